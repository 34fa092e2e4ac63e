"""A server's authorization as the HTTP transports use it: the token on every request, and what to
do when the server answers 401 or 403 (authorize, refresh, step up, or take a DPoP nonce).

One ``OAuthSession`` per transport. Requests that are refused at once share one flow (a lock and a
generation number); a request is authorized at most ``max_authorizations`` times, so a server
that never grants enough cannot loop us. Tokens and client registrations go to the configured
``TokenStore`` (per server; registrations per authorization server, never reused across them).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import httpx

from ._frames import Frame
from ._oauth_config import OAuthConfig, OAuthFailed
from ._oauth_flow import OAuthFlow
from ._oauth_rules import Challenge, canonical_resource, describe_challenge, parse_challenges, pick_challenge

if TYPE_CHECKING:
    from ._dpop import DpopKey

__all__ = ["OAuthSession", "Refusal"]

_REFRESH_MARGIN = 30.0


class Refusal:
    """What a 401/403 said: its status, its challenges, and the DPoP nonce it gave."""

    def __init__(self, response: httpx.Response) -> None:
        self.status = response.status_code
        self.challenges = parse_challenges(response.headers.get_list("www-authenticate"))
        self.nonce = response.headers.get("dpop-nonce")

    @property
    def challenge(self) -> Challenge | None:
        return pick_challenge(self.challenges)

    def describe(self) -> str:
        return describe_challenge(self.status, self.challenge)


class OAuthSession:
    def __init__(
        self,
        config: OAuthConfig,
        server_url: str,
        http: httpx.AsyncClient,
        record: Callable[[Frame], Frame],
        hold: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext,
    ) -> None:
        self.config = config
        self.hold = hold
        """Stops the requests' clocks while the flow waits for the person (``FrameSink.clocks_held``)."""
        self.server_url = server_url
        self.http = http
        self.record = record
        self.key = config.store_key or canonical_resource(server_url)
        stored = config.store.load(self.key) if config.store is not None else None
        self.state: dict[str, Any] = dict(stored or {})
        self.generation = 0
        self._lock = asyncio.Lock()
        self.dpop: DpopKey | None = None
        if self.token and self.token.get("token_type") == "DPoP":
            self.state.pop("token")  # a DPoP token is bound to a key that did not survive
        if self.token:
            self._note("using a stored token for this server")

    @property
    def token(self) -> dict[str, Any] | None:
        token = self.state.get("token")
        return token if isinstance(token, dict) and token.get("access_token") else None

    def headers(self, method: str, url: str) -> dict[str, str]:
        """The Authorization (and DPoP) headers for one request, or none before a token exists."""
        token = self.token
        if token is None:
            return {}
        if token.get("token_type") == "DPoP" and self.dpop is not None:
            return {
                "Authorization": f"DPoP {token['access_token']}",
                "DPoP": self.dpop.proof(method, url, token["access_token"]),
            }
        return {"Authorization": f"Bearer {token['access_token']}"}

    async def ready(self) -> None:
        """Refresh a token about to expire before it is sent (when there is a refresh token)."""
        token = self.token
        expires = token.get("expires_at") if token else None
        if token is None or expires is None or expires - _REFRESH_MARGIN > self.config.now():
            return
        async with self._lock:
            if self.token is token:
                await self._refresh()

    async def challenged(self, response: httpx.Response, attempts: int, generation: int) -> bool:
        """Answer a 401/403: return True when the request should be sent again (with new headers)."""
        refusal = Refusal(response)
        challenge = refusal.challenge
        nonce = challenge is not None and challenge.error == "use_dpop_nonce"
        if nonce and self.dpop is not None and self.dpop.take_nonce(self.server_url, refusal.nonce):
            self._note("the server asked for a DPoP nonce: sending the request again with it")
            return True
        if refusal.status == 403 and (challenge is None or challenge.error != "insufficient_scope"):
            return False  # a plain 403 is a refusal, not a request for authorization
        async with self._lock:
            if self.generation != generation:
                return True  # another request got a new token meanwhile
            if attempts >= self.config.max_authorizations:
                self._note(
                    f"gave up after {attempts} authorizations for this request ({refusal.describe()})",
                    code="oauth-retry-limit",
                )
                return False
            if (
                refusal.status == 401
                and self.token
                and self.token.get("refresh_token")
                and await self._refresh()
            ):
                return True
            try:
                await self._authorize(refusal)
            except OAuthFailed as exc:
                self._note(f"authorization failed: {exc}", code="oauth-failed")
                return False
            return True

    async def _authorize(self, refusal: Refusal) -> None:
        step_up = refusal.status == 403
        self._note(f"{'step-up authorization' if step_up else 'authorization'} started: {refusal.describe()}")
        state = self._fresh_state(step_up)
        flow = OAuthFlow(
            self.config,
            self.server_url,
            self.http,
            self.record,
            state=state,
            challenge=refusal.challenge,
            dpop=self.dpop,
        )
        await flow.step()  # resource metadata
        await flow.step()  # authorization server metadata
        self._metadata_seen(flow)
        # The request refused waits for the person in the browser: it must not time out meanwhile.
        with self.hold():
            await flow.run()
        self.state = flow.state
        self.generation += 1
        self._save()

    def _metadata_seen(self, flow: OAuthFlow) -> None:
        """After discovery: forget a client registered with another authorization server (SEP-2352),
        and make a DPoP key if the server binds tokens with DPoP."""
        previous = self.state.get("issuer")
        issuer = flow.state.get("issuer")
        if previous and issuer and previous != issuer:
            self._note(
                f"the authorization server changed from {previous} to {issuer}: its client registration "
                "and tokens are not used with the new one"
            )
            flow.state.pop("client", None)
            flow.state.pop("token", None)
        meta = flow.state.get("as") or {}
        if self.config.dpop and meta.get("dpop_signing_alg_values_supported") and self.dpop is None:
            from ._dpop import DpopKey

            algs = meta["dpop_signing_alg_values_supported"]
            if isinstance(algs, list) and DpopKey.algorithm in algs:
                self.dpop = DpopKey()
                flow.dpop = self.dpop
                self._note("the authorization server binds tokens with DPoP: a key was made for this session")
        flow.dpop = self.dpop

    def _fresh_state(self, step_up: bool) -> dict[str, Any]:
        """A new run's state: what is known of the server and its clients, not the steps done."""
        keep = ("clients", "issuer", "granted_scope", "token")
        state = {key: self.state[key] for key in keep if key in self.state}
        if not step_up:
            state.pop("granted_scope", None)
        if self.state.get("client") and self.state["client"].get("how") != "pre-registered":
            state["clients"] = {
                **state.get("clients", {}),
                self.state["client"]["issuer"]: self.state["client"],
            }
        state["done"] = []
        return state

    async def _refresh(self) -> bool:
        flow = OAuthFlow(
            self.config,
            self.server_url,
            self.http,
            self.record,
            state=self.state,
            dpop=self.dpop,
        )
        if await flow.refresh():
            self.generation += 1
            self._save()
            return True
        self.state.pop("token", None)
        self._save()
        return False

    def _save(self) -> None:
        if self.config.store is None:
            return
        keep = ("clients", "issuer", "token", "granted_scope", "resource")
        self.config.store.save(self.key, {key: self.state[key] for key in keep if key in self.state})

    def forget(self) -> None:
        """Drop the token (a person asked to): the next refusal authorizes again."""
        self.state.pop("token", None)
        self.generation += 1
        self._save()

    def _note(self, note: str, *, code: str | None = None) -> None:
        frame = Frame("state", "local", transport={"state": "oauth"}, note=note)
        if code is not None:
            frame.flag(code, "warning", note)
        self.record(frame)
