"""Start-up checks: Django's system checks, plus one that the templates and static files are found.

An install without them (a wheel built without its force-included folders, a half-copied tree) would otherwise
start, answer /healthz, and serve a 500 for every page; ``mcp-inspector`` runs these first and
refuses to start instead.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.contrib.staticfiles import finders
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core import checks
from django.template import TemplateDoesNotExist, TemplateSyntaxError, engines
from django.template.loader import get_template

from sessions.env import SECRET_VARIABLES

__all__ = ["check_egress_allow", "check_install", "check_sandbox", "startup_problems"]

# The login page and the pages every user sees first, and what they load.
TEMPLATES = (
    "auth/token.html",
    "auth/login.html",
    "auth/_sso.html",
    "base.html",
    "home.html",
    "sessions/session.html",
)
STATIC_FILES = ("inspector/app.css", "inspector/app.js", "inspector/login.js", "inspector/favicon.svg")


_HINT = (
    "the install is incomplete: reinstall from a checkout, or from an sdist or wheel built from one, "
    "which carry templates/ and static/"
)


def _static_found(path: str) -> bool:
    if settings.STATIC_ROOT is None:
        # Served from the source (or installed package) directories through the finders.
        return finders.find(path) is not None
    # Collected (the Docker image): the file and, for the manifest storage, its hashed name.
    try:
        staticfiles_storage.url(path)
    except ValueError:
        return False
    return bool(staticfiles_storage.exists(path))


@checks.register(checks.Tags.templates, checks.Tags.staticfiles)
def check_install(app_configs: Sequence[AppConfig] | None = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Tell whether the templates and static files this install needs are there."""
    problems: list[checks.CheckMessage] = []
    missing: list[str] = []
    for name in TEMPLATES:
        try:
            get_template(name)
        except TemplateDoesNotExist:
            missing.append(name)
        except TemplateSyntaxError as exc:
            problems.append(checks.Error(f"the template {name} does not compile: {exc}", id="inspector.E002"))
    if missing:
        where = ", ".join(str(d) for engine in engines.all() for d in engine.dirs)
        problems.append(
            checks.Error(
                f"templates not found in {where}: {', '.join(missing)}", hint=_HINT, id="inspector.E001"
            )
        )
    missing = [path for path in STATIC_FILES if not _static_found(path)]
    if missing:
        if settings.STATIC_ROOT:
            where, hint = (
                settings.STATIC_ROOT,
                "run `manage.py collectstatic` with this STATIC_ROOT, or unset it",
            )
        else:
            where, hint = ", ".join(map(str, settings.STATICFILES_DIRS)), _HINT
        problems.append(
            checks.Error(
                f"static files not found in {where}: {', '.join(missing)}", hint=hint, id="inspector.E003"
            )
        )
    return problems


@checks.register()
def check_egress_allow(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Tell whether INSPECTOR_EGRESS_ALLOW's entries are host names, addresses or CIDR blocks."""
    from sessions.engine import EgressPolicy

    try:
        EgressPolicy.from_entries(settings.INSPECTOR_EGRESS_ALLOW)
    except ValueError as exc:
        return [checks.Error(f"INSPECTOR_EGRESS_ALLOW: {exc}", id="inspector.E004")]
    return []


@checks.register()
def check_llm_models(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Tell whether INSPECTOR_LLM_MODELS lists models the Playground can use (never echoing a key)."""
    from sessions.playground.costs import parse_prices
    from sessions.providers import parse_models

    try:
        parse_models(settings.INSPECTOR_LLM_MODELS)
        parse_prices(settings.INSPECTOR_LLM_MODELS)
    except ValueError as exc:
        return [checks.Error(f"INSPECTOR_LLM_MODELS: {exc}", id="inspector.E006")]
    return []


_SANDBOX_OFF = (
    "INSPECTOR_SANDBOX is off: stdio servers run unsandboxed, as this process's user, and can read its "
    "files, its data folder and other servers' directories"
)


def _exposed(path: str) -> str:
    """What of the app's own a readable path would show every sandboxed server ("" if nothing)."""
    if not os.path.isabs(path):
        return "it is not an absolute path"
    inside = os.path.realpath(path)
    secrets = [os.environ[f"{name}_FILE"] for name in SECRET_VARIABLES if os.environ.get(f"{name}_FILE")]
    for label, mine in (
        ("the data folder", str(settings.DATA_DIR)),
        *(("a secret file", f) for f in secrets),
    ):
        mine = os.path.realpath(mine)
        if mine == inside or mine.startswith(inside.rstrip("/") + "/"):
            return f"it holds {label} ({mine})"
    return ""


@checks.register()
def check_sandbox(app_configs: Sequence[AppConfig] | None = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Tell whether the hosted mode's stdio servers can run in their sandbox here (bwrap runs once)."""
    if not settings.INSPECTOR_HOSTED:
        return []
    if not settings.INSPECTOR_SANDBOX:
        return [checks.Warning(_SANDBOX_OFF, id="inspector.W001")]
    problems: list[checks.CheckMessage] = []
    for path in settings.INSPECTOR_SANDBOX_READ:
        if why := _exposed(path):
            problems.append(
                checks.Error(
                    f"INSPECTOR_SANDBOX_READ: every stdio server could read {path}, and {why}",
                    hint="list only the folders servers' programs live in",
                    id="inspector.E005",
                )
            )
    if problems:
        return problems
    from sessions.engine import sandbox_problem
    from sessions.runtime.owner import confinement

    sandbox = confinement().sandbox
    if sandbox is not None and (problem := sandbox_problem(sandbox)):
        return [checks.Warning(sandbox.refusal(problem), id="inspector.W002")]
    return []


def startup_problems() -> tuple[list[str], list[str]]:
    """Run every system check (ours included); return the errors and the warnings, as text."""
    shown = [m for m in checks.run_checks() if not m.is_silenced()]
    return [_text(m) for m in shown if m.is_serious()], [_text(m) for m in shown if not m.is_serious()]


def _text(message: checks.CheckMessage) -> str:
    where = f"{message.obj}: " if message.obj is not None else ""
    hint = f" ({message.hint})" if message.hint else ""
    return f"{message.id}: {where}{message.msg}{hint}"
