"""The Tasks panel in Chromium: a tool run as a task from the Tools panel, followed live to its result."""

from __future__ import annotations

import re
from typing import Any

import pytest
from support.browser import (
    assert_clean,
    call_card,
    connect,
    list_tools,
    open_tab,
    open_tool,
)

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_tool_run_as_a_task_is_followed_live_and_its_result_fetched(
    home: Any, everything_stdio: dict
) -> None:
    connect(home, stdio=everything_stdio)
    list_tools(home, until=("simulate-research-query",))
    form = open_tool(home, "simulate-research-query")
    form.get_by_label("topic").fill("tides")
    expect(form.get_by_label("run as task")).to_be_checked()  # taskSupport: required
    form.get_by_label("time to live (ms)").fill("60000")
    form.get_by_role("button", name="Call simulate-research-query").click()
    card = call_card(home, "tools/call", "simulate-research-query").first
    expect(card.get_by_text("Task created:")).to_be_visible()

    open_tab(home, "Tasks")
    task = home.locator("#task-list article.task-row").first
    expect(task.locator(".task-status")).to_have_text("completed", timeout=30_000)  # live, no reload
    expect(task).to_contain_text("simulate-research-query")
    task.get_by_role("button", name="Fetch result").click()
    result = call_card(home, "tasks/result").first
    expect(result).to_contain_text("Research Report: tides")
    expect(task.get_by_text("Result", exact=True)).to_be_visible(timeout=15_000)
    expect(task.get_by_role("button", name=re.compile("^Cancel task"))).to_have_count(0)
    assert_clean(home)
