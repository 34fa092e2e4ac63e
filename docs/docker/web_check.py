"""Drive a running inspector as a browser would: log in with the one-time token, then connect a stdio
server through the home page's connect form and list its tools, or open a session already made.

Standard library only: docs/docker/smoke.sh runs it on the host against the app in the container.

    python3 web_check.py URL TOKEN connect COMMAND     prints the session's id, then its tools
    python3 web_check.py URL TOKEN open SESSION        fails unless the session's page opens
"""

from __future__ import annotations

import http.cookiejar
import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from email.message import Message
from html.parser import HTMLParser

CSRF_COOKIE = "mcp_inspector_csrftoken"


class FormFields(HTMLParser):
    """The fields a browser would post from one form of a page: its default values."""

    def __init__(self, form_id: str) -> None:
        super().__init__()
        self.form_id = form_id
        self.inside = False
        self.fields: dict[str, str] = {}
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.inside = a.get("id") == self.form_id
        if not self.inside:
            return
        if tag == "option" and self._select and ("selected" in a or self._select not in self.fields):
            self.fields[self._select] = a.get("value", "")
        if not a.get("name"):
            return
        name = a["name"]
        if tag == "input" and a.get("type") in ("checkbox", "radio"):
            if "checked" in a:
                self.fields[name] = a.get("value") or "on"
        elif tag == "input" and a.get("type") not in ("submit", "button", "file"):
            self.fields[name] = a.get("value", "")
        elif tag == "select":
            self._select = name
        elif tag == "textarea":
            self._textarea = name
            self.fields[name] = ""

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self.fields[self._textarea] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None


class ToolNames(HTMLParser):
    """The tools a tools panel lists (each a button labelled "Open tool NAME")."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        label = dict(attrs).get("aria-label") or ""
        if tag == "button" and label.startswith("Open tool "):
            self.names.append(label.removeprefix("Open tool "))


class Browser:
    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")
        self.cookies = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies))

    def get(self, path: str) -> str:
        with self.opener.open(self.base + path, timeout=30) as response:
            return response.read().decode()

    def post(self, path: str, fields: dict[str, str], htmx: bool = False) -> tuple[str, Message]:
        csrf = next(c.value for c in self.cookies if c.name == CSRF_COOKIE)
        headers = {"Origin": self.base, "X-CSRFToken": csrf or ""}
        if htmx:
            headers["HX-Request"] = "true"
        data = urllib.parse.urlencode(fields).encode()
        request = urllib.request.Request(self.base + path, data=data, headers=headers, method="POST")
        with self.opener.open(request, timeout=60) as response:
            return response.read().decode(), response.headers

    def log_in(self, token: str) -> None:
        self.get("/auth/token?" + urllib.parse.urlencode({"token": token}))
        self.post("/auth/token", {"token": token})


def connect(browser: Browser, command: str) -> None:
    form = FormFields("connect-form")
    form.feed(browser.get("/"))
    fields = form.fields | {"transport": "stdio", "command": command}
    try:
        _, headers = browser.post("/connect", fields, htmx=True)
    except urllib.error.HTTPError as exc:
        errors = re.findall(r'role="alert">(.*?)</', exc.read().decode(), re.DOTALL)
        sys.exit(f"connect refused ({exc.code}): {' '.join(e.strip() for e in errors)}")
    # A header of the response, case-insensitive: daphne sends header names in lower case. htmx is
    # told where the session page is (HX-Location, JSON with its path), to put it in place.
    location = json.loads(headers.get("HX-Location") or "{}").get("path", "")
    session = location.strip("/").split("/")[-1]
    if not session:
        sys.exit(f"connect started no session: {headers}")
    print(session, flush=True)
    # The server may still be starting (npx fetches it first): ask until it answers, for a minute.
    deadline = time.monotonic() + 60
    while True:
        panel, _ = browser.post(f"/s/{session}/tools/list", {"page": "all"}, htmx=True)
        tools = ToolNames()
        tools.feed(panel)
        if tools.names:
            print(len(tools.names), "tools:", ", ".join(tools.names))
            return
        if time.monotonic() > deadline:
            sys.exit(f"no tools listed within a minute; the panel said:\n{panel[:2000]}")
        time.sleep(1)


def main() -> None:
    base, token, action, argument = sys.argv[1:5]
    browser = Browser(base)
    browser.log_in(token)
    if action == "connect":
        connect(browser, argument)
    else:
        browser.get(f"/s/{argument}/")


if __name__ == "__main__":
    main()
