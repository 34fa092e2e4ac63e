"""The OAuth rules as pure functions (``sessions/engine/_oauth_rules.py``): challenges, discovery
URLs, resource and issuer checks, scope selection, the authorization response, and masking."""

from __future__ import annotations

import re

import pytest
from support.paths import REPO

from sessions.engine._oauth_rules import (
    as_metadata_urls,
    authorization_response,
    canonical_resource,
    check_as_metadata,
    check_prm,
    is_secure_url,
    mask_form,
    mask_json_secrets,
    parse_challenges,
    prm_urls,
    resource_covers,
    select_scopes,
)
from sessions.engine._targets import mask_headers

ISSUER = "https://auth.example.com"
META = {
    "issuer": ISSUER,
    "authorization_endpoint": f"{ISSUER}/authorize",
    "token_endpoint": f"{ISSUER}/token",
    "code_challenge_methods_supported": ["S256"],
}


def codes(problems: list) -> list[tuple[str, str, bool]]:
    return [(p.code, p.severity, p.fatal) for p in problems]


# --- WWW-Authenticate -----------------------------------------------------------------------------------


def test_a_bearer_challenge_gives_its_parameters_with_lower_cased_names() -> None:
    [challenge] = parse_challenges(
        [
            'Bearer Resource_Metadata="https://mcp.example.com/.well-known/oauth-protected-resource", '
            "scope=files"
        ]
    )
    assert challenge.scheme == "Bearer"
    assert challenge.resource_metadata == "https://mcp.example.com/.well-known/oauth-protected-resource"
    assert challenge.scope == "files"


def test_several_challenges_in_one_header_and_across_headers() -> None:
    found = parse_challenges(
        ['Basic realm="x", Bearer error="insufficient_scope", scope="a b"', 'DPoP algs="ES256"']
    )
    assert [(c.scheme, c.params) for c in found] == [
        ("Basic", {"realm": "x"}),
        ("Bearer", {"error": "insufficient_scope", "scope": "a b"}),
        ("DPoP", {"algs": "ES256"}),
    ]


def test_quoted_strings_keep_escaped_quotes_and_commas() -> None:
    [challenge] = parse_challenges([r'Bearer error_description="say \"no\", twice", scope="a\\b c"'])
    assert challenge.params == {"error_description": 'say "no", twice', "scope": r"a\b c"}


def test_a_scheme_without_parameters_does_not_hide_the_next_challenge() -> None:
    found = parse_challenges(['Negotiate, Bearer resource_metadata="https://m.example/prm"'])
    assert [c.scheme for c in found] == ["Negotiate", "Bearer"]
    assert found[1].resource_metadata == "https://m.example/prm"


def test_a_token68_challenge_is_skipped_not_taken_for_a_scheme() -> None:
    found = parse_challenges(['Basic dXNlcjpwYXNz, Bearer scope="a"', "Negotiate YII=="])
    assert [(c.scheme, c.params) for c in found] == [
        ("Basic", {}),
        ("Bearer", {"scope": "a"}),
        ("Negotiate", {}),
    ]


@pytest.mark.parametrize("junk", ["", "   ", ",,,", '="x"', "Bearer ,,, =", '"quoted"', "\x00Bearer"])
def test_junk_gives_no_challenge_or_a_harmless_one_and_never_raises(junk: str) -> None:
    for challenge in parse_challenges([junk]):
        assert challenge.resource_metadata is None and challenge.scope is None


def test_an_empty_scope_counts_as_none() -> None:
    [challenge] = parse_challenges(['Bearer scope="  "'])
    assert challenge.scope is None


# --- discovery URLs ------------------------------------------------------------------------------------


def test_prm_urls_are_path_aware_first_then_the_root() -> None:
    assert prm_urls("https://mcp.example.com/public/mcp?x=1") == [
        "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp",
        "https://mcp.example.com/.well-known/oauth-protected-resource",
    ]
    assert prm_urls("https://mcp.example.com/mcp/") == [
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
        "https://mcp.example.com/.well-known/oauth-protected-resource",
    ]


@pytest.mark.parametrize("url", ["https://mcp.example.com", "https://mcp.example.com/"])
def test_prm_urls_of_a_server_at_the_root_are_the_root_only(url: str) -> None:
    assert prm_urls(url) == ["https://mcp.example.com/.well-known/oauth-protected-resource"]


def test_as_metadata_urls_with_a_path_in_the_protocols_order() -> None:
    assert as_metadata_urls("https://auth.example.com/tenant1") == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example.com/.well-known/openid-configuration/tenant1",
        "https://auth.example.com/tenant1/.well-known/openid-configuration",
    ]


@pytest.mark.parametrize("issuer", ["https://auth.example.com", "https://auth.example.com/"])
def test_as_metadata_urls_without_a_path(issuer: str) -> None:
    assert as_metadata_urls(issuer) == [
        "https://auth.example.com/.well-known/oauth-authorization-server",
        "https://auth.example.com/.well-known/openid-configuration",
    ]


def test_the_canonical_resource_is_lower_case_without_trailing_slash_query_or_fragment() -> None:
    assert canonical_resource("HTTPS://MCP.Example.COM/Mcp/?a=1#f") == "https://mcp.example.com/Mcp"
    assert canonical_resource("https://mcp.example.com/") == "https://mcp.example.com"


# --- resource and issuer checks -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("published", "server", "covers"),
    [
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com/mcp/", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp/", True),
        ("https://mcp.example.com", "https://mcp.example.com/any/path", True),
        ("https://mcp.example.com/", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com/api", "https://mcp.example.com/api/mcp", True),
        ("HTTPS://MCP.EXAMPLE.COM/mcp", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com:443/mcp", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com/mc", "https://mcp.example.com/mcp", False),  # not on a segment boundary
        ("https://mcp.example.com/mcp/v2", "https://mcp.example.com/mcp", False),
        ("https://mcp.example.com/MCP", "https://mcp.example.com/mcp", False),  # paths are case-sensitive
        ("https://evil.example.com/mcp", "https://mcp.example.com/mcp", False),
        ("http://mcp.example.com/mcp", "https://mcp.example.com/mcp", False),
        ("https://mcp.example.com:8443/mcp", "https://mcp.example.com/mcp", False),
    ],
)
def test_resource_covers(published: str, server: str, covers: bool) -> None:
    assert resource_covers(published, server) is covers


def test_check_prm_accepts_a_good_document() -> None:
    document = {"resource": "https://mcp.example.com/mcp", "authorization_servers": [ISSUER]}
    assert check_prm(document, "https://mcp.example.com/mcp", "https://mcp.example.com/.well-known/x") == []


def test_check_prm_refuses_a_resource_that_names_another_server() -> None:
    document = {"resource": "https://other.example.com/mcp", "authorization_servers": [ISSUER]}
    problems = check_prm(document, "https://mcp.example.com/mcp", "https://mcp.example.com/.well-known/x")
    assert codes(problems) == [("oauth-resource-mismatch", "error", True)]


@pytest.mark.parametrize(
    "document",
    [
        [],
        {"authorization_servers": [ISSUER]},
        {"resource": "https://mcp.example.com/mcp"},
        {"resource": "https://mcp.example.com/mcp", "authorization_servers": []},
        {"resource": "https://mcp.example.com/mcp", "authorization_servers": [""]},
    ],
)
def test_check_prm_refuses_an_incomplete_document(document: object) -> None:
    problems = check_prm(document, "https://mcp.example.com/mcp", "https://mcp.example.com/.well-known/x")
    assert [(p.code, p.fatal) for p in problems] == [("oauth-prm", True)]


def test_check_prm_fetched_over_plain_http_on_another_host_is_an_error() -> None:
    document = {"resource": "http://mcp.example.com/mcp", "authorization_servers": [ISSUER]}
    problems = check_prm(document, "http://mcp.example.com/mcp", "http://mcp.example.com/.well-known/x")
    assert codes(problems) == [("oauth-insecure", "error", False)]
    local = {"resource": "http://127.0.0.1:8000/mcp", "authorization_servers": ["http://127.0.0.1:9000"]}
    assert check_prm(local, "http://127.0.0.1:8000/mcp", "http://127.0.0.1:8000/.well-known/x") == []


def test_check_as_metadata_accepts_good_metadata() -> None:
    assert check_as_metadata(META, ISSUER) == []


@pytest.mark.parametrize("given", ["https://evil.example.com", f"{ISSUER}/", ISSUER.upper(), None])
def test_an_issuer_that_is_not_the_same_string_is_fatal(given: str | None) -> None:
    problems = check_as_metadata({**META, "issuer": given}, ISSUER)
    assert codes(problems) == [("oauth-issuer-mismatch", "error", True)]


def test_an_issuer_mismatch_in_the_2025_03_26_fallback_is_only_a_warning() -> None:
    problems = check_as_metadata({**META, "issuer": "https://elsewhere.example.com"}, ISSUER, legacy=True)
    assert codes(problems) == [("oauth-issuer-mismatch", "warning", False)]


@pytest.mark.parametrize("methods", [None, [], ["plain"], "S256"])
def test_no_pkce_s256_is_fatal(methods: object) -> None:
    metadata = {**META, "code_challenge_methods_supported": methods}
    if methods is None:
        del metadata["code_challenge_methods_supported"]
    assert codes(check_as_metadata(metadata, ISSUER)) == [("oauth-no-pkce", "error", True)]


def test_pkce_is_not_asked_of_a_server_without_the_authorization_code_grant_or_in_legacy_mode() -> None:
    bare = {k: v for k, v in META.items() if k != "code_challenge_methods_supported"}
    assert check_as_metadata({**bare, "grant_types_supported": ["client_credentials"]}, ISSUER) == []
    assert check_as_metadata(bare, ISSUER, legacy=True) == []


@pytest.mark.parametrize("key", ["authorization_endpoint", "token_endpoint"])
def test_a_plain_http_endpoint_on_another_host_is_fatal(key: str) -> None:
    problems = check_as_metadata({**META, key: "http://auth.example.com/x"}, ISSUER)
    assert codes(problems) == [("oauth-insecure", "error", True)]


def test_plain_http_on_loopback_is_allowed() -> None:
    issuer = "http://127.0.0.1:9000"
    endpoints = {"authorization_endpoint": f"{issuer}/a", "token_endpoint": f"{issuer}/t"}
    local = {**META, "issuer": issuer, **endpoints}
    assert check_as_metadata(local, issuer) == []


def test_metadata_without_a_token_endpoint_or_not_an_object_is_fatal() -> None:
    bare = {k: v for k, v in META.items() if k != "token_endpoint"}
    assert codes(check_as_metadata(bare, ISSUER)) == [("oauth-as-metadata", "error", True)]
    assert codes(check_as_metadata("<html>", ISSUER)) == [("oauth-as-metadata", "error", True)]


@pytest.mark.parametrize(
    ("url", "secure"),
    [
        ("https://auth.example.com", True),
        ("http://localhost:9000", True),
        ("http://app.localhost", True),
        ("http://127.0.0.2", True),
        ("http://[::1]:8080", True),
        ("http://auth.example.com", False),
        ("http://localhost.example.com", False),
        ("http://10.0.0.1", False),
        ("ftp://localhost", False),
    ],
)
def test_is_secure_url(url: str, secure: bool) -> None:
    assert is_secure_url(url) is secure


# --- scope selection ------------------------------------------------------------------------------------


def scopes(**kwargs: object) -> str | None:
    given = {"configured": None, "challenged": None, "published": None, "server_scopes": None}
    return select_scopes(**{**given, **kwargs})  # type: ignore[arg-type]


def test_scopes_configured_win_over_the_challenge_and_the_published_ones() -> None:
    assert scopes(configured="mine", challenged="theirs", published=["p"]) == "mine"
    assert scopes(challenged="a b", published=["p"]) == "a b"
    assert scopes(published=["p", "q"]) == "p q"
    assert scopes() is None
    assert scopes(published=[]) is None


def test_a_step_up_asks_for_the_union_with_what_was_asked_before() -> None:
    assert scopes(challenged="b c", previous="a b") == "a b c"
    # Not a step-up (no new scope named): the previous scopes are not carried on their own.
    assert scopes(published=["p"], previous="a") == "p"


def test_offline_access_only_when_the_server_lists_it_and_a_refresh_token_is_wanted() -> None:
    assert scopes(published=["p"], server_scopes=["p", "offline_access"]) == "p offline_access"
    assert scopes(published=["p"], server_scopes=["p"]) == "p"
    assert scopes(published=["p"], server_scopes=["offline_access"], offline=False) == "p"
    assert scopes(server_scopes=["offline_access"]) is None  # no scope at all: still none
    assert scopes(challenged="offline_access p", server_scopes=["offline_access"]) == "offline_access p"


# --- the authorization response -------------------------------------------------------------------------


def answer(query: str, *, iss_supported: bool = False) -> tuple[dict[str, str], list]:
    return authorization_response(
        f"http://127.0.0.1:5000/callback?{query}", state="s1", issuer=ISSUER, iss_supported=iss_supported
    )


def test_a_good_response_gives_the_code() -> None:
    params, problems = answer("code=c1&state=s1")
    assert params["code"] == "c1" and problems == []


@pytest.mark.parametrize("query", ["code=c1&state=s2", "code=c1", "code=c1&state="])
def test_a_wrong_or_missing_state_is_fatal(query: str) -> None:
    assert codes(answer(query)[1]) == [("oauth-state", "error", True)]


def test_iss_is_compared_as_an_exact_string() -> None:
    assert answer(f"code=c1&state=s1&iss={ISSUER}")[1] == []
    for other in (f"{ISSUER}/", "https://AUTH.example.com", "https://evil.example.com"):
        assert codes(answer(f"code=c1&state=s1&iss={other}")[1]) == [("oauth-iss", "error", True)]


def test_a_missing_iss_is_fatal_only_when_the_server_advertises_it() -> None:
    assert answer("code=c1&state=s1", iss_supported=False)[1] == []
    assert codes(answer("code=c1&state=s1", iss_supported=True)[1]) == [("oauth-iss", "error", True)]


def test_an_error_parameter_is_a_refusal_in_the_servers_words() -> None:
    _, problems = answer("error=access_denied&error_description=nope&state=s1")
    assert codes(problems) == [("oauth-denied", "error", True)]
    assert "nope" in problems[0].message


def test_a_response_without_a_code_is_a_refusal() -> None:
    assert codes(answer("state=s1")[1]) == [("oauth-denied", "error", True)]


# --- masking --------------------------------------------------------------------------------------------


def test_json_secrets_are_masked_wherever_they_are_nested() -> None:
    document = {
        "access_token": "at-123",
        "token_type": "Bearer",
        "nested": [{"refresh_token": "rt-456", "scope": "a"}],
        "client_secret": "cs-789",
        "id_token": None,
    }
    masked = mask_json_secrets(document)
    text = repr(masked)
    assert not any(secret in text for secret in ("at-123", "rt-456", "cs-789"))
    assert masked["token_type"] == "Bearer" and masked["nested"][0]["scope"] == "a"
    assert masked["access_token"] == "•••• (6 chars)" and masked["id_token"] is None


def test_form_secrets_are_masked() -> None:
    form = {"grant_type": "authorization_code", "code": "c-1", "code_verifier": "v-2", "client_id": "me"}
    assert mask_form(form) == {
        "grant_type": "authorization_code",
        "code": "•••• (3 chars)",
        "code_verifier": "•••• (3 chars)",
        "client_id": "me",
    }


def test_credential_headers_are_masked_but_challenges_and_nonces_are_shown() -> None:
    headers = {
        "Authorization": "Bearer at-123",
        "WWW-Authenticate": 'Bearer resource_metadata="https://m/prm"',
        "DPoP-Nonce": "n-1",
        "X-Api-Key": "k-1",
    }
    masked = mask_headers(headers)
    assert masked["Authorization"] == "Bearer •••• (13 chars)"
    assert masked["WWW-Authenticate"] == headers["WWW-Authenticate"]
    assert masked["DPoP-Nonce"] == "n-1" and "k-1" not in masked["X-Api-Key"]


# --- the rule table -------------------------------------------------------------------------------------


def test_every_oauth_verdict_code_is_in_the_rule_table() -> None:
    source = " ".join(p.read_text() for p in (REPO / "sessions/engine").glob("_oauth*.py"))
    used = set(re.findall(r'"(oauth-[a-z-]+)"', source))
    table = (REPO / "docs/engine.md").read_text()
    documented = set(re.findall(r"`(oauth-[a-z-]+)`", table))
    assert len(used) > 10
    assert used - documented == set()
