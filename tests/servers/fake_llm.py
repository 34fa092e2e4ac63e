"""A stand-in for an OpenAI-compatible chat completions API: the one thing the tests may not reach.

Usage: python tests/servers/fake_llm.py PORT LOG_FILE

POST /v1/chat/completions with ``Authorization: Bearer test-key`` answers "Drafted: <the last user
message>" from model "fake-model-1" (finish_reason "length" when max_tokens is under 5); every
request body is appended to LOG_FILE as a JSON line, so tests can see what was sent. Anything else,
or another key, is refused.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (the http.server API)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != "/v1/chat/completions" or self.headers.get("Authorization") != "Bearer test-key":
            self._answer(401, {"error": {"message": "bad key or path"}})
            return
        request = json.loads(body)
        with open(sys.argv[2], "a", encoding="utf-8") as log:
            log.write(json.dumps(request) + "\n")
        last = next((m["content"] for m in reversed(request["messages"]) if m["role"] == "user"), "")
        finish = "length" if request.get("max_tokens", 100) < 5 else "stop"
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": f"Drafted: {last}"},
            "finish_reason": finish,
        }
        self._answer(
            200, {"id": "x", "object": "chat.completion", "model": "fake-model-1", "choices": [choice]}
        )

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
