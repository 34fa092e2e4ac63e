"""MCP Apps' pure parts: which tool has a view, who may call it, the view's document and its CSP, and
the extension in the client's capabilities. No process is started."""

from __future__ import annotations

import base64
import json

import pytest

from inspector.cli.replay import capabilities
from sessions.engine import (
    APP_MESSAGE_STATE,
    MAX_APP_MESSAGES,
    MODERN_VERSIONS,
    UI_EXTENSION,
    ClientCapabilities,
    View,
    app_frames,
    tool_view_uri,
    tool_visibility,
    view_checks,
    view_csp,
    view_of,
)

UI = "ui://weather/view.html"
DECLARED = {UI_EXTENSION: {"mimeTypes": ["text/html;profile=mcp-app"]}}


def _directives(policy: str) -> dict[str, list[str]]:
    parts = [part.split() for part in policy.split(";")]
    return {words[0]: words[1:] for words in parts if words}


@pytest.mark.parametrize(
    ("meta", "uri"),
    [
        ({"ui": {"resourceUri": UI}}, UI),
        ({"ui/resourceUri": UI}, UI),  # deprecated, still read
        ({"ui": {"resourceUri": UI}, "ui/resourceUri": "ui://old/one"}, UI),  # the nested one wins
        ({"ui": {"resourceUri": "https://example.com/view.html"}}, None),  # not a ui:// resource
        ({"ui": {"resourceUri": 42}}, None),
        ({"ui": "nonsense"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_a_tool_has_a_view_when_its_meta_names_a_ui_resource(meta: object, uri: str | None) -> None:
    assert tool_view_uri({"name": "t", "_meta": meta}) == uri


def test_visibility_defaults_to_model_and_app_and_keeps_only_known_audiences() -> None:
    assert tool_visibility({"name": "t"}) == ("model", "app")
    assert tool_visibility({"_meta": {"ui": {"visibility": ["app"]}}}) == ("app",)
    assert tool_visibility({"_meta": {"ui": {"visibility": ["model", "robots"]}}}) == ("model",)
    assert tool_visibility({"_meta": {"ui": {"visibility": "app"}}}) == ("model", "app")  # not a list


def test_a_view_without_a_csp_reaches_nothing_but_its_own_inline_code() -> None:
    policy = _directives(view_csp({}))
    assert policy["default-src"] == ["'none'"]
    assert policy["connect-src"] == ["'none'"]
    assert policy["frame-src"] == ["'none'"]
    assert policy["object-src"] == ["'none'"]
    assert policy["script-src"] == ["'unsafe-inline'"]
    assert policy["sandbox"] == ["allow-scripts"]  # opaque even when opened on its own
    # The inspector's origin only as who may frame it, never as a source the view may reach.
    assert [name for name, sources in policy.items() if "'self'" in sources] == ["frame-ancestors"]


def test_declared_domains_go_to_their_directives_and_nowhere_else() -> None:
    policy = _directives(
        view_csp(
            {
                "csp": {
                    "connectDomains": ["https://api.example.com", "wss://live.example.com"],
                    "resourceDomains": ["https://cdn.example.com"],
                    "frameDomains": ["https://player.example.com"],
                    "baseUriDomains": ["https://base.example.com"],
                }
            }
        )
    )
    assert policy["connect-src"] == ["https://api.example.com", "wss://live.example.com"]
    for name in ("script-src", "style-src", "img-src", "font-src", "media-src"):
        assert "https://cdn.example.com" in policy[name]
        assert "https://api.example.com" not in policy[name]
    assert policy["frame-src"] == ["https://player.example.com"]
    assert policy["base-uri"] == ["https://base.example.com"]


@pytest.mark.parametrize(
    "hostile",
    [
        "https://a.example.com; script-src *",
        "https://a.example.com 'unsafe-eval'",
        "*",
        "'self'",
        "data:",
        "https://a.example.com,https://b.example.com",
        "javascript:alert(1)",
    ],
)
def test_a_declared_domain_that_would_widen_the_policy_is_dropped(hostile: str) -> None:
    policy = view_csp({"csp": {"connectDomains": [hostile], "resourceDomains": [hostile]}})
    directives = _directives(policy)
    assert directives["connect-src"] == ["'none'"]
    assert directives["script-src"] == ["'unsafe-inline'"]
    assert directives["img-src"] == ["data:", "blob:"]
    assert len(directives) == len(_directives(view_csp({})))


def test_the_view_document_comes_from_text_or_base64_and_its_read_meta_wins() -> None:
    listed = {"csp": {"connectDomains": ["https://listed.example.com"]}}
    read = {"csp": {"connectDomains": ["https://read.example.com"]}}
    text = {
        "contents": [
            {"uri": UI, "mimeType": "text/html;profile=mcp-app", "text": "<p>hi</p>", "_meta": {"ui": read}}
        ]
    }
    view = view_of(text, UI, listed)
    assert view is not None and view.html == "<p>hi</p>" and view.ui == read
    blob = base64.b64encode(b"<p>blob</p>").decode()
    view = view_of(
        {"contents": [{"uri": UI, "mimeType": "text/html;profile=mcp-app", "blob": blob}]}, UI, listed
    )
    assert view is not None and view.html == "<p>blob</p>" and view.ui == listed
    assert view_of({"contents": [{"uri": UI, "blob": "not base64!"}]}, UI) is None
    assert view_of({"contents": []}, UI) is None
    assert view_of(None, UI) is None


def test_the_client_declares_the_ui_extension_unless_switched_off_and_a_replay_reads_it_back() -> None:
    for version in ("2025-06-18", "2025-11-25", *MODERN_VERSIONS):
        declared = ClientCapabilities().to_wire(version)
        assert declared["extensions"] == DECLARED
        assert capabilities(declared, version).to_wire(version) == declared
        assert "extensions" not in ClientCapabilities(apps=False).to_wire(version)


def test_view_host_messages_become_local_frames_with_the_verdicts_the_host_gave_them() -> None:
    batch = [
        {"direction": "in", "message": {"jsonrpc": "2.0", "id": 1, "method": "ui/initialize", "params": {}}},
        {"direction": "out", "message": {"jsonrpc": "2.0", "id": 1, "result": {}}},
        {
            "direction": "in",
            "message": {"jsonrpc": "2.0", "id": 2, "method": "tools/call"},
            "violation": "apps-tool-not-visible",
        },
        {"direction": "in", "message": "not json-rpc", "violation": "made-up-verdict"},
    ]
    frames = list(app_frames(UI, batch))
    assert [f.note for f in frames] == [
        "view → host ui/initialize",
        "host → view result #1",
        "view → host tools/call",
        "view → host result #None",
    ]
    assert all(f.kind == "state" and f.direction == "local" for f in frames)
    assert frames[0].transport == {
        "state": APP_MESSAGE_STATE,
        "app": {"view": UI, "direction": "in", "what": "ui/initialize"},
    }
    assert json.loads(frames[1].raw) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert [v.code for v in frames[2].verdicts] == ["apps-tool-not-visible"]
    assert frames[3].verdicts == []  # only the extension's own verdicts are given


def test_a_flood_of_view_messages_is_cut_and_says_how_many_were_left_out() -> None:
    batch = [{"direction": "in", "message": {"jsonrpc": "2.0", "method": "ping"}}] * (MAX_APP_MESSAGES + 5)
    frames = list(app_frames(UI, batch, dropped=1000))
    assert len(frames) == MAX_APP_MESSAGES + 1
    assert frames[-1].note is not None and frames[-1].note.startswith("1005 more view↔host messages")
    assert [v.code for v in frames[-1].verdicts] == ["apps-flood"]


def test_a_saved_or_connect_form_config_turns_the_extension_off_with_its_switch() -> None:
    from sessions.servers import build_options

    on = build_options({"capabilities": {}}).capabilities.to_wire("2025-11-25")
    off = build_options({"capabilities": {"apps": False}}).capabilities.to_wire("2025-11-25")
    assert on["extensions"] == DECLARED and "extensions" not in off


def test_the_hosts_answer_to_a_view_names_the_request_it_caused_and_nothing_else_does() -> None:
    batch = [
        {"direction": "in", "message": {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}, "caused": 7},
        {"direction": "out", "message": {"jsonrpc": "2.0", "id": 2, "result": {}}, "caused": 7},
        {"direction": "out", "message": {"jsonrpc": "2.0", "id": 3, "result": {}}, "caused": True},
        {"direction": "out", "message": {"jsonrpc": "2.0", "id": 4, "result": {}}, "caused": "x" * 101},
    ]
    frames = list(app_frames(UI, batch))
    assert [f.transport["app"].get("caused") for f in frames] == [None, 7, None, None]


def test_a_recorded_view_reaches_no_network_whatever_it_declares() -> None:
    declared = {"csp": {"connectDomains": ["https://api.example.com"], "resourceDomains": ["https://cdn.x"]}}
    assert "https://api.example.com" in view_csp(declared)
    policy = _directives(view_csp(declared, offline=True))
    assert policy == _directives(view_csp({}))
    assert policy["connect-src"] == ["'none'"]


def test_a_views_resource_is_checked_against_the_extensions_rules() -> None:
    good = View(UI, "<p>", "text/html;profile=mcp-app", {"csp": {"resourceDomains": ["https://cdn.x"]}})
    assert view_checks(good) == []
    bad = View(
        UI,
        "<p>",
        "text/html",
        {"csp": {"resourceDomains": ["https://cdn.x", "'unsafe-eval'"], "connectDomains": "https://a"}},
    )
    codes = [(code, message.split(":")[0]) for code, message in view_checks(bad)]
    assert codes == [
        ("apps-mime-type", "mimeType is 'text/html', not 'text/html;profile=mcp-app'"),
        ("apps-csp-malformed", "csp.connectDomains is not a list"),
        ("apps-csp-dropped", "csp.resourceDomains"),
    ]
