"""Every URL, form field and query parameter, given hostile values, is answered below 500.

The walk finds what to send by itself: every URL pattern (inspector/urls.py and what it includes),
the fields of every form, button and link the pages render (scraped from the pages of a live
session with listings, calls and waiting reviews), the parameters each view's module reads by name,
and those the walk sees read (any ``QueryDict`` lookup) while a route answers its form's own values.
Each is sent, one at a time over a form's own values, as Unicode digits, huge numbers, NaN and
infinity, 100,000 characters, JSON nested 100,000 deep, JSON of the wrong type, a list
where one value is expected, and missing; a NUL byte in all of them at once (the middleware refuses
it before any view, whichever holds it); every path argument as a huge number, a long or odd
string, an unknown id. A 500, or an exception out of a view, fails the test with the request.
The walk is one test per group of URLs (``GROUPS``), each on a session of its own, so that
pytest-xdist runs the groups side by side.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import re
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import pytest
from channels.db import database_sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import QueryDict
from django.test import AsyncClient, override_settings
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.urls.exceptions import Resolver404
from support.teams import ateam_of, team_of
from support.web import (
    live_runtime,
    logged_in_client,
    make_user,
    request,
    start_session,
    stdio_config,
    wait_until,
)

from sessions.models import McpSession, OAuthAuthorization, PendingReview, ServerConfig
from sessions.playground.models import Chat, ChatEntry, ChatServer, EvalResult, EvalRun, EvalSuite, ItemShare
from sessions.teams.models import (
    CatalogServer,
    Invitation,
    LoginSession,
    Membership,
    Share,
    TeamModel,
    token_digest,
)

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE: dict[str, Any] = {
    "a superscript digit": "²",
    "Arabic-Indic digits": "١٢٣",
    "a huge integer": "9" * 40,
    "minus one": "-1",
    "NaN": "NaN",
    "infinity": "inf",
    "an overflowing float": "1e999",
    "100,000 characters": "x" * 100_000,
    "JSON nested 100,000 deep": "[" * 100_000,
    "a JSON object nested 20,000 deep": '{"a":' * 20_000 + "1" + "}" * 20_000,
    "a JSON array": "[1, 2]",
    "a JSON string": '"text"',
    "empty": "",
    "spaces": "   ",
    "a list of two": ["1", "2"],
}
PATH_HOSTILE = {
    "int": ["9" * 30, "0"],
    "str": ["x" * 3000, quote("a\x00b"), quote("²"), quote("../..")],
    "uuid": [str(uuid.uuid4())],
}
# Raw bodies no form sends: a broken multipart body, bytes that are not UTF-8, JSON.
BODIES = [
    (b"--b\r\nContent-Disposition: form-data; name=\r\n\r\nx", "multipart/form-data; boundary=b"),
    (b"--b\r\n" * 3, "multipart/form-data"),
    (b"method=\xff\xfe&params=%ff%00", "application/x-www-form-urlencoded"),
    (b'{"method": "ping"}', "application/json"),
]
# Left out while the session is live (they end it, or restart it over and over); walked once it is closed.
ENDS_THE_SESSION = {"disconnect", "reinitialize", "delete_session"}
# Never walked: logging out takes no parameter, and would leave the rest of the walk logged out.
LOGS_OUT = {"logout"}
ARG = re.compile(r"<(?:(?P<converter>\w+):)?(?P<name>\w+)>")
# request.GET.get("x"), request.POST["x"], int_param(request.GET, "x"): the names a view reads.
READS = re.compile(r"""(?:GET|POST|data)(?:\.get(?:list)?\(|\[|,)\s*["']([^"']+)["']""")
# What an empty field of a form is filled with, so the walk gets past "this is required".
GOOD = {"method": "ping", "params": "{}", "timeout": "5", "uri": "info://server", "text": "hi", "model": "m"}
NOWHERE_MODEL = '[{"name": "nowhere", "url": "http://127.0.0.1:9/v1", "model": "m", "timeout": 2}]'
# Which waiting review a review URL is walked with.
SAMPLING = "sampling/createMessage"
REVIEW_OF = [
    ("sampling", SAMPLING), ("draft", SAMPLING), ("consent", "elicitation/url"),
    ("elicitation", "elicitation/create"), ("roots", "roots/list"), ("", SAMPLING),
]  # fmt: skip
FILTER_FIELDS = ("method", "direction", "errors", "violations", "hide_http", "apps", "rule")
# The walk is one test per group of URLs (by URL name), so that pytest-xdist spreads it over its
# workers; the groups are of about the same cost. A URL no group names is walked in "the rest".
GROUPS: dict[str, set[str]] = {
    "tools": {"tool_call", "tool_form", "tools_list", "app_open", "app_request", "app_frame",
              "app_messages"},
    "connect": {"connect"},
    "first list": {"first_list"},
    "servers": {"home", "connect_saved", "edit_server", "delete_server", "import_servers",
                "delete_ended_sessions"},
    "resources": {"panel", "subscribe", "list_items", "read_template", "resource_blob"},
    "timeline": {"session", "timeline", "flow", "frame", "export", "export_html", "export_collection"},
    "reviews": {"review_answer", "review_reject", "review_sampling", "review_draft", "review_elicitation",
                "review_consent", "review_roots", "roots_save"},
    "prompts": {"complete", "get_prompt"},
    "accounts": {"account", "change_password", "end_other_logins", "end_login", "invite", "sso-login",
                 "sso-callback"},
    "teams": {"team", "switch_team", "team_settings", "member_role", "member_remove", "invitation_create",
              "invitation_revoke", "catalog_new", "catalog_edit", "catalog_delete", "connect_catalog",
              "model_create", "model_edit", "model_delete"},
    "requests": {"request", "call", "cancel", "ping", "tasks_list", "task_action", "set_level", "check_skill",
                 "add_note", "frame_raw"},
    "shares": {"shares_panel", "share_preview", "share_create", "share_revoke", "shared", "shared_panel",
               "shared_timeline", "shared_frame", "shared_app_frame", "shared_export", "shared_export_html",
               "shared_collection", "item_chat_shares", "item_run_shares", "item_share_revoke",
               "shared_item"},
    "oauth and taps": {"forget_session_tokens", "open_authorization", "cancel_authorization",
                       "oauth_debugger", "oauth_debug_step", "forget_server_tokens", "oauth_callback",
                       "oauth_debug",
                       "tap_rule_add", "tap_rule_remove", "tap_release", "tap_faults", "tap_fault_once",
                       "tap_endpoint_create", "tap_endpoint_revoke"},
    "playground": {"playground_new", "playground_chat", "playground_settings", "playground_send",
                   "playground_step", "playground_stream", "playground_decide", "item_chat_export",
                   "item_chat_export_html"},
    "team playground": {"team_playground", "team_chat_new", "team_chat", "team_chat_settings",
                        "team_chat_send", "team_chat_step", "team_chat_stream", "team_chat_decide"},
    "evals": {"evals", "eval_new", "eval_suite", "eval_suite_json", "eval_save", "eval_start", "eval_run",
              "eval_step", "eval_result", "eval_delete", "item_run_export", "item_run_export_html"},
    "the rest": set(),
}  # fmt: skip


def in_group(name: str | None, group: str) -> bool:
    named = set().union(*GROUPS.values())
    return name in GROUPS[group] if group != "the rest" else name not in named


def url_patterns() -> Iterator[tuple[str, URLPattern]]:
    """Every URL pattern of the project, with its full route."""

    def walk(patterns: list[Any], prefix: str) -> Iterator[tuple[str, URLPattern]]:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            else:
                yield prefix + str(pattern.pattern), pattern

    yield from walk(get_resolver().url_patterns, "")


def names_read_by(pattern: URLPattern) -> set[str]:
    """The parameters a view may read: what it or a function of its module that it names reads by
    name (``request.GET.get("x")``, ``int_param(request.GET, "x")``), and the timeline filter's
    fields where it reads one. What it reads through other helpers (``number("before")``) the walk
    learns by watching it answer (``Reads``)."""
    view = inspect.unwrap(pattern.callback)
    module = sys.modules[view.__module__]
    own = inspect.getsource(view)
    sources = [own]
    for name, helper in vars(module).items():
        if (
            inspect.isfunction(helper)
            and helper.__module__ == module.__name__
            and re.search(rf"\b{name}\b", own)
        ):
            sources.append(inspect.getsource(helper))
    names = {name for source in sources for name in READS.findall(source)}
    if any("TimelineFilter.from_data" in source for source in sources):
        names.update(FILTER_FIELDS)
    return names


@dataclass
class Form:
    """A form (or a button, or a link) as a page renders it: where it goes, and what it sends."""

    method: str
    route: str
    fields: dict[str, Any] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)
    headers: dict[str, str] = field(default_factory=dict)  # what htmx says of the element that sent it


class FormScraper(HTMLParser):
    """Collect the forms, htmx buttons and links with a query string of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[Form] = []
        self.current: Form | None = None
        self.select: str | None = None
        self.textarea: str | None = None

    def target(self, method: str, url: str) -> Form | None:
        parts = urlsplit(url)
        if not parts.path.startswith("/") or "{" in url:
            return None
        try:
            route = resolve(parts.path).route
        except Resolver404:
            return None
        query = dict(parse_qsl(parts.query))
        return Form(method, route, dict(query), set(query))

    def handle_starttag(self, tag: str, attributes: list[tuple[str, str | None]]) -> None:
        attrs = {k: v or "" for k, v in attributes}
        if tag == "form":
            post = "hx-post" in attrs or attrs.get("method", "").lower() == "post"
            url = attrs.get("hx-post") or attrs.get("hx-get") or attrs.get("action") or ""
            self.current = self.target("post" if post else "get", url)
            if self.current is not None:
                self.forms.append(self.current)
            return
        own = attrs.get("hx-post") or attrs.get("hx-get")
        if own and tag != "form":
            button = self.target("post" if "hx-post" in attrs else "get", own)
            if button is not None:
                values = json.loads(attrs.get("hx-vals") or "{}")
                if attrs.get("name"):
                    values[attrs["name"]] = attrs.get("value", "")
                    button.headers = {"HX-Trigger-Name": attrs["name"], "HX-Trigger": attrs.get("id", "")}
                if self.current is not None:  # htmx sends the enclosing form's values too
                    button.fields.update(self.current.fields)
                    button.names.update(self.current.names)
                button.fields.update(values)
                button.names.update(values)
                self.forms.append(button)
        if tag == "a" and "?" in attrs.get("href", ""):
            link = self.target("get", attrs["href"])
            if link is not None:
                self.forms.append(link)
        form, name = self.current, attrs.get("name")
        if form is None:
            return
        if tag == "option" and self.select is not None:
            if self.select not in form.fields or "selected" in attrs:
                form.fields[self.select] = attrs.get("value", "")
            return
        if not name or tag not in ("input", "select", "textarea", "button"):
            return
        form.names.add(name)
        if tag == "select":
            self.select = name
        elif tag == "textarea":
            self.textarea = name
            form.fields[name] = ""
        elif tag == "input" and attrs.get("type") in ("checkbox", "radio"):
            if "checked" in attrs:
                form.fields[name] = attrs.get("value", "on")
        elif tag == "input" and attrs.get("type") == "file":
            form.fields[name] = "file"
        elif tag != "button":
            form.fields[name] = attrs.get("value", "")

    def handle_data(self, data: str) -> None:
        if self.current is not None and self.textarea is not None:
            self.current.fields[self.textarea] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.current = None
        elif tag == "select":
            self.select = None
        elif tag == "textarea":
            self.textarea = None


class Reads:
    """The names a request's query or form data (``QueryDict``) is asked for while it is answered,
    whatever reads them: the middleware, the view, a helper of another module."""

    def __init__(self) -> None:
        self.names: set[str] | None = None

    def install(self, patch: pytest.MonkeyPatch) -> None:
        for attr in ("__getitem__", "__contains__", "get", "getlist"):
            patch.setattr(QueryDict, attr, self._noting(getattr(QueryDict, attr)))

    def _noting(self, method: Any) -> Any:
        def read(data: Any, key: Any, *rest: Any) -> Any:
            if self.names is not None and isinstance(key, str):
                self.names.add(key)
            return method(data, key, *rest)

        return read


@dataclass
class Walk:
    client: AsyncClient
    arguments: dict[str, str]
    forms: dict[tuple[str, str], list[Form]]
    reads: Reads
    failures: list[str] = field(default_factory=list)
    sent: int = 0

    async def send(
        self, method: str, url: str, data: Any, *, htmx: dict[str, str] | None = None, content_type: str = ""
    ) -> int:
        """One request (from htmx unless ``htmx`` is None); a 500 or an exception is a failure."""
        self.sent += 1
        headers = {} if htmx is None else {"HX-Request": "true", **htmx}
        try:
            if content_type:
                response = await self.client.generic(method.upper(), url, data, content_type, headers=headers)
            elif method == "get":
                response = await self.client.get(url, data, headers=headers)
            else:
                response = await self.client.post(url, data, headers=headers)
            if getattr(response, "streaming", False):
                async for _ in response.streaming_content:
                    pass
            status = response.status_code
        except Exception as exc:
            status, problem = 599, f"{type(exc).__name__}: {str(exc)[:200]}"
        else:
            problem = (
                response.content[:200].decode(errors="replace")
                if status >= 500 and not response.streaming
                else ""
            )
        if status >= 500:
            shown = (
                {
                    k: (v[:40] + "…" if isinstance(v, str) and len(v) > 40 else v)
                    for k, v in dict(data).items()
                }
                if isinstance(data, dict)
                else repr(data)[:80]
            )
            self.failures.append(f"{method.upper()} {url[:120]} {shown} -> {status} {problem}")
        return status

    def url(self, route: str, **override: str) -> str:
        values = {**self.arguments, **override}
        if route.startswith("servers/"):
            values["pk"] = values["server"]
        elif route.startswith("catalog/"):
            values["pk"] = values["entry_id"]
        elif "/shares/" in route:
            values["pk"] = values["share"]
        elif "/oauth/" in route and route.startswith("s/"):
            values["pk"] = values["authorization"]
        elif "reviews/" in route:
            values["pk"] = values[next(kind for part, kind in REVIEW_OF if part in route)]
        return "/" + ARG.sub(lambda match: values[match["name"]], route)

    async def route(self, route: str, pattern: URLPattern, *, every_value: bool = True) -> None:
        """Walk one route; without ``every_value``, each name gets only the huge number (all at once)."""
        url = self.url(route)
        for method in ("get", "post"):
            self.reads.names = read = set()
            try:
                if await self.send(method, url, {}) in (405, 599):
                    continue
                forms = self.forms.get((method, route)) or [Form(method, route)]
                base = {name: value or GOOD.get(name, "1") for name, value in forms[0].fields.items()}
                htmx = forms[0].headers
                await self.send(method, url, self._files(base), htmx=htmx)
            finally:
                self.reads.names = None
            names = set().union(*(f.names for f in forms)) | names_read_by(pattern) | read
            for name in sorted(names) if every_value else ():
                for value in HOSTILE.values():
                    await self.send(method, url, self._with(base, name, value), htmx=htmx)
                await self.send(
                    method, url, {k: v for k, v in self._files(base).items() if k != name}, htmx=htmx
                )
            await self.send(method, url, dict.fromkeys(names, "9" * 40), htmx=htmx)
            if names:
                nul = await self.send(method, url, dict.fromkeys(names, "a\x00b"), htmx=htmx)
                if nul != 400:
                    self.failures.append(f"{method.upper()} {url[:120]} with NUL bytes -> {nul}, not 400")
            if method == "post":
                for body, content_type in BODIES:
                    await self.send(method, url, body, content_type=content_type, htmx={})
        for match in ARG.finditer(route):
            for value in PATH_HOSTILE.get(match["converter"] or "str", []):
                for method in ("get", "post"):
                    await self.send(method, self.url(route, **{match["name"]: value}), {}, htmx={})

    def _files(self, data: dict[str, Any]) -> dict[str, Any]:
        return {k: SimpleUploadedFile("x.jsonl", b"{}\n") if v == "file" else v for k, v in data.items()}

    def _with(self, base: dict[str, Any], name: str, value: Any) -> dict[str, Any]:
        data = self._files(base)
        if base.get(name) == "file":
            payload = "\n".join(value) if isinstance(value, list) else value
            data[name] = SimpleUploadedFile("hostile.jsonl", payload.encode())
        else:
            data[name] = value
        return data


ELICITATION_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "score": {"type": "number"},
        "agree": {"type": "boolean"},
        "color": {"type": "string", "enum": ["red", "green"]},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
    },
    "required": ["name"],
}


@database_sync_to_async
def waiting_reviews(session: McpSession) -> dict[str, int]:
    """Reviews as the runtime stores them, one of each kind, waiting (their answers go nowhere)."""
    hello = {"role": "user", "content": {"type": "text", "text": "hi"}}
    params = {
        SAMPLING: {"messages": [hello], "maxTokens": 5},
        "elicitation/create": {"message": "Who?", "requestedSchema": ELICITATION_SCHEMA},
        "elicitation/url": {
            "message": "Go",
            "mode": "url",
            "url": "https://example.com/",
            "elicitationId": "e",
        },
        "roots/list": {},
    }
    made = {}
    for i, (kind, values) in enumerate(params.items()):
        method = "elicitation/create" if kind == "elicitation/url" else kind
        review = PendingReview.objects.create(
            session=session, key=f"walk-{i}", method=method, rpc_id=str(1000 + i), params=values, frame_seq=1
        )
        made[kind] = review.pk
    return made


@database_sync_to_async
def team_ids(user: Any) -> dict[str, str]:
    """The ids the team and account pages take: the person's membership, an invitation, a catalog
    entry and a login session of their team (made here, in their personal team)."""
    team = team_of(user)
    entry = CatalogServer.objects.create(team=team, name="walked", command="true")
    invitation, _ = Invitation.make(team, "viewer", user)
    login = LoginSession.objects.create(user=user, session_key="walk-" + uuid.uuid4().hex[:30])
    member = Membership.objects.get(team=team, user=user)
    return {
        "member_id": str(member.pk),
        "invitation_id": str(invitation.pk),
        "entry_id": str(entry.pk),
        "login_id": str(login.pk),
    }


async def scrape(client: AsyncClient, pages: list[str]) -> dict[tuple[str, str], list[Form]]:
    forms: dict[tuple[str, str], list[Form]] = {}
    for page in pages:
        response = await client.get(page)
        assert response.status_code == 200, page
        scraper = FormScraper()
        scraper.feed(response.content.decode())
        for form in scraper.forms:
            forms.setdefault((form.method, form.route), []).append(form)
    return forms


async def walk(walker: Walk, group: str, *, live: bool) -> None:
    # Closed, the session's own pages; deleting it comes last.
    patterns = sorted(url_patterns(), key=lambda item: item[1].name == "delete_session")
    for route, pattern in patterns:
        if pattern.name in LOGS_OUT:
            continue
        if live and pattern.name in ENDS_THE_SESSION or not live and not route.startswith("s/"):
            continue
        if in_group(pattern.name, group):
            # Closed, a view parses what it is sent as it did live: the hostile values were walked then.
            await walker.route(route, pattern, every_value=live or pattern.name in ENDS_THE_SESSION)


def test_the_walk_groups_name_only_urls_that_exist() -> None:
    names = {pattern.name for _, pattern in url_patterns()}
    assert set().union(*GROUPS.values()) <= names
    assert all(sum(in_group(name, group) for group in GROUPS) == 1 for name in names)


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
async def test_every_url_form_and_query_parameter_answers_hostile_values_below_500(
    everything_stdio: dict, group: str
) -> None:
    with contextlib.ExitStack() as stack:
        await _walk_group(everything_stdio, group, stack)


async def _walk_group(everything_stdio: dict, group: str, stack: contextlib.ExitStack) -> None:
    async with live_runtime():
        alice = await make_user()
        config = stdio_config(
            everything_stdio["command"], everything_stdio["args"], capabilities={"review_roots": True}
        )
        session = await start_session(alice, config)
        client = await logged_in_client(alice)
        listed = {}
        for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list"):
            listed[method] = (await request(session, method, wait=10))["result"]
        uri = listed["resources/list"]["resources"][0]["uri"]
        read = await request(session, "resources/read", {"uri": uri}, wait=10)
        reviews = await waiting_reviews(session)
        saved = await ServerConfig.objects.acreate(
            owner=alice, team=await ateam_of(alice), name="gone", command="/nonexistent/server"
        )
        people = await team_ids(alice)
        token = "hostile-walk-" + "t" * 30
        share = await Share.objects.acreate(session=session, digest=token_digest(token), audience="anyone")
        authorization = await OAuthAuthorization.objects.acreate(
            session=session, user=alice, state_sha256="a" * 64, url="https://auth.example/authorize?state=a"
        )
        base = f"/s/{session.public_id}/"
        tabs = ("overview", "tools", "resources", "prompts", "logging", "roots", "conformance")
        pages = ["/", "/search", "/compare", base, *(f"{base}?tab={tab}" for tab in tabs)]
        pages += [f"{base}panel/{tab}" for tab in tabs]
        pages += [
            f"{base}tools/form?name={quote(tool['name'])}" for tool in listed["tools/list"]["tools"][:4]
        ]
        pages += ["/team", "/account", "/team/catalog/new", f"/team/catalog/{people['entry_id']}"]
        pages += [f"/servers/{saved.pk}/edit"]
        team_page = group == "team playground"
        chat = await Chat.objects.acreate(
            session=session, team_id=session.team_id, model_key="nowhere", team_page=team_page
        )
        if team_page:
            await ChatServer.objects.acreate(chat=chat, session=session, prefix="everything")
            stack.enter_context(override_settings(INSPECTOR_LLM_MODELS=NOWHERE_MODEL))
            pages += ["/playground", f"/playground/{chat.pk}"]
        call = await ChatEntry.objects.acreate(chat=chat, kind="tool", tool_name="echo", status="pending")
        if group == "playground":
            # A model nothing listens for: each step's answer is an error in the chat, at once.
            stack.enter_context(override_settings(INSPECTOR_LLM_MODELS=NOWHERE_MODEL))
            pages += [f"{base}?tab=playground", f"{base}panel/playground", f"{base}playground/{chat.pk}"]
        definition = {"tests": [{"name": "t", "prompt": "Echo hi", "expect": {"calls": ["echo"]}}]}
        suite = await EvalSuite.objects.acreate(team_id=session.team_id, name="walk", definition=definition)
        run = await EvalRun.objects.acreate(
            suite=suite,
            team_id=session.team_id,
            session=session,
            definition=definition,
            model_keys=["nowhere"],
        )
        result = await EvalResult.objects.acreate(
            run=run, position=0, test="t", model_key="nowhere", attempt=1
        )
        if group == "evals":
            # A model nothing listens for: the run's step fails its test at once, saying so.
            stack.enter_context(override_settings(INSPECTOR_LLM_MODELS=NOWHERE_MODEL))
            pages += [
                "/evals",
                f"/evals/{suite.pk}",
                f"/evals/runs/{run.pk}",
                f"/evals/runs/{run.pk}/results/{result.pk}",
            ]
        model = await TeamModel.objects.acreate(
            team_id=session.team_id, name="own", url="http://192.0.2.1/v1", model="m", api_key="k"
        )
        item_share = await ItemShare.objects.acreate(
            team_id=session.team_id, chat=chat, digest=token_digest(token), audience="anyone"
        )
        pages += [
            f"/team/models/{model.pk}",
            f"{base}playground/{chat.pk}/shares",
            f"/evals/runs/{run.pk}/shares",
        ]
        forms = await scrape(client, pages)
        arguments = {
            "public_id": str(session.public_id),
            "seq": "1",
            "rpc_id": str(read["rpc_id"]),
            "index": "0",
            "held_id": "1",
            "endpoint_id": "1",
            "server": str(saved.pk),
            "token": token,
            "share": str(share.pk),
            "authorization": str(authorization.pk),
            "name": "tools",
            "kind": "resources",
            "action": "get",
            "chat_id": str(chat.pk),
            "call_id": str(call.pk),
            "decision": "approve",
            "suite_id": str(suite.pk),
            "run_id": str(run.pk),
            "result_id": str(result.pk),
            "model_id": str(model.pk),
            "share_id": str(item_share.pk),
            **people,
            **{kind: str(pk) for kind, pk in reviews.items()},
        }
        reads = Reads()
        patch = stack.enter_context(pytest.MonkeyPatch.context())
        reads.install(patch)
        walker = Walk(client, arguments, forms, reads)
        await walk(walker, group, live=True)
    # The session's pages again, for a session opened from a recording (closed), its lifecycle included:
    # every value only where a route ends a session (walked only now), the rest once with a huge number.
    export = await client.get(f"/s/{session.public_id}/export")
    body = b"".join([chunk async for chunk in export.streaming_content])
    opened = await client.post("/recordings/open", {"recording": SimpleUploadedFile("walk.jsonl", body)})
    assert opened.status_code == 302
    recording = await McpSession.objects.aget(owner=alice, name="walk.jsonl")
    await wait_until(lambda: McpSession.objects.filter(pk=recording.pk, status="closed").exists())
    walker.arguments["public_id"] = str(recording.public_id)
    await walk(walker, group, live=False)
    print("SENT", group, walker.sent)
    assert not walker.failures, f"{len(walker.failures)} answers of 500 or more:\n" + "\n".join(
        walker.failures[:60]
    )


# --- the cases the issue names, each with the answer it gets --------------------------------------


async def closed_session() -> tuple[AsyncClient, McpSession]:
    alice = await make_user()
    session = await McpSession.objects.acreate(
        owner=alice, team=await ateam_of(alice), name="closed", config={}, status="closed"
    )
    return await logged_in_client(alice), session


async def test_numbers_in_parameters_are_ascii_digits_in_range_or_a_400_that_says_which() -> None:
    client, session = await closed_session()
    page = f"/s/{session.public_id}/"
    for query, expected in {
        "frame=²": "frame must be a whole number",
        "frame=١٢": "frame must be a whole number",
        "frame=99999999999999999999": "frame must be a whole number from 0 to 9223372036854775807",
        "frame=-1": "frame must be a whole number",
    }.items():
        response = await client.get(f"{page}?{query}")
        assert response.status_code == 400 and expected in response.content.decode(), query
    assert (await client.get(f"{page}?frame=5")).status_code == 200
    for query in ("before=²", "after=1e3", "before=9" + "9" * 30):
        response = await client.get(f"{page}timeline?{query}")
        assert response.status_code == 400, query
        assert "must be a whole number" in response.content.decode(), query
    assert (await client.get(f"{page}timeline?before=3&after=")).status_code == 200
    # An id longer than any column holds is no page at all.
    assert (await client.get(f"{page}frames/{'9' * 30}")).status_code == 404


async def test_a_request_timeout_that_is_not_a_finite_number_is_refused_with_the_reason() -> None:
    client, session = await closed_session()
    for timeout in ("abc", "NaN", "inf", "1e999", "-1", "²", "1_0"):
        response = await client.post(
            f"/s/{session.public_id}/request", {"method": "ping", "timeout": timeout}
        )
        assert response.status_code == 422, timeout
        assert "timeout must be a number from 0 to 86400" in response.content.decode(), timeout
    # A good one gets as far as the session (closed: a 409 that says so).
    response = await client.post(f"/s/{session.public_id}/request", {"method": "ping", "timeout": "2.5"})
    assert response.status_code == 409 and "not live" in response.content.decode()


async def test_typed_json_nested_too_deep_or_with_nan_is_refused_with_the_reason() -> None:
    client, session = await closed_session()
    for params, expected in {
        "[" * 100_000: "nested too deeply",
        '{"a":' * 101 + "1" + "}" * 101: "nested more than 100 levels deep",
        '{"x": NaN}': "NaN is not JSON",
    }.items():
        response = await client.post(f"/s/{session.public_id}/request", {"method": "ping", "params": params})
        assert response.status_code == 422 and expected in response.content.decode(), expected
    response = await client.post("/servers/import", {"text": "[" * 100_000})
    assert response.status_code == 422 and "nested too deeply" in response.content.decode()


async def test_a_nul_character_in_any_parameter_is_a_400_before_any_view() -> None:
    client, session = await closed_session()
    for response in (
        await client.get("/search", {"q": "a\x00b"}),
        await client.get(f"/s/{session.public_id}/timeline", {"method": "tools\x00"}),
        await client.post(f"/s/{session.public_id}/request", {"method": "ping", "params": '{"a": "\x00"}'}),
        await client.get(f"/s/{session.public_id}/panel/{quote(chr(0))}"),
    ):
        assert response.status_code == 400
        assert "holds a NUL character" in response.content.decode()


def test_a_body_declared_bigger_than_any_view_takes_is_refused_before_anything_reads_it() -> None:
    from django.conf import settings
    from django.http import HttpResponse
    from django.test import RequestFactory

    from inspector.middleware import BodySizeMiddleware
    from sessions.timeline.recordings import MAX_BYTES

    chain = [path.rsplit(".", 1)[-1] for path in settings.MIDDLEWARE]
    assert chain.index("BodySizeMiddleware") < chain.index("CsrfViewMiddleware")  # which parses a POST
    read: list[bytes] = []
    middleware = BodySizeMiddleware(lambda request: (read.append(request.body), HttpResponse("read"))[1])
    limit = MAX_BYTES + settings.DATA_UPLOAD_MAX_MEMORY_SIZE

    def post(declared: int) -> Any:
        return RequestFactory().post(
            "/recordings/open", b"{}\n", content_type="application/x-ndjson", CONTENT_LENGTH=str(declared)
        )

    refused = middleware(post(limit + 1))
    assert refused.status_code == 413 and "larger than" in refused.content.decode() and read == []
    assert middleware(post(3)).content == b"read" and read == [b"{}\n"]
