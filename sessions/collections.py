"""A session's requests as a collection for ``mcp-inspector --cli --collection``: record, then regress.

Every request the person sent (not the lifecycle's own, nor a stateless retry) becomes a step with
the expectations its answer met: an error, or a result with the same ``isError`` and — when the
answer broke no rule — ``"verdicts": "clean"``. Run against a new build of the server in CI, the
collection fails where the new build answers differently. Result values are left out on purpose
(times, ids and counts change from run to run): add ``result`` or ``contains`` by hand where a value
matters.
"""

from __future__ import annotations

import json
from typing import Any

from sessions.models import McpSession, TimelineFrame
from sessions.timeline import request_of


def collection(session: McpSession) -> dict[str, Any]:
    requests = TimelineFrame.objects.filter(session=session, direction="out", rpc_kind="request").order_by(
        "seq"
    )
    answers = {
        frame.pair_seq: frame
        for frame in TimelineFrame.objects.filter(
            session=session, direction="in", rpc_kind__in=("result", "error"), pair_seq__isnull=False
        ).only("pair_seq", "rpc_kind", "raw", "worst")
    }
    steps = []
    for frame in requests:
        if frame.note.startswith("retry of request"):
            continue  # the original request stands for the whole input-required exchange
        request = request_of(frame, bytes(frame.raw))
        answer = answers.get(frame.seq)
        if request is None or answer is None:
            continue
        method, params = request
        expect: dict[str, Any] = {}
        if answer.rpc_kind == "error":
            expect["error"] = True
        else:
            try:
                result = json.loads(bytes(answer.raw)).get("result")
            except (ValueError, AttributeError):
                result = None
            if method == "tools/call" and isinstance(result, dict):
                expect["isError"] = bool(result.get("isError", False))
            if answer.worst not in ("error", "warning"):
                expect["verdicts"] = "clean"
        label = (params or {}).get("name") or (params or {}).get("uri")
        step: dict[str, Any] = {
            "name": f"#{frame.seq} {method}{f' {label}' if label else ''}",
            "method": method,
        }
        if params is not None:
            step["params"] = params
        step["expect"] = expect
        steps.append(step)
    about = (
        f"the requests of session {session.public_id} ({session.server_label}, {session.protocol_version})"
    )
    return {"about": about, "steps": steps}
