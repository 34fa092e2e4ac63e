"""``--apps``: the CLI declares the MCP Apps extension only when asked (a command line renders no view)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support.cli import result_of, run_cli

from inspector.cli.arguments import parse_args

APPS_SERVER = Path(__file__).parents[1] / "servers" / "apps_server.py"
UI = "io.modelcontextprotocol/ui"


def test_apps_is_off_unless_asked() -> None:
    assert parse_args(["srv", "--method", "tools/list"]).apps is False
    assert parse_args(["srv", "--method", "tools/list", "--apps"]).apps is True


@pytest.mark.slow
def test_the_cli_declares_the_extension_with_apps_and_reads_a_view(tmp_path: Path) -> None:
    server = [sys.executable, str(APPS_SERVER), "stdio"]
    declared = {}
    for flags in ([], ["--apps"]):
        record = tmp_path / f"frames{len(flags)}.jsonl"
        read = [
            *server,
            "--method",
            "resources/read",
            "--uri",
            "ui://weather/view.html",
            "--record",
            str(record),
        ]
        result = result_of(run_cli(*read, *flags))
        assert result["contents"][0]["mimeType"] == "text/html;profile=mcp-app"
        frames = [json.loads(line) for line in record.read_text().splitlines()]
        opening = next(f for f in frames if f["method"] == "initialize" and f["direction"] == "out")
        declared[bool(flags)] = json.loads(opening["raw"])["params"]["capabilities"].get("extensions")
    assert declared == {False: None, True: {UI: {"mimeTypes": ["text/html;profile=mcp-app"]}}}
