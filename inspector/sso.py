"""Single sign-on with OpenID Connect, for the hosted mode: the client, and the two views of its flow.

Authlib does the protocol (its httpx client and OpenID mixins, the building blocks of its framework
integrations): discovery from ``<issuer>/.well-known/openid-configuration``, the authorization code
flow with PKCE (S256), ``state`` and ``nonce``, the token exchange, and the ID token's checks: its
signature against the provider's JWKS, issuer, audience, expiry and nonce.

The flow's own data (state, nonce, PKCE verifier, where to go next) does not live in the login
session: the session cookie is ``SameSite=Strict``, and the provider's redirect back to the callback is
a navigation another site started, which a browser makes without Strict cookies, so the callback
would never see it. It lives instead in a cookie of its own: signed, HttpOnly, ``SameSite=Lax`` (sent
on that top-level GET), scoped to ``/auth/oidc/`` and alive ten minutes. It holds nothing that signs
anyone in: the state ties the callback to this browser, the code is worthless without the verifier,
and the ID token must carry the nonce.

For the same reason the callback does not redirect to the page the person wanted: the browser would
send that request, too, as part of the cross-site navigation, without the session cookie just set.
It answers a small page that moves on by itself (``Refresh``), a navigation of our own site.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import time
from dataclasses import dataclass
from typing import Any

import httpx2
from asgiref.sync import sync_to_async
from authlib.integrations.base_client import BaseApp, OAuthError
from authlib.integrations.base_client.async_app import AsyncOAuth2Mixin
from authlib.integrations.base_client.async_openid import AsyncOpenIDMixin
from authlib.integrations.httpx_client import AsyncOAuth2Client
from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.decorators import login_not_required
from django.core import signing
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from joserfc.errors import JoseError

from sessions.teams import identities
from sessions.teams.models import LoginSession

__all__ = [
    "FLOW_COOKIE",
    "PENDING_INVITATION",
    "OidcClient",
    "Provider",
    "SignInProblem",
    "callback",
    "client_for",
    "login_options",
    "provider",
    "start",
    "validated_claims",
]

logger = logging.getLogger("inspector.sso")

# The flow's cookie: our own prefix (cookies are not port-scoped), only under /auth/oidc/.
FLOW_COOKIE = "mcp_inspector_oidc"
FLOW_PATH = "/auth/oidc/"
FLOW_MAX_AGE = 600
FLOW_SALT = "inspector.sso.flow"
# Where the invitation page keeps the token of the invitation a person opened, until they sign in.
PENDING_INVITATION = "inspector_invitation"
# Discovery is read again after this long (a provider's endpoints rarely move; its keys are re-read
# whenever a token names a key we do not have).
METADATA_TTL = 3600.0
# Clock skew allowed on the ID token's times, in seconds.
LEEWAY = 60
HTTP_TIMEOUT = 10.0
# A path on this site only: no scheme, no host, no control characters or spaces (it goes in a header).
_LOCAL_PATH = re.compile(r"/(?![/\\])[\x21-\x7e]*")


@dataclass(frozen=True)
class Provider:
    """The configured OpenID Connect provider and our client there."""

    issuer: str
    client_id: str
    client_secret: str
    scopes: str
    name: str

    @property
    def discovery_url(self) -> str:
        # OpenID Connect Discovery 1.0, section 4: the issuer without its trailing slash, then the path.
        return self.issuer.rstrip("/") + "/.well-known/openid-configuration"


def provider() -> Provider | None:
    """The provider when single sign-on is on: the hosted mode, with an issuer set."""
    if not (settings.INSPECTOR_HOSTED and settings.INSPECTOR_OIDC_ISSUER):
        return None
    return Provider(
        issuer=settings.INSPECTOR_OIDC_ISSUER,
        client_id=settings.INSPECTOR_OIDC_CLIENT_ID,
        client_secret=settings.INSPECTOR_OIDC_CLIENT_SECRET,
        scopes=settings.INSPECTOR_OIDC_SCOPES,
        name=settings.INSPECTOR_OIDC_NAME,
    )


class SignInProblem(Exception):
    """Why a sign-in stops: a message for the person, and the status of the page that says it."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class OidcClient(AsyncOAuth2Mixin, AsyncOpenIDMixin, BaseApp):
    """Authlib's OpenID Connect client over httpx, as its framework integrations build theirs."""

    client_cls = AsyncOAuth2Client


_clients: dict[Provider, OidcClient] = {}


def client_for(p: Provider) -> OidcClient:
    """The one client of this process for the provider (it keeps the discovery document and JWKS)."""
    client = _clients.get(p)
    if client is None:
        client = _clients[p] = OidcClient(
            framework=None,
            name="oidc",
            client_id=p.client_id,
            client_secret=p.client_secret or None,
            server_metadata_url=p.discovery_url,
            client_kwargs={"scope": p.scopes, "code_challenge_method": "S256", "timeout": HTTP_TIMEOUT},
        )
    return client


async def _metadata(p: Provider, client: OidcClient) -> dict[str, Any]:
    """The provider's discovery document, read at most once an hour; it must name our issuer."""
    loaded = client.server_metadata.get("_loaded_at")
    if loaded is not None and time.time() - loaded > METADATA_TTL:
        client.server_metadata.clear()
    try:
        metadata: dict[str, Any] = await client.load_server_metadata()
    except (httpx2.HTTPError, ValueError) as exc:
        client.server_metadata.clear()
        logger.warning("OpenID Connect discovery at %s failed: %s", p.discovery_url, exc)
        raise SignInProblem(
            f"{p.name} could not be reached just now ({type(exc).__name__}); try again in a moment.", 502
        ) from None
    # Discovery 1.0, section 4.3: the document must name exactly the issuer it was read for, or a
    # document served elsewhere could make us accept another issuer's tokens.
    if metadata.get("issuer") != p.issuer:
        client.server_metadata.clear()
        logger.warning("OpenID Connect discovery names issuer %r, not %r", metadata.get("issuer"), p.issuer)
        raise SignInProblem(f"{p.name} is not set up correctly here (its issuer does not match).", 502)
    return metadata


async def validated_claims(
    p: Provider, client: OidcClient, token: dict[str, Any], nonce: str
) -> dict[str, Any]:
    """The ID token's claims once its signature, issuer, audience, times and nonce are checked."""
    if "id_token" not in token:
        raise SignInProblem(f"{p.name} sent no ID token: is the openid scope allowed for this client?", 403)
    # Authlib checks the audience only when told to: without this, a token for another client that
    # names us as its authorized party ("azp") would pass.
    options = {
        "iss": {"essential": True, "value": p.issuer},
        "aud": {"essential": True, "value": p.client_id},
        "sub": {"essential": True},
        "exp": {"essential": True},
        "iat": {"essential": True},
    }
    try:
        await client.fetch_jwk_set()
        userinfo = await client.parse_id_token(token, nonce=nonce, claims_options=options, leeway=LEEWAY)
    except httpx2.HTTPError as exc:
        logger.warning("Fetching the OpenID Connect provider's keys failed: %s", exc)
        raise SignInProblem(
            f"{p.name}'s signing keys could not be read; try again in a moment.", 502
        ) from None
    except (JoseError, ValueError, TypeError, RuntimeError) as exc:
        # A bad signature, a claim that fails, or a token that is not a JWT at all.
        logger.warning("An OpenID Connect ID token was refused: %s", exc)
        raise SignInProblem(f"{p.name}'s answer did not pass our checks ({exc}); start again.", 403) from None
    return dict(userinfo)


def login_options(request: HttpRequest) -> dict[str, Any]:
    """Template context: ``sso`` (its button's label) on every page when single sign-on is on."""
    p = provider()
    return {"sso": {"name": p.name}} if p is not None else {}


def _safe_next(request: HttpRequest, url: str) -> str:
    ok = url_has_allowed_host_and_scheme(
        url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return url if ok and _LOCAL_PATH.fullmatch(url) else "/"


async def _problem(request: HttpRequest, p: Provider, problem: SignInProblem) -> HttpResponse:
    # Rendered off the event loop: the page's top bar may read the person's teams.
    context = {"name": p.name, "message": problem.message}
    return await sync_to_async(render)(request, "auth/sso_problem.html", context, status=problem.status)


@login_not_required
@never_cache
@require_safe
async def start(request: HttpRequest) -> HttpResponse:
    """Send the person to the provider, keeping the flow's secrets in a cookie of its own.

    A GET: it changes nothing here but that cookie, so the login page can link to it (a form's POST
    that redirects to another site would need the provider in the page's form-action policy).
    """
    p = provider()
    if p is None:
        raise Http404("Single sign-on is not set up.")
    client = client_for(p)
    redirect_uri = request.build_absolute_uri(reverse("sso-callback"))
    try:
        await _metadata(p, client)
        try:
            authorization = await client.create_authorization_url(redirect_uri)
        except RuntimeError as exc:  # a discovery document without an authorization endpoint
            raise SignInProblem(f"{p.name} is not set up correctly here ({exc}).", 502) from None
    except SignInProblem as problem:
        return await _problem(request, p, problem)
    # The invitation the person opened: its page's link carries it (or an earlier page kept it in the
    # session, which is here: this request is same-site).
    invitation = request.GET.get("invitation", "") or await request.session.aget(PENDING_INVITATION, "")
    flow = {
        "state": authorization["state"],
        "nonce": authorization["nonce"],
        "verifier": authorization["code_verifier"],
        "redirect_uri": redirect_uri,
        "next": _safe_next(request, request.GET.get("next", "")),
        "invitation": invitation if isinstance(invitation, str) else "",
    }
    response = HttpResponseRedirect(authorization["url"])
    response.set_signed_cookie(
        FLOW_COOKIE,
        json.dumps(flow),
        salt=FLOW_SALT,
        max_age=FLOW_MAX_AGE,
        path=FLOW_PATH,
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",
    )
    return response


def _flow(request: HttpRequest) -> dict[str, str]:
    """The flow this browser started here, from its cookie; a problem if there is none (any longer)."""
    try:
        flow = json.loads(request.get_signed_cookie(FLOW_COOKIE, salt=FLOW_SALT, max_age=FLOW_MAX_AGE) or "")
    except (KeyError, signing.BadSignature, ValueError):
        raise SignInProblem(
            "This sign-in was not started in this browser, or took more than ten minutes: start again.", 400
        ) from None
    if not isinstance(flow, dict) or not all(
        isinstance(flow.get(k), str) for k in ("state", "nonce", "verifier", "redirect_uri")
    ):
        raise SignInProblem("This sign-in's data is damaged: start again.", 400)
    return flow


def _provider_refusal(p: Provider, error: str, description: str) -> SignInProblem:
    if error == "access_denied":
        return SignInProblem(f"{p.name} did not let you sign in here (access denied).", 403)
    detail = f"{error}: {description}" if description else error
    return SignInProblem(f"{p.name} refused the sign-in ({detail[:300]}).", 403)


async def _claims(request: HttpRequest, p: Provider, flow: dict[str, str]) -> dict[str, Any]:
    """Check the provider's answer against the flow, exchange the code, and validate the ID token."""
    error = request.GET.get("error", "")
    if error:
        raise _provider_refusal(p, error, request.GET.get("error_description", ""))
    # The state ties this answer to the sign-in this browser started: no one can finish theirs here.
    if not hmac.compare_digest(request.GET.get("state", "").encode(), flow["state"].encode()):
        raise SignInProblem(
            "This answer belongs to another sign-in (its state does not match): start again.", 400
        )
    code = request.GET.get("code", "")
    if not code:
        raise SignInProblem(f"{p.name} sent no authorization code: start again.", 400)
    client = client_for(p)
    await _metadata(p, client)
    try:
        token = await client.fetch_access_token(
            redirect_uri=flow["redirect_uri"], code=code, code_verifier=flow["verifier"]
        )
    except OAuthError as exc:
        raise _provider_refusal(p, str(exc.error), str(exc.description or "")) from None
    except (httpx2.HTTPError, ValueError) as exc:
        logger.warning("The OpenID Connect token request failed: %s", exc)
        raise SignInProblem(f"{p.name} could not be reached just now; start again.", 502) from None
    return await validated_claims(p, client, token, flow["nonce"])


def _sign_in(request: HttpRequest, p: Provider, claims: dict[str, Any], invitation: str) -> Any:
    """Find or make the person's account, then log this browser in as them (a new session key)."""
    default_team = (
        identities.DefaultTeam(settings.INSPECTOR_OIDC_TEAM, settings.INSPECTOR_OIDC_ROLE)
        if settings.INSPECTOR_OIDC_TEAM
        else None
    )
    try:
        user = identities.person_for(p.issuer, claims, invitation, default_team)
    except identities.NotAllowed as exc:
        raise SignInProblem(str(exc), 403) from None
    request.session.pop(PENDING_INVITATION, None)
    request.session.cycle_key()
    login(request, user, backend=settings.AUTHENTICATION_BACKENDS[0])
    _record_login_session(request, user)
    return user


def _record_login_session(request: HttpRequest, user: Any) -> None:
    """The browser's row in the person's list of sessions.

    get_or_create: a ``user_logged_in`` handler that records every login (the accounts work) may have
    made it already, and then this finds it.
    """
    LoginSession.objects.get_or_create(
        session_key=request.session.session_key,
        defaults={
            "user": user,
            "address": request.META.get("REMOTE_ADDR", "")[:100],
            "user_agent": request.headers.get("User-Agent", "")[:300],
        },
    )


@login_not_required
@never_cache
@require_safe
async def callback(request: HttpRequest) -> HttpResponse:
    """The provider's answer: sign the person in, or say plainly why not (never a 500)."""
    p = provider()
    if p is None:
        raise Http404("Single sign-on is not set up.")
    try:
        flow = _flow(request)
        claims = await _claims(request, p, flow)
        await sync_to_async(_sign_in)(request, p, claims, flow.get("invitation", ""))
    except SignInProblem as problem:
        response = await _problem(request, p, problem)
    else:
        next_url = _safe_next(request, flow.get("next", "/"))
        response = await sync_to_async(render)(
            request, "auth/sso_done.html", {"name": p.name, "next": next_url}
        )
        # A navigation of our own site, so the browser sends the new (Strict) session cookie with it.
        response.headers["Refresh"] = f"0; url={next_url}"
    # One use: a second answer with the same state finds no flow.
    response.delete_cookie(FLOW_COOKIE, path=FLOW_PATH, samesite="Lax")
    return response
