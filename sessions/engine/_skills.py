"""The skills extension (``io.modelcontextprotocol/skills``, SEP-2640): list skills, load one, verify.

A server that declares the extension lists its skills with ``skills/list``; each entry carries the
skill's frontmatter and a manifest of its files (``uri``, ``sha256:`` digest, size in bytes), or
``"resources": "dynamic"``. Files are ordinary resources, read with ``resources/read``.

As the extension requires of a host:

- nothing is fetched ahead of need: listing reads no file; ``load`` reads the skill's SKILL.md,
  ``read`` one supporting file, and only a file the held entry lists;
- every file read is checked against its entry: the byte length against ``size``, the SHA-256 of
  the bytes against ``digest``, and for SKILL.md the YAML frontmatter, field by field, against the
  entry's ``frontmatter``. Content that fails is not handed back (``SkillVerificationFailed``).

Each check is recorded as a local ``state`` frame (``transport.state`` ``skill-verified`` or
``skill-rejected``) whose verdicts say what the server got wrong: ``skill-size``, ``skill-digest``,
``skill-frontmatter``, ``skill-content``; an invalid listing entry gets ``skill-entry``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ._errors import SkillError
from ._frames import Frame, Verdict
from ._frontmatter import FrontmatterError, FrontmatterUnsupported, parse_frontmatter

__all__ = [
    "EXTENSION",
    "Skill",
    "SkillError",
    "SkillFile",
    "SkillRead",
    "SkillVerificationFailed",
    "Skills",
    "offers_skills",
    "verify_read",
]

EXTENSION = "io.modelcontextprotocol/skills"
SKILL_MD = "SKILL.md"
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
MAX_PAGES = 1000
SHOWN_TEXT = 200_000
"""``check`` hands back at most this many characters of a file's text (a panel shows it)."""


class SkillVerificationFailed(SkillError):
    """A file's content does not match its entry; ``read`` says how. The content must not be used."""

    def __init__(self, read: SkillRead) -> None:
        super().__init__(f"{read.uri} failed verification: {'; '.join(v.message for v in read.verdicts)}")
        self.read = read


def offers_skills(capabilities: Any) -> bool:
    """Whether a server's capabilities declare the skills extension."""
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, dict) and EXTENSION in extensions


@dataclass(frozen=True, slots=True)
class SkillFile:
    """One file of a skill's manifest: what its content must hash to and weigh."""

    uri: str
    digest: str
    size: int


@dataclass(slots=True)
class Skill:
    """A skill entry from skills/list or skills/get, kept verbatim in ``entry``.

    ``files`` is the manifest (``None`` when the server says ``"dynamic"``: nothing to verify
    against); ``problems`` lists why the entry is invalid, and a host must not load an invalid one.
    """

    uri: str
    frontmatter: dict[str, Any]
    files: list[SkillFile] | None
    entry: dict[str, Any]
    problems: list[str] = field(default_factory=list)

    @classmethod
    def from_entry(cls, entry: Any) -> Skill:
        """Read an entry; never raises (what is wrong goes to ``problems``)."""
        if not isinstance(entry, dict):
            return cls("", {}, [], {}, [f"the entry is {type(entry).__name__}, not an object"])
        problems = []
        uri = entry.get("uri")
        if not isinstance(uri, str) or not uri:
            problems.append("no uri")
            uri = ""
        elif not uri.endswith("/" + SKILL_MD):
            problems.append(f"uri {uri} does not name a {SKILL_MD}")
        frontmatter = entry.get("frontmatter")
        if not isinstance(frontmatter, dict):
            problems.append("no frontmatter object")
            frontmatter = {}
        else:
            for key in ("name", "description"):
                if not isinstance(frontmatter.get(key), str) or not frontmatter[key]:
                    problems.append(f"frontmatter has no {key}")
            name = frontmatter.get("name")
            if uri and isinstance(name, str) and _final_segment(uri) != name:
                problems.append(f"the uri's last path segment is not the skill's name {name!r}")
        files = _manifest(entry.get("resources"), uri, problems)
        return cls(uri, frontmatter, files, entry, problems)

    @property
    def name(self) -> str:
        name = self.frontmatter.get("name")
        return name if isinstance(name, str) else _final_segment(self.uri)

    @property
    def description(self) -> str:
        description = self.frontmatter.get("description")
        return description if isinstance(description, str) else ""

    @property
    def dynamic(self) -> bool:
        return self.files is None

    @property
    def root(self) -> str:
        """The skill's directory: its SKILL.md URI without ``/SKILL.md``."""
        return self.uri[: -len(SKILL_MD) - 1] if self.uri.endswith("/" + SKILL_MD) else self.uri

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files or [])

    def resolve(self, path: str) -> str:
        """A file's URI: ``path`` relative to the skill's root, or already a URI."""
        return path if "://" in path else f"{self.root}/{path.lstrip('/')}"

    def file(self, uri: str) -> SkillFile | None:
        return next((f for f in self.files or [] if f.uri == uri), None)


def _final_segment(uri: str) -> str:
    path = uri.split("://", 1)[-1]
    segments = [s for s in path.split("/") if s]
    if segments and segments[-1] == SKILL_MD:
        segments.pop()
    return segments[-1] if segments else ""


def _manifest(resources: Any, uri: str, problems: list[str]) -> list[SkillFile] | None:
    if resources == "dynamic":
        return None
    if not isinstance(resources, list):
        problems.append('resources is neither an array nor "dynamic"')
        return []
    files = []
    for i, item in enumerate(resources):
        if not isinstance(item, dict) or not isinstance(item.get("uri"), str):
            problems.append(f"resources[{i}] has no uri")
            continue
        digest, size = item.get("digest"), item.get("size")
        if not isinstance(digest, str) or not DIGEST.match(digest):
            problems.append(f"resources[{i}] ({item['uri']}): digest is not sha256:<64 lowercase hex>")
            continue
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            problems.append(f"resources[{i}] ({item['uri']}): size is not a byte count")
            continue
        files.append(SkillFile(item["uri"], digest, size))
    if uri and not any(f.uri == uri for f in files):
        problems.append(f"resources does not list {SKILL_MD} itself")
    return files


@dataclass(slots=True)
class SkillRead:
    """One file read for a skill, with what verification found (no verdicts: it is verified)."""

    uri: str
    content: bytes | None
    """The raw bytes (a text content's UTF-8, a blob decoded); ``None`` when nothing usable came."""
    text: str | None
    mime_type: str | None
    verified: bool
    """True when the size and digest were checked and matched (never for a dynamic skill)."""
    verdicts: list[Verdict]
    frontmatter: dict[str, Any] | None = None
    """SKILL.md only: the frontmatter parsed from the file."""

    @property
    def ok(self) -> bool:
        return not self.verdicts

    @property
    def size(self) -> int | None:
        return None if self.content is None else len(self.content)

    @property
    def digest(self) -> str | None:
        return None if self.content is None else "sha256:" + hashlib.sha256(self.content).hexdigest()

    def to_dict(self, limit: int | None = None) -> dict[str, Any]:
        """JSON-ready; ``limit`` cuts the text (or blob) to that many characters, marked ``truncated``."""
        data: dict[str, Any] = {
            "uri": self.uri,
            "ok": self.ok,
            "verified": self.verified,
            "size": self.size,
            "digest": self.digest,
            "mimeType": self.mime_type,
            "verdicts": [v.to_dict() for v in self.verdicts],
        }
        if self.text is not None:
            data["text"] = self.text
        elif self.content is not None:
            data["blob"] = base64.b64encode(self.content).decode("ascii")
        for key in ("text", "blob"):
            if limit is not None and len(data.get(key, "")) > limit:
                data[key], data["truncated"] = data[key][:limit], True
        return data


def verify_read(skill: Skill, uri: str, result: Any) -> SkillRead:
    """Check a resources/read result for one of ``skill``'s files against the entry (pure)."""
    content, text, mime_type, problem = _content(uri, result)
    verdicts = [] if problem is None else [Verdict("skill-content", "error", problem)]
    listed = skill.file(uri)
    verified = False
    if content is not None and listed is not None:
        if len(content) != listed.size:
            verdicts.append(
                Verdict("skill-size", "error", f"{len(content)} bytes, but the entry says {listed.size}")
            )
        digest = "sha256:" + hashlib.sha256(content).hexdigest()
        if digest != listed.digest:
            verdicts.append(
                Verdict(
                    "skill-digest", "error", f"the content hashes to {digest}, the entry says {listed.digest}"
                )
            )
        verified = not verdicts
    read = SkillRead(uri, content, text, mime_type, verified, verdicts)
    if uri == skill.uri and content is not None:
        _check_frontmatter(skill, read)
    return read


def _content(uri: str, result: Any) -> tuple[bytes | None, str | None, str | None, str | None]:
    """The file's bytes from a resources/read result: (bytes, text, mimeType, what is wrong)."""
    contents = result.get("contents") if isinstance(result, dict) else None
    items = [c for c in contents if isinstance(c, dict)] if isinstance(contents, list) else []
    item = next((c for c in items if c.get("uri") == uri), items[0] if len(items) == 1 else None)
    if item is None:
        return None, None, None, f"resources/read returned no content for {uri}"
    mime = item.get("mimeType") if isinstance(item.get("mimeType"), str) else None
    if isinstance(item.get("text"), str):
        text = item["text"]
        try:
            return text.encode("utf-8"), text, mime, None
        except UnicodeEncodeError:  # a lone surrogate from a \ud800 escape: not a byte string
            return None, text, mime, "the text is not valid Unicode (a lone surrogate)"
    if isinstance(item.get("blob"), str):
        try:
            return base64.b64decode(item["blob"], validate=True), None, mime, None
        except (binascii.Error, ValueError):
            return None, None, mime, "the blob is not valid base64"
    return None, None, mime, "the content has neither text nor blob"


def _check_frontmatter(skill: Skill, read: SkillRead) -> None:
    """SKILL.md: parse its frontmatter and compare it with the entry's, field by field."""
    try:
        text = read.text if read.text is not None else (read.content or b"").decode("utf-8")
        parsed = parse_frontmatter(text)
    except UnicodeDecodeError:
        read.verdicts.append(Verdict("skill-frontmatter", "error", f"{SKILL_MD} is not UTF-8 text"))
        return
    except FrontmatterUnsupported as exc:
        read.verdicts.append(
            Verdict(
                "skill-frontmatter",
                "warning",
                f"the frontmatter uses YAML the inspector does not read ({exc}), so it cannot be compared",
            )
        )
        return
    except FrontmatterError as exc:
        read.verdicts.append(Verdict("skill-frontmatter", "error", f"unreadable frontmatter: {exc}"))
        return
    read.frontmatter = parsed
    differences = [
        f"{key}: the file has {_short(parsed.get(key))}, the entry {_short(skill.frontmatter.get(key))}"
        for key in sorted(set(parsed) | set(skill.frontmatter))
        if not _same(parsed.get(key), skill.frontmatter.get(key))
    ]
    if differences:
        read.verdicts.append(
            Verdict(
                "skill-frontmatter",
                "error",
                "the frontmatter differs from the entry's: " + "; ".join(differences),
            )
        )


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``True`` is not ``1``, ``1`` is ``1.0``, a missing field is ``null``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return all(_same(a.get(k), b.get(k)) for k in set(a) | set(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Requester(Protocol):
    """What ``Skills`` needs of a session (``ClientSession`` is one)."""

    @property
    def server_capabilities(self) -> dict[str, Any]: ...

    async def request(
        self, method: str, params: dict[str, Any] | None = None, **options: Any
    ) -> dict[str, Any]: ...

    async def list_page(self, method: str, cursor: str | None = None, **options: Any) -> dict[str, Any]: ...

    def record(self, frame: Frame) -> Frame: ...


class Skills:
    """A session's skills (``session.skills``): list, get, load and read, verifying every file."""

    def __init__(self, session: Requester) -> None:
        self.session = session

    @property
    def offered(self) -> bool:
        return offers_skills(self.session.server_capabilities)

    def _require(self) -> None:
        if not self.offered:
            raise SkillError(f"the server does not declare the {EXTENSION} extension")

    async def list(self) -> list[Skill]:
        """Every page of skills/list; reads no file. Invalid entries are kept, with ``problems``."""
        self._require()
        skills: list[Skill] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            page = await self.session.list_page("skills/list", cursor, progress=False)
            entries = page.get("skills")
            if isinstance(entries, list):
                skills.extend(Skill.from_entry(e) for e in entries)
            cursor = page.get("nextCursor")
            if not isinstance(cursor, str) or not cursor or cursor in seen:
                break
            seen.add(cursor)
        invalid = [s for s in skills if s.problems]
        if invalid:
            self._note(
                "skills-listed",
                f"skills/list: {len(invalid)} of {len(skills)} entries are invalid and cannot be loaded",
                [
                    Verdict("skill-entry", "error", f"{s.uri or '?'}: {'; '.join(s.problems)}")
                    for s in invalid
                ],
            )
        return skills

    async def get(self, uri: str) -> Skill:
        """One skill's current entry by its SKILL.md URI (skills/get)."""
        self._require()
        result = await self.session.request("skills/get", {"uri": uri}, progress=False)
        skill = Skill.from_entry(result.get("skill"))
        if skill.uri != uri:
            skill.problems.append(f"skills/get answered for {skill.uri or 'no uri'}, not {uri}")
        return skill

    async def find(self, name_or_uri: str) -> Skill:
        """A skill by its name (which must be unique in the listing) or its SKILL.md URI.

        A URI the listing does not carry is asked for with skills/get: a listing may be partial.
        """
        skills = await self.list()
        if "://" in name_or_uri:
            found = [s for s in skills if s.uri == name_or_uri]
            return found[0] if found else await self.get(name_or_uri)
        found = [s for s in skills if s.name == name_or_uri]
        if not found:
            names = ", ".join(sorted({s.name for s in skills})) or "none"
            raise SkillError(f"no skill named {name_or_uri!r} in skills/list (listed: {names})")
        if len(found) > 1:
            uris = ", ".join(s.uri for s in found)
            raise SkillError(f"{len(found)} skills are named {name_or_uri!r}; choose one by its URI: {uris}")
        return found[0]

    async def fetch(self, skill: Skill, uri: str | None = None) -> SkillRead:
        """Read one of the skill's files (SKILL.md by default) and verify it; never withholds the
        verdicts (the caller decides what to do with content that failed; ``load`` and ``read`` refuse it).
        """
        uri = skill.uri if uri is None else uri
        if skill.problems:
            raise SkillError(f"the entry for {skill.uri or '?'} is invalid: {'; '.join(skill.problems)}")
        if not skill.dynamic and skill.file(uri) is None:
            raise SkillError(f"{uri} is not among the files the entry for {skill.uri} lists; not reading it")
        if skill.dynamic and uri != skill.uri and not uri.startswith(skill.root + "/"):
            raise SkillError(f"{uri} is not within the skill {skill.root}")
        result = await self.session.request("resources/read", {"uri": uri})
        read = verify_read(skill, uri, result)
        if read.ok:
            checked = "size and digest" if read.verified else "no digest (dynamic skill)"
            if uri == skill.uri:
                checked += ", frontmatter"
            self._note("skill-verified", f"{uri}: {read.size} bytes; checked {checked}", [])
        else:
            self._note("skill-rejected", f"{uri} failed verification; its content is not used", read.verdicts)
        return read

    async def check(self, entry: str | dict[str, Any]) -> dict[str, Any]:
        """Fetch and verify the SKILL.md of an entry (a dict, or its JSON text), as JSON-ready data
        with the text cut to ``SHOWN_TEXT``: what an inspector shows, whether or not it passed."""
        skill = Skill.from_entry(json.loads(entry) if isinstance(entry, str) else entry)
        return (await self.fetch(skill)).to_dict(limit=SHOWN_TEXT)

    async def load(self, skill: Skill) -> SkillRead:
        """Load a skill: read its SKILL.md, verified; raises ``SkillVerificationFailed`` if it fails."""
        read = await self.fetch(skill)
        if not read.ok:
            raise SkillVerificationFailed(read)
        return read

    async def read(self, skill: Skill, path: str) -> SkillRead:
        """Read one file of a loaded skill (a path relative to its root, or a URI), verified."""
        read = await self.fetch(skill, skill.resolve(path))
        if not read.ok:
            raise SkillVerificationFailed(read)
        return read

    def _note(self, state: str, note: str, verdicts: Sequence[Verdict]) -> None:
        # (Sequence: in this class, ``list`` names the method.)
        frame = Frame("state", "local", transport={"state": state}, note=note, verdicts=[*verdicts])
        self.session.record(frame)
