"""A chat or an eval run as a file (JSON, or one HTML page with no script) or a shared page, redacted.

Redaction is the session export's (``sessions.timeline.redaction.Redactor``): the built-in rules
(secret-looking names, URL passwords) and every secret value of the session's config, wherever it
appears, plus the keys of the models it used; the whole document goes through it, so a secret a tool
echoed into its result, or a person typed, shows as ``[redacted]``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.contrib.staticfiles import finders
from django.template.loader import render_to_string

from sessions.models import McpSession
from sessions.playground import evalruns
from sessions.playground.models import Chat, EvalRun
from sessions.playground.turns import configured
from sessions.timeline.exports import stylesheet
from sessions.timeline.redaction import Redactor
from sessions.timeline.secret_rules import config_secrets

__all__ = ["chat_document", "chat_html", "redactor_for", "run_document", "run_html"]

ENTRY_FIELDS = (
    "kind", "text", "model_name", "input_tokens", "output_tokens", "ms", "call_id", "tool_name",
    "mcp_name", "arguments", "raw_arguments", "status", "result", "is_error", "request_seq",
    "response_seq", "latency_ms", "verdicts",
)  # fmt: skip


def redactor_for(session: McpSession | None, team_id: int) -> Redactor:
    """The session's secrets and every model key the team may use: none of them leaves in a document."""
    secrets = config_secrets(session.config) if session is not None else []
    keys = [config.api_key for config in configured(team_id)[0] if config.api_key]
    return Redactor([*secrets, *keys])


def _when(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def chat_document(chat: Chat) -> dict[str, Any]:
    """The chat as JSON: its settings, then each entry in order, redacted."""
    session = chat.session
    redactor = redactor_for(session, chat.team_id)
    entries = []
    for entry in chat.entries.all():
        item = {name: getattr(entry, name) for name in ENTRY_FIELDS}
        item["created"] = _when(entry.created)
        entries.append({k: v for k, v in item.items() if v not in ("", None, [])})
    document = {
        "kind": "mcp-inspector chat",
        "chat": chat.pk,
        "session": {"id": str(session.public_id), "name": session.name},
        "model": chat.model_key,
        "system_prompt": chat.system_prompt,
        "temperature": chat.temperature,
        "approval": chat.approval,
        "created": _when(chat.created),
        "entries": entries,
    }
    return redactor.value(document)  # type: ignore[no-any-return]


def run_document(run: EvalRun) -> dict[str, Any]:
    """The eval run as JSON: the suite as it ran, the pass rates, each result with its transcript."""
    redactor = redactor_for(run.session, run.team_id)
    table = evalruns.rate_table(run)
    rates = [
        {
            "test": row["test"],
            "models": {k: _cell(c) for k, c in zip(table["models"], row["cells"], strict=False)},
        }
        for row in table["rows"]
    ]
    results = [
        {
            "test": r.test,
            "model": r.model_key,
            "attempt": r.attempt,
            "state": r.state,
            "reasons": r.reasons,
            "ms": r.ms,
            "transcript": r.transcript,
        }
        for r in run.results.all()
    ]
    document = {
        "kind": "mcp-inspector eval run",
        "run": run.pk,
        "suite": run.suite.name,
        "server": run.server_label,
        "session": str(run.session.public_id) if run.session is not None else None,
        "models": run.model_keys,
        "runs": run.runs,
        "state": run.state,
        "note": run.note,
        "created": _when(run.created),
        "definition": run.definition,
        "rates": rates,
        "results": results,
    }
    return redactor.value(document)  # type: ignore[no-any-return]


def _cell(cell: dict[str, Any]) -> dict[str, Any]:
    return {"passed": cell["passed"], "done": cell["done"], "runs": cell["runs"]}


def _css() -> str:
    """The app's stylesheet and the Playground's, inlined: the file loads nothing from elsewhere."""
    found = finders.find("inspector/playground.css")
    return stylesheet() + ("\n" + Path(found).read_text() if isinstance(found, str) else "")


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def chat_html(chat: Chat) -> str:
    """The chat as one HTML page: no script, nothing loaded from elsewhere, redacted."""
    document = chat_document(chat)
    for entry in document["entries"]:
        if "arguments" in entry:
            entry["arguments_json"] = _pretty(entry["arguments"])
        if "result" in entry:
            entry["result_json"] = _pretty(entry["result"])
    return render_to_string("exports/chat.html", {"doc": document, "css": _css()})


def run_html(run: EvalRun) -> str:
    """The eval run as one HTML page: no script, nothing loaded from elsewhere, redacted."""
    document = run_document(run)
    for result in document["results"]:
        for entry in result["transcript"] if isinstance(result["transcript"], list) else []:
            if isinstance(entry, dict) and "arguments" in entry:
                entry["arguments_json"] = _pretty(entry["arguments"])
    document["definition_json"] = _pretty(document["definition"])
    return render_to_string("exports/eval_run.html", {"doc": document, "css": _css()})
