"""Redaction rules (sessions/timeline/redaction.py): what a share or a redacted export shows."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from sessions.timeline.redaction import LARGE_PREVIEW, MASK, Redactor, Rules, config_secrets

CONFIG = {
    "name": "everything",
    "transport": "http",
    "url": "https://mcp.example.com/mcp?api_key=URLSECRET123&tenant=acme",
    "env": {
        "API_KEY": "ENVSECRET456",
        "DATABASE_URL": "postgres://app:DBPASS789@db.internal/app",
        "PLAIN": "visible-value",
    },
    "secret_env": [],
    "headers": {"X-Signature": "SIGSECRET000", "X-Trace": "trace-1"},
    "bearer_token": "BEARERSECRET",
    "args": ["--token=ARGSECRET11", "--api-key", "ARGSECRET22", "--verbose"],
}
SECRETS = [
    "URLSECRET123",
    "ENVSECRET456",
    "DBPASS789",
    "SIGSECRET000",
    "BEARERSECRET",
    "ARGSECRET11",
    "ARGSECRET22",
]


def test_every_secret_of_the_configuration_is_known_and_nothing_else() -> None:
    found = config_secrets(CONFIG)
    for secret in SECRETS:
        assert secret in found, secret
    assert "visible-value" not in found and "trace-1" not in found and "acme" not in found


def test_a_redacted_configuration_shows_no_secret_and_keeps_the_rest() -> None:
    shown = json.dumps(Redactor.for_session(CONFIG).config(CONFIG))
    for secret in SECRETS:
        assert secret not in shown, secret
    assert "visible-value" in shown and "trace-1" in shown and "tenant=acme" in shown and "--verbose" in shown


def test_a_secret_the_server_echoes_back_is_masked_wherever_it_is() -> None:
    # server-everything's get-env returns the environment as JSON text inside a tool result.
    env_dump = json.dumps(
        {"API_KEY": "ENVSECRET456", "HOME": "/root", "OTHER_TOKEN": "unknown-to-us-1"}, indent=2
    )
    result = {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": env_dump}]}}
    raw = json.dumps(result).encode()
    redacted = Redactor.for_session(CONFIG).raw(raw)
    assert b"ENVSECRET456" not in redacted and b"unknown-to-us-1" not in redacted
    assert b"/root" in redacted and MASK.encode() in redacted
    # Escaped inside a JSON string, and in a frame that is not JSON at all.
    tricky = {**CONFIG, "env": {"API_KEY": 'quo"te\\back'}}
    assert b"quo" not in Redactor.for_session(tricky).raw(json.dumps({"x": 'say quo"te\\back'}).encode())
    assert b"BEARERSECRET" not in Redactor.for_session(CONFIG).raw(b"stderr: got BEARERSECRET \xff")


def test_nothing_found_leaves_the_bytes_as_they_were() -> None:
    raw = b'{"jsonrpc": "2.0", "id": 1, "result": {}}'
    assert Redactor.for_session(CONFIG).raw(raw) is raw


def test_names_that_look_secret_are_masked_in_headers_queries_and_text() -> None:
    r = Redactor([])
    assert r.value({"headers": {"Authorization": "Bearer abc", "Cookie": "s=1", "Accept": "x"}}) == {
        "headers": {"Authorization": MASK, "Cookie": MASK, "Accept": "x"}
    }
    assert r.text("GET /mcp?access_token=abc123&page=2") == f"GET /mcp?access_token={MASK}&page=2"
    assert r.text("connect to redis://:hunter2pass@cache:6379") == f"connect to redis://:{MASK}@cache:6379"
    assert r.text("Authorization: Bearer xyz\nAccept: */*") == f"Authorization: {MASK}\nAccept: */*"


def test_the_sharers_rules_add_names_paths_and_patterns() -> None:
    rules = Rules(
        names=["customer"],
        paths=["params.arguments.note", "result.content[*].text"],
        patterns=[r"\bacct-\d+"],
    )
    assert not rules.problems()
    r = Redactor([], rules)
    message = {
        "params": {"arguments": {"note": "private", "customer": "ACME", "id": "acct-42 and acct-7"}},
        "result": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    }
    assert r.value(message) == {
        "params": {"arguments": {"note": MASK, "customer": MASK, "id": f"{MASK} and {MASK}"}},
        "result": {"content": [{"type": "text", "text": MASK}, {"type": "text", "text": MASK}]},
    }
    assert Rules(patterns=["("], paths=["a..b"]).problems() and Rules.from_dict(
        {"names": ["x", ""]}
    ).names == ["x"]


def test_a_rows_preview_is_made_again_from_the_redacted_bytes_so_a_cut_secret_shows_no_head() -> None:
    raw = json.dumps({"x": "a" * 280, "y": "ENVSECRET456"}).encode()
    row = {"seq": 1, "method": "", "note": "", "preview": raw[:300].decode(), "transport": {}, "verdicts": []}
    assert "ENVS" in row["preview"] and "ENVSECRET456" not in row["preview"]  # cut through it
    shown = Redactor.for_session(CONFIG).row(row, raw)
    assert "ENVS" not in shown["preview"] and shown["preview"].startswith('{"x":')
    assert Redactor.for_session(CONFIG).row(row, None)["preview"] == LARGE_PREVIEW


def test_protocol_fields_named_like_secrets_are_kept() -> None:
    message = {
        "params": {"progressToken": "p-1", "maxTokens": 100, "_meta": {"authorization_servers": ["x"]}}
    }
    assert Redactor([]).value(message) == message
    assert Redactor([]).value({"access_token": "abc", "refreshToken": "def"}) == {
        "access_token": MASK,
        "refreshToken": MASK,
    }


def test_bytes_that_are_not_utf8_pass_through_unchanged_unless_a_secret_is_in_them() -> None:
    raw = b"\xff\xfe stderr line"
    assert Redactor.for_session(CONFIG).raw(raw) is raw
    redacted = Redactor.for_session(CONFIG).raw(b"\xff BEARERSECRET \xfe")
    assert redacted == b"\xff " + MASK.encode() + b" \xfe"


def test_a_session_and_a_frame_are_redacted_as_copies_that_cannot_be_saved() -> None:
    session = SimpleNamespace(
        name="https://mcp.example.com/mcp?api_key=URLSECRET123",
        config=CONFIG,
        server_info={"name": "x"},
        server_capabilities={},
        client_capabilities={},
        phases=[{"state": "spawned", "note": "env API_KEY=ENVSECRET456"}],
        roots=[],
        instructions="",
        status_note="",
        server_process={"pid": 1},
        worker_channel="c",
    )
    shown = Redactor.for_session(CONFIG).session(session)
    assert "URLSECRET123" not in shown.name and "ENVSECRET456" not in json.dumps(shown.phases)
    assert session.name.endswith("URLSECRET123")  # the original is untouched
    with pytest.raises(RuntimeError):
        shown.save()
    frame = SimpleNamespace(
        raw=b'{"result": "BEARERSECRET"}', transport={"http": {"url": "/mcp?token=abc"}}, verdicts=[], note=""
    )
    copy = Redactor.for_session(CONFIG).frame(frame)
    assert b"BEARERSECRET" not in copy.raw and copy.transport == {"http": {"url": f"/mcp?token={MASK}"}}
    assert frame.raw == b'{"result": "BEARERSECRET"}'


def test_a_sharer_may_add_only_a_few_short_patterns() -> None:
    assert Rules(patterns=["x" * 201]).problems() and Rules(patterns=["a"] * 21).problems()
    assert not Rules(patterns=["a"] * 20).problems()
