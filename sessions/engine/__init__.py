"""The MCP client engine: transports, a JSON-RPC peer, the lifecycle, and conformance verdicts.

Pure asyncio; it imports nothing from Django. See docs/engine.md for the guide.

    async with ClientSession(make_transport(StdioTarget("python", ["server.py"]))) as session:
        session.subscribe(print)            # every frame and event, in order
        tools = await session.list_all("tools/list", "tools")
        result = await session.call_tool("echo", {"text": "hi"})
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    TransportError,
    VersionNegotiationFailed,
    error_name,
)
from ._frames import Event, Frame, PendingRequest, PendingResolved, Progress, Task, TaskChanged, Verdict
from ._listen import ACKNOWLEDGED as LISTEN_ACKNOWLEDGED
from ._listen import SUBSCRIPTION_ID, ListenStream
from ._oauth_config import GRANTS, Authorizer, OAuthConfig, OAuthFailed, TokenStore
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
from ._skills import Skill, SkillError, SkillRead, Skills, SkillVerificationFailed, offers_skills
from ._targets import HttpTarget, StdioTarget, Target, mask_headers
from ._tasks import STATUS_NOTIFICATION as TASK_STATUS_NOTIFICATION
from ._tasks import TASK_METHODS, TaskBook
from ._tasks import augmentable as task_augmentable
from ._transport import FrameSink, Transport

if TYPE_CHECKING:  # at run time these load on first use (__getattr__ below): they import httpx and Authlib
    from ._oauth import OAuthSession
    from ._oauth_flow import STEPS as OAUTH_STEPS
    from ._oauth_flow import OAuthFlow
    from ._tls import oauth_client

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
]


def connect(target: Target, options: ClientOptions | None = None) -> ClientSession:
    """Return a session for ``target``; ``async with`` it to open and initialize."""
    return ClientSession(make_transport(target), options)


def __getattr__(name: str) -> object:
    """The OAuth flow and session load httpx and Authlib: only when asked for (a stdio CLI call
    imports neither)."""
    if name in ("OAuthFlow", "OAUTH_STEPS"):
        from . import _oauth_flow

        return _oauth_flow.OAuthFlow if name == "OAuthFlow" else _oauth_flow.STEPS
    if name == "OAuthSession":
        from ._oauth import OAuthSession

        return OAuthSession
    if name == "oauth_client":
        from ._tls import oauth_client

        return oauth_client
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
