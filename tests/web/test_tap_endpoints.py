"""Tap endpoints on the team page, and their route's refusals, as the named people (no process started).

alice is the admin of team A, bob an operator there, carol a viewer; dave is the admin of team B.
What the endpoints forward and record is tests/hosted/test_hosted_tap.py's.
"""

from __future__ import annotations

import html
import logging
import re
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.test import AsyncClient

from inspector.auth import RedactQueryStrings, strip_share_tokens
from inspector.tap_route import serve
from sessions.models import McpSession
from sessions.teams.models import Membership, Role, TapEndpoint, Team, token_digest

pytestmark = pytest.mark.django_db(transaction=True)

UPSTREAM = "http://127.0.0.1:9/mcp"
PEOPLE = {
    "alice": ("A", Role.ADMIN),
    "bob": ("A", Role.OPERATOR),
    "carol": ("A", Role.VIEWER),
    "dave": ("B", Role.ADMIN),
}


@pytest.fixture
def hosted(settings: Any) -> None:
    settings.INSPECTOR_HOSTED = True
    settings.INSPECTOR_EGRESS_ALLOW = ["127.0.0.1"]


@database_sync_to_async
def _people() -> dict[str, User]:
    teams = {"A": Team.objects.create(name="team A"), "B": Team.objects.create(name="team B")}
    people = {}
    for name, (team, role) in PEOPLE.items():
        people[name] = User.objects.create_user(name)
        Membership.objects.create(team=teams[team], user=people[name], role=role)
    return people


async def _client(user: User) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(user)
    return client


async def _make(client: AsyncClient, url: str = UPSTREAM, name: str = "everything") -> Any:
    return await client.post("/team/taps", {"name": name, "url": url})


def _shown_url(body: str) -> str:
    found = re.search(r'id="new-tap-url" value="([^"]+)"', body)
    assert found, body[:3000]
    return html.unescape(found[1])


@pytest.mark.usefixtures("hosted")
async def test_an_operator_makes_an_endpoint_whose_url_is_shown_once_and_kept_only_as_a_digest() -> None:
    people = await _people()
    bob = await _client(people["bob"])
    response = await _make(bob)
    assert response.status_code == 200
    url = _shown_url(response.content.decode())
    token = url.split("/tap/", 1)[1].split("/", 1)[0]
    assert url == f"http://testserver/tap/{token}/mcp" and response["Referrer-Policy"] == "no-referrer"
    endpoint = await TapEndpoint.objects.aget()
    assert (
        endpoint.digest == token_digest(token) and endpoint.url == UPSTREAM and endpoint.name == "everything"
    )
    assert await database_sync_to_async(lambda: endpoint.team.name)() == "team A"
    page = (await bob.get("/team")).content.decode()
    assert token not in page and "everything" in page and UPSTREAM in page and "never" in page


@pytest.mark.usefixtures("hosted")
async def test_a_viewer_sees_the_teams_endpoints_but_may_not_make_or_revoke_one() -> None:
    people = await _people()
    bob, carol = await _client(people["bob"]), await _client(people["carol"])
    await _make(bob)
    endpoint = await TapEndpoint.objects.aget()
    assert (await _make(carol)).status_code == 403
    assert (await carol.post(f"/team/taps/{endpoint.pk}/revoke")).status_code == 403
    page = (await carol.get("/team")).content.decode()
    assert "everything" in page and 'action="/team/taps"' not in page and "revoke" not in page
    assert await TapEndpoint.objects.filter(revoked__isnull=True).acount() == 1


@pytest.mark.usefixtures("hosted")
async def test_another_team_gets_404_for_the_endpoint_and_never_sees_it() -> None:
    people = await _people()
    bob, dave = await _client(people["bob"]), await _client(people["dave"])
    await _make(bob, name="team-a-secret-tap")
    endpoint = await TapEndpoint.objects.aget()
    response = await dave.post(f"/team/taps/{endpoint.pk}/revoke")
    assert response.status_code == 404 and b"No such tap endpoint" in response.content
    assert "team-a-secret-tap" not in (await dave.get("/team")).content.decode()
    assert (await TapEndpoint.objects.aget()).revoked is None


@pytest.mark.usefixtures("hosted")
@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://10.1.2.3/mcp", "egress rules refuse"),
        ("http://169.254.169.254/latest", "egress rules refuse"),
        ("http://[::1]:9/mcp", "egress rules refuse"),
        ("ftp://127.0.0.1/mcp", "http:// or https:// URL"),
        ("not a url", "Enter a valid URL"),
        ("http://user:pw@127.0.0.1:9/mcp", "Leave credentials out"),
        ("http://127.0.0.1:99999/mcp", "port is not a number"),
        ("", "This field is required"),
    ],
)
async def test_an_upstream_the_rules_refuse_or_a_bad_url_is_a_400_that_says_why(url: str, said: str) -> None:
    people = await _people()
    response = await _make(await _client(people["bob"]), url=url)
    assert response.status_code == 400
    assert said in html.unescape(response.content.decode())
    assert not await TapEndpoint.objects.aexists()


@pytest.mark.usefixtures("hosted")
async def test_a_name_too_long_is_a_400() -> None:
    people = await _people()
    assert (await _make(await _client(people["bob"]), name="x" * 201)).status_code == 400


async def test_the_local_mode_has_no_tap_endpoints(settings: Any) -> None:
    settings.INSPECTOR_HOSTED = False
    people = await _people()
    assert (await _make(await _client(people["alice"]))).status_code == 404
    assert "Tap endpoints" not in (await (await _client(people["alice"])).get("/team")).content.decode()
    token = "t" * 43
    assert (await _call("GET", f"/tap/{token}/mcp"))[0] == 404


@pytest.mark.usefixtures("hosted")
async def test_revoking_tells_the_streams_in_flight_and_ends_the_endpoints_live_sessions() -> None:
    people = await _people()
    bob = await _client(people["bob"])
    await _make(bob)
    endpoint = await TapEndpoint.objects.aget()
    live = await McpSession.objects.acreate(
        team_id=endpoint.team_id,
        name="tap",
        config={"tap": {"endpoint": endpoint.pk}},
        transport_name="tap",
        status="ready",
    )
    other = await McpSession.objects.acreate(
        team_id=endpoint.team_id,
        name="tap",
        config={"tap": {"endpoint": 0}},
        transport_name="tap",
        status="ready",
    )
    layer = get_channel_layer()
    in_flight = await layer.new_channel()
    await layer.group_add(TapEndpoint.group_for(endpoint.digest), in_flight)
    response = await bob.post(f"/team/taps/{endpoint.pk}/revoke")
    assert response.status_code == 302
    assert await layer.receive(in_flight) == {"type": "tap.revoked"}
    assert (await TapEndpoint.objects.aget()).revoked is not None
    await live.arefresh_from_db()
    await other.arefresh_from_db()
    assert (live.status, live.status_note) == ("closed", "the tap endpoint was revoked")
    assert other.status == "ready"


async def _call(
    method: str, path: str, headers: list[tuple[bytes, bytes]] | None = None
) -> tuple[int, dict[bytes, bytes], bytes]:
    """One request to the tap route, as daphne hands it over."""
    sent: list[dict[str, Any]] = []
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": headers or [(b"host", b"testserver")],
        "scheme": "http",
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await serve(scope, receive, send)
    start = sent[0]
    return start["status"], dict(start["headers"]), b"".join(m.get("body", b"") for m in sent[1:])


@pytest.mark.usefixtures("hosted")
async def test_the_route_answers_unknown_revoked_and_malformed_tokens_with_no_detail() -> None:
    people = await _people()
    await _make(await _client(people["bob"]))
    endpoint = await TapEndpoint.objects.aget()
    unknown = "u" * 43
    status, headers, body = await _call("POST", f"/tap/{unknown}/mcp")
    assert (status, body) == (404, b"Not found\n")
    assert headers[b"content-security-policy"].startswith(b"sandbox") and b"set-cookie" not in headers
    for path in ("/tap/", "/tap/short/mcp", "/tap/" + "%" * 43 + "/mcp", "/tap/" + "é" * 43):
        assert (await _call("GET", path))[:1] == (404,), path
    assert (await _call("PUT", f"/tap/{unknown}/mcp"))[0] == 405
    endpoint.revoked = endpoint.created
    await endpoint.asave()
    # The revoked endpoint's token is unknown to the test: the row's digest is made to match one it knows.
    known = "k" * 43
    await TapEndpoint.objects.filter(pk=endpoint.pk).aupdate(digest=token_digest(known))
    status, _headers, body = await _call("POST", f"/tap/{known}/mcp")
    assert (status, body) == (410, b"Gone\n")


def test_a_tap_endpoints_token_never_reaches_a_log_line() -> None:
    token = "AbC-123_" * 5
    assert (
        strip_share_tokens(f"POST /tap/{token}/mcp 200 [127.0.0.1:5]")
        == "POST /tap/[redacted]/mcp 200 [127.0.0.1:5]"
    )
    record = logging.LogRecord(
        "inspector.access", logging.INFO, "", 0, "%s %s", ("GET", f"/tap/{token}/sse?x=1"), None
    )
    RedactQueryStrings().filter(record)
    assert token not in record.getMessage() and "/tap/[redacted]/sse" in record.getMessage()
