"""The CLI's skills (the ``io.modelcontextprotocol/skills`` extension): list, get, load and read, verified.

    mcp-inspector --cli URL --method skills/list                    # the entries; no file is read
    mcp-inspector --cli URL --method skills/get --uri skill://x/SKILL.md
    mcp-inspector --cli URL --skill pdf-processing                  # SKILL.md, verified
    mcp-inspector --cli URL --skill pdf-processing --skill-file references/FORMS.md

``--skill`` loads the skill as a host does: it finds the entry (skills/list; skills/get for a URI the
listing lacks), reads SKILL.md, and checks its size, digest and frontmatter against the entry. Each
``--skill-file`` is then read and checked in turn, and only if the entry lists it. The first file that
fails stops the run (exit 1): nothing after it is read, and its content is not printed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inspector.cli.arguments import Invocation
    from sessions.engine import ClientSession, Skill

__all__ = ["call"]


def _invalid(skills: list[Skill]) -> list[dict[str, Any]]:
    return [{"uri": s.uri, "problems": s.problems} for s in skills if s.problems]


async def call(session: ClientSession, inv: Invocation) -> dict[str, Any]:
    """Run ``--method skills/list``, ``--method skills/get`` or ``--skill``."""
    if inv.method == "skills/list":
        skills = await session.skills.list()
        result: dict[str, Any] = {"skills": [s.entry for s in skills]}
    elif inv.method == "skills/get":
        assert inv.uri is not None
        skills = [await session.skills.get(inv.uri)]
        result = {"skill": skills[0].entry}
    else:
        assert inv.skill is not None
        skill = await session.skills.find(inv.skill)
        files = [(await session.skills.load(skill)).to_dict()]
        for path in inv.skill_files:
            files.append((await session.skills.read(skill, path)).to_dict())
        return {"skill": skill.entry, "files": files}
    invalid = _invalid(skills)
    if invalid:
        result["invalid"] = invalid
    return result
