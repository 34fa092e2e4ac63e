"""``mcp-inspector replay --report FILE.html``: one self-contained page, no script, everything a server sent
escaped; the summary on top, each step with its changes, unchanged steps folded."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

from inspector.cli.replay_html import html_report
from sessions.replay import ABSENT, Difference, StepReport, summary

HOSTILE = "</pre><script>alert(1)</script><img src=x onerror=alert(2)>"


class Page(HTMLParser):
    """The elements of a page, with their attributes, and its text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parsed(html: str) -> Page:
    page = Page()
    page.feed(html)
    return page


def data() -> dict[str, Any]:
    steps = [
        StepReport(0, "initialize"),
        StepReport(1, "tools/list", recorded_ms=1.5, replayed_ms=2.25),
        StepReport(
            2,
            "tools/call",
            [
                Difference(2, "tools/call", "$.result.content[0].text", "value changed", "hi", HOSTILE),
                Difference(2, "tools/call", "$.result.structuredContent.extra", "added", ABSENT, {"n": 1}),
            ],
            label="echo",
        ),
        StepReport(3, "tools/call", [Difference(3, "tools/call", "latency_ms", "slower", 3.0, 90.0)]),
    ]
    return {
        "recording": "rec.jsonl",
        "target": "python server.py",
        "notes": ["a <b>note</b>"],
        **summary(steps),
    }


def test_the_report_is_one_page_with_no_script_and_every_value_escaped() -> None:
    html = html_report(data())
    page = parsed(html)
    tags = [tag for tag, _ in page.tags]
    assert "script" not in tags and "img" not in tags and "link" not in tags
    assert not any(name.startswith("on") for _, attrs in page.tags for name in attrs)
    assert HOSTILE in "".join(page.text)  # shown as text, escaped
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "a &lt;b&gt;note&lt;/b&gt;" in html
    policy = next(a for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert policy["content"] == "default-src 'none'; style-src 'unsafe-inline'"
    assert tags.count("style") == 1 and ".replay-step" in html and "--font-mono" in html  # styles inline


def test_the_summary_comes_first_and_counts_the_changes_by_kind() -> None:
    html = html_report(data())
    text = " ".join(" ".join(parsed(html).text).split())
    assert text.index("4 steps, 2 changed") < text.index("Steps")
    assert "2 changed 2 unchanged" in text
    rules = html[html.index('<table class="fp-table replay-rules"') : html.index("</table>")]
    assert [" ".join(row.split()) for row in parsed(rules).text if row.strip()] == [
        "Kind of change", "Differences", "added", "1", "slower", "1", "value changed", "1",
    ]  # fmt: skip


def test_changed_steps_are_open_with_their_changes_and_unchanged_ones_folded() -> None:
    page = parsed(html_report(data()))
    details = [attrs for tag, attrs in page.tags if tag == "details"]
    assert ["open" in attrs for attrs in details] == [False, False, True, True]
    text = " ".join(" ".join(page.text).split())
    assert "2 tools/call echo 2 changes" in text and "1.5 ms → 2.2 ms" in text
    assert '$.result.structuredContent.extra (absent) { "n": 1 }' in text
    assert "added" in text and "latency_ms 3.0 90.0" in text
