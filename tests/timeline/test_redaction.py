"""Redaction rules (sessions/timeline/redaction.py): what a share or a redacted export shows."""

from __future__ import annotations

import json
import re
from random import Random
from types import SimpleNamespace
from typing import Any

import pytest

from sessions.frames import deeper_than
from sessions.timeline import redaction
from sessions.timeline.redaction import (
    LARGE_PREVIEW,
    MASK,
    MAX_DEPTH,
    NAME_WORDS,
    SECRET_NAME,
    Redactor,
    Rules,
    config_secrets,
    looks_secret,
)

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


# --- the fast paths mask exactly what the rules applied everywhere mask ------------------------------

# The rules as they were before the fast paths (every rule over the whole text, a callback per match):
# the reference the fast paths are held to.
SLOW_URL_PASSWORD = re.compile(
    r"(?P<head>\b[a-z][a-z0-9+.-]*://[^\s/:@\"']*:)(?P<password>[^\s@/\"']+)(?=@)", re.I
)
SLOW_NAME_EQUALS = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,80})(?P<sep>=)(?P<value>[^\s&;,\"'<>]+)")
SLOW_QUOTED_PAIR = re.compile(r'(?P<name>"[A-Za-z_][A-Za-z0-9_.-]{0,80}"\s*:\s*)"(?P<value>(?:[^"\\]|\\.)*)"')
SLOW_HEADER_LINE = re.compile(r"(?im)^(?P<name>[A-Za-z][A-Za-z0-9-]{0,80})(?P<sep>:[ \t]*)(?P<value>\S.*)$")


def slow_text(r: Redactor, text: str) -> str:
    def pair(match: re.Match[str]) -> str:
        if not r.secret_name(match["name"]) or match["value"] in (MASK, f'"{MASK}"'):
            return match.group(0)
        return f"{match['name']}{match['sep']}{MASK}"

    def quoted_pair(match: re.Match[str]) -> str:
        if not r.secret_name(match["name"].split('"')[1]):
            return match.group(0)
        return f'{match["name"]}"{MASK}"'

    if not text:
        return text
    if r.secrets is not None:
        text = r.secrets.sub(MASK, text)
    text = SLOW_URL_PASSWORD.sub(lambda m: m["head"] + MASK, text)
    text = SLOW_NAME_EQUALS.sub(pair, text)
    text = SLOW_QUOTED_PAIR.sub(quoted_pair, text)
    text = SLOW_HEADER_LINE.sub(pair, text)
    for pattern in r.patterns:
        text = pattern.sub(MASK, text)
    return text


TRICKY = [
    # name=value: at line starts and ends, in query strings, in arguments, chained, already masked
    "API_KEY=ENVSECRET456",
    "token=abc",
    "--token=ARGSECRET11",
    "--api-key=zz",
    "access_token=abc123&page=2",
    "url=http://x/?token=abc&y=1",
    "a=b=token=x",
    "token==x",
    "token=",
    "=token",
    "x.token-2=v",
    "9token=v",
    "-key=v",
    ".secret=v",
    "KEY=v",
    "my_key=v",
    "monkey=v",
    "apikey=v",
    "session_id=s",
    "sessionid=s",
    "token=[redacted]",
    'token="[redacted]"',
    "Bearer=b",
    "dsn=postgres",
    "pwd=/root",
    "PWD=/root",
    "A" * 81 + "_token=v",
    "_" + "x" * 79 + "token=v",
    "x" * 90 + "=v",
    "T" * 82 + "OKEN=v",
    "token" + "x" * 76 + "=v",
    '"token' + "x" * 76 + '": "v"',
    "Token" + "x" * 76 + ": v",
    # names that look secret and are not
    "progressToken=p1",
    "progress_token=7",
    "MAX_TOKENS=100",
    "max_tokens=5",
    "completion_tokens=3",
    "token_count=2",
    "token_type=bearer",
    "author=me",
    "AUTHOR_NAME=x",
    "authorization_servers=x",
    "authorization-endpoint=y",
    "authorization=z",
    # "name": "value" pairs, JSON-escaped values, values across lines, unclosed and odd quoting
    '"password": "hunter2"',
    '"token":"a\\"b"',
    '"access_token" : "x\\\\"',
    '"refreshToken": ""',
    '"note": "say "token": "x""',
    '"a": "line\nbreak", "secret": "s"',
    '"secret"\n:\n"v"',
    '"secret":\n"v"\nAuthorization: x\nCookie: c',
    '"secret":\n"' + "v" * 19 + '"\nprogress_token: x',  # the lines after a masked value move
    '"token": "a\nb", "auth": "c"\nSecret: s',
    '"key": "v\\\n"',
    '"progressToken": "p"',
    '"max_tokens": "9"',
    '"auth": "\\u00e9t\\u00e9"',
    '"secret": "unclosed',
    '{"API_KEY": "ENVSECRET456", "HOME": "/root"}',
    '"x": "\\"token\\": \\"y\\""',
    "'token': 'single'",
    # header lines
    "Authorization: Bearer xyz",
    "authorization:basic x",
    "X-Api-Key:  k",
    "Cookie:s=1",
    "Set-Cookie:\tid=1",
    "Secret: s3",
    "session-id:  abc",
    "Accept: */*",
    "Host: x",
    "Token:",
    "Token: ",
    "  Token: indented",
    "X-Signature: SIGSECRET000",
    # passwords in URLs
    "postgres://app:DBPASS789@db.internal/app",
    "redis://:hunter2pass@cache:6379",
    "https://u:p%40ss@host",
    "HTTP://U:P@H",
    "xhttp://a:b@c",
    "_http://a:b@c",
    "\u00e9http://a:b@c",
    "a+b.c-d://u:p@h",
    "://u:p@h",
    "http://u:p@",
    "http://a:b:c@d",
    "http://a@b:c@d",
    "1http://a:b@c",
    "ftp://x:y@z://w:v@q",
    # the sharer's names and patterns, session secrets as they are and JSON-escaped
    "customer=ACME",
    "Customer: x",
    '"customer": "y"',
    "k-ey=v",
    "acct-42",
    "BEARERSECRET",
    "URLSECRET123",
    'quo"te\\back',
    'quo\\"te\\\\back',
    "line\nbreak-secret",
    "\u0130stanbul-secret",
    "i\u0307stanbul-secret",
    # unicode: characters that lower-case to two, Kelvin sign, long s, final sigma, other scripts
    "\u0130=x",
    "\u212aEY=val",
    "\u017fecret=1",
    "token\u0130=x",
    "\u03a3=1",
    "\u00df",
    "\U0001f511 key=v",
    "\u043f\u0430\u0440\u043e\u043b\u044c=1",
    "\u0130" * 3 + "token=x",
]
SEPARATORS = ["", " ", "\n", "\r\n", "\t", "&", ";", ",", "<", ">", "'", '"', "=", ":", "\\", "\u2028",
              "\x1c", "\u00a0", "\n\n", ": ", "?", "@", "/", "://"]  # fmt: skip


NAMES = [
    "API_KEY",
    "token",
    "progress_token",
    "progressToken",
    "MAX_TOKENS",
    "HOME",
    "x-signature",
    "Authorization",
    "author",
    "customer",
    "PATH",
    "session-id",
    "a",
    "T" * 81,
    "9token",
    "Cookie",
]
VALUE_PIECES = ["v", "x" * 17, " ", '\\"', '"', "\\", "\n", "\\\n", "=", ":", "&", "ENVSECRET456", "/", "@"]


def made_line(random: Random) -> str:
    """One line as an env dump, a header block or JSON text holds them, its value of random length."""
    name = random.choice(NAMES)
    value = "".join(random.choice(VALUE_PIECES) for _ in range(random.randint(0, 6)))
    shape = random.choice(['"{n}": "{v}",', "{n}={v}", "{n}: {v}", '  "{n}"\n  : "{v}"', "{n}:{v}"])
    return shape.format(n=name, v=value)


def tricky_texts(count: int, seed: int = 12) -> list[str]:
    """The tricky pieces alone, then ``count`` random texts made of them, of separators and of lines."""
    random = Random(seed)
    texts = list(TRICKY)
    for _ in range(count):
        pieces = []
        for _ in range(random.randint(1, 10)):
            if random.random() < 0.5:
                pieces.append(made_line(random))
                pieces.append("\n")
            else:
                pieces.append(random.choice(TRICKY))
                pieces.append(random.choice(SEPARATORS))
        text = "".join(pieces)
        if random.random() < 0.2:  # cut anywhere: through a name, an escape, a URL
            text = text[random.randint(0, len(text)) :]
        texts.append(text)
    return texts


def redactors() -> list[Redactor]:
    odd_rules = Rules(names=["customer", "K-EY", "x y", "\u0130d", ""], patterns=[r"acct-\d+"])
    return [
        Redactor([]),
        Redactor.for_session(CONFIG),
        Redactor(['quo"te\\back', "ENVSECRET456", "line\nbreak-secret", "\u0130stanbul-secret"], odd_rules),
    ]


@pytest.mark.slow
def test_the_fast_paths_mask_exactly_what_every_rule_over_the_whole_text_masks() -> None:
    texts = tricky_texts(5000)
    for r in redactors():
        for text in texts:
            assert r.text(text) == slow_text(r, text), (r.rules, text)


@pytest.mark.parametrize("remembering", [True, False])
def test_lines_remembered_or_not_are_masked_exactly_as_the_rules_say(remembering: bool) -> None:
    texts = tricky_texts(1500, seed=21)
    texts += [text + "\nAPI_KEY=x\n\n" for text in texts[:300]]  # the same lines again, in new texts
    for r in redactors():
        r._remembering = lambda text: remembering  # type: ignore[method-assign]
        for text in texts:
            assert r._text(text) == slow_text(r, text), (r.rules, text)
        assert (r.line_hits > 0) is remembering


def test_long_texts_and_env_dumps_are_masked_exactly_as_the_rules_say_cached_or_not() -> None:
    env = {f"VAR_{n}": f"/opt/value-{n}" for n in range(100)}
    env |= {"API_KEY": "ENVSECRET456", "GITHUB_TOKEN": "ghp_x", "MAX_TOKENS": "5", "SSH_AUTH_SOCK": "/tmp/a"}
    env |= {"DATABASE_URL": "postgres://app:DBPASS789@db/app", "progressToken": "p"}
    dumps = [
        "\n".join(f"{k}={v}" for k, v in env.items()),
        json.dumps(env, indent=2),
        json.dumps(env),
        " ".join(tricky_texts(400, seed=5)),  # longer than the cache takes
    ]
    for r in redactors():
        for text in dumps:
            expected = slow_text(r, text)
            assert r.text(text) == expected and r.text(text) == expected  # computed, then remembered
            assert r._text(text) == expected
    r = Redactor.for_session(CONFIG)
    shown = r.text(dumps[0])
    assert "ENVSECRET456" not in shown and "ghp_x" not in shown and "DBPASS789" not in shown
    assert "MAX_TOKENS=5" in shown and "VAR_7=/opt/value-7" in shown


def test_the_same_env_dump_in_many_frames_is_redacted_once() -> None:
    dump = json.dumps({f"VAR_{n}": f"value-{n}" for n in range(100)} | {"API_KEY": "ENVSECRET456"}, indent=2)
    r = Redactor.for_session(CONFIG)
    redacted: list[str] = []

    def counted(text: str) -> str:
        redacted.append(text)
        return Redactor._text(r, text)

    r._text = counted  # type: ignore[method-assign]
    for seq in range(50):
        message = {"jsonrpc": "2.0", "id": seq, "result": {"content": [{"type": "text", "text": dump}]}}
        assert b"ENVSECRET456" not in r.raw(json.dumps(message).encode())
        for other in range(3):  # other long texts come and go between, more than are remembered
            r.text(f"{seq}-{other}".zfill(300))
    assert redacted.count(dump) == 1


def test_every_name_secret_name_finds_holds_one_of_the_words_the_fast_path_looks_for() -> None:
    for alternative in SECRET_NAME.pattern.split("|"):
        literal = re.sub(r"\[-_\]\??|[\^$]", "", alternative).lower()
        assert any(word in literal for word in NAME_WORDS), alternative
    for name in ["X_API-KEY", "Private_Key", "ACCESSKEY", "SessionID", "Credentials", "x-dsn", "KEY"]:
        assert looks_secret(name) and any(word in name.lower() for word in NAME_WORDS)


def slow_value(r: Redactor, value: Any, path: list[str] | None = None, depth: int = 0) -> Any:
    """``Redactor.value`` as it was: every node carries its path, every string goes to ``slow_text``."""
    path = path or []
    if depth > MAX_DEPTH or any(
        len(rule) == len(path) and all(x in ("*", p) for x, p in zip(rule, path, strict=True))
        for rule in r.paths
    ):
        return MASK
    if isinstance(value, dict):
        return {
            key: MASK
            if r.secret_name(str(key)) and isinstance(item, str | int | float) and item != ""
            else slow_value(r, item, [*path, str(key)], depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [slow_value(r, item, [*path, str(i)], depth + 1) for i, item in enumerate(value)]
    return slow_text(r, value) if isinstance(value, str) else value


def test_json_values_are_masked_exactly_as_before_whatever_came_first() -> None:
    random = Random(7)
    texts = tricky_texts(300, seed=9)
    keys = [
        "token",
        "max_tokens",
        '"max_tokens": ',
        '"token": ',
        "progressToken",
        "note",
        "Authorization",
        "",
    ]
    scalars: list[Any] = [*texts, 0, 1.5, True, None, ""]

    def made(depth: int) -> Any:
        if depth > 3 or random.random() < 0.3:
            return random.choice(scalars)
        if random.random() < 0.5:
            return [made(depth + 1) for _ in range(random.randint(0, 3))]
        return {random.choice(keys + texts[:20]): made(depth + 1) for _ in range(random.randint(0, 4))}

    values = [made(0) for _ in range(300)]
    deep: Any = "API_KEY=ENVSECRET456"
    for _ in range(MAX_DEPTH + 5):
        deep = {"x": [deep]}
    values.append(deep)
    for r in [*redactors(), Redactor([], Rules(paths=["params.arguments.note", "result.content[*].text"]))]:
        for value in values:  # one Redactor for all, as an export uses it: what it remembers is shared
            assert r.value(value) == slow_value(r, value)
            assert r.text('"max_tokens": "5"') == '"max_tokens": "5"'


def slow_raw(r: Redactor, raw: bytes) -> bytes:
    """``Redactor.raw`` as it was, on ``slow_value`` and ``slow_text``."""
    try:
        parsed = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        parsed = None
        shallow = False
    else:
        shallow = not (isinstance(parsed, dict | list) and deeper_than(parsed, MAX_DEPTH))
    if not shallow:
        text = raw.decode("utf-8", errors="surrogateescape")
        redacted_text = slow_text(r, text)
        return raw if redacted_text == text else redacted_text.encode("utf-8", errors="surrogateescape")
    redacted = slow_value(r, parsed)
    return (
        raw
        if redacted == parsed
        else json.dumps(redacted, ensure_ascii=False, separators=(",", ":")).encode()
    )


def test_frames_bytes_are_redacted_exactly_as_before_however_deep() -> None:
    frames = [json.dumps({"id": 1, "result": {"text": text}}).encode() for text in tricky_texts(200, seed=3)]
    for depth in (1, 150, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 50):
        for opener, closer in (("[", "]"), ('{"token": "x", "a": ', "}")):
            frames.append((opener * depth + '"API_KEY=ENVSECRET456"' + closer * depth).encode())
    frames.append(b'{"a": "[[[[' + b"[" * 300 + b'", "token": "t"}')  # brackets in a string: not deep
    frames += [b"\xff token=abc \xfe", b"not json: Authorization: Bearer x", b"", b"[]", b'"BEARERSECRET"']
    for r in redactors():
        for raw in frames:
            assert r.raw(raw) == slow_raw(r, raw), raw[:80]


def test_what_a_redactor_remembers_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redaction, "LINES_REMEMBERED_CHARS", 200_000)
    r = Redactor.for_session(CONFIG)
    r._remembering = lambda text: True  # type: ignore[method-assign]
    for n in range(300):
        text = "\n".join(f"LINE_{n}_{k}=" + "v" * 2000 for k in range(6)) + "\napi_key=abc"
        assert r.text(text).endswith(f"api_key={MASK}")
        assert r.seen_chars <= 200_000 + 2 * len(text)
    assert len(r.texts) <= redaction.TEXT_CACHE
    assert sum(map(len, r.seen_all)) <= 200_000 + len(text)


@pytest.mark.slow
def test_a_frame_no_rule_can_change_is_seen_at_a_glance_and_only_then() -> None:
    """``Redactor.plain`` (the bytes come back as they are, unparsed) says so only where the rules, as JSON
    and as text, change nothing; and it says so for the frames a session mostly holds."""
    random = Random(17)
    keys = [*NAMES, "x token", "\nkey", "key\n", "a\\key", "monkey", "\u212aey", "\u017fecret", "\u00e9token"]
    keys += ["progressToken", "_meta", "name", "text", "uri", "level", 'say "key"', "tokens", "key-"]
    keys += ["x progressToken", "progressToken ", "the max_tokens"]
    words = ["the key", "monkey", "token", "progressToken", "Token: x", "token=x", "x\ntoken", "\\", '"']
    words += ["see https://x", "a:b", "ENVSECRET456", 'quo"te\\back', "\u0130d", "\u017fecret", "plain", ""]
    words += ["key: v", "key=1", "x key: v", "a\nkey:1", "progressToken", "max_tokens"]
    words += ["\x01", "\u2028", "\u00e9t\u00e9", "auth", "KEY", "[", "{", "/", "author", "x-api-key"]
    scalars: list[Any] = [*words, *tricky_texts(60, seed=4), 0, 2.5, True, None]

    def made(depth: int) -> Any:
        if depth > 3 or random.random() < 0.35:
            value = random.choice(scalars)
            if isinstance(value, str) and random.random() < 0.5:
                value = " ".join(random.choice(words) for _ in range(random.randint(1, 4)))
            return value
        if random.random() < 0.4:
            return [made(depth + 1) for _ in range(random.randint(0, 3))]
        return {random.choice(keys): made(depth + 1) for _ in range(random.randint(0, 4))}

    texts = []
    for _ in range(3000):
        text = json.dumps(made(0), ensure_ascii=random.random() < 0.3, indent=random.choice([None, 1]))
        texts.append(text[: random.randint(0, len(text))] if random.random() < 0.1 else text)
    texts += [
        '{"progressToken": 1, "data": "the key was found"}',
        '{"a": "\\u0074oken=x"}',
        '{"a": "http:\\/\\/u:p@h"}',
        '{"K": "\\"token\\": \\"x\\""}',
        '{"key": 1}',
        '["\\nkey", 1]',
        '{"\\nkey": 1}',
        '{"x\\"progressToken": 1}',
        '{"\\u017fecret": 1}',
        '{"\\u212aey": "v", "b": "\\u00e9"}',
        '{"a": "\\u0073ecret: x"}',
        '{"a": "\\u00C9-ACME-991"}',  # a secret beyond ASCII, escaped otherwise than json.dumps escapes it
        '{"a": "b\\"c", "x progressToken": 1}',
        "token",
        '"token"',
        "the token=x",
    ]
    said_plain = 0
    for r in [*redactors(), Redactor(["ENVSECRET456", 'quo"te\\back']), Redactor(["\u00c9-ACME-991"])]:
        for first in range(0, len(texts), 7):  # several at a time, as an export redacts them
            some = [text.encode() for text in texts[first : first + 7]]
            assert r.raws(some) == [slow_raw(r, raw) for raw in some], some
        for text in texts:
            raw = text.encode()
            assert r.raw(raw) == slow_raw(r, raw), text
            if not r.plain(text):
                continue
            said_plain += 1
            assert slow_text(r, text) == text, text
            try:
                parsed = json.loads(text)
            except ValueError:
                continue
            assert slow_value(r, parsed) == parsed, text
    assert said_plain > 1000
    r = Redactor.for_session(CONFIG)
    assert not r.plain('{"key": 1}') and not r.plain('{"a": "x token"}') and not r.plain('["\\nkey"]')
    assert r.plain('{"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1}}')


def test_a_batch_of_frames_is_looked_at_as_each_frame_alone() -> None:
    """``raws`` and ``plains`` look at a batch joined (``Redactor._plains``): what each frame becomes, and
    whether it is plain, is what it would be alone; name words at a frame's very start or end, and frames
    that pass the joined look but hold a secret name, included."""
    random = Random(23)
    pieces = ["token", "key", '"key"', '"progressToken"', "monkey", "x", '"a"', ":", "=", " ", "\n", "{", "}"]
    pieces += ['"', "\\n", "auth", "Session", "https://h/p", "\u00e9", "1", "[", ",", "Token: v", "api_key=v"]
    pieces += ["the max_tokens", "author", '"secret": "s"', "ENVSECRET456"]
    frames = [
        '{"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1}}',
        '{"jsonrpc": "2.0", "id": 3, "result": {"content": [{"text": "a monkey and \\u00e9"}]}}',
        "key",
        "token=1",
        '{"key": 1}',
    ]
    frames += ["".join(random.choice(pieces) for _ in range(random.randint(0, 8))) for _ in range(600)]
    for r in [Redactor([]), Redactor.for_session(CONFIG)]:
        alone = [r.plain(text) for text in frames]
        assert 100 < sum(alone) < len(frames) - 100
        for size in (2, 5, 50):
            for first in range(0, len(frames), size):
                some = frames[first : first + size]
                assert r.plains(some) == alone[first : first + size], some
                raws = [text.encode() for text in some]
                assert r.raws(raws) == [slow_raw(r, raw) for raw in raws], some
        clear = [text for text, plain in zip(frames, alone, strict=True) if plain]
        assert r.plains(clear) == [True] * len(clear)  # one joined look for all of them


def test_no_digit_changes_whether_a_name_rule_could_change_a_text() -> None:
    """``plain`` remembers, by the text with its digits as 0s (``Redactor.named``), whether a name rule
    could change a text: the search it spares finds the same in every text that differs only by its
    digits, and a redactor that has seen one says of the others what a fresh one says."""
    random = Random(31)
    names = ("key", "token", "progressToken", "max_tokens", "api_key", "x", "Bearer", "author")
    texts = tricky_texts(1500)
    texts += [
        f'{{"{name}{n}": "v{n}", "n{n}{name}": {n}}} {n}{name}={n}'
        for name in names
        for n in ["1", "42", "007"]
    ]
    remembering = Redactor([])
    searched = []
    for text in texts:
        variant = re.sub("[0-9]", lambda _: random.choice("0123456789"), text)
        searched.append(Redactor._names_searched([text], text))
        assert Redactor._names_searched([variant], variant) == searched[-1], (text, variant)
        remembering.plain(text)
        assert remembering.plain(variant) == Redactor([]).plain(variant), (text, variant)
    with_digits = [found for text, found in zip(texts, searched, strict=True) if re.search("[0-9]", text)]
    assert [True] in with_digits and [False] in with_digits


def test_a_sharers_pattern_python_cannot_compile_or_warns_about_is_a_problem_not_an_error() -> None:
    problems = Rules(patterns=["(", "[[a]", "sk-[a-z]+"]).problems()
    assert len(problems) == 2
    assert "'(' is not a regular expression" in problems[0]
    assert "'[[a]' is not a regular expression: Possible nested set" in problems[1]
