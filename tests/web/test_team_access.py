"""Named people try every URL and the live socket with their own team's ids and the other team's.

Share links are reached by their token, not by team membership: team A's link is for anyone with it,
team B's for B's members only; an anonymous visitor reaches A's shared view and nothing else.

alice is the admin of team A, bob an operator there and carol a viewer; dave is the admin of team B.
What each may do is the table below; every URL pattern of the app must be in it, so a new view cannot
go untested. An answer is "ok" (past the access check: any status below 500 but 403 and 404),
"forbidden" (403: a member whose role is too low) or "hidden" (404: not a member; the id could as
well not exist).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.db import transaction
from django.test import AsyncClient
from django.urls import URLPattern, URLResolver, get_resolver
from support.web import anonymous_communicator, scripted_servers, session_communicator

from sessions.engine import Frame
from sessions.frames import frame_row
from sessions.models import McpSession, PendingReview, ServerConfig, TimelineFrame
from sessions.playground.models import Chat, ChatEntry, ChatServer, EvalResult, EvalRun, EvalSuite, ItemShare
from sessions.teams.models import (
    CatalogServer,
    Invitation,
    LoginSession,
    Membership,
    Role,
    Share,
    TapEndpoint,
    Team,
    TeamModel,
    token_digest,
)

pytestmark = pytest.mark.django_db(transaction=True)

PEOPLE = {
    "alice": ("A", Role.ADMIN),
    "bob": ("A", Role.OPERATOR),
    "carol": ("A", Role.VIEWER),
    "dave": ("B", Role.ADMIN),
}

OK, FORBIDDEN, HIDDEN = "ok", "forbidden", "hidden"

# How each kind of URL answers each person: (with team A's ids, with team B's ids).
RULES: dict[str, dict[str, tuple[str, str]]] = {
    # Reading a session: any member of its team.
    "read": {"alice": (OK, HIDDEN), "bob": (OK, HIDDEN), "carol": (OK, HIDDEN), "dave": (HIDDEN, OK)},
    # Acting on a session, or on a saved or catalog server by its id: operators and admins of its team.
    # A viewer is told their role is too low before anything is looked up.
    "act": {"alice": (OK, HIDDEN), "bob": (OK, HIDDEN), "carol": (FORBIDDEN, HIDDEN), "dave": (HIDDEN, OK)},
    "act-on-team-id": {
        "alice": (OK, HIDDEN),
        "bob": (OK, HIDDEN),
        "carol": (FORBIDDEN, FORBIDDEN),
        "dave": (HIDDEN, OK),
    },
    # Team-wide pages with no id: each person in their own team.
    "team-read": dict.fromkeys(PEOPLE, (OK, OK)),
    "team-act": {"alice": (OK, OK), "bob": (OK, OK), "carol": (FORBIDDEN, FORBIDDEN), "dave": (OK, OK)},
    # Changing the team (settings, invitations, the catalog): its admins. A member whose role is too
    # low is told so before any id is looked up.
    "team-admin": {
        "alice": (OK, OK),
        "bob": (FORBIDDEN, FORBIDDEN),
        "carol": (FORBIDDEN, FORBIDDEN),
        "dave": (OK, OK),
    },
    "admin-on-team-id": {
        "alice": (OK, HIDDEN),
        "bob": (FORBIDDEN, FORBIDDEN),
        "carol": (FORBIDDEN, FORBIDDEN),
        "dave": (HIDDEN, OK),
    },
    # A login session of the team's admin (alice's in A, dave's in B): only its own person ends it.
    "own-login": {
        "alice": (OK, HIDDEN),
        "bob": (HIDDEN, HIDDEN),
        "carol": (HIDDEN, HIDDEN),
        "dave": (HIDDEN, OK),
    },
    # Open to anyone: health, login pages.
    "public": dict.fromkeys(PEOPLE, (OK, OK)),
    # A share link's view, by its token: A's link is for anyone, B's for B's members only.
    "shared": {"alice": (OK, HIDDEN), "bob": (OK, HIDDEN), "carol": (OK, HIDDEN), "dave": (OK, OK)},
}

# Every URL name of the app: its method and its rule.
URLS: dict[str, tuple[str, str]] = {
    "healthz": ("GET", "public"),
    "login": ("GET", "public"),
    "auth-token": ("GET", "public"),
    "sso-login": ("GET", "public"),
    "sso-callback": ("GET", "public"),
    "home": ("GET", "team-read"),
    "connect": ("POST", "team-act"),
    "import_servers": ("POST", "team-act"),
    "connect_saved": ("POST", "act-on-team-id"),
    "warm_connect": ("POST", "team-act"),
    "warm_saved": ("POST", "act-on-team-id"),
    "edit_server": ("POST", "act-on-team-id"),
    "delete_server": ("POST", "act-on-team-id"),
    "connect_catalog": ("POST", "act-on-team-id"),
    "delete_ended_sessions": ("POST", "team-act"),
    "open_recording": ("POST", "team-act"),
    "search": ("GET", "team-read"),
    "compare": ("GET", "team-read"),
    "session": ("GET", "read"),
    "delete_session": ("POST", "act"),
    "import_status": ("GET", "read"),
    "disconnect": ("POST", "act"),
    "reconnect": ("POST", "act"),
    "reinitialize": ("POST", "act"),
    "replay_form": ("GET", "read"),
    "replay_start": ("POST", "act"),
    "replay_view": ("GET", "read"),
    "panel": ("GET", "read"),
    "first_list": ("POST", "act"),
    "request": ("POST", "act"),
    "call": ("GET", "read"),
    "cancel": ("POST", "act"),
    "session_switcher": ("GET", "read"),
    "timeline": ("GET", "read"),
    "flow": ("GET", "read"),
    "frame": ("GET", "read"),
    "frame_raw": ("GET", "read"),
    "add_note": ("POST", "act"),
    "export": ("GET", "read"),
    "export_html": ("GET", "read"),
    "export_collection": ("GET", "read"),
    "tools_list": ("POST", "act"),
    "tool_form": ("GET", "read"),
    "tool_call": ("POST", "act"),
    "app_open": ("POST", "act"),
    "app_request": ("POST", "act"),
    "app_messages": ("POST", "act"),
    "app_frame": ("GET", "read"),
    "list_items": ("POST", "act"),
    "read_template": ("POST", "act"),
    "subscribe": ("POST", "act"),
    "resource_blob": ("GET", "read"),
    "get_prompt": ("POST", "act"),
    "tasks_list": ("POST", "act"),
    "task_action": ("POST", "act"),
    "check_skill": ("POST", "act"),
    "complete": ("POST", "act"),
    "set_level": ("POST", "act"),
    "ping": ("POST", "act"),
    "review_answer": ("POST", "act"),
    "review_reject": ("POST", "act"),
    "review_sampling": ("POST", "act"),
    "review_draft": ("POST", "act"),
    "review_elicitation": ("POST", "act"),
    "review_consent": ("POST", "act"),
    "review_roots": ("POST", "act"),
    "roots_save": ("POST", "act"),
    "shares_panel": ("GET", "read"),
    "share_preview": ("POST", "act"),
    "share_create": ("POST", "act"),
    "share_revoke": ("POST", "act"),
    "shared": ("GET", "shared"),
    "shared_panel": ("GET", "shared"),
    "shared_timeline": ("GET", "shared"),
    "shared_frame": ("GET", "shared"),
    "shared_app_frame": ("GET", "shared"),
    "shared_export": ("GET", "shared"),
    "shared_export_html": ("GET", "shared"),
    "shared_collection": ("GET", "shared"),
    "logout": ("POST", "public"),
    "invite": ("GET", "public"),
    "account": ("GET", "team-read"),
    "change_password": ("POST", "team-read"),
    "end_other_logins": ("POST", "team-read"),
    "end_login": ("POST", "own-login"),
    "team": ("GET", "team-read"),
    "switch_team": ("POST", "team-read"),
    "team_settings": ("POST", "team-admin"),
    "invitation_create": ("POST", "team-admin"),
    "catalog_new": ("POST", "team-admin"),
    "member_role": ("POST", "admin-on-team-id"),
    "member_remove": ("POST", "admin-on-team-id"),
    "invitation_revoke": ("POST", "admin-on-team-id"),
    "catalog_edit": ("POST", "admin-on-team-id"),
    "catalog_delete": ("POST", "admin-on-team-id"),
    "model_create": ("POST", "team-admin"),
    "model_edit": ("POST", "admin-on-team-id"),
    "model_delete": ("POST", "admin-on-team-id"),
    "tap_endpoint_create": ("POST", "team-act"),
    "tap_endpoint_revoke": ("POST", "act-on-team-id"),
    "oauth_callback": ("GET", "public"),
    "oauth_debug": ("POST", "team-act"),
    "forget_server_tokens": ("POST", "act-on-team-id"),
    "forget_session_tokens": ("POST", "act"),
    "open_authorization": ("POST", "act"),
    "cancel_authorization": ("POST", "act"),
    "oauth_debugger": ("GET", "read"),
    "oauth_debug_step": ("POST", "act"),
    "tap_rule_add": ("POST", "act"),
    "tap_rule_remove": ("POST", "act"),
    "tap_release": ("POST", "act"),
    "tap_faults": ("POST", "act"),
    "tap_fault_once": ("POST", "act"),
    "playground_new": ("POST", "act"),
    "playground_chat": ("GET", "read"),
    "playground_settings": ("POST", "act"),
    "playground_send": ("POST", "act"),
    "playground_step": ("POST", "act"),
    "playground_stream": ("GET", "read"),
    "playground_decide": ("POST", "act"),
    "playground_view_context": ("POST", "act"),
    "team_playground": ("GET", "team-read"),
    "team_chat_new": ("POST", "team-act"),
    "team_chat": ("GET", "read"),
    "team_chat_settings": ("POST", "act-on-team-id"),
    "team_chat_send": ("POST", "act-on-team-id"),
    "team_chat_step": ("POST", "act-on-team-id"),
    "team_chat_stream": ("GET", "read"),
    "team_chat_decide": ("POST", "act-on-team-id"),
    "team_chat_view_context": ("POST", "act-on-team-id"),
    "evals": ("GET", "team-read"),
    "eval_new": ("POST", "team-act"),
    "eval_suite": ("GET", "read"),
    "eval_suite_json": ("GET", "read"),
    "eval_save": ("POST", "act-on-team-id"),
    "eval_delete": ("POST", "act-on-team-id"),
    "eval_start": ("POST", "act-on-team-id"),
    "eval_run": ("GET", "read"),
    "eval_step": ("POST", "act-on-team-id"),
    "eval_result": ("GET", "read"),
    "item_chat_export": ("GET", "read"),
    "item_chat_export_html": ("GET", "read"),
    "item_chat_shares": ("POST", "act"),
    "item_run_export": ("GET", "read"),
    "item_run_export_html": ("GET", "read"),
    "item_run_shares": ("POST", "act-on-team-id"),
    "item_share_revoke": ("POST", "act-on-team-id"),
    "shared_item": ("GET", "shared"),
}
# Requests that log the person out: they are logged in again before the next.
LOGS_OUT = {"logout"}

# Path arguments other than ids: a tab, a listing, a task action, a call and its content.
FIXED_ARGS = {
    "name": "overview",
    "kind": "prompts",
    "action": "get",
    "rpc_id": "1",
    "seq": "1",
    "index": "0",
    "held_id": "1",
    "decision": "approve",
}
QUERIES = {"tool_form": "?name=echo", "timeline": "", "frame": ""}


def patterns() -> list[tuple[str, str]]:
    """(route, name) of every URL pattern."""
    found: list[tuple[str, str]] = []

    def walk(items: list[Any], prefix: str) -> None:
        for item in items:
            if isinstance(item, URLResolver):
                walk(item.url_patterns, prefix + str(item.pattern))
            elif isinstance(item, URLPattern):
                found.append((prefix + str(item.pattern), str(item.name)))

    walk(get_resolver().url_patterns, "")
    return found


@dataclass
class TeamIds:
    team: Team
    session: McpSession
    review: PendingReview
    server: ServerConfig
    catalog: CatalogServer
    admin: Membership
    invitation: Invitation
    login: LoginSession
    token: str
    share: Share
    tap: TapEndpoint
    chat: Chat
    call: ChatEntry
    team_chat: Chat
    suite: EvalSuite
    run: EvalRun
    result: EvalResult
    model: TeamModel
    item_share: ItemShare


def _team(name: str) -> Team:
    return Team.objects.create(name=f"team {name}")


def _ids(team: Team, owner: User, word: str) -> TeamIds:
    """A closed session with a call (an echo and a resource read) and a waiting review, a saved HTTP
    server and a catalog entry. ``word`` is in the session's frames only, for search."""
    session = McpSession.objects.create(
        team=team, owner=owner, name=f"session of {team.name}", config={}, status="closed", last_seq=4
    )
    messages = [
        ("out", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}}),
        ("in", {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": word}]}}),
        (
            "in",
            {"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage", "params": {"messages": []}},
        ),
    ]
    rows = []
    for seq, (direction, body) in enumerate(messages, start=1):
        frame = Frame("message", direction, json.dumps(body).encode(), message=body)  # type: ignore[arg-type]
        frame.seq, frame.method, frame.rpc_id = seq, body.get("method"), body.get("id")
        frame.rpc_kind = "result" if "result" in body else "request"
        rows.append(TimelineFrame(session=session, **frame_row(frame, 0)))
    TimelineFrame.objects.bulk_create(rows)
    review = PendingReview.objects.create(
        session=session,
        key="s1",
        method="sampling/createMessage",
        rpc_id="s1",
        params={"messages": []},
        frame_seq=3,
    )
    server = ServerConfig.objects.create(
        team=team, owner=owner, name="saved", transport="http", url="http://192.0.2.1/mcp"
    )
    catalog = CatalogServer.objects.create(team=team, name="approved", command="true")
    admin = Membership.objects.get(team=team, user=owner)
    invitation, _ = Invitation.make(team, Role.VIEWER, owner)
    login = LoginSession.objects.create(user=owner, session_key=f"elsewhere-{uuid.uuid4().hex[:20]}")
    # Team A's session is shared with anyone who has the link; team B's with B's members only.
    token = f"link-of-{word}"
    audience = Share.Audience.ANYONE if word == "aardvark" else Share.Audience.TEAM
    share = Share.objects.create(
        session=session, created_by=owner, digest=token_digest(token), audience=audience
    )
    tap, _ = TapEndpoint.make(team, "tap", "http://192.0.2.1/mcp", owner)
    chat = Chat.objects.create(session=session, team=team, model_key="gpt")
    call = ChatEntry.objects.create(
        chat=chat, kind="tool", tool_name="echo", mcp_name="echo", status="pending"
    )
    team_chat = Chat.objects.create(session=session, team=team, model_key="gpt", team_page=True)
    ChatServer.objects.create(chat=team_chat, session=session, prefix="s1")
    suite = EvalSuite.objects.create(team=team, name="suite", definition={"tests": []})
    run = EvalRun.objects.create(suite=suite, team=team, session=session, state="done", model_keys=["gpt"])
    result = EvalResult.objects.create(
        run=run, position=0, test="t", model_key="gpt", attempt=1, state="failed"
    )
    model = TeamModel.objects.create(team=team, name="own", url="http://192.0.2.1/v1", model="m", api_key="k")
    item_share = ItemShare.objects.create(team=team, chat=chat, digest=token_digest(token), audience=audience)
    return TeamIds(
        team,
        session,
        review,
        server,
        catalog,
        admin,
        invitation,
        login,
        token,
        share,
        tap,
        chat,
        call,
        team_chat,
        suite,
        run,
        result,
        model,
        item_share,
    )


@database_sync_to_async
def _world() -> tuple[dict[str, User], dict[str, TeamIds]]:
    teams = {"A": _team("A"), "B": _team("B")}
    people = {}
    for name, (team, role) in PEOPLE.items():
        people[name] = User.objects.create_user(name, password=f"{name}-password-1")
        Membership.objects.create(team=teams[team], user=people[name], role=role)
    return people, {
        "A": _ids(teams["A"], people["alice"], "aardvark"),
        "B": _ids(teams["B"], people["dave"], "zebu"),
    }


def _url(route: str, ids: TeamIds) -> str:
    """The route with the team's ids (and fixed values for the other path arguments)."""
    values = {
        "public_id": str(ids.session.public_id),
        # The team's admin: removing or demoting them is refused (the team's only admin), past the check.
        "member_id": str(ids.admin.pk),
        "invitation_id": str(ids.invitation.pk),
        "entry_id": str(ids.catalog.pk),
        "login_id": str(ids.login.pk),
        "token": ids.token,
        "endpoint_id": str(ids.tap.pk),
        "chat_id": str(ids.chat.pk),
        "call_id": str(ids.call.pk),
        "suite_id": str(ids.suite.pk),
        "run_id": str(ids.run.pk),
        "result_id": str(ids.result.pk),
        "model_id": str(ids.model.pk),
        "share_id": str(ids.item_share.pk),
        **FIXED_ARGS,
    }
    values["pk"] = str(
        ids.review.pk if route.startswith("s/") else (ids.catalog.pk if "catalog" in route else ids.server.pk)
    )
    if route.startswith("playground/"):
        values["chat_id"] = str(ids.team_chat.pk)
    path = route
    for name, value in values.items():
        for converter in ("uuid", "int", "str"):
            path = path.replace(f"<{converter}:{name}>", value)
    assert "<" not in path, path
    return "/" + path


# What a 404 says when the id of the session, or of a saved or catalog server, is not the person's team's.
# Other 404s ("No such frame", "No such tool") come from past the check: the id was theirs.
UNKNOWN_ID = (
    "No such session",
    "No such server",
    "No such member",
    "No such invitation",
    "No such login",
    "No such share link",
    "No such tap endpoint",
    "No such eval suite",
    "No such eval run",
    "No such chat in this team",
    "No such model",
)


def _outcome(status: int, body: str) -> str:
    assert status < 500
    if status == 404:
        return HIDDEN if any(reason in body for reason in UNKNOWN_ID) else OK
    return FORBIDDEN if status == 403 else OK


@database_sync_to_async
def _restore(world: dict[str, TeamIds]) -> None:
    """Put back what an allowed request deleted or changed, so every request meets the same world."""
    with transaction.atomic():  # one commit, not one per statement
        _put_back(list(world.values()))


def _put_back(teams: list[TeamIds]) -> None:
    # Parents first.
    for part in (
        "session",
        "team_chat",
        "server",
        "review",
        "share",
        "catalog",
        "login",
        "suite",
        "run",
        "result",
        "model",
        "chat",
        "item_share",
    ):
        kept = [getattr(ids, part) for ids in teams]
        there = set(type(kept[0]).objects.filter(pk__in=[k.pk for k in kept]).values_list("pk", flat=True))
        for gone in (k for k in kept if k.pk not in there):
            gone.save(force_insert=True)
    sessions = McpSession.objects.filter(pk__in=[ids.session.pk for ids in teams])
    sessions.update(status="closed", worker_channel="")
    Share.objects.filter(pk__in=[ids.share.pk for ids in teams]).update(revoked=None)
    PendingReview.objects.filter(pk__in=[ids.review.pk for ids in teams]).update(status="waiting")
    Invitation.objects.filter(pk__in=[ids.invitation.pk for ids in teams]).update(revoked=False)
    TapEndpoint.objects.filter(pk__in=[ids.tap.pk for ids in teams]).update(revoked=None)
    ItemShare.objects.filter(pk__in=[ids.item_share.pk for ids in teams]).update(revoked=None)


@pytest.mark.slow
async def test_every_url_answers_each_person_as_the_table_says(settings: Any) -> None:
    settings.INSPECTOR_HOSTED = True
    people, world = await _world()
    routes = patterns()
    assert {name for _, name in routes} == set(URLS), "every URL name must be in the table (and only those)"
    clients = {}
    for name, user in people.items():
        clients[name] = AsyncClient()
        await clients[name].aforce_login(user)
    differences = []
    # Whether the world may differ from what _world made: no GET changes anything, nor does a refusal
    # (one that did would show as a later difference).
    changed = True
    with scripted_servers():  # the connects start no process: what they answer is what is checked
        for route, url_name in routes:
            method, rule = URLS[url_name]
            for person, expected in RULES[rule].items():
                for team, wanted in zip(("A", "B"), expected, strict=True):
                    if changed:
                        await _restore(world)
                    url = _url(route, world[team]) + QUERIES.get(url_name, "")
                    client = clients[person]
                    response = await (client.get(url) if method == "GET" else client.post(url, {}))
                    body = "" if response.streaming else response.content.decode()
                    got = _outcome(response.status_code, body)
                    changed = method != "GET" and got == OK
                    if url_name in LOGS_OUT:
                        await client.aforce_login(people[person])
                    if got != wanted:
                        differences.append(
                            f"{person} {method} {url} ({url_name}, team {team}'s ids): {got} "
                            f"({response.status_code}), the table says {wanted}"
                        )
    assert not differences, "\n".join(differences)


async def test_a_review_of_another_team_is_hidden_even_through_ones_own_session(settings: Any) -> None:
    settings.INSPECTOR_HOSTED = True
    people, world = await _world()
    bob = AsyncClient()
    await bob.aforce_login(people["bob"])
    own, other = world["A"], world["B"]
    for action in ("answer", "reject", "sampling", "draft", "elicitation", "consent", "roots"):
        response = await bob.post(f"/s/{own.session.public_id}/reviews/{other.review.pk}/{action}", {})
        assert response.status_code == 404, action
    assert await PendingReview.objects.filter(pk=other.review.pk, status="waiting").aexists()


async def test_a_chat_of_another_team_is_hidden_even_through_ones_own_session(settings: Any) -> None:
    settings.INSPECTOR_HOSTED = True
    people, world = await _world()
    bob = AsyncClient()
    await bob.aforce_login(people["bob"])
    own, other = world["A"], world["B"]
    base = f"/s/{own.session.public_id}/playground/{other.chat.pk}"
    response = await bob.get(base)
    assert response.status_code == 404 and "No such chat" in response.content.decode()
    for action in (
        "settings",
        "send",
        "step",
        f"calls/{other.call.pk}/approve",
        f"calls/{other.call.pk}/context",
    ):
        assert (await bob.post(f"{base}/{action}", {"text": "hi"})).status_code == 404, action
    response = await bob.post(
        f"/s/{own.session.public_id}/playground/{own.chat.pk}/calls/{other.call.pk}/deny"
    )
    assert response.status_code == 404
    # A view's context for the model is kept only on a call of the person's own chat.
    own_chat = f"/s/{own.session.public_id}/playground/{own.chat.pk}"
    context = {"structuredContent": {"city": "Oslo"}}
    response = await bob.post(f"{own_chat}/calls/{other.call.pk}/context", context, "application/json")
    assert response.status_code == 404
    response = await bob.post(f"{own_chat}/calls/{own.call.pk}/context", {"text": "hi"})
    assert response.status_code == 400 and "application/json" in response.json()["message"]
    response = await bob.post(f"{own_chat}/calls/{own.call.pk}/context", context, "application/json")
    assert response.status_code == 200
    assert await ChatEntry.objects.filter(pk=own.call.pk, view_context=context).aexists()
    assert await ChatEntry.objects.filter(pk=other.call.pk, view_context__isnull=True).aexists()
    assert await ChatEntry.objects.filter(pk=other.call.pk, status="pending").aexists()
    assert not await ChatEntry.objects.filter(chat=other.chat, kind="user").aexists()


async def test_the_live_socket_lets_members_of_the_sessions_team_watch_and_no_one_else(settings: Any) -> None:
    settings.INSPECTOR_HOSTED = True
    people, world = await _world()
    for person, (team, _role) in PEOPLE.items():
        for other in ("A", "B"):
            communicator = await session_communicator(
                people[person], f"/ws/sessions/{world[other].session.public_id}/"
            )
            connected, code = await communicator.connect(timeout=10)
            if team == other:
                assert connected, (person, other)
                await communicator.disconnect()
            else:
                assert (connected, code) == (False, 4404), (person, other)
    # A session id that does not exist looks the same as another team's.
    communicator = await session_communicator(people["alice"], f"/ws/sessions/{uuid.uuid4()}/")
    assert await communicator.connect(timeout=10) == (False, 4404)


async def test_lists_search_and_compare_show_only_the_persons_team(settings: Any) -> None:
    settings.INSPECTOR_HOSTED = True
    people, world = await _world()
    carol, dave = AsyncClient(), AsyncClient()
    await carol.aforce_login(people["carol"])
    await dave.aforce_login(people["dave"])
    home = (await carol.get("/")).content.decode()
    assert "session of team A" in home and "session of team B" not in home
    assert 'id="connect-form"' not in home and "You are a viewer in this team" in home
    assert "aardvark" in (await carol.get("/search", {"q": "aardvark"})).content.decode().split("<main", 1)[1]
    found = (await dave.get("/search", {"q": "aardvark"})).content.decode()
    assert "session of team A" not in found and "0 matching frames" in found
    assert "session of team A" not in (await dave.get("/compare")).content.decode()


@pytest.mark.slow
async def test_an_anonymous_visitor_with_an_anyone_link_reaches_the_shared_view_and_nothing_else(
    settings: Any,
) -> None:
    settings.INSPECTOR_HOSTED = True
    _people, world = await _world()
    stranger = AsyncClient()  # no account, no cookie
    refused = []
    for route, url_name in patterns():
        method, rule = URLS[url_name]
        for team in ("A", "B"):
            await _restore(world)
            url = _url(route, world[team]) + QUERIES.get(url_name, "")
            response = await (stranger.get(url) if method == "GET" else stranger.post(url, {}))
            status = response.status_code
            assert status < 500, url
            if rule == "public":
                continue
            if rule == "shared" and team == "A":
                assert status in (200, 404), (url, status)  # in (a frame may be gone: "No such frame")
                if status == 404:
                    assert "No such share link" not in response.content.decode(), url
                continue
            # Anything else sends them to log in, or refuses them.
            if status not in (302, 401, 403, 404) or (
                status == 302 and not response["Location"].startswith("/auth/login")
            ):
                refused.append(f"{method} {url} ({url_name}): {status}")
    assert not refused, "\n".join(refused)
    page = await stranger.get(f"/shared/{world['A'].token}/")
    assert page.status_code == 200 and "session of team A" in page.content.decode()
    # A team link sends a stranger to log in first.
    response = await stranger.get(f"/shared/{world['B'].token}/")
    assert response.status_code == 302 and response["Location"].startswith("/auth/login")


async def test_the_shared_socket_follows_the_links_audience(settings: Any) -> None:
    settings.INSPECTOR_HOSTED = True
    people, world = await _world()
    for person, (team, _role) in PEOPLE.items():
        for other in ("A", "B"):
            communicator = await session_communicator(people[person], f"/ws/shared/{world[other].token}/")
            connected, code = await communicator.connect(timeout=10)
            if other == "A" or team == other:
                assert connected, (person, other)
                await communicator.disconnect()
            else:
                assert (connected, code) == (False, 4404), (person, other)
    for token, expected in ((world["A"].token, True), (world["B"].token, False), ("nonsense", False)):
        communicator = anonymous_communicator(f"/ws/shared/{token}/")
        connected, _code = await communicator.connect(timeout=10)
        assert connected is expected, token
        if connected:
            await communicator.disconnect()


@pytest.mark.django_db
def test_a_session_is_read_with_the_persons_role_beside_it() -> None:
    from sessions.teams.access import personal_team, session_with_role

    alice, eve = User.objects.create_user("alice"), User.objects.create_user("eve")
    session = McpSession.objects.create(
        team=personal_team(alice),
        name="everything",
        config={"transport": "stdio", "command": "npx", "env": {"API_KEY": "s3cret"}},
        server_info={"name": "everything", "version": "1.0"},
        server_capabilities={"tools": {"listChanged": True}},
        phases=[{"phase": "ready", "ms": 3.5}],
        ended=dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
        exit_code=None,
    )
    found = session_with_role(alice.pk, session.public_id)
    assert found is not None
    read, role = found
    assert role == "admin" and read.person_role == "admin"  # type: ignore[attr-defined]
    assert read == session and read.name == "everything"
    assert read.config["env"]["API_KEY"] == "s3cret" and read.ended == session.ended
    assert session_with_role(eve.pk, session.public_id) is None  # not of her team: as if absent
    assert session_with_role(alice.pk, "not-a-uuid") is None
