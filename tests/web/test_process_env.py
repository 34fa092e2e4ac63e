"""The one rule of which environment variables a catalog server may be given (``process_env``): pure."""

from __future__ import annotations

import pytest

from sessions.teams.process_env import EXACT, HARMLESS, PREFIXES, refusal, refusals

LOADS_CODE = [
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "DYLD_INSERT_LIBRARIES",
    "PATH",
    "HOME",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PYTHONUSERBASE",
    "PYTHONWARNINGS",
    "PYTHONBREAKPOINT",
    "PERL5LIB",
    "PERL5OPT",
    "PERLLIB",
    "RUBYOPT",
    "RUBYLIB",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "PS4",
    "GCONV_PATH",
    "NPM_CONFIG_REGISTRY",
    "npm_config_registry",
    "npm_config_node_options",
    "UV_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_PYTHON",
    "PIP_INDEX_URL",
    "GIT_SSH_COMMAND",
    "GIT_CONFIG_COUNT",
    "OPENSSL_CONF",
    "XDG_CONFIG_HOME",
    "VIRTUAL_ENV",
    "DOTNET_STARTUP_HOOKS",
]


@pytest.mark.parametrize("name", LOADS_CODE)
def test_a_variable_that_loads_code_is_refused_with_a_reason(name: str) -> None:
    why = refusal(name)
    assert why is not None and len(why) > 20, name


@pytest.mark.parametrize("name", ["ld_preload", "Path", "node_options", "PythonPath"])
def test_case_does_not_get_a_variable_past_the_rule(name: str) -> None:
    assert refusal(name) == refusal(name.upper()) is not None


@pytest.mark.parametrize(
    "name",
    [
        "API_KEY",
        "GITHUB_TOKEN",
        "LOG_LEVEL",
        "LDAP_URL",  # LD_ is the loader's, not any name starting with LD
        "NODE_ENV",
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
        "TZ",
        "LANG",
        "ENVIRONMENT",
        "PATHS_TO_SERVE",
    ],
)
def test_an_ordinary_variable_passes(name: str) -> None:
    assert refusal(name) is None


def test_the_harmless_exceptions_are_members_of_a_refused_family() -> None:
    # An exception that no family covers would be dead weight, and hide a typo.
    for name in HARMLESS:
        assert any(name.startswith(prefix) for prefix in PREFIXES) or name in EXACT, name


def test_refusals_keeps_only_the_refused_names_in_order() -> None:
    found = refusals(["API_KEY", "PATH", "NODE_ENV", "LD_PRELOAD"])
    assert list(found) == ["PATH", "LD_PRELOAD"]
    assert "library" in found["LD_PRELOAD"] or "libraries" in found["LD_PRELOAD"]
