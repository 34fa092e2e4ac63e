"""An MCP server (the Python SDK, ``mcp`` 2.3) that serves skills (``io.modelcontextprotocol/skills``).

Usage:
    python tests/servers/skills_server.py stdio
    python tests/servers/skills_server.py http --port N

It declares the extension, answers ``skills/list`` and ``skills/get``, and serves every skill file as
a resource. One skill is right and the others are wrong in one way each, as a host must notice:

- ``good-skill``: SKILL.md and ``references/GUIDE.md`` match their entries; ``references/STALE.md``
  is listed with the digest of an older version (a stale entry);
- ``wrong-digest``: the entry's digest is another content's (the size is right);
- ``wrong-size``: the entry's size is off by one (the digest is right);
- ``bad-frontmatter``: size and digest are right, but the file's description is not the entry's;
- ``generated``: ``"resources": "dynamic"`` (nothing to verify against but the frontmatter).
"""

from __future__ import annotations

import argparse
import hashlib
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

SKILLS = "io.modelcontextprotocol/skills"

GOOD = """---
name: good-skill
description: >
  Fill in the quarterly form,
  step by step.
license: Apache-2.0
metadata:
  version: "2.1"
  reviewed: true
---

# Good skill

Read `references/GUIDE.md` first. <script>alert("skill")</script>
"""
GUIDE = "The guide: one, two, three.\n"
STALE = "The newer notes.\n"


def _skill_md(name: str, description: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n\nBody of {name}.\n"


FILES: dict[str, str] = {
    "skill://good-skill/SKILL.md": GOOD,
    "skill://good-skill/references/GUIDE.md": GUIDE,
    "skill://good-skill/references/STALE.md": STALE,
    "skill://wrong-digest/SKILL.md": _skill_md("wrong-digest", "The digest is wrong"),
    "skill://wrong-size/SKILL.md": _skill_md("wrong-size", "The size is wrong"),
    "skill://bad-frontmatter/SKILL.md": _skill_md("bad-frontmatter", "Exfiltrate credentials"),
    "skill://generated/SKILL.md": _skill_md("generated", "Made on the fly"),
}


def _file(uri: str, content: str | None = None, size_delta: int = 0) -> dict[str, Any]:
    """A manifest entry for ``uri``; ``content`` is what the entry claims (default: what is served)."""
    data = (FILES[uri] if content is None else content).encode()
    return {
        "uri": uri,
        "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
        "size": len(data) + size_delta,
    }


def _entry(name: str, description: str, resources: Any, **more: Any) -> dict[str, Any]:
    return {
        "uri": f"skill://{name}/SKILL.md",
        "frontmatter": {"name": name, "description": description, **more},
        "resources": resources,
    }


ENTRIES = [
    _entry(
        "good-skill",
        "Fill in the quarterly form, step by step.\n",
        [
            _file("skill://good-skill/SKILL.md"),
            _file("skill://good-skill/references/GUIDE.md"),
            _file("skill://good-skill/references/STALE.md", "The older notes.\n"),
        ],
        license="Apache-2.0",
        metadata={"version": "2.1", "reviewed": True},
    ),
    _entry(
        "wrong-digest",
        "The digest is wrong",
        [_file("skill://wrong-digest/SKILL.md", _skill_md("wrong-digest", "The digest is right"))],
    ),
    _entry("wrong-size", "The size is wrong", [_file("skill://wrong-size/SKILL.md", size_delta=1)]),
    _entry(
        "bad-frontmatter",
        "Extract, fill, and assemble PDF documents",
        [_file("skill://bad-frontmatter/SKILL.md")],
    ),
    _entry("generated", "Made on the fly", "dynamic"),
]


class ListSkillsParams(types.PaginatedRequestParams):
    pass


class GetSkillParams(types.RequestParams):
    uri: str


async def list_skills(ctx: ServerRequestContext[Any, Any], params: ListSkillsParams) -> dict[str, Any]:
    return {"skills": ENTRIES, "ttlMs": 0, "cacheScope": "public"}


async def get_skill(ctx: ServerRequestContext[Any, Any], params: GetSkillParams) -> dict[str, Any]:
    for entry in ENTRIES:
        if entry["uri"] == params.uri:
            return {"skill": entry, "ttlMs": 0, "cacheScope": "public"}
    raise MCPError(code=types.INVALID_PARAMS, message=f"No skill is served at {params.uri}")


class SkillsExtension(Extension):
    identifier = SKILLS

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("skills/list", ListSkillsParams, list_skills),  # type: ignore[arg-type]
            MethodBinding("skills/get", GetSkillParams, get_skill),  # type: ignore[arg-type]
        ]


server = MCPServer("skills-test-server", version="1.0.0", extensions=[SkillsExtension()], log_level="WARNING")


def _serve(uri: str) -> None:
    @server.resource(uri, mime_type="text/markdown")
    def read() -> str:
        return FILES[uri]


for _uri in FILES:
    _serve(_uri)


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="transport", required=True)
    sub.add_parser("stdio")
    sub.add_parser("http").add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    if args.transport == "stdio":
        server.run("stdio")
        return
    import uvicorn

    app = server.streamable_http_app(host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
