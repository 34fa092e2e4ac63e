"""A chat's and an eval run's downloads and share links, as the named people (no process started).

alice is the admin of team A, bob an operator there, carol a viewer; dave is the admin of team B. Team
A's session was started with a bearer token and an API key in its environment, a tool echoed the token
into a chat's result and an eval transcript, and a person pasted the team model's key into the chat:
none of them leaves in a file or a shared page.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from html import unescape

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.test import AsyncClient
from django.utils import timezone

from inspector.auth import RedactQueryStrings
from sessions.models import McpSession
from sessions.playground.models import Chat, ChatEntry, EvalResult, EvalRun, EvalSuite, ItemShare
from sessions.teams.models import Membership, Role, Team, TeamModel

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "bearer-0123456789-SECRET-token"
ENV_KEY = "env-api-key-9876543210-SECRET"
MODEL_KEY = "sk-team-model-key-SECRET-42"
SECRETS = (TOKEN, ENV_KEY, MODEL_KEY)
PEOPLE = {
    "alice": ("A", Role.ADMIN),
    "bob": ("A", Role.OPERATOR),
    "carol": ("A", Role.VIEWER),
    "dave": ("B", Role.ADMIN),
}


@database_sync_to_async
def _world() -> tuple[dict[str, User], Chat, EvalRun]:
    teams = {"A": Team.objects.create(name="team A"), "B": Team.objects.create(name="team B")}
    people = {}
    for name, (team, role) in PEOPLE.items():
        people[name] = User.objects.create_user(name)
        Membership.objects.create(team=teams[team], user=people[name], role=role)
    team = teams["A"]
    TeamModel.objects.create(
        team=team, name="ours", url="http://127.0.0.1:9/v1", model="m", api_key=MODEL_KEY
    )
    config = {
        "transport": "http",
        "url": "http://127.0.0.1:9/mcp",
        "bearer_token": TOKEN,
        "env": {"API_KEY": ENV_KEY},
    }
    session = McpSession.objects.create(
        team=team, owner=people["alice"], name="everything", config=config, status="closed"
    )
    chat = Chat.objects.create(session=session, team=team, model_key="ours", system_prompt="Be <b>exact</b>.")
    ChatEntry.objects.create(chat=chat, kind="user", text=f"my key is {MODEL_KEY}, echo {TOKEN}")
    ChatEntry.objects.create(
        chat=chat,
        kind="tool",
        tool_name="echo",
        mcp_name="echo",
        arguments={"message": TOKEN, "password": "hunter2-long"},
        status="done",
        result={"content": [{"type": "text", "text": f"Echo: {TOKEN}"}]},
        text=f"Echo: {TOKEN}",
        request_seq=5,
        response_seq=6,
    )
    ChatEntry.objects.create(
        chat=chat, kind="assistant", text="<script>alert(1)</script> done", model_name="m"
    )
    suite = EvalSuite.objects.create(
        team=team, name="suite", definition={"tests": [{"name": "t", "prompt": "p"}]}
    )
    run = EvalRun.objects.create(
        suite=suite,
        team=team,
        session=session,
        state="done",
        model_keys=["ours"],
        definition=suite.definition,
    )
    transcript = [
        {"kind": "user", "text": "p"},
        {"kind": "tool", "name": "echo", "arguments": {"message": ENV_KEY}, "status": "done", "text": TOKEN},
    ]
    EvalResult.objects.create(
        run=run, position=0, test="t", model_key="ours", attempt=1, state="failed",
        reasons=[f"expected the answer to contain {TOKEN}"], transcript=transcript,
    )  # fmt: skip
    return people, chat, run


async def _client(user: User | None = None) -> AsyncClient:
    client = AsyncClient()
    if user is not None:
        await client.aforce_login(user)
    return client


def _clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text
        assert secret not in unescape(text)
    assert "[redacted]" in text


def _chat_url(chat: Chat, tail: str) -> str:
    return f"/s/{chat.session.public_id}/playground/{chat.pk}/{tail}"


async def test_a_viewer_downloads_a_chat_and_a_run_redacted_as_json_and_html_with_no_script() -> None:
    people, chat, run = await _world()
    carol = await _client(people["carol"])
    response = await carol.get(_chat_url(chat, "export.json"))
    assert response.status_code == 200
    assert response["Content-Disposition"] == f'attachment; filename="mcp-chat-{chat.pk}.json"'
    text = response.content.decode()
    _clean(text)
    document = json.loads(text)
    assert document["kind"] == "mcp-inspector chat" and document["model"] == "ours"
    user, tool, answer = document["entries"]
    assert tool["arguments"] == {"message": "[redacted]", "password": "[redacted]"}
    assert tool["result"]["content"][0]["text"] == "Echo: [redacted]" and tool["request_seq"] == 5
    assert user["text"] == "my key is [redacted], echo [redacted]"
    response = await carol.get(_chat_url(chat, "export.html"))
    page = response.content.decode()
    assert response.status_code == 200 and "default-src 'none'" in response["Content-Security-Policy"]
    _clean(page)
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; done" in page
    assert "Be &lt;b&gt;exact&lt;/b&gt;." in page and "Echo: [redacted]" in page

    response = await carol.get(f"/evals/runs/{run.pk}/export.json")
    text = response.content.decode()
    assert response.status_code == 200
    _clean(text)
    document = json.loads(text)
    assert document["rates"] == [{"test": "t", "models": {"ours": {"passed": 0, "done": 1, "runs": 1}}}]
    assert document["results"][0]["reasons"] == ["expected the answer to contain [redacted]"]
    response = await carol.get(f"/evals/runs/{run.pk}/export.html")
    page = response.content.decode()
    assert response.status_code == 200 and "<script" not in page
    _clean(page)
    assert "0/1" in page and "expected the answer to contain [redacted]" in page


async def test_another_team_gets_404_for_the_downloads_and_the_share_pages() -> None:
    people, chat, run = await _world()
    dave = await _client(people["dave"])
    for url in (
        _chat_url(chat, "export.json"),
        _chat_url(chat, "export.html"),
        _chat_url(chat, "shares"),
        f"/evals/runs/{run.pk}/export.json",
        f"/evals/runs/{run.pk}/export.html",
        f"/evals/runs/{run.pk}/shares",
    ):
        assert (await dave.get(url)).status_code == 404, url
        assert (await dave.post(url, {"audience": "anyone"})).status_code in (404, 405), url
    assert not await ItemShare.objects.aexists()


def _link(body: str) -> str:
    found = re.search(r'id="new-item-link" value="([^"]+)"', body)
    assert found, body[:3000]
    return unescape(found[1]).removeprefix("http://testserver")


async def test_a_share_link_opens_a_redacted_read_only_page_for_its_audience_until_revoked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    people, chat, run = await _world()
    bob, carol, dave = [await _client(people[n]) for n in ("bob", "carol", "dave")]
    # A viewer reads the links but makes none.
    assert (await carol.post(_chat_url(chat, "shares"), {"audience": "anyone"})).status_code == 403
    page = (await carol.get(_chat_url(chat, "shares"))).content.decode()
    assert "new-item-link" not in page
    # Back leads to the chat itself, on its session's Playground tab.
    assert f'href="/s/{chat.session.public_id}/?tab=playground&amp;chat={chat.pk}">Back' in page

    response = await bob.post(_chat_url(chat, "shares"), {"audience": "anyone", "days": "0"})
    assert response.status_code == 200
    anyone_link = _link(response.content.decode())
    token = anyone_link.split("/")[2]
    share = await ItemShare.objects.aget()
    assert token not in share.digest and share.chat_id == chat.pk and share.expires is None
    page = await (await _client()).get(anyone_link)
    assert page.status_code == 200 and "<script" not in page.content.decode()
    assert (
        page["Referrer-Policy"] == "no-referrer" and "default-src 'none'" in page["Content-Security-Policy"]
    )
    _clean(page.content.decode())
    assert "Echo: [redacted]" in page.content.decode() and "Make a link" not in page.content.decode()

    response = await bob.post(f"/evals/runs/{run.pk}/shares", {"audience": "team", "days": "3"})
    team_link = _link(response.content.decode())
    assert (await (await _client()).get(team_link)).status_code == 404
    assert (await dave.get(team_link)).status_code == 404
    page = await carol.get(team_link)
    assert page.status_code == 200 and "Run " in page.content.decode()
    _clean(page.content.decode())

    # Revoked: 410, for everyone; another team's operator cannot revoke it.
    assert (await dave.post(f"/shares/{share.pk}/revoke")).status_code == 404
    assert (await bob.post(f"/shares/{share.pk}/revoke")).status_code == 302
    assert (await (await _client()).get(anyone_link)).status_code == 410
    # Expired: 410 too.
    await ItemShare.objects.filter(run=run).aupdate(expires=timezone.now() - dt.timedelta(seconds=1))
    assert (await carol.get(team_link)).status_code == 410
    # The access log never holds a link's token.
    record = logging.LogRecord("daphne", logging.INFO, "", 0, f'"GET {anyone_link} HTTP/1.1" 200', None, None)
    RedactQueryStrings().filter(record)
    assert token not in record.getMessage() and "/shared-item/[redacted]" in record.getMessage()


async def test_a_team_that_forbids_public_links_gets_none() -> None:
    people, chat, _ = await _world()
    await Team.objects.filter(name="team A").aupdate(allow_public_shares=False)
    bob = await _client(people["bob"])
    response = await bob.post(_chat_url(chat, "shares"), {"audience": "anyone"})
    assert response.status_code == 400 and "members only" in response.content.decode()
    response = await bob.post(_chat_url(chat, "shares"), {"audience": "everyone"})
    assert response.status_code == 400
    assert not await ItemShare.objects.aexists()
