"""Single sign-on with OpenID Connect, against a real provider (django-oauth-toolkit) the tests start.

erin and frank have accounts at the provider only; alice has a local account here and, at the provider,
an account with the same username and e-mail (which must not give anyone her local account). The flow
runs through the inspector's own views (Django's test client) and the provider's real pages (httpx); one
test does it all in Chromium against a running `mcp-inspector`.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.models import User
from django.core import signing
from django.test import Client
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from support.browser import CHROMIUM, CHROMIUM_ARGS, MCP_INSPECTOR, SHORT, assert_clean, open_page
from support.oidc import PASSWORD, Provider, sign_in_at_provider, start_provider
from support.processes import free_port, start_http_server

from inspector import sso
from sessions.teams.models import Invitation, LoginSession, Membership, Role, SsoIdentity, Team

CALLBACK = "http://testserver/auth/oidc/callback"
# The running inspector of the browser test: a loopback address, which the provider takes on any port
# (RFC 8252, section 7.3), so the port is chosen when the inspector starts.
LIVE_CALLBACK = "http://127.0.0.1/auth/oidc/callback"
PEOPLE = [
    {"username": "erin", "email": "erin@example.org", "first_name": "Erin", "last_name": "Example"},
    {"username": "frank", "email": "frank@example.org"},
    {"username": "alice", "email": "alice@example.org"},
]


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    with start_provider(tmp_path_factory.mktemp("oidc-provider"), [CALLBACK, LIVE_CALLBACK], PEOPLE) as p:
        yield p


def configure(settings: Any, p: Provider) -> Provider:
    settings.INSPECTOR_HOSTED = True
    settings.INSPECTOR_OIDC_ISSUER = p.issuer
    settings.INSPECTOR_OIDC_CLIENT_ID = p.client_id
    settings.INSPECTOR_OIDC_CLIENT_SECRET = p.client_secret
    settings.INSPECTOR_OIDC_SCOPES = "openid email profile"
    settings.INSPECTOR_OIDC_NAME = "Test SSO"
    settings.INSPECTOR_OIDC_TEAM = ""
    settings.INSPECTOR_OIDC_ROLE = "viewer"
    return p


@pytest.fixture
def sso_on(settings: Any, provider: Provider) -> Provider:
    """Single sign-on with the running test provider."""
    return configure(settings, provider)


@pytest.fixture
def sso_offline(settings: Any) -> Provider:
    """Single sign-on set up with a provider nobody runs: for what is refused before it is asked."""
    return configure(settings, Provider("http://127.0.0.1:9/o", "client", "secret"))


@pytest.fixture
def team_a(db: None) -> Team:
    return Team.objects.create(name="A")


def start(client: Client, next_url: str = "/") -> str:
    """Press "Sign in with …": return the provider's authorization URL the inspector sends us to."""
    response = client.get("/auth/oidc/login", {"next": next_url})
    assert response.status_code == 302, response.content[:500]
    return response["Location"]


def callback(client: Client, url: str) -> Any:
    parts = urlsplit(url)
    return client.get(f"{parts.path}?{parts.query}")


def sign_in(client: Client, username: str, next_url: str = "/") -> Any:
    """The whole flow for ``username``: start here, sign in at the provider, come back."""
    return callback(client, sign_in_at_provider(start(client, next_url), username, CALLBACK))


def signed_in_as(client: Client) -> User | None:
    user_id = client.session.get(SESSION_KEY)
    return None if user_id is None else User.objects.get(pk=user_id)


def invite(client: Client, team: Team, role: str) -> Invitation:
    """What the invitation page does when a person opens a link: keep its token in their session."""
    invitation, token = Invitation.make(team, role, by=None)
    session = client.session
    session[sso.PENDING_INVITATION] = token
    session.save()
    return invitation


def flow_cookie(**flow: str) -> str:
    """The signed flow cookie the login view would set, for tests that only reach the callback."""
    data = {"nonce": "n", "verifier": "v", "redirect_uri": CALLBACK, "next": "/", "invitation": "", **flow}
    return signing.get_cookie_signer(salt=sso.FLOW_COOKIE + sso.FLOW_SALT).sign(json.dumps(data))


# --- the flow -----------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db
def test_an_invited_person_signs_in_with_sso_gets_an_account_and_joins_the_team(
    client: Client, sso_on: Provider, team_a: Team
) -> None:
    invitation = invite(client, team_a, Role.OPERATOR)
    anonymous_key = client.session.session_key

    authorization = start(client, "/search")
    query = parse_qs(urlsplit(authorization).query)
    assert authorization.startswith(f"{sso_on.issuer}/authorize/")
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"]
    assert query["state"] and query["nonce"] and query["scope"] == ["openid email profile"]
    assert query["redirect_uri"] == [CALLBACK]
    cookie = client.cookies[sso.FLOW_COOKIE]
    assert (cookie["samesite"], cookie["path"], cookie["httponly"]) == ("Lax", "/auth/oidc/", True)

    response = callback(client, sign_in_at_provider(authorization, "erin", CALLBACK))

    assert response.status_code == 200, response.content.decode()[:1000]
    assert response["Refresh"] == "0; url=/search"
    erin = User.objects.get(username="erin")
    assert signed_in_as(client) == erin
    assert client.session.session_key != anonymous_key
    assert (erin.email, erin.first_name, erin.last_name) == ("erin@example.org", "Erin", "Example")
    assert not erin.has_usable_password()
    identity = SsoIdentity.objects.get(user=erin)
    assert (identity.issuer, identity.email) == (sso_on.issuer, "erin@example.org")
    assert Membership.objects.get(user=erin).role == Role.OPERATOR
    invitation.refresh_from_db()
    assert invitation.used_by == erin and not invitation.usable
    assert sso.PENDING_INVITATION not in client.session
    assert LoginSession.objects.filter(user=erin, session_key=client.session.session_key).count() == 1
    # The flow's cookie is spent.
    assert client.cookies[sso.FLOW_COOKIE].value == ""
    assert client.get("/").status_code == 200


@pytest.mark.slow
@pytest.mark.django_db
def test_a_returning_person_is_the_same_account(client: Client, sso_on: Provider, team_a: Team) -> None:
    invite(client, team_a, Role.VIEWER)
    assert sign_in(client, "erin").status_code == 200
    client.logout()

    assert sign_in(client, "erin").status_code == 200

    assert signed_in_as(client) == User.objects.get(username="erin")
    assert User.objects.count() == 1 and SsoIdentity.objects.count() == 1


@pytest.mark.slow
@pytest.mark.django_db
def test_without_an_invitation_or_a_default_team_there_is_no_account(
    client: Client, sso_on: Provider
) -> None:
    response = sign_in(client, "frank")

    assert response.status_code == 403
    assert b"There is no account here for you yet" in response.content
    assert not User.objects.exists() and not SsoIdentity.objects.exists()
    assert signed_in_as(client) is None


@pytest.mark.slow
@pytest.mark.django_db
def test_everyone_joins_the_default_team_once_at_their_first_sign_in(
    client: Client, sso_on: Provider, settings: Any
) -> None:
    settings.INSPECTOR_OIDC_TEAM = "Everyone"
    settings.INSPECTOR_OIDC_ROLE = "operator"

    assert sign_in(client, "frank").status_code == 200

    frank = User.objects.get(username="frank")
    assert Membership.objects.get(user=frank).team.name == "Everyone"
    assert Membership.objects.get(user=frank).role == Role.OPERATOR
    # An admin removes frank from the team: signing in again does not put him back.
    Membership.objects.filter(user=frank).delete()
    client.logout()
    assert sign_in(client, "frank").status_code == 200
    assert signed_in_as(client) == frank
    assert not Membership.objects.filter(user=frank).exists()


@pytest.mark.slow
@pytest.mark.django_db
def test_a_local_account_with_the_same_username_and_email_is_never_taken_over(
    client: Client, sso_on: Provider, team_a: Team
) -> None:
    alice = User.objects.create_user("alice", email="alice@example.org", password="alices-own")
    Membership.objects.create(team=team_a, user=alice, role=Role.ADMIN)
    invite(client, team_a, Role.VIEWER)

    assert sign_in(client, "alice").status_code == 200

    newcomer = signed_in_as(client)
    assert newcomer is not None and newcomer != alice
    assert newcomer.username == "alice-2"
    assert not SsoIdentity.objects.filter(user=alice).exists()
    assert Membership.objects.get(user=newcomer).role == Role.VIEWER
    alice.refresh_from_db()
    assert alice.check_password("alices-own")


@pytest.mark.slow
@pytest.mark.django_db
def test_an_existing_member_who_opens_an_invitation_joins_that_team_too(
    client: Client, sso_on: Provider, settings: Any
) -> None:
    settings.INSPECTOR_OIDC_TEAM = "Everyone"
    assert sign_in(client, "frank").status_code == 200
    client.logout()
    team_b = Team.objects.create(name="B")
    invite(client, team_b, Role.ADMIN)

    assert sign_in(client, "frank").status_code == 200

    frank = User.objects.get(username="frank")
    assert sorted(m.team.name for m in Membership.objects.filter(user=frank)) == ["B", "Everyone"]
    assert Membership.objects.get(user=frank, team=team_b).role == Role.ADMIN


@pytest.mark.slow
@pytest.mark.django_db
def test_a_used_invitation_gives_no_account(client: Client, sso_on: Provider, team_a: Team) -> None:
    invitation = invite(client, team_a, Role.VIEWER)
    Invitation.objects.filter(pk=invitation.pk).update(revoked=True)

    response = sign_in(client, "erin")

    assert response.status_code == 403
    assert b"expired, was used already or was withdrawn" in response.content
    assert not User.objects.exists()


# --- in a browser -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live_inspector(provider: Provider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`mcp-inspector` in the hosted mode with single sign-on; everyone joins "Everyone" as an operator."""
    # The tests' own database settings are not the app's: empty is unset (the local SQLite default).
    drop = ("INSPECTOR_TOKEN", "DB", "DB_NAME", "SECRET_KEY", "REDIS_URL")
    env = dict.fromkeys(drop, "") | {
        "DJANGO_SETTINGS_MODULE": "inspector.settings",
        "INSPECTOR_DATA_DIR": str(tmp_path_factory.mktemp("inspector-data")),
        "INSPECTOR_HOSTED": "true",
        "INSPECTOR_SECRET_KEYS": Fernet.generate_key().decode(),
        "INSPECTOR_OIDC_ISSUER": provider.issuer,
        "INSPECTOR_OIDC_CLIENT_ID": provider.client_id,
        "INSPECTOR_OIDC_CLIENT_SECRET": provider.client_secret,
        "INSPECTOR_OIDC_NAME": "Test SSO",
        "INSPECTOR_OIDC_TEAM": "Everyone",
        "INSPECTOR_OIDC_ROLE": "operator",
    }
    port = free_port()
    with start_http_server([MCP_INSPECTOR, "--no-browser", "--port", str(port)], port, env=env):
        yield f"http://127.0.0.1:{port}"


@pytest.mark.slow
@pytest.mark.browser
def test_in_a_browser_a_person_signs_in_with_sso_and_lands_where_they_were_going(
    provider: Provider, live_inspector: str
) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    expect = playwright.expect
    with playwright.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context()
            context.set_default_timeout(SHORT)
            page = open_page(context, "/search", base_url=live_inspector)
            page.wait_for_url(f"{live_inspector}/auth/login?next=/search")

            navigations: list[str] = []
            page.on("request", lambda r: navigations.append(r.url) if r.is_navigation_request() else None)
            page.get_by_role("link", name="Sign in with Test SSO").click()
            # The provider is another site (localhost, not 127.0.0.1), as it is in production.
            page.wait_for_url(f"{provider.issuer.removesuffix('/o')}/accounts/login/**")
            page.get_by_label("Username").fill("erin")
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Sign in at the provider").click()

            # Back here, signed in, at the page the person asked for (no detour by the login page).
            page.wait_for_url(f"{live_inspector}/search")
            expect(page.locator(".topbar .user")).to_have_text("erin")
            back = next(
                i
                for i, url in enumerate(navigations)
                if url.startswith(f"{live_inspector}/auth/oidc/callback")
            )
            assert navigations[back + 1 :] == [f"{live_inspector}/search"], navigations
            cookies = {c["name"]: c for c in context.cookies(live_inspector)}
            assert cookies["mcp_inspector_session"]["sameSite"] == "Strict"
            assert sso.FLOW_COOKIE not in cookies
            assert_clean(page)
        finally:
            browser.close()


# --- refusals -----------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db
def test_an_answer_with_another_state_is_refused(client: Client, sso_on: Provider, team_a: Team) -> None:
    invite(client, team_a, Role.VIEWER)
    back = sign_in_at_provider(start(client), "erin", CALLBACK)
    forged = back.replace("state=", "state=x")

    response = callback(client, forged)

    assert response.status_code == 400
    assert b"its state does not match" in response.content
    assert not User.objects.exists() and signed_in_as(client) is None


@pytest.mark.slow
@pytest.mark.django_db
def test_an_answer_in_a_browser_that_did_not_start_the_sign_in_is_refused(
    client: Client, sso_on: Provider, team_a: Team
) -> None:
    invite(client, team_a, Role.VIEWER)
    back = sign_in_at_provider(start(client), "erin", CALLBACK)

    # Someone else's browser (no flow cookie) given erin's answer: the login CSRF a state stops.
    response = callback(Client(), back)

    assert response.status_code == 400
    assert b"not started in this browser" in response.content
    assert not User.objects.exists()


@pytest.mark.slow
@pytest.mark.django_db
def test_a_code_works_once(client: Client, sso_on: Provider, team_a: Team) -> None:
    invite(client, team_a, Role.VIEWER)
    back = sign_in_at_provider(start(client), "erin", CALLBACK)
    spent = client.cookies[sso.FLOW_COOKIE].value
    assert callback(client, back).status_code == 200

    # Replayed with the flow's cookie put back: the provider refuses the used code.
    client.cookies[sso.FLOW_COOKIE] = spent
    response = callback(client, back)

    assert response.status_code == 403
    assert b"refused the sign-in (invalid_grant" in response.content


@pytest.mark.django_db
def test_a_refusal_by_the_provider_is_a_403_that_says_so(client: Client, sso_offline: Provider) -> None:
    client.cookies[sso.FLOW_COOKIE] = flow_cookie(state="s1")

    denied = client.get("/auth/oidc/callback", {"error": "access_denied", "state": "s1"})
    client.cookies[sso.FLOW_COOKIE] = flow_cookie(state="s1")
    odd = client.get(
        "/auth/oidc/callback",
        {"error": "server_error", "error_description": "<script>x</script>", "state": "s1"},
    )

    assert denied.status_code == 403 and b"did not let you sign in here (access denied)" in denied.content
    assert odd.status_code == 403 and b"&lt;script&gt;x&lt;/script&gt;" in odd.content


@pytest.mark.django_db
@pytest.mark.parametrize(
    "query",
    [
        {},
        {"state": "s2"},
        {"code": "c"},
        {"state": ["s2", "s1"], "code": "c"},
        {"state": "\u00b2", "code": "c"},
    ],
)
def test_an_incomplete_answer_is_a_400(client: Client, sso_offline: Provider, query: dict[str, Any]) -> None:
    client.cookies[sso.FLOW_COOKIE] = flow_cookie(state="s2")

    response = client.get("/auth/oidc/callback", query)

    assert response.status_code == 400


@pytest.mark.django_db
def test_a_tampered_flow_cookie_is_a_400(client: Client, sso_offline: Provider) -> None:
    client.cookies[sso.FLOW_COOKIE] = flow_cookie(state="s1")[:-3] + "abc"

    response = client.get("/auth/oidc/callback", {"state": "s1", "code": "c"})

    assert response.status_code == 400 and b"not started in this browser" in response.content


@pytest.mark.django_db
@pytest.mark.parametrize(
    "data",
    ['{"state": "s1"}', '{"state": "s1", "nonce": "n", "verifier": "v"}', "[1, 2]", '"text"', "not json"],
)
def test_a_signed_flow_that_is_not_one_of_ours_is_a_400(
    client: Client, sso_offline: Provider, data: str
) -> None:
    signer = signing.get_cookie_signer(salt=sso.FLOW_COOKIE + sso.FLOW_SALT)
    client.cookies[sso.FLOW_COOKIE] = signer.sign(data)

    response = client.get("/auth/oidc/callback", {"state": "s1", "code": "c"})

    assert response.status_code == 400


@pytest.mark.django_db
def test_the_provider_s_redirect_back_passes_the_same_origin_guard(
    client: Client, sso_offline: Provider
) -> None:
    # A cross-site top-level GET navigation is what the provider's redirect is: it reaches the view.
    navigation = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
    client.cookies[sso.FLOW_COOKIE] = flow_cookie(state="s1")
    reached = client.get("/auth/oidc/callback", {"state": "s1", "error": "access_denied"}, headers=navigation)
    # A script on another site fetching it does not.
    fetched = client.get(
        "/auth/oidc/callback", headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"}
    )

    assert reached.status_code == 403 and b"access denied" in reached.content
    assert fetched.status_code == 403 and fetched.content == b"Forbidden: cross-site request."


# --- the ID token's checks (no network: the client is handed the discovery document and keys) ---------------

ISSUER = "https://id.example.com"
CLIENT_ID = "inspector"
SIGNING_KEY = RSAKey.generate_key(2048, parameters={"kid": "k1", "use": "sig"})


def offline_client(key: RSAKey = SIGNING_KEY) -> tuple[sso.Provider, sso.OidcClient]:
    p = sso.Provider(ISSUER, CLIENT_ID, "secret", "openid", "Test SSO")
    metadata = {
        "issuer": ISSUER,
        "jwks": KeySet([key]).as_dict(private=False),
        "id_token_signing_alg_values_supported": ["RS256"],
        "_loaded_at": time.time(),
    }
    return p, sso.OidcClient(framework=None, client_id=CLIENT_ID, client_secret="secret", **metadata)


def id_token(key: RSAKey = SIGNING_KEY, **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "sub": "u1",
        "aud": CLIENT_ID,
        "iat": now,
        "exp": now + 300,
        "nonce": "n1",
        **changes,
    }
    claims = {k: v for k, v in claims.items() if v is not None}
    return {"id_token": jwt.encode({"alg": "RS256", "kid": "k1"}, claims, key)}


async def check(token: dict[str, Any], nonce: str = "n1") -> dict[str, Any]:
    p, client = offline_client()
    return await sso.validated_claims(p, client, token, nonce)


async def test_a_valid_id_token_gives_its_claims() -> None:
    claims = await check(id_token(email="erin@example.org"))

    assert (claims["sub"], claims["email"]) == ("u1", "erin@example.org")


@pytest.mark.parametrize(
    ("why", "changes"),
    [
        ("another audience", {"aud": "someone-else"}),
        # Authlib alone lets this one through (it checks azp, and aud only when told to).
        ("another audience that names us as azp", {"aud": "someone-else", "azp": CLIENT_ID}),
        ("another audience among others", {"aud": ["someone-else", "third"]}),
        ("another issuer", {"iss": "https://evil.example.com"}),
        ("expired", {"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}),
        ("no expiry", {"exp": None}),
        ("no subject", {"sub": None}),
        ("no nonce", {"nonce": None}),
        ("another nonce", {"nonce": "replayed"}),
    ],
)
async def test_an_id_token_that_fails_a_check_is_refused(why: str, changes: dict[str, Any]) -> None:
    with pytest.raises(sso.SignInProblem) as refused:
        await check(id_token(**changes))

    assert refused.value.status == 403, why


async def test_an_id_token_signed_by_another_key_is_refused() -> None:
    forger = RSAKey.generate_key(2048, parameters={"kid": "k1"})

    with pytest.raises(sso.SignInProblem) as refused:
        await check(id_token(forger))

    assert refused.value.status == 403


def unsigned(claims: dict[str, Any]) -> str:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(claims)}."


@pytest.mark.parametrize(
    "token",
    [
        unsigned({"iss": ISSUER, "sub": "u1", "aud": CLIENT_ID, "iat": 1, "exp": 2**40, "nonce": "n1"}),
        "",
        "abc",
        "a.b.c",
        "\u00b2.\u00b2.\u00b2",
        jwt.encode({"alg": "RS256", "kid": "k1"}, {"sub": 1, "aud": {"x": 1}}, SIGNING_KEY),
    ],
)
async def test_a_token_that_is_not_a_signed_jwt_of_ours_is_refused(token: str) -> None:
    with pytest.raises(sso.SignInProblem) as refused:
        await check({"id_token": token})

    assert refused.value.status == 403


async def test_an_answer_without_an_id_token_is_refused() -> None:
    with pytest.raises(sso.SignInProblem) as refused:
        await check({"access_token": "a"})

    assert refused.value.status == 403


# --- switched off -------------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("hosted", [False, True])
def test_without_single_sign_on_there_is_no_button_and_no_flow(
    client: Client, settings: Any, hosted: bool
) -> None:
    settings.INSPECTOR_HOSTED = hosted
    # The local mode ignores an issuer: its one person logs in with the token.
    settings.INSPECTOR_OIDC_ISSUER = "https://id.example.com" if not hosted else ""
    settings.INSPECTOR_OIDC_CLIENT_ID = "x"

    assert b"Sign in with" not in client.get("/auth/login").content
    assert client.get("/auth/oidc/login").status_code == 404
    assert client.get("/auth/oidc/callback", {"code": "c", "state": "s"}).status_code == 404


@pytest.mark.django_db
def test_the_login_page_offers_single_sign_on_with_its_name(client: Client, sso_offline: Provider) -> None:
    page = client.get("/auth/login", {"next": "/search?q=a b"}).content.decode()

    assert 'href="/auth/oidc/login?next=/search%3Fq%3Da%20b">Sign in with Test SSO</a>' in page


@pytest.mark.django_db
def test_an_unreachable_provider_is_a_502_that_says_so(client: Client, sso_offline: Provider) -> None:
    response = client.get("/auth/oidc/login")

    assert response.status_code == 502
    assert b"Test SSO could not be reached just now" in response.content
    assert sso.FLOW_COOKIE not in response.cookies


@pytest.mark.django_db
@pytest.mark.parametrize(
    "next_url", ["https://evil.example.com/", "//evil.example.com", "/\\evil.example.com"]
)
def test_sign_in_never_sends_the_person_to_another_site(next_url: str) -> None:
    from django.test import RequestFactory

    assert sso._safe_next(RequestFactory().get("/"), next_url) == "/"


@pytest.mark.parametrize(
    ("issuer", "client_id", "scopes", "role", "problem"),
    [
        ("http://id.example.com", "c", "openid", "viewer", "must be an https:// URL"),
        ("id.example.com", "c", "openid", "viewer", "must be an https:// URL"),
        ("https://id.example.com?x=1", "c", "openid", "viewer", "no query or fragment"),
        ("https://id.example.com", "", "openid", "viewer", "INSPECTOR_OIDC_CLIENT_ID must be set"),
        ("https://id.example.com", "c", "email profile", "viewer", "must include openid"),
        ("https://id.example.com", "c", "openid", "owner", "INSPECTOR_OIDC_ROLE must be"),
    ],
)
def test_bad_single_sign_on_settings_stop_the_start(
    monkeypatch: pytest.MonkeyPatch, issuer: str, client_id: str, scopes: str, role: str, problem: str
) -> None:
    import inspector.settings as module

    for name, value in [("ISSUER", issuer), ("CLIENT_ID", client_id), ("SCOPES", scopes), ("ROLE", role)]:
        monkeypatch.setattr(module, f"INSPECTOR_OIDC_{name}", value)

    assert any(problem in line for line in module._oidc_problems()), module._oidc_problems()


@pytest.mark.parametrize(
    "issuer", ["https://id.example.com/realms/a/", "http://localhost:8080/o", "http://[::1]:9/o"]
)
def test_good_single_sign_on_settings_pass(monkeypatch: pytest.MonkeyPatch, issuer: str) -> None:
    import inspector.settings as module

    monkeypatch.setattr(module, "INSPECTOR_OIDC_ISSUER", issuer)
    monkeypatch.setattr(module, "INSPECTOR_OIDC_CLIENT_ID", "c")

    assert module._oidc_problems() == []
