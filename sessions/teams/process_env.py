"""Environment variables a catalog server may not be given: those that make a program load other code.

A catalog entry is an admin's promise of what runs: its command and arguments. A variable that the
dynamic loader, an interpreter, a package runner or a tool it calls reads as "load this code too" (or
"fetch the code from there") breaks that promise, whoever sets it: the admin's fixed values and the
variables a person fills alike. ``refusal(name)`` is the one rule; the team's catalog form refuses such
an entry and ``sessions.teams.policy`` refuses to start one saved before the rule.

Names are compared upper-cased: npm reads ``npm_config_*`` in any case, and Windows ignores case.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["EXACT", "HARMLESS", "PREFIXES", "refusal", "refusals"]

# Whole families: every variable whose name starts so (upper-cased), with why.
PREFIXES: dict[str, str] = {
    "LD_": "the dynamic loader loads the libraries it names into the process (LD_PRELOAD, LD_AUDIT)",
    "DYLD_": "the macOS loader loads libraries it names into the process",
    "PYTHON": "Python runs or imports code it names (PYTHONPATH, PYTHONSTARTUP, PYTHONHOME, PYTHONUSERBASE)",
    "PERL": "Perl loads modules and options it names (PERL5LIB, PERL5OPT, PERLLIB, PERL5DB)",
    "RUBY": "Ruby loads libraries and options it names (RUBYOPT, RUBYLIB)",
    "GEM_": "Ruby loads gems from where it names",
    "BUNDLE_": "Bundler evaluates the Gemfile and loads gems from where it names",
    "NODE_": "Node.js loads modules and options it names (NODE_OPTIONS, NODE_PATH)",
    "NPM_CONFIG_": "npm and npx take their registry, script shell and config files from it: what npx runs",
    "COREPACK_": "Corepack downloads package managers from where it names",
    "YARN_": "Yarn takes its registry and plugins from it",
    "UV_": "uv and uvx take their package index, interpreter, config and cache from it: the code uvx runs",
    "PIP_": "pip installs from the index or config file it names",
    "PIPX_": "pipx installs from where it names",
    "GIT_": "git runs programs and reads config it names (GIT_SSH_COMMAND, GIT_CONFIG_*, GIT_EXEC_PATH)",
    "OPENSSL_": "OpenSSL loads engines and providers (shared libraries) from its config and module paths",
    "LUA_": "Lua runs and loads code it names (LUA_INIT, LUA_PATH, LUA_CPATH)",
    "JAVA_": "the JVM and Java launch scripts take agents, options and the java binary from it",
    "CORECLR_": ".NET loads a profiler library it names",
    "COR_": ".NET Framework loads a profiler library it names",
    "DOTNET_": ".NET loads startup hooks and extra dependencies it names",
    "BASH_FUNC_": "bash imports shell functions from it",
}

# Single variables, with why.
EXACT: dict[str, str] = {
    "PATH": "it decides which program a command name runs (the hosted set-up gives a fixed one)",
    "HOME": (
        "tools read code and config from the home folder (Python's user site-packages, ~/.npmrc, "
        "~/.gitconfig, uv's config): a chosen HOME chooses them (the hosted set-up gives a fresh one)"
    ),
    "XDG_CONFIG_HOME": "git, uv and others read config that names programs from there",
    "XDG_CONFIG_DIRS": "git, uv and others read config that names programs from there",
    "VIRTUAL_ENV": "uv and Python tools run the environment's interpreter and packages",
    "CONDA_PREFIX": "uv and Python tools run the environment's interpreter and packages",
    "CLASSPATH": "Java loads classes from where it names",
    "_JAVA_OPTIONS": "the JVM takes options from it (-javaagent loads code)",
    "JDK_JAVA_OPTIONS": "the java launcher takes options from it (-javaagent loads code)",
    "PERLLIB": "Perl loads modules from where it names",
    "BASH_ENV": "bash runs the file it names before any script",
    "ENV": "sh runs the file it names",
    "SHELLOPTS": "bash takes options from it (xtrace with PS4 runs code)",
    "BASHOPTS": "bash takes options from it",
    "PS4": "bash expands it, running commands in it, when tracing",
    "ZDOTDIR": "zsh runs the start-up files it finds there",
    "SHELL": "programs that start a shell start the one it names",
    "GCONV_PATH": "the C library loads character-set converters (shared libraries) from where it names",
    "GLIBC_TUNABLES": "the C library's loader parses it before the program starts",
    "EDITOR": "programs that open an editor run the one it names",
    "VISUAL": "programs that open an editor run the one it names",
    "PAGER": "programs that page output run the one it names",
    "BROWSER": "programs that open a browser run the one it names",
    "SSH_ASKPASS": "ssh runs the program it names",
    "PHPRC": "PHP reads an ini file from there (auto_prepend_file runs code)",
    "PHP_INI_SCAN_DIR": "PHP reads ini files from there (auto_prepend_file runs code)",
    "TCLLIBPATH": "Tcl loads packages from where it names",
    "R_PROFILE": "R runs the file it names at start",
    "R_PROFILE_USER": "R runs the file it names at start",
    "R_LIBS": "R loads packages from where it names",
}

# Members of a refused family that only switch behaviour and name no code.
HARMLESS = frozenset(
    {
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUTF8",
        "PYTHONNOUSERSITE",
        "PYTHONSAFEPATH",
        "NODE_ENV",
        "NODE_NO_WARNINGS",
    }
)


def refusal(name: str) -> str | None:
    """Why a catalog server may not be given the variable ``name``, or None when it may."""
    upper = name.upper()
    if upper in HARMLESS:
        return None
    if upper in EXACT:
        return EXACT[upper]
    for prefix, why in PREFIXES.items():
        if upper.startswith(prefix):
            return why
    return None


def refusals(names: Iterable[str]) -> dict[str, str]:
    """The refused ones of ``names``, each with why, in their order."""
    return {name: why for name in names if (why := refusal(str(name))) is not None}
