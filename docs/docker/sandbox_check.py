"""Inside the image: start an npx server in the hosted mode's sandbox, as a worker would, and list its
tools. Run by smoke.sh with the container's seccomp profile that allows user namespaces."""

from __future__ import annotations

import asyncio
import os
import sys

from sessions.engine import ClientSession, Sandbox, StdioTarget, make_transport, sandbox_problem


async def main() -> int:
    sandbox = Sandbox(tuple(p for p in os.environ.get("INSPECTOR_SANDBOX_READ", "").split(",") if p))
    if problem := sandbox_problem(sandbox):
        print(f"no sandbox here: {problem}", file=sys.stderr)
        return 1
    target = StdioTarget(
        "npx",
        ["-y", "@modelcontextprotocol/server-everything"],
        # The system's certificates, which the image's own Node is told of too (a proxy's CA, say).
        env={
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "NODE_EXTRA_CA_CERTS": "/etc/ssl/certs/ca-certificates.crt",
        },
        inherit_env=False,
        fresh_home=True,
        sandbox=sandbox,
    )
    session = ClientSession(make_transport(target))
    async with asyncio.timeout(120):
        await session.open()
        try:
            await session.initialize()
            tools = await session.list_tools()
        finally:
            await session.aclose()
    names = [tool["name"] for tool in tools["tools"]]
    print(len(names), "tools in the sandbox:", ", ".join(names))
    return 0 if "echo" in names else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
