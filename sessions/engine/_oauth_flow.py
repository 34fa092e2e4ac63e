"""The authorization flow, one step at a time, every HTTP exchange a frame and every rule a verdict.

``OAuthFlow`` holds its progress in ``state``, a plain JSON-ready dict, so a flow can be stored
between steps (the web's OAuth debugger) or kept with a server's tokens. Steps, in order:

``resource-metadata`` (RFC 9728, or the 2025-03-26 fallback), ``authorization-server`` (RFC 8414 /
OpenID Connect discovery), ``client`` (pre-registered, a Client ID Metadata Document, or dynamic
registration), ``authorization`` (authorization code with PKCE; skipped by the other grants) and
``token``. The HTTP goes through the session's own client, so egress rules apply to it too.
Authlib supplies the mechanics (PKCE challenge, client authentication, signed assertions); the
discovery and the protocol's rules are ours (``_oauth_rules``).
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlencode

import httpx

from . import _oauth_rules as rules
from ._frames import Frame
from ._oauth_config import OAuthConfig, OAuthFailed
from ._oauth_rules import Challenge, Problem
from ._targets import mask_headers

if TYPE_CHECKING:
    from ._dpop import DpopKey

__all__ = ["STEPS", "OAuthFlow"]

STEPS = ("resource-metadata", "authorization-server", "client", "authorization", "token")
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
_BODY_LIMIT = 1 << 20
_FAILED = (httpx.HTTPError, httpx.InvalidURL)

Record = Callable[[Frame], Frame]


class OAuthFlow:
    """One run of the flow for one server. ``run()`` goes to the end; ``step()`` does the next step."""

    def __init__(
        self,
        config: OAuthConfig,
        server_url: str,
        http: httpx.AsyncClient,
        record: Record,
        *,
        state: dict[str, Any] | None = None,
        challenge: Challenge | None = None,
        dpop: DpopKey | None = None,
    ) -> None:
        self.config = config
        self.server_url = server_url
        self.http = http
        self.record = record
        self.state: dict[str, Any] = state if state is not None else {}
        self.state.setdefault("done", [])
        if challenge is not None:
            self.state["challenge"] = {"scheme": challenge.scheme, "params": challenge.params}
        self.dpop = dpop

    # -- driving ---------------------------------------------------------------------------------

    @property
    def steps(self) -> tuple[str, ...]:
        if self.config.grant == "authorization_code":
            return STEPS
        return tuple(s for s in STEPS if s != "authorization")

    @property
    def next_step(self) -> str | None:
        done = self.state["done"]
        return next((s for s in self.steps if s not in done), None)

    async def step(self) -> str | None:
        """Run the next step; return its name (``None`` when the flow is over)."""
        name = self.next_step
        if name is None:
            return None
        handler = {
            "resource-metadata": self._resource_metadata,
            "authorization-server": self._authorization_server,
            "client": self._client,
            "authorization": self._authorization,
            "token": self._token,
        }[name]
        await handler()
        self.state["done"].append(name)
        return name

    async def run(self) -> dict[str, Any]:
        """Run every remaining step; return the token."""
        while await self.step() is not None:
            pass
        return dict(self.state["token"])

    async def discover(self, message: dict[str, Any], headers: dict[str, str]) -> None:
        """A request without a token, as a client's first (``message``, usually ``initialize``): the
        401 and its challenge, judged and kept for the resource metadata step."""
        response, _ = await self._exchange(
            "discovery",
            "discovery: a request without a token",
            "POST",
            self.server_url,
            body=message,
            headers={"Accept": "application/json, text/event-stream", **headers},
        )
        challenge = rules.pick_challenge(
            rules.parse_challenges(response.headers.get_list("www-authenticate"))
        )
        note, problems = rules.judge_unauthenticated(response.status_code, challenge)
        if challenge is not None:
            self.state["challenge"] = {"scheme": challenge.scheme, "params": challenge.params}
        self._state_frame("discovery", note, problems)

    # -- recording -------------------------------------------------------------------------------

    def _state_frame(self, step: str, note: str, problems: Sequence[Problem] = (), **facts: Any) -> None:
        frame = Frame(
            "state", "local", transport={"state": "oauth", "oauth": {"step": step, **facts}}, note=note
        )
        for problem in problems:
            frame.flag(problem.code, problem.severity, problem.message)
        self.record(frame)
        fatal = [p for p in problems if p.fatal]
        if fatal:
            raise OAuthFailed(f"{step}: {fatal[0].message}")

    def _fail(self, step: str, note: str, code: str, message: str) -> NoReturn:
        """Record the step as failed with one fatal verdict, and stop the flow."""
        self._state_frame(step, note, [Problem(code, "error", message, fatal=True)])
        raise OAuthFailed(f"{step}: {message}")  # _state_frame raised already; this tells the type checker

    async def _exchange(
        self,
        step: str,
        what: str,
        method: str,
        url: str,
        *,
        form: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[httpx.Response, Any]:
        """One HTTP exchange of the flow, recorded both ways (secrets masked); its JSON, if any."""
        headers = {"Accept": "application/json", **(headers or {})}
        content: bytes | None = None
        shown = b""
        if form is not None:
            content = urlencode(form).encode()
            headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
            shown = urlencode(rules.mask_form(form)).encode()
        elif body is not None:
            content = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
            shown = json.dumps(rules.mask_json_secrets(body)).encode()
        if method == "POST" and self.dpop is not None and step in ("token", "refresh"):
            headers["DPoP"] = self.dpop.proof("POST", url)
        out = self.record(
            Frame(
                "http",
                "out",
                shown,
                transport={
                    "http": {"method": method, "url": url, "headers": mask_headers(headers), "oauth": step}
                },
                note=f"OAuth {what}",
            )
        )
        try:
            request = self.http.build_request(method, url, content=content, headers=headers)
            response = await self.http.send(request, stream=True)
            try:
                raw = await _bounded(response)
            finally:
                await response.aclose()
        except _FAILED as exc:
            note = f"OAuth {what} failed: {exc or type(exc).__name__}"
            self.record(
                Frame("state", "local", transport={"state": "http-error", "http": {"oauth": step}}, note=note)
            )
            raise OAuthFailed(note) from exc
        document = _json(raw, response)
        shown_in = (
            json.dumps(rules.mask_json_secrets(document)).encode() if document is not None else raw[:65536]
        )
        details = {
            "status": response.status_code,
            "reason": response.reason_phrase,
            "headers": mask_headers(dict(response.headers)),
            "request_seq": out.seq,
            "oauth": step,
        }
        self.record(Frame("http", "in", shown_in, transport={"http": details}))
        return response, document

    # -- steps -----------------------------------------------------------------------------------

    async def _resource_metadata(self) -> None:
        challenge = self.state.get("challenge") or {}
        pointed = (challenge.get("params") or {}).get("resource_metadata")
        candidates = [pointed] if pointed else rules.prm_urls(self.server_url)
        for url in candidates:
            response, document = await self._exchange(
                "resource-metadata", "protected resource metadata", "GET", url
            )
            if response.status_code == 200 and document is not None:
                problems = rules.check_prm(document, self.server_url, url)
                self.state["prm"] = document
                self.state["resource"] = document.get("resource")
                issuer = document["authorization_servers"][0] if not any(p.fatal for p in problems) else None
                self.state["issuer"] = issuer
                self._state_frame(
                    "resource-metadata",
                    f"protected resource metadata from {url}: authorization server {issuer}",
                    problems,
                    url=url,
                    resource=document.get("resource"),
                    issuer=issuer,
                )
                return
            if pointed:
                self._fail(
                    "resource-metadata",
                    f"the challenge's resource_metadata {url} answered {response.status_code}",
                    "oauth-prm",
                    f"resource_metadata {url} answered {response.status_code}",
                )
        # No metadata anywhere: the 2025-03-26 way, the server's origin is the authorization base URL.
        self.state["prm"] = None
        self.state["legacy"] = True
        self.state["issuer"] = rules.origin_of(self.server_url)
        self.state["resource"] = rules.canonical_resource(self.server_url)
        self._state_frame(
            "resource-metadata",
            "no protected resource metadata: falling back to the 2025-03-26 discovery at the server's origin",
            [
                Problem(
                    "oauth-no-prm",
                    "warning",
                    "the server publishes no protected resource metadata (RFC 9728), which servers MUST "
                    "do since 2025-06-18",
                )
            ],
            issuer=self.state["issuer"],
        )

    async def _authorization_server(self) -> None:
        issuer = self.state["issuer"]
        legacy = bool(self.state.get("legacy"))
        if not rules.is_secure_url(issuer):
            self._fail(
                "authorization-server",
                f"authorization server {issuer} is not HTTPS",
                "oauth-insecure",
                f"the authorization server {issuer} is not HTTPS",
            )
        for url in rules.as_metadata_urls(issuer):
            response, document = await self._exchange(
                "authorization-server", "authorization server metadata", "GET", url
            )
            if response.status_code == 200 and isinstance(document, dict):
                problems = rules.check_as_metadata(document, issuer, legacy=legacy)
                if not any(p.fatal for p in problems):
                    self.state["as"] = document
                self._state_frame(
                    "authorization-server",
                    f"authorization server metadata from {url}",
                    problems,
                    url=url,
                    issuer=document.get("issuer"),
                )
                return
            if legacy:
                break  # 2025-03-26: only the RFC 8414 root location, then the default endpoints
        if legacy:
            self.state["as"] = rules.legacy_endpoints(self.server_url)
            self._state_frame(
                "authorization-server",
                "no authorization server metadata: using the default endpoints /authorize, /token and "
                "/register at the server's origin (2025-03-26)",
                issuer=issuer,
            )
            return
        self._fail(
            "authorization-server",
            f"no authorization server metadata for {issuer}",
            "oauth-as-metadata",
            f"no metadata found for the authorization server {issuer}",
        )

    async def _client(self) -> None:
        meta = self.state["as"]
        issuer = self.state["issuer"]
        clients: dict[str, Any] = self.state.setdefault("clients", {})
        config = self.config
        methods = rules.auth_methods(meta)
        if config.client_id:
            if config.private_key_pem:
                method = "private_key_jwt"
            elif config.client_secret:
                method = (
                    "client_secret_post"
                    if "client_secret_basic" not in methods and ("client_secret_post" in methods)
                    else "client_secret_basic"
                )
            else:
                method = "none"
            client = {"client_id": config.client_id, "auth_method": method, "how": "pre-registered"}
            note = f"pre-registered client {config.client_id} ({method})"
        elif clients.get(issuer):
            client = clients[issuer]
            note = f"client {client['client_id']} registered earlier with {issuer}"
        elif config.client_metadata_url and meta.get("client_id_metadata_document_supported") is True:
            client = {
                "client_id": config.client_metadata_url,
                "auth_method": "none",
                "how": "metadata document",
            }
            note = f"client id metadata document {config.client_metadata_url}"
        elif isinstance(meta.get("registration_endpoint"), str):
            client = await self._register(meta["registration_endpoint"], methods)
            note = f"registered as {client['client_id']} ({client['auth_method']})"
        else:
            self._fail(
                "client",
                "no way to identify this client",
                "oauth-no-client",
                "the authorization server offers no dynamic registration and no client id "
                "metadata documents: give a pre-registered client id",
            )
        client["issuer"] = issuer
        if client["how"] != "pre-registered":
            clients[issuer] = client
        self.state["client"] = client
        self._state_frame("client", note, client_id=client["client_id"], how=client["how"])

    async def _register(self, endpoint: str, methods: list[str]) -> dict[str, Any]:
        redirect = await self._redirect_uri() if self.config.grant == "authorization_code" else None
        grants = ["authorization_code", "refresh_token"] if redirect else ["client_credentials"]
        metadata: dict[str, Any] = {
            "client_name": self.config.client_name,
            "grant_types": grants,
            "response_types": ["code"] if redirect else [],
            "token_endpoint_auth_method": "none",
            "application_type": self._application_type(),
        }
        if redirect:
            metadata["redirect_uris"] = [redirect]
        response, document = await self._exchange(
            "client", "dynamic client registration", "POST", endpoint, body=metadata
        )
        if (
            response.status_code not in (200, 201)
            or not isinstance(document, dict)
            or not document.get("client_id")
        ):
            self._fail(
                "client",
                f"registration answered {response.status_code}",
                "oauth-registration",
                f"dynamic registration failed (HTTP {response.status_code})",
            )
        secret = document.get("client_secret")
        method = document.get("token_endpoint_auth_method")
        if not isinstance(method, str):
            if secret:
                method = "client_secret_basic" if "client_secret_basic" in methods else "client_secret_post"
            else:
                method = "none"
        client = {"client_id": document["client_id"], "auth_method": method, "how": "registered"}
        if secret:
            client["client_secret"] = secret
        return client

    async def _authorization(self) -> None:
        authorizer = self.config.authorizer
        if authorizer is None:
            raise OAuthFailed("authorization needs a person (or --oauth-headless): no authorizer is set")
        meta = self.state["as"]
        client = self.state["client"]
        from authlib.oauth2.rfc7636 import create_s256_code_challenge

        verifier = secrets.token_urlsafe(48)
        state = secrets.token_urlsafe(24)
        scope = self._scope()
        params = {
            "response_type": "code",
            "client_id": client["client_id"],
            "redirect_uri": await self._redirect_uri(),
            "state": state,
            "code_challenge": create_s256_code_challenge(verifier),
            "code_challenge_method": "S256",
            "resource": self.state["resource"],
        }
        if scope:
            params["scope"] = scope
        endpoint = meta.get("authorization_endpoint")
        if not isinstance(endpoint, str):
            self._fail(
                "authorization",
                "no authorization endpoint",
                "oauth-as-metadata",
                "the metadata names no `authorization_endpoint`",
            )
        url = f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(params)}"
        self.state.update(verifier=verifier, requested_scope=scope, redirect_uri=params["redirect_uri"])
        self._state_frame(
            "authorization",
            f"authorization request: scope {scope or '(none)'}, resource {params['resource']}",
            url=url,
            scope=scope,
        )
        returned = await authorizer.authorize(url, state)
        answer, problems = rules.authorization_response(
            returned,
            state=state,
            issuer=meta.get("issuer", self.state["issuer"]),
            iss_supported=meta.get("authorization_response_iss_parameter_supported") is True,
        )
        shown = {k: ("••••" if k == "code" else v) for k, v in answer.items()}
        self._state_frame("authorization", f"authorization response: {shown}", problems, response=shown)
        self.state["code"] = answer["code"]

    async def _token(self) -> None:
        grant = self.config.grant
        if grant == "authorization_code":
            form = {
                "grant_type": "authorization_code",
                "code": self.state.pop("code"),
                "redirect_uri": self.state["redirect_uri"],
                "code_verifier": self.state.pop("verifier"),
                "resource": self.state["resource"],
            }
        elif grant == "client_credentials":
            form = {"grant_type": "client_credentials", "resource": self.state["resource"]}
        elif grant == "jwt_bearer":
            if not self.config.assertion:
                raise OAuthFailed("the jwt-bearer grant needs an assertion (a workload identity JWT)")
            form = {
                "grant_type": JWT_BEARER,
                "assertion": self.config.assertion,
                "resource": self.state["resource"],
            }
        else:
            form = {
                "grant_type": JWT_BEARER,
                "assertion": await self._identity_assertion(),
                "resource": self.state["resource"],
            }
        scope = self.state.get("requested_scope") if grant == "authorization_code" else self._scope()
        if scope and grant != "authorization_code":
            form["scope"] = scope
        await self._token_request(form, "token")

    async def refresh(self) -> bool:
        """Use the refresh token; say whether it worked (a failure leaves the flow to start over)."""
        token = self.state.get("token") or {}
        if not token.get("refresh_token") or "as" not in self.state or "client" not in self.state:
            return False
        form = {
            "grant_type": "refresh_token",
            "refresh_token": token["refresh_token"],
            "resource": self.state["resource"],
        }
        try:
            await self._token_request(form, "refresh")
        except OAuthFailed:
            return False
        return True

    async def _token_request(self, form: dict[str, str], step: str) -> None:
        endpoint = self.state["as"]["token_endpoint"]
        client = self.state.get("client") or {"client_id": self.config.client_id, "auth_method": "none"}
        for _ in range(2):  # once more with the server's DPoP nonce
            fields, headers = self._authenticate(client, endpoint, dict(form))
            response, document = await self._exchange(
                step, f"{step} request ({form['grant_type']})", "POST", endpoint, form=fields, headers=headers
            )
            if (
                response.status_code == 400
                and self.dpop is not None
                and isinstance(document, dict)
                and document.get("error") == "use_dpop_nonce"
                and self.dpop.take_nonce(endpoint, response.headers.get("dpop-nonce"))
            ):
                continue
            break
        if response.status_code != 200 or not isinstance(document, dict) or not document.get("access_token"):
            error = (
                document.get("error_description") or document.get("error")
                if isinstance(document, dict)
                else None
            )
            self._fail(
                step,
                f"the token endpoint answered {response.status_code}",
                "oauth-token",
                f"no token (HTTP {response.status_code}): {error or 'no access_token'}",
            )
        self._keep_token(document, step)

    def _keep_token(self, document: dict[str, Any], step: str) -> None:
        problems: list[Problem] = []
        token_type = str(document.get("token_type", ""))
        if token_type.lower() not in ("bearer", "dpop"):
            problems.append(Problem("oauth-token", "warning", f"unexpected token_type {token_type!r}"))
        expires_in = document.get("expires_in")
        previous = self.state.get("token") or {}
        token = {
            "access_token": document["access_token"],
            "token_type": "DPoP" if token_type.lower() == "dpop" else "Bearer",
            "refresh_token": document.get("refresh_token") or previous.get("refresh_token"),
            "scope": document.get("scope") or self.state.get("requested_scope"),
            "expires_at": self.config.now() + float(expires_in)
            if isinstance(expires_in, int | float)
            else None,
        }
        audience = _jwt_audience(token["access_token"])
        resource = self.state.get("resource")
        if (
            audience is not None
            and resource
            and resource not in audience
            and resource.rstrip("/") not in audience
        ):
            problems.append(
                Problem(
                    "oauth-audience",
                    "warning",
                    f"the access token's audience {audience} does not include {resource}",
                )
            )
        self.state["token"] = token
        self.state["granted_scope"] = self.state.get("requested_scope") or token["scope"]
        self._state_frame(
            step,
            f"{token['token_type']} token for {token['scope'] or 'no particular scope'}"
            + (f", expires in {int(expires_in)} s" if isinstance(expires_in, int | float) else "")
            + (", with a refresh token" if token["refresh_token"] else ""),
            problems,
            token_type=token["token_type"],
            scope=token["scope"],
        )

    # -- helpers ---------------------------------------------------------------------------------

    def _authenticate(
        self, client: dict[str, Any], endpoint: str, form: dict[str, str]
    ) -> tuple[dict[str, str], dict[str, str]]:
        """The token request's client authentication: Basic, in the body, a signed assertion, or none."""
        method = client.get("auth_method", "none")
        client_id = client.get("client_id") or ""
        secret = client.get("client_secret") or (
            self.config.client_secret if client.get("how") == "pre-registered" else None
        )
        headers: dict[str, str] = {}
        # Authlib (and the JOSE library under it) load only for the flows that use them.
        if method == "private_key_jwt" and self.config.private_key_pem:
            from authlib.oauth2.rfc7523 import private_key_jwt_sign

            # SEP-1046 and RFC 7523bis: the audience is the authorization server's issuer.
            assertion = private_key_jwt_sign(
                self.config.private_key_pem,
                client_id,
                self.state["issuer"],
                alg=self.config.signing_algorithm,
            )
            form.update(
                client_assertion_type="urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                client_assertion=assertion if isinstance(assertion, str) else assertion.decode(),
            )
        elif method == "client_secret_basic" and secret:
            from authlib.oauth2.auth import ClientAuth

            _, prepared, _ = ClientAuth(client_id, secret, method).prepare("POST", endpoint, {}, "")
            headers = dict(prepared)
            # Also in the body (RFC 6749 §4.1.3 allows it): the `mcp` SDK's servers refuse without it.
            form["client_id"] = client_id
        elif method == "client_secret_post" and secret:
            form.update(client_id=client_id, client_secret=secret)
        elif client_id:
            form["client_id"] = client_id
        return form, headers

    async def _identity_assertion(self) -> str:
        """Enterprise-managed authorization (SEP-990): exchange the identity provider's ID token for
        an identity assertion grant (RFC 8693) aimed at this authorization server and resource."""
        config = self.config
        if not (config.idp_token_endpoint and config.idp_id_token):
            raise OAuthFailed(
                "enterprise-managed authorization needs the identity provider's token endpoint and ID token"
            )
        form = {
            "grant_type": TOKEN_EXCHANGE,
            "requested_token_type": ID_JAG,
            "subject_token": config.idp_id_token,
            "subject_token_type": ID_TOKEN,
            "audience": self.state["issuer"],
            "resource": self.state["resource"],
        }
        if config.idp_client_id:
            form["client_id"] = config.idp_client_id
        scope = self._scope()
        if scope:
            form["scope"] = scope
        response, document = await self._exchange(
            "token", "token exchange at the identity provider", "POST", config.idp_token_endpoint, form=form
        )
        if response.status_code != 200 or not isinstance(document, dict) or not document.get("access_token"):
            self._fail(
                "token",
                f"the identity provider answered {response.status_code}",
                "oauth-token",
                f"the token exchange failed (HTTP {response.status_code})",
            )
        issued = document.get("issued_token_type")
        problems = (
            []
            if issued == ID_JAG
            else [Problem("oauth-token", "warning", f"issued_token_type is {issued!r}, not an ID-JAG")]
        )
        self._state_frame("token", "identity assertion grant from the identity provider", problems)
        return str(document["access_token"])

    def _scope(self) -> str | None:
        challenge = self.state.get("challenge") or {}
        prm = self.state.get("prm") or {}
        meta = self.state.get("as") or {}
        published = prm.get("scopes_supported") if isinstance(prm.get("scopes_supported"), list) else None
        server_scopes = (
            meta.get("scopes_supported") if isinstance(meta.get("scopes_supported"), list) else None
        )
        return rules.select_scopes(
            configured=self.config.scope,
            challenged=(challenge.get("params") or {}).get("scope"),
            published=published,
            server_scopes=server_scopes,
            previous=self.state.get("granted_scope"),
            offline=self.config.offline_access and self.config.grant == "authorization_code",
        )

    async def _redirect_uri(self) -> str:
        if self.config.authorizer is None:
            raise OAuthFailed("authorization needs a redirect URI: no authorizer is set")
        return await self.config.authorizer.redirect_uri()

    def _application_type(self) -> str:
        authorizer = self.config.authorizer
        return getattr(authorizer, "application_type", "native") if authorizer is not None else "native"


async def _bounded(response: httpx.Response) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        parts.append(chunk)
        size += len(chunk)
        if size > _BODY_LIMIT:
            raise httpx.DecodingError(f"an OAuth response larger than {_BODY_LIMIT} bytes")
    return b"".join(parts)


def _json(raw: bytes, response: httpx.Response) -> Any:
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _jwt_audience(token: str) -> list[str] | None:
    """The ``aud`` of an access token that is a JWT (read, not verified: the resource verifies it)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None
    audience = payload.get("aud") if isinstance(payload, dict) else None
    if isinstance(audience, str):
        return [audience]
    if isinstance(audience, list):
        return [str(a) for a in audience]
    return None
