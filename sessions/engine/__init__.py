"""The MCP client engine: transports, a JSON-RPC peer, the lifecycle, and conformance verdicts.

Pure asyncio; it imports nothing from Django. See docs/engine.md for the guide.

    async with ClientSession(make_transport(StdioTarget("python", ["server.py"]))) as session:
        session.subscribe(print)            # every frame and event, in order
        tools = await session.list_all("tools/list", "tools")
        result = await session.call_tool("echo", {"text": "hi"})
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # at run time each name loads its module on first use (__getattr__ below)
    from ._apps import (
        APP_MESSAGE_STATE,
        APP_VIOLATIONS,
        MAX_APP_MESSAGES,
        UI_EXTENSION,
        UI_MIME_TYPE,
        UI_PROTOCOL_VERSIONS,
        View,
        app_frames,
        tool_view_uri,
        tool_visibility,
        view_checks,
        view_csp,
        view_of,
    )
    from ._client_rules import CLIENT_PREFIX, ClientConduct, check_client_frame, observe_server_frame, side_of
    from ._clock import Clock
    from ._connect import make_transport
    from ._egress import EgressPolicy, EgressRefused, is_forbidden_address, is_numeric_disguise
    from ._errors import (
        ConnectionClosed,
        EngineError,
        HttpStatusError,
        InputRequiredRoundsExceeded,
        McpError,
        MessageTooLarge,
        RequestCancelled,
        RequestTimeout,
        SessionExpired,
        SkillError,
        TransportError,
        VersionNegotiationFailed,
        error_name,
    )
    from ._frames import Event, Frame, PendingRequest, PendingResolved, Progress, Task, TaskChanged, Verdict
    from ._listen import ACKNOWLEDGED as LISTEN_ACKNOWLEDGED
    from ._listen import SUBSCRIPTION_ID, ListenStream
    from ._oauth import OAuthSession
    from ._oauth_config import GRANTS, Authorizer, OAuthConfig, OAuthFailed, TokenStore
    from ._oauth_flow import STEPS as OAUTH_STEPS
    from ._oauth_flow import OAuthFlow
    from ._oauth_rules import Challenge, canonical_resource, parse_challenges
    from ._observer import LineSplitter, TapObserver
    from ._options import (
        HANDSHAKE_VERSIONS,
        LATEST_HANDSHAKE_VERSION,
        LATEST_MODERN_VERSION,
        MODERN_VERSIONS,
        ClientCapabilities,
        ClientOptions,
    )
    from ._outputs import MATCHES as OUTPUT_MATCHES
    from ._outputs import OUTPUT_CODES
    from ._processes import ServerProcess, kill_recorded, kill_tree, undumpable, watch
    from ._requests import RequestHandle
    from ._rules import warm_up
    from ._sandbox import Sandbox, sandbox_problem
    from ._serving import ServerRequestHandler
    from ._session import ClientSession
    from ._skills import Skill, SkillRead, Skills, SkillVerificationFailed, offers_skills
    from ._targets import HttpTarget, StdioTarget, Target, mask_headers
    from ._task_serving import ServedTask
    from ._tasks import STATUS_NOTIFICATION as TASK_STATUS_NOTIFICATION
    from ._tasks import TASK_METHODS, TaskBook
    from ._tasks import augmentable as task_augmentable
    from ._tls import oauth_client
    from ._transport import FrameSink, Transport
    from ._warm import WarmStarts

__all__ = [
    "CLIENT_PREFIX",
    "ClientConduct",
    "check_client_frame",
    "observe_server_frame",
    "side_of",
    "GRANTS",
    "OAUTH_STEPS",
    "Authorizer",
    "Challenge",
    "OAuthConfig",
    "OAuthFailed",
    "OAuthFlow",
    "OAuthSession",
    "TokenStore",
    "parse_challenges",
    "HANDSHAKE_VERSIONS",
    "LATEST_HANDSHAKE_VERSION",
    "LATEST_MODERN_VERSION",
    "LISTEN_ACKNOWLEDGED",
    "MODERN_VERSIONS",
    "OUTPUT_CODES",
    "OUTPUT_MATCHES",
    "SUBSCRIPTION_ID",
    "TASK_METHODS",
    "TASK_STATUS_NOTIFICATION",
    "ClientCapabilities",
    "ClientOptions",
    "ClientSession",
    "Clock",
    "ConnectionClosed",
    "EgressPolicy",
    "EgressRefused",
    "EngineError",
    "Event",
    "Frame",
    "FrameSink",
    "HttpStatusError",
    "HttpTarget",
    "InputRequiredRoundsExceeded",
    "LineSplitter",
    "ListenStream",
    "McpError",
    "MessageTooLarge",
    "PendingRequest",
    "PendingResolved",
    "Progress",
    "RequestCancelled",
    "RequestHandle",
    "RequestTimeout",
    "Sandbox",
    "ServedTask",
    "ServerProcess",
    "ServerRequestHandler",
    "SessionExpired",
    "Skill",
    "SkillError",
    "SkillRead",
    "SkillVerificationFailed",
    "Skills",
    "StdioTarget",
    "Target",
    "Task",
    "TaskBook",
    "TaskChanged",
    "TapObserver",
    "Transport",
    "WarmStarts",
    "TransportError",
    "Verdict",
    "VersionNegotiationFailed",
    "connect",
    "error_name",
    "is_forbidden_address",
    "is_numeric_disguise",
    "kill_recorded",
    "kill_tree",
    "canonical_resource",
    "make_transport",
    "mask_headers",
    "oauth_client",
    "sandbox_problem",
    "task_augmentable",
    "undumpable",
    "watch",
    "warm_up",
    "offers_skills",
    "APP_MESSAGE_STATE",
    "APP_VIOLATIONS",
    "MAX_APP_MESSAGES",
    "UI_EXTENSION",
    "UI_MIME_TYPE",
    "UI_PROTOCOL_VERSIONS",
    "View",
    "app_frames",
    "tool_view_uri",
    "tool_visibility",
    "view_checks",
    "view_csp",
    "view_of",
]


_LAZY: dict[str, tuple[str, str]] = {
    "CLIENT_PREFIX": ("_client_rules", "CLIENT_PREFIX"),
    "ClientConduct": ("_client_rules", "ClientConduct"),
    "check_client_frame": ("_client_rules", "check_client_frame"),
    "observe_server_frame": ("_client_rules", "observe_server_frame"),
    "side_of": ("_client_rules", "side_of"),
    "Clock": ("_clock", "Clock"),
    "make_transport": ("_connect", "make_transport"),
    "EgressPolicy": ("_egress", "EgressPolicy"),
    "EgressRefused": ("_egress", "EgressRefused"),
    "is_forbidden_address": ("_egress", "is_forbidden_address"),
    "is_numeric_disguise": ("_egress", "is_numeric_disguise"),
    "ConnectionClosed": ("_errors", "ConnectionClosed"),
    "EngineError": ("_errors", "EngineError"),
    "HttpStatusError": ("_errors", "HttpStatusError"),
    "InputRequiredRoundsExceeded": ("_errors", "InputRequiredRoundsExceeded"),
    "McpError": ("_errors", "McpError"),
    "MessageTooLarge": ("_errors", "MessageTooLarge"),
    "RequestCancelled": ("_errors", "RequestCancelled"),
    "RequestTimeout": ("_errors", "RequestTimeout"),
    "SessionExpired": ("_errors", "SessionExpired"),
    "TransportError": ("_errors", "TransportError"),
    "VersionNegotiationFailed": ("_errors", "VersionNegotiationFailed"),
    "error_name": ("_errors", "error_name"),
    "Event": ("_frames", "Event"),
    "Frame": ("_frames", "Frame"),
    "PendingRequest": ("_frames", "PendingRequest"),
    "PendingResolved": ("_frames", "PendingResolved"),
    "Progress": ("_frames", "Progress"),
    "Task": ("_frames", "Task"),
    "TaskChanged": ("_frames", "TaskChanged"),
    "Verdict": ("_frames", "Verdict"),
    "LISTEN_ACKNOWLEDGED": ("_listen", "ACKNOWLEDGED"),
    "SUBSCRIPTION_ID": ("_listen", "SUBSCRIPTION_ID"),
    "ListenStream": ("_listen", "ListenStream"),
    "GRANTS": ("_oauth_config", "GRANTS"),
    "Authorizer": ("_oauth_config", "Authorizer"),
    "OAuthConfig": ("_oauth_config", "OAuthConfig"),
    "OAuthFailed": ("_oauth_config", "OAuthFailed"),
    "TokenStore": ("_oauth_config", "TokenStore"),
    "Challenge": ("_oauth_rules", "Challenge"),
    "canonical_resource": ("_oauth_rules", "canonical_resource"),
    "parse_challenges": ("_oauth_rules", "parse_challenges"),
    "LineSplitter": ("_observer", "LineSplitter"),
    "TapObserver": ("_observer", "TapObserver"),
    "HANDSHAKE_VERSIONS": ("_options", "HANDSHAKE_VERSIONS"),
    "LATEST_HANDSHAKE_VERSION": ("_options", "LATEST_HANDSHAKE_VERSION"),
    "LATEST_MODERN_VERSION": ("_options", "LATEST_MODERN_VERSION"),
    "MODERN_VERSIONS": ("_options", "MODERN_VERSIONS"),
    "ClientCapabilities": ("_options", "ClientCapabilities"),
    "ClientOptions": ("_options", "ClientOptions"),
    "OUTPUT_MATCHES": ("_outputs", "MATCHES"),
    "OUTPUT_CODES": ("_outputs", "OUTPUT_CODES"),
    "ServerProcess": ("_processes", "ServerProcess"),
    "kill_recorded": ("_processes", "kill_recorded"),
    "kill_tree": ("_processes", "kill_tree"),
    "undumpable": ("_processes", "undumpable"),
    "watch": ("_processes", "watch"),
    "RequestHandle": ("_requests", "RequestHandle"),
    "warm_up": ("_rules", "warm_up"),
    "Sandbox": ("_sandbox", "Sandbox"),
    "sandbox_problem": ("_sandbox", "sandbox_problem"),
    "ServerRequestHandler": ("_serving", "ServerRequestHandler"),
    "ServedTask": ("_task_serving", "ServedTask"),
    "ClientSession": ("_session", "ClientSession"),
    "APP_MESSAGE_STATE": ("_apps", "APP_MESSAGE_STATE"),
    "APP_VIOLATIONS": ("_apps", "APP_VIOLATIONS"),
    "app_frames": ("_apps", "app_frames"),
    "MAX_APP_MESSAGES": ("_apps", "MAX_APP_MESSAGES"),
    "UI_EXTENSION": ("_apps", "UI_EXTENSION"),
    "UI_MIME_TYPE": ("_apps", "UI_MIME_TYPE"),
    "UI_PROTOCOL_VERSIONS": ("_apps", "UI_PROTOCOL_VERSIONS"),
    "View": ("_apps", "View"),
    "tool_view_uri": ("_apps", "tool_view_uri"),
    "tool_visibility": ("_apps", "tool_visibility"),
    "view_checks": ("_apps", "view_checks"),
    "view_csp": ("_apps", "view_csp"),
    "view_of": ("_apps", "view_of"),
    "Skill": ("_skills", "Skill"),
    "SkillError": ("_errors", "SkillError"),
    "SkillRead": ("_skills", "SkillRead"),
    "Skills": ("_skills", "Skills"),
    "SkillVerificationFailed": ("_skills", "SkillVerificationFailed"),
    "offers_skills": ("_skills", "offers_skills"),
    "HttpTarget": ("_targets", "HttpTarget"),
    "StdioTarget": ("_targets", "StdioTarget"),
    "Target": ("_targets", "Target"),
    "mask_headers": ("_targets", "mask_headers"),
    "TASK_STATUS_NOTIFICATION": ("_tasks", "STATUS_NOTIFICATION"),
    "TASK_METHODS": ("_tasks", "TASK_METHODS"),
    "TaskBook": ("_tasks", "TaskBook"),
    "task_augmentable": ("_tasks", "augmentable"),
    "FrameSink": ("_transport", "FrameSink"),
    "Transport": ("_transport", "Transport"),
    "WarmStarts": ("_warm", "WarmStarts"),
    "OAuthFlow": ("_oauth_flow", "OAuthFlow"),
    "OAUTH_STEPS": ("_oauth_flow", "STEPS"),
    "OAuthSession": ("_oauth", "OAuthSession"),
    "oauth_client": ("_tls", "oauth_client"),
}


def connect(target: Target, options: ClientOptions | None = None) -> ClientSession:
    """Return a session for ``target``; ``async with`` it to open and initialize."""
    from ._connect import make_transport
    from ._session import ClientSession

    return ClientSession(make_transport(target), options)


def __getattr__(name: str) -> object:
    """Import the module that defines ``name`` on first use: a caller (the CLI above all) pays only for
    the parts it touches, not for stdio, OAuth, the tap's observer and the client rules all at once."""
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(import_module(f"{__name__}.{module}"), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
