"""OAuth in the web runtime: the authorization step in the person's browser, and tokens kept per team.

The engine runs the flow (``sessions.engine``: ``OAuthSession`` and ``OAuthFlow``); the runtime gives
it an ``Authorizer`` and a ``TokenStore``:

- ``WebAuthorizer``: the redirect URI is the inspector's own callback (``/oauth/callback``, made
  absolute from the request that connected). Authorizing stores a waiting ``OAuthAuthorization``
  (the state's SHA-256, bound to the person who started the session), tells the session's viewers
  (``AuthorizationChanged``: an "Authorize at <host>" card), and waits, at most
  ``AUTHORIZE_WAIT``, for the callback view to hand the URL over through the owner's command
  channel (``OAuthReturned``): that works across processes (web processes and engine workers).
  The card's Cancel ends the wait the same way (``CancelAuthorization``).
- ``TeamTokenStore``: the team's ``OAuthTokens`` row, encrypted. The engine calls the store on the
  event loop, where the database may not be touched: the row is read before connecting, and
  writes go behind, in order, on the runtime's database thread.
- ``SessionOAuth``: what a live session's owner holds of it: the authorizations waiting, the token
  store, and an OAuth debugger's runner (``oauth_debug.py``) once the session has one.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from sessions.engine import EngineError, HttpTarget, OAuthFailed
from sessions.models import McpSession, OAuthAuthorization, OAuthTokens
from sessions.runtime import messages as m
from sessions.runtime.store import in_db_thread
from sessions.teams.models import token_digest

if TYPE_CHECKING:
    from sessions.runtime.oauth_debug import OAuthDebugger

__all__ = [
    "AUTHORIZE_WAIT",
    "CALLBACK_PATH",
    "SessionOAuth",
    "TeamTokenStore",
    "WebAuthorizer",
    "prepare",
    "state_hash",
]

AUTHORIZE_WAIT = 600.0
"""How long an authorization waits for the person to come back (then the flow fails, saying so); the
requests waiting on it wait as long (the engine holds their clocks)."""
CALLBACK_PATH = "/oauth/callback"


# What is stored of an authorization's ``state``: its SHA-256 (hex), as of an invitation's token.
state_hash = token_digest


@in_db_thread
def _session_people(pk: int) -> tuple[int, int | None]:
    row = McpSession.objects.values_list("team_id", "owner_id").get(pk=pk)
    return row[0], row[1]


@in_db_thread
def _load_tokens(team_id: int, key: str) -> dict[str, Any] | None:
    row = OAuthTokens.objects.filter(team_id=team_id, key=key).first()
    return dict(row.data) if row is not None and isinstance(row.data, dict) else None


@in_db_thread
def _save_tokens(team_id: int, key: str, data: dict[str, Any], user_id: int | None) -> None:
    OAuthTokens.objects.update_or_create(
        team_id=team_id, key=key, defaults={"data": data, "authorized_by_id": user_id}
    )


@in_db_thread
def _open_authorization(session_pk: int, user_id: int, digest: str, url: str) -> None:
    OAuthAuthorization.objects.create(session_id=session_pk, user_id=user_id, state_sha256=digest, url=url)


@in_db_thread
def _end_authorization(digest: str, outcome: str) -> None:
    with transaction.atomic():
        OAuthAuthorization.objects.filter(state_sha256=digest, ended__isnull=True).update(
            ended=timezone.now(), outcome=outcome
        )


class TeamTokenStore:
    """The engine's ``TokenStore`` over a team's ``OAuthTokens``: read before, written behind."""

    def __init__(self, team_id: int, user_id: int | None, key: str, loaded: dict[str, Any] | None) -> None:
        self.team_id = team_id
        self.user_id = user_id
        self.data: dict[str, dict[str, Any]] = {key: loaded} if loaded else {}
        self._written: asyncio.Future[None] | None = None

    def load(self, key: str) -> dict[str, Any] | None:
        value = self.data.get(key)
        return copy.deepcopy(value) if value is not None else None

    def save(self, key: str, data: dict[str, Any]) -> None:
        self.data[key] = copy.deepcopy(data)
        previous = self._written
        self._written = asyncio.ensure_future(self._write(previous, key, copy.deepcopy(data)))

    async def _write(self, previous: asyncio.Future[None] | None, key: str, data: dict[str, Any]) -> None:
        if previous is not None:  # in the order the engine saved them
            await asyncio.gather(previous, return_exceptions=True)
        await _save_tokens(self.team_id, key, data, self.user_id)

    async def flush(self) -> None:
        """Wait until every save so far is in the database."""
        if self._written is not None:
            await asyncio.gather(self._written, return_exceptions=True)


class WebAuthorizer:
    """The authorization step in the browser of the person who started the session."""

    application_type = "web"

    def __init__(
        self,
        session_pk: int,
        user_id: int | None,
        uri: str,
        waiting: dict[str, asyncio.Future[str]],
        publish: Callable[[m.Event], None],
    ) -> None:
        self.session_pk = session_pk
        self.user_id = user_id
        self.uri = uri
        self.waiting = waiting
        self.publish = publish

    async def redirect_uri(self) -> str:
        if not self.uri:
            raise OAuthFailed("no callback URL is known for this session: connect again from its page")
        return self.uri

    async def authorize(self, url: str, state: str) -> str:
        if self.user_id is None:
            raise OAuthFailed("the person who started this session is gone: nobody can authorize it")
        digest = state_hash(state)
        arrived: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.waiting[digest] = arrived
        await _open_authorization(self.session_pk, self.user_id, digest, url)
        self.publish(m.AuthorizationChanged())
        try:
            return await asyncio.wait_for(asyncio.shield(arrived), AUTHORIZE_WAIT)
        except OAuthFailed:  # the card's Cancel (SessionOAuth.cancel)
            await _end_authorization(digest, "cancelled")
            raise
        except TimeoutError:
            await _end_authorization(digest, "expired")
            minutes = int(AUTHORIZE_WAIT // 60)
            raise OAuthFailed(
                f"nobody came back from the authorization server within {minutes} minutes: "
                "reconnect to authorize again"
            ) from None
        finally:
            self.waiting.pop(digest, None)
            if not arrived.done():
                arrived.cancel()
                await _end_authorization(digest, "failed")
            self.publish(m.AuthorizationChanged())


async def prepare(
    target: HttpTarget,
    *,
    session_pk: int,
    config: dict[str, Any],
    waiting: dict[str, asyncio.Future[str]],
    publish: Callable[[m.Event], None],
    store: TeamTokenStore | None = None,
) -> TeamTokenStore | None:
    """Give the target's OAuth settings their authorizer and the team's token store; the store."""
    oauth = target.oauth
    if oauth is None:
        return None
    team_id, user_id = await _session_people(session_pk)
    key = OAuthTokens.key_for(target.url, oauth.client_id or "")
    if store is None:
        store = TeamTokenStore(team_id, user_id, key, await _load_tokens(team_id, key))
    uri = str((config.get("oauth") or {}).get("redirect_uri") or "")
    oauth.authorizer = WebAuthorizer(session_pk, user_id, uri, waiting, publish)
    oauth.store = store
    oauth.store_key = key
    return store


class SessionOAuth:
    """A live session's OAuth: the authorizations waiting for the browser, the team's tokens, a debugger."""

    __slots__ = ("_debugger_set", "authorizations", "debugger", "publish", "session_pk", "tokens")

    DEBUGGER_WAIT = 10.0
    """How long a step waits for a debugger's session to have its debugger (seconds)."""

    def __init__(self, session_pk: int, publish: Callable[[m.Event], None]) -> None:
        self.session_pk = session_pk
        self.publish = publish
        self.authorizations: dict[str, asyncio.Future[str]] = {}
        """OAuth authorizations waiting for the person's browser, by their state's SHA-256."""
        self.tokens: TeamTokenStore | None = None
        self.debugger: OAuthDebugger | None = None
        self._debugger_set: asyncio.Event | None = None
        """Set once an OAuth debugger's session has its debugger (its commands may come before)."""

    async def prepare(self, target: Any, config: dict[str, Any]) -> None:
        """An HTTP target with OAuth gets the browser and the team's tokens (kept across reconnects)."""
        if isinstance(target, HttpTarget) and target.oauth is not None:
            self.tokens = await prepare(
                target,
                session_pk=self.session_pk,
                config=config,
                waiting=self.authorizations,
                publish=self.publish,
                store=self.tokens,
            )

    def expect_debugger(self) -> None:
        """The session is an OAuth debugger's: its steps wait until ``debugging`` says whether it has one."""
        self._debugger_set = asyncio.Event()

    def debugging(self, debugger: OAuthDebugger | None) -> None:
        """The debugger's session has its debugger (None: it cannot have one); the steps waiting go on."""
        self.debugger = debugger
        assert self._debugger_set is not None
        self._debugger_set.set()

    def returned(self, state_sha256: str, url: str) -> None:
        """The person came back from the authorization server: the waiting flow goes on."""
        arrived = self.authorizations.get(state_sha256)
        if arrived is None or arrived.done():
            raise EngineError("no authorization of this session is waiting for this answer")
        arrived.set_result(url)

    def cancel(self, state_sha256: str, by: str = "") -> None:
        """The person gave up on authorizing: the waiting flow fails, saying who cancelled it."""
        arrived = self.authorizations.get(state_sha256)
        if arrived is None or arrived.done():
            raise EngineError("no authorization of this session is waiting")
        who = f" by {by}" if by else ""
        arrived.set_exception(OAuthFailed(f"the authorization was cancelled{who}: reconnect to authorize"))

    async def forget(self, client: Any) -> None:
        """Drop the token ``client`` uses, and what the store holds (the asker deletes the stored ones)."""
        transport = getattr(client, "transport", None)
        auth = getattr(transport, "auth", None)
        if auth is not None:
            auth.forget()
        if self.tokens is not None:
            await self.tokens.flush()
            self.tokens.data.clear()

    async def step(self, run_all: bool) -> m.Done:
        """Start the debugger's next step (or all that are left)."""
        if self._debugger_set is not None:
            await asyncio.wait_for(self._debugger_set.wait(), self.DEBUGGER_WAIT)
        if self.debugger is None:
            raise EngineError("this session is not an OAuth debugger")
        return await self.debugger.start(run_all)

    async def aclose(self) -> None:
        """Stop the debugger's running step and close its HTTP client, if the session has one."""
        if self.debugger is not None:
            with contextlib.suppress(Exception):
                await self.debugger.aclose()
