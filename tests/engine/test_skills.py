"""The skills extension (io.modelcontextprotocol/skills, SEP-2640): the engine, the CLI and the panel.

Fast: the frontmatter reader, and the engine over a scripted server (listing reads no file; every file
read is checked for size, digest and frontmatter; what fails is refused with a verdict). Slow: the SDK
server in tests/servers/skills_server.py (one right skill, one wrong in each way) through the engine,
the CLI and the web panel.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from support.paths import REPO
from support.teams import ateam_of
from support.web import live_runtime, logged_in_client, make_user, start_session, stdio_config

from sessions.engine import (
    ClientOptions,
    ClientSession,
    Frame,
    SkillError,
    SkillVerificationFailed,
    StdioTarget,
    connect,
)
from sessions.engine._frontmatter import FrontmatterError, FrontmatterUnsupported, parse_frontmatter
from sessions.engine.testing import ManualClock, Recorder, ScriptedTransport
from sessions.models import McpSession, TimelineFrame

SERVER = REPO / "tests" / "servers" / "skills_server.py"
EXTENSION = "io.modelcontextprotocol/skills"
OFFERS = {"capabilities": {"resources": {}, "extensions": {EXTENSION: {}}}}
SKILL_MD = (
    "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n---\n\nSkill body.\n"
)
FORMS = "Supporting content.\n"
URI = "skill://pdf-processing/SKILL.md"
FORMS_URI = "skill://pdf-processing/references/FORMS.md"


def digest(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return "sha256:" + hashlib.sha256(data).hexdigest()


def entry(skill_md: str = SKILL_MD, **frontmatter: Any) -> dict[str, Any]:
    """The entry of a skill whose files are ``skill_md`` and FORMS (as listed, not necessarily as served)."""
    return {
        "uri": URI,
        "frontmatter": {"name": "pdf-processing", "description": "Extract, fill, and assemble PDF documents"}
        | frontmatter,
        "resources": [
            {"uri": URI, "digest": digest(skill_md), "size": len(skill_md.encode())},
            {"uri": FORMS_URI, "digest": digest(FORMS), "size": len(FORMS.encode())},
        ],
    }


def contents(uri: str, text: str) -> dict[str, Any]:
    return {"contents": [{"uri": uri, "mimeType": "text/markdown", "text": text}]}


@asynccontextmanager
async def scripted(
    handshake: dict[str, Any] | None = None,
) -> AsyncIterator[tuple[ClientSession, ScriptedTransport, Recorder]]:
    server = ScriptedTransport(handshake=OFFERS if handshake is None else handshake)
    session = ClientSession(server, ClientOptions(validate=False, clock=ManualClock()))
    log = Recorder(session)
    async with session:
        yield session, server, log


async def listed(session: ClientSession, server: ScriptedTransport, *entries: Any) -> list[Any]:
    """List the skills, the server answering with ``entries`` on one page."""
    import asyncio

    task = asyncio.ensure_future(session.skills.list())
    server.answer(await server.next_sent("skills/list"), {"skills": list(entries)})
    return await task


async def served(session: ClientSession, server: ScriptedTransport, coro: Any, *texts: str) -> Any:
    """Run ``coro`` while the server answers each resources/read it sends with the next of ``texts``."""
    import asyncio

    task = asyncio.ensure_future(coro)
    for text in texts:
        sent = await server.next_sent("resources/read")
        server.answer(sent, contents(sent.params["uri"], text))
    return await task


def reads(server: ScriptedTransport) -> list[str]:
    return [s.params["uri"] for s in server.sent if s.method == "resources/read"]


def states(log: Recorder, state: str) -> list[Frame]:
    return [f for f in log.frames if f.kind == "state" and f.transport.get("state") == state]


# --- the frontmatter reader ------------------------------------------------------------------------------


def test_frontmatter_reads_the_yaml_skills_use() -> None:
    text = (
        "---\n"
        "name: x  # a comment\n"
        "description: >\n  Folded text\n  goes on.\n\n  New paragraph.\n"
        "license: 'Apache-2.0'\n"
        'allowed-tools: "Bash(git:*) Read"\n'
        'metadata:\n  version: "2.1"\n  count: 3\n  ratio: 1.5\n  reviewed: true\n  empty:\n'
        "  tags: [a, 'b c', 1]\n  list:\n    - one\n    - two\n"
        "literal: |-\n  line 1\n    indented\n"
        "plain: runs on\n  over lines\n"
        "---\nbody\n"
    )
    assert parse_frontmatter(text) == {
        "name": "x",
        "description": "Folded text goes on.\nNew paragraph.\n",
        "license": "Apache-2.0",
        "allowed-tools": "Bash(git:*) Read",
        "metadata": {
            "version": "2.1",
            "count": 3,
            "ratio": 1.5,
            "reviewed": True,
            "empty": None,
            "tags": ["a", "b c", 1],
            "list": ["one", "two"],
        },
        "literal": "line 1\n  indented",
        "plain": "runs on over lines",
    }
    assert parse_frontmatter("\ufeff---\r\nname: crlf\r\n---\r\n") == {"name": "crlf"}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("no frontmatter\n", FrontmatterError),
        ("---\nname: x\n", FrontmatterError),  # never closed
        ("---\nname: x\nname: y\n---\n", FrontmatterError),
        ("---\n- a list\n---\n", FrontmatterError),
        ("---\nname: 'open\n---\n", FrontmatterError),
        ("---\nname: &anchor x\n---\n", FrontmatterUnsupported),
        ("---\nlist:\n  - key: value\n---\n", FrontmatterUnsupported),
        ("---\nname: !tag x\n---\n", FrontmatterUnsupported),
    ],
)
def test_frontmatter_refuses_what_it_cannot_read(text: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        parse_frontmatter(text)


# --- the engine over a scripted server -------------------------------------------------------------------


async def test_listing_reads_no_skill_file() -> None:
    async with scripted() as (session, server, log):
        skills = await listed(session, server, entry())
        assert [s.name for s in skills] == ["pdf-processing"]
        assert skills[0].files is not None and [f.uri for f in skills[0].files] == [URI, FORMS_URI]
        await session.start_request("tools/list")
        assert (await server.next_sent()).method == "tools/list"  # nothing was sent in between
    assert reads(server) == []
    assert [v for f in log.frames for v in f.verdicts] == []


async def test_listing_follows_every_page() -> None:
    async with scripted() as (session, server, _):
        import asyncio

        task = asyncio.ensure_future(session.skills.list())
        first = await server.next_sent("skills/list")
        server.answer(first, {"skills": [entry()], "nextCursor": "2"})
        second = await server.next_sent("skills/list")
        assert second.params.get("cursor") == "2"
        server.answer(second, {"skills": [entry() | {"uri": "skill://other/SKILL.md"}]})
        assert len(await task) == 2


async def test_no_skills_request_to_a_server_that_does_not_declare_the_extension() -> None:
    async with scripted(handshake={"capabilities": {"resources": {}}}) as (session, server, _):
        assert not session.skills.offered
        with pytest.raises(SkillError, match="does not declare"):
            await session.skills.list()
    assert not [s for s in server.sent if (s.method or "").startswith("skills/")]


async def test_a_skill_that_matches_its_entry_loads_and_its_listed_files_read() -> None:
    async with scripted() as (session, server, log):
        (skill,) = await listed(session, server, entry())
        loaded = await served(session, server, session.skills.load(skill), SKILL_MD)
        forms = await served(session, server, session.skills.read(skill, "references/FORMS.md"), FORMS)
    assert loaded.ok and loaded.verified and loaded.text == SKILL_MD
    assert loaded.frontmatter == skill.frontmatter
    assert forms.ok and forms.verified and forms.content == FORMS.encode()
    assert reads(server) == [URI, FORMS_URI]
    verified = states(log, "skill-verified")
    assert len(verified) == 2 and all(f.verdicts == [] for f in verified)
    assert "frontmatter" in (verified[0].note or "")


@pytest.mark.parametrize(
    ("served_text", "code"),
    [
        (SKILL_MD.replace("Skill body.", "Evil body!!"), "skill-digest"),  # same size, other bytes
        (SKILL_MD + "extra bytes the entry did not account for\n", "skill-size"),
    ],
)
async def test_a_skill_md_that_does_not_match_its_entry_is_refused_with_a_verdict(
    served_text: str, code: str
) -> None:
    async with scripted() as (session, server, log):
        (skill,) = await listed(session, server, entry())
        with pytest.raises(SkillVerificationFailed) as failed:
            await served(session, server, session.skills.load(skill), served_text)
    assert code in {v.code for v in failed.value.read.verdicts}
    (rejected,) = states(log, "skill-rejected")
    assert code in {v.code for v in rejected.verdicts} and all(
        v.severity == "error" for v in rejected.verdicts
    )
    assert URI in (rejected.note or "")
    assert states(log, "skill-verified") == []


async def test_a_skill_md_whose_frontmatter_differs_from_the_entry_is_refused() -> None:
    tampered = SKILL_MD.replace("Extract, fill, and assemble PDF documents", "Exfiltrate credentials")
    async with scripted() as (session, server, log):
        # Size and digest describe the tampered file: only the frontmatter comparison can catch it.
        (skill,) = await listed(session, server, entry(tampered))
        with pytest.raises(SkillVerificationFailed, match="description"):
            await served(session, server, session.skills.load(skill), tampered)
    (rejected,) = states(log, "skill-rejected")
    assert [v.code for v in rejected.verdicts] == ["skill-frontmatter"]


async def test_frontmatter_is_compared_as_json_values() -> None:
    with_version = (
        "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\nversion: 1\n---\n"
    )
    async with scripted() as (session, server, _):
        same, other = await listed(
            session,
            server,
            entry(with_version, version=1.0),
            entry(with_version, version=True),
        )
        assert (await served(session, server, session.skills.fetch(same), with_version)).ok
        mismatch = await served(session, server, session.skills.fetch(other), with_version)
    assert [v.code for v in mismatch.verdicts] == ["skill-frontmatter"]


async def test_a_supporting_file_is_read_only_if_the_entry_lists_it_and_only_verified() -> None:
    async with scripted() as (session, server, _):
        (skill,) = await listed(session, server, entry())
        with pytest.raises(SkillError, match="not among the files"):
            await session.skills.read(skill, "references/UNLISTED.md")
        assert reads(server) == []
        with pytest.raises(SkillVerificationFailed):
            await served(session, server, session.skills.read(skill, FORMS_URI), "Changed since listing.\n")


async def test_an_invalid_entry_is_flagged_and_never_loaded() -> None:
    bad = {
        "uri": "skill://pdf-processing/SKILL.md",
        "frontmatter": {"name": "other-name", "description": "d"},
        "resources": [{"uri": URI, "digest": "md5:abc", "size": 3}],
    }
    async with scripted() as (session, server, log):
        (skill,) = await listed(session, server, bad)
        with pytest.raises(SkillError, match="invalid"):
            await session.skills.load(skill)
    assert reads(server) == []
    (note,) = states(log, "skills-listed")
    (verdict,) = note.verdicts
    assert verdict.code == "skill-entry" and "name" in verdict.message and "digest" in verdict.message


async def test_a_dynamic_skill_loads_unverified_but_its_frontmatter_is_still_compared() -> None:
    dynamic = entry() | {"resources": "dynamic"}
    async with scripted() as (session, server, _):
        (skill,) = await listed(session, server, dynamic)
        loaded = await served(session, server, session.skills.load(skill), SKILL_MD)
        assert loaded.ok and not loaded.verified
        with pytest.raises(SkillVerificationFailed):
            await served(session, server, session.skills.load(skill), SKILL_MD.replace("Extract", "Steal"))


async def test_a_blob_is_verified_on_its_decoded_bytes() -> None:
    data = bytes(range(256))
    blob_entry = entry()
    blob_entry["resources"][1] = {"uri": FORMS_URI, "digest": digest(data), "size": len(data)}
    async with scripted() as (session, server, _):
        import asyncio

        (skill,) = await listed(session, server, blob_entry)
        task = asyncio.ensure_future(session.skills.read(skill, FORMS_URI))
        sent = await server.next_sent("resources/read")
        server.answer(sent, {"contents": [{"uri": FORMS_URI, "blob": base64.b64encode(data).decode()}]})
        read = await task
    assert read.verified and read.content == data and read.to_dict()["blob"]


async def test_find_by_name_refuses_a_shared_name_and_a_uri_not_listed_is_asked_with_skills_get() -> None:
    import asyncio

    nested = entry() | {"uri": "skill://acme/pdf-processing/SKILL.md"}
    nested["resources"] = [{**nested["resources"][0], "uri": nested["uri"]}]
    async with scripted() as (session, server, _):
        task = asyncio.ensure_future(session.skills.find("pdf-processing"))
        server.answer(await server.next_sent("skills/list"), {"skills": [entry(), nested]})
        with pytest.raises(SkillError, match="choose one by its URI"):
            await task
        other = "skill://hidden/SKILL.md"
        task = asyncio.ensure_future(session.skills.find(other))
        server.answer(await server.next_sent("skills/list"), {"skills": [entry()]})
        get = await server.next_sent("skills/get")
        assert get.params["uri"] == other
        hidden = {"uri": other, "frontmatter": {"name": "hidden", "description": "d"}, "resources": "dynamic"}
        server.answer(get, {"skill": hidden})
        assert (await task).uri == other


# --- a real server (the Python SDK) ----------------------------------------------------------------------

STATELESS = ClientOptions(protocol_version="2026-07-28", mode="stateless", timeout=20)


@pytest.mark.slow
async def test_the_sdk_skills_server_through_the_engine() -> None:
    async with connect(StdioTarget(sys.executable, [str(SERVER), "stdio"]), STATELESS) as session:
        log = Recorder(session)
        skills = {s.name: s for s in await session.skills.list()}
        assert set(skills) == {"good-skill", "wrong-digest", "wrong-size", "bad-frontmatter", "generated"}
        good = await session.skills.load(skills["good-skill"])
        assert good.verified and "# Good skill" in (good.text or "")
        assert (await session.skills.read(skills["good-skill"], "references/GUIDE.md")).verified
        with pytest.raises(SkillVerificationFailed, match="hashes to"):
            await session.skills.read(skills["good-skill"], "references/STALE.md")
        failures = {}
        for name in ("wrong-digest", "wrong-size", "bad-frontmatter"):
            with pytest.raises(SkillVerificationFailed) as failed:
                await session.skills.load(skills[name])
            failures[name] = {v.code for v in failed.value.read.verdicts}
    assert failures == {
        "wrong-digest": {"skill-digest"},
        "wrong-size": {"skill-size"},
        "bad-frontmatter": {"skill-frontmatter"},
    }
    assert len(states(log, "skill-rejected")) == 4


# --- the CLI ---------------------------------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "inspector", "--cli", sys.executable, str(SERVER), "stdio"]
    return subprocess.run(
        [*command, "--protocol-version", "2026-07-28", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
def test_cli_lists_skills_and_loads_one_verified_or_refuses_it(tmp_path: Path) -> None:
    listing = run_cli("--method", "skills/list")
    assert listing.returncode == 0, listing.stderr
    assert len(json.loads(listing.stdout)["skills"]) == 5

    good = run_cli("--skill", "good-skill", "--skill-file", "references/GUIDE.md")
    assert good.returncode == 0, good.stderr
    files = json.loads(good.stdout)["files"]
    assert [(f["uri"], f["verified"]) for f in files] == [
        ("skill://good-skill/SKILL.md", True),
        ("skill://good-skill/references/GUIDE.md", True),
    ]

    record = tmp_path / "frames.jsonl"
    bad = run_cli("--skill", "wrong-size", "--skill-file", "references/X.md", "--record", str(record))
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.startswith("error: --skill wrong-size: skill://wrong-size/SKILL.md failed verification")
    frames = [json.loads(line) for line in record.read_text().splitlines()]
    read_uris = [
        json.loads(f["raw"])["params"]["uri"]
        for f in frames
        if f["direction"] == "out" and f["method"] == "resources/read"
    ]
    assert read_uris == ["skill://wrong-size/SKILL.md"]  # nothing after the failed SKILL.md
    assert any(v["code"] == "skill-size" for f in frames for v in f["verdicts"])


def test_cli_skill_options_are_checked() -> None:
    from inspector.cli.arguments import UsageError, parse_args

    with pytest.raises(UsageError, match="--skill-file goes with --skill"):
        parse_args(["server", "--method", "ping", "--skill-file", "x"])
    with pytest.raises(UsageError, match="leave out --method"):
        parse_args(["server", "--method", "ping", "--skill", "x"])
    with pytest.raises(UsageError, match="needs --uri"):
        parse_args(["server", "--method", "skills/get"])
    assert parse_args(["server", "--skill", "x", "--skill-file", "a", "--skill-file", "b"]).skill_files == [
        "a",
        "b",
    ]


# --- the Skills panel ------------------------------------------------------------------------------------


async def _stored(session: McpSession, seq: int, method: str, result: dict[str, Any]) -> None:
    raw = json.dumps({"jsonrpc": "2.0", "id": seq, "result": result}).encode()
    await TimelineFrame.objects.acreate(
        session=session,
        seq=seq,
        kind="message",
        direction="in",
        wall=time.time(),
        mono=0.0,
        method=method,
        rpc_id=str(seq),
        rpc_kind="result",
        raw=raw,
    )


@pytest.mark.django_db(transaction=True)
async def test_the_skills_tab_shows_only_when_the_server_offers_skills_and_escapes_the_listing() -> None:
    alice = await make_user()
    plain = await McpSession.objects.acreate(
        owner=alice, team=await ateam_of(alice), name="plain", config={}, status="closed"
    )
    offering = await McpSession.objects.acreate(
        owner=alice,
        team=await ateam_of(alice),
        name="skills",
        config={},
        status="closed",
        server_capabilities=OFFERS["capabilities"],
    )
    evil = '<img src=x onerror="alert(1)">'
    await _stored(offering, 1, "skills/list", {"skills": [entry(description=evil)]})
    client = await logged_in_client(alice)
    assert "?tab=skills" not in (await client.get(f"/s/{plain.public_id}/")).content.decode()
    assert "?tab=skills" in (await client.get(f"/s/{offering.public_id}/")).content.decode()
    page = (await client.get(f"/s/{offering.public_id}/panel/skills")).content.decode()
    assert "pdf-processing" in page and FORMS_URI in page and digest(FORMS) in page
    assert "<img" not in page and "&lt;img src=x" in page
    missing = await client.post(f"/s/{offering.public_id}/skills/check", {"uri": "skill://nope/SKILL.md"})
    assert missing.status_code == 409 and "list the skills again" in missing.content.decode()
    assert (await client.post(f"/s/{offering.public_id}/skills/check", {})).status_code == 400


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_the_skills_panel_lists_and_verifies_against_a_real_server() -> None:
    async with live_runtime():
        alice = await make_user()
        config = stdio_config(sys.executable, [str(SERVER), "stdio"], protocol_version="2026-07-28")
        session = await start_session(alice, config)
        client = await logged_in_client(alice)
        base = f"/s/{session.public_id}/"
        assert "?tab=skills" in (await client.get(base)).content.decode()
        listed_page = (await client.post(base + "list/skills")).content.decode()
        assert "good-skill" in listed_page and "wrong-digest" in listed_page
        assert not await TimelineFrame.objects.filter(session=session, method="resources/read").aexists()

        good = (
            await client.post(base + "skills/check", {"uri": "skill://good-skill/SKILL.md"})
        ).content.decode()
        assert "verified" in good and "# Good skill" in good
        assert "<script>" not in good and "&lt;script&gt;alert" in good
        bad = await client.post(base + "skills/check", {"uri": "skill://wrong-digest/SKILL.md"})
        assert bad.status_code == 200
        html = bad.content.decode()
        assert "rejected" in html and "skill-digest" in html and "must not use" in html
        flagged = [
            v["code"]
            async for f in TimelineFrame.objects.filter(session=session, kind="state")
            for v in f.verdicts or []
        ]
        assert flagged == ["skill-digest"]
