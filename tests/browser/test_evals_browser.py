"""In Chromium: an eval suite written on its page, run three times against two scripted models over
server-everything's tools, the pass-rate table filling in test by test, the planted regression's failing
run opened from its cell, and its tool call's frame opened on the session's timeline from there."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.browser import LONG, assert_clean, connect
from support.eval_scenario import KEY, SUITE, models, scripted_model

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def model_urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    folder: Path = tmp_path_factory.mktemp("eval-models")
    with scripted_model(folder, "gpt") as gpt, scripted_model(folder, "claude", regression=True) as claude:
        yield gpt, claude


@pytest.fixture(scope="module")
def app_env(model_urls: tuple[str, str]) -> dict[str, str]:
    return {"INSPECTOR_LLM_MODELS": models(*model_urls)}


def test_a_suite_is_run_and_its_failing_transcript_is_a_click_away(home: Any, everything_stdio: dict) -> None:
    session_url = connect(home, stdio=everything_stdio)
    home.get_by_role("navigation").get_by_role("link", name="Evals").click()
    expect(home.get_by_role("heading", name="Evals")).to_be_visible()
    home.get_by_label("New suite").fill("draft")
    home.get_by_role("button", name="Create").click()

    editor = home.get_by_label("Suite (JSON)")
    editor.fill(json.dumps(SUITE, indent=2))
    home.get_by_role("button", name="Save").click()
    expect(home.get_by_role("status")).to_have_text("Saved.")
    expect(home.get_by_role("heading", name="everything", exact=True)).to_be_visible()
    expect(home.locator(".eval-tests li")).to_have_count(5)

    expect(home.get_by_label("Over the tools of")).to_contain_text("everything")
    home.get_by_label("Runs of each test").fill("3")
    home.get_by_role("button", name="Run the suite").click()

    table = home.get_by_role("table", name="Pass rate per test and model")
    expect(home.locator(".eval-progress")).to_contain_text("29/30 passed · done", timeout=LONG)
    expect(table.locator("thead th")).to_have_text(["Test", "gpt", "claude"])
    sum_row = table.locator("tbody tr").filter(has=home.get_by_role("rowheader", name="sum", exact=True))
    expect(sum_row.locator(".eval-rate")).to_have_text(["3/3", "2/3"])
    expect(table.locator(".eval-some")).to_have_count(1)
    home.screenshot(path="/tmp/evals-run.png", full_page=True)

    sum_row.get_by_role("link", name="run 2 failed").click()
    reasons = home.get_by_role("list", name="Why it failed")
    expect(reasons).to_contain_text(
        'expected a call of get-sum {"a": 2, "b": 3}; the calls were: get-sum {"a": 2, "b": 2}'
    )
    card = home.get_by_role("article", name="Tool call get-sum")
    expect(card.locator(".chat-result")).to_have_text("The sum of 2 and 2 is 4.")
    expect(home.locator(".chat-assistant").last).to_contain_text("It is 4.")
    home.screenshot(path="/tmp/evals-failure.png", full_page=True)
    assert KEY not in home.content()

    # The call is the session's: its frame opens on the session's timeline.
    card.get_by_role("link", name="frame #").click()
    expect(home).to_have_url(f"{session_url.split('?')[0].rstrip('/')}/?frame=" + home.url.split("=")[-1])
    expect(home.locator("#frame-detail")).to_contain_text('"b": 2', timeout=LONG)

    # Back on the suite's page, the run is in the history plot.
    home.go_back()
    home.get_by_role("link", name="everything").first.click()
    expect(home.locator("#eval-history circle")).to_have_count(2)
    expect(home.locator("#eval-history")).to_contain_text("claude (newest 14/15)")
    # Once more, clean this time (the planted answer is used up): a second point for each model.
    home.get_by_label("Runs of each test").fill("1")
    home.get_by_role("button", name="Run the suite").click()
    expect(home.locator(".eval-progress")).to_contain_text("10/10 passed · done", timeout=LONG)
    home.get_by_role("link", name="everything").first.click()
    expect(home.locator("#eval-history circle")).to_have_count(4)
    expect(home.locator("#eval-history")).to_contain_text("claude (newest 5/5)")
    grid = home.get_by_role("table", name="Pass rate of each test and model by run")
    regressed = (
        grid.locator("tbody tr")
        .filter(has_text="claude")
        .filter(has=home.get_by_role("rowheader", name="sum", exact=True))
    )
    expect(regressed.locator(".eval-rate")).to_have_text(["2/3", "1/1"])
    expect(grid.locator(".eval-some")).to_have_count(1)
    home.screenshot(path="/tmp/evals-suite.png", full_page=True)
    assert_clean(home)
