"""Evals in the web against server-everything and two scripted models: a suite saved, run three times
against both, the planted regression in the pass-rate table and its transcript a click away, the model's
calls on the session's timeline, the history of runs; a broken suite refused with the reason; another
team's suite and run out of reach, a viewer unable to run one."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from support.eval_scenario import KEY, SUITE, models, scripted_model
from support.web import (
    frames_of,
    frames_stored,
    live_runtime,
    logged_in_client,
    make_user,
    start_session,
    stdio_config,
    wait_until,
)

from sessions.models import McpSession
from sessions.playground.models import EvalResult, EvalRun, EvalSuite
from sessions.teams.models import Membership, Role

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

STEP = re.compile(r'hx-post="(/evals/runs/\d+/step)"')


async def run_to_the_end(client: Any, run: EvalRun, steps: int = 40) -> str:
    """Take the steps the run's page asks for, as the page does; the last table."""
    html = (await client.get(f"/evals/runs/{run.pk}")).content.decode()
    for _ in range(steps):
        found = STEP.search(html)
        if not found:
            return html
        response = await client.post(found[1])
        assert response.status_code == 200
        html = response.content.decode()
    raise AssertionError(f"the run still wants a step after {steps}:\n{html}")


async def start(
    client: Any, suite: EvalSuite, session: McpSession, *model_keys: str, runs: int = 3
) -> EvalRun:
    form = {"session": str(session.public_id), "model": list(model_keys), "runs": str(runs)}
    response = await client.post(f"/evals/{suite.pk}/run", form)
    assert response.status_code == 302, response.content.decode()
    return await EvalRun.objects.filter(suite=suite).afirst()  # type: ignore[return-value]


def cells(html: str) -> list[tuple[str, list[str]]]:
    """The rate table's rows: each test and its rate with each model."""
    rows = re.findall(r'<th scope="row">([^<]+)</th>(.*?)</tr>', html, re.S)
    return [(test, re.findall(r'<span class="eval-rate">([^<]+)</span>', rest)) for test, rest in rows]


async def test_a_suite_run_three_times_against_two_models_shows_the_planted_regression(
    everything_stdio: dict, tmp_path: Path
) -> None:
    with (
        scripted_model(tmp_path, "gpt") as gpt,
        scripted_model(tmp_path, "claude", regression=True) as claude,
        override_settings(INSPECTOR_LLM_MODELS=models(gpt, claude)),
    ):
        async with live_runtime():
            alice = await make_user()
            session = await start_session(
                alice, stdio_config(everything_stdio["command"], everything_stdio["args"])
            )
            client = await logged_in_client(alice)
            response = await client.post("/evals/new", {"name": "draft"})
            assert response.status_code == 302
            suite = await EvalSuite.objects.aget()
            broken = {"tests": [{"name": "x", "prompt": "p", "expect": {"order": "sorted"}}]}
            response = await client.post(f"/evals/{suite.pk}/save", {"definition": json.dumps(broken)})
            assert response.status_code == 400
            assert (
                "test &#x27;x&#x27;&#x27;s expect.order must be one of in_order, exact, any"
                in response.content.decode()
            )
            response = await client.post(f"/evals/{suite.pk}/save", {"definition": json.dumps(SUITE)})
            assert response.status_code == 200 and "Saved." in response.content.decode()
            await suite.arefresh_from_db()
            assert suite.name == "everything"

            run = await start(client, suite, session, "gpt", "claude")
            html = await run_to_the_end(client, run)
            await run.arefresh_from_db()
            assert run.state == "done"
            assert "29/30 passed" in html
            assert cells(html) == [
                ("echo", ["3/3", "3/3"]),
                ("sum", ["3/3", "2/3"]),
                ("echo-then-sum", ["3/3", "3/3"]),
                ("no-tools", ["3/3", "3/3"]),
                ("greeting", ["3/3", "3/3"]),
            ]
            failed = await EvalResult.objects.aget(run=run, state="failed")
            assert (failed.test, failed.model_key, failed.attempt) == ("sum", "claude", 2)
            link = f"/evals/runs/{run.pk}/results/{failed.pk}"
            assert f'href="{link}"' in html and "run 2 failed" in html

            page = (await client.get(link)).content.decode()
            assert (
                "expected a call of get-sum {&quot;a&quot;: 2, &quot;b&quot;: 3}; the calls were: get-sum"
                in page
            )
            assert "It is 4." in page and "The sum of 2 and 2 is 4." in page and KEY not in page
            call = next(e for e in failed.transcript if e["kind"] == "tool")
            assert f'href="/s/{session.public_id}/?frame={call["request_seq"]}"' in page

            # Every call the models made went through the session: on its timeline.
            results = [r async for r in EvalResult.objects.filter(run=run)]
            made = [e for r in results for e in r.transcript if e["kind"] == "tool"]
            await frames_stored(session, *(e[side] for e in made for side in ("request_seq", "response_seq")))
            seen = {f.seq for f in await frames_of(session, method="tools/call")}
            assert len(made) == 30 and len(seen) == 60
            assert {e["request_seq"] for e in made} | {e["response_seq"] for e in made} == seen

            # A second run, clean this time (the planted step is used up): the history shows the drop.
            second = await start(client, suite, session, "gpt", "claude", runs=1)
            assert "10/10 passed" in await run_to_the_end(client, second)
            page = (await client.get(f"/evals/{suite.pk}")).content.decode()
            assert "Pass rate by run" in page and "(2 runs," in page
            assert "claude: 14/15 passed, run" in page and "claude: 5/5 passed, run" in page
            assert page.count('class="eval-point series-') == 4
            grid = page[page.index('aria-label="Pass rate of each test and model by run"') :]
            assert re.search(
                r'<th scope="row">sum</th><td>claude</td><td class="eval-cell eval-some">.*?>2/3</a>', grid
            )

            listing = (await client.get("/evals")).content.decode()
            assert f'href="/evals/{suite.pk}"' in listing and "10/10 passed" in listing
            download = await client.get(f"/evals/{suite.pk}/suite.json")
            assert json.loads(download.content) == SUITE

            # Another team's person reaches none of it; a viewer of the team reads but does not run.
            bob = await make_user("bob")
            other = await logged_in_client(bob)
            for path in (
                f"/evals/{suite.pk}",
                f"/evals/runs/{run.pk}",
                link,
                f"/evals/{suite.pk}/suite.json",
            ):
                assert (await other.get(path)).status_code == 404, path
            assert (await other.post(f"/evals/runs/{run.pk}/step")).status_code == 404
            assert "everything" not in (await other.get("/evals")).content.decode()
            carol = await make_user("carol")
            await Membership.objects.acreate(team_id=suite.team_id, user=carol, role=Role.VIEWER)
            viewer = await logged_in_client(carol)
            viewer_page = await viewer.get(f"/evals/{suite.pk}")
            assert viewer_page.status_code == 200 and "Run the suite" not in viewer_page.content.decode()
            form = {"session": str(session.public_id), "model": ["gpt"], "runs": "1"}
            assert (await viewer.post(f"/evals/{suite.pk}/run", form)).status_code == 403
            assert (await viewer.post(f"/evals/{suite.pk}/save", {"definition": "{}"})).status_code == 403


async def test_a_run_that_cannot_be_made_is_refused_saying_why(
    everything_stdio: dict, tmp_path: Path
) -> None:
    with override_settings(INSPECTOR_LLM_MODELS=models("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1")):
        async with live_runtime():
            alice = await make_user()
            session = await start_session(
                alice, stdio_config(everything_stdio["command"], everything_stdio["args"])
            )
            client = await logged_in_client(alice)
            await client.post("/evals/new", {"name": "s"})
            suite = await EvalSuite.objects.aget()
            for form, said in [
                ({"session": "nope", "model": ["gpt"], "runs": "1"}, "Pick a live session of this team"),
                ({"session": str(session.public_id), "model": ["llama"], "runs": "1"}, "Pick one or more"),
                ({"session": str(session.public_id), "model": ["gpt"], "runs": "99"}, "runs"),
            ]:
                response = await client.post(f"/evals/{suite.pk}/run", form)
                assert response.status_code == 400 and said in response.content.decode(), said
            assert not await EvalRun.objects.aexists()

            # A model that cannot be reached fails its test saying so; a session that ends stops the run.
            run = await start(client, suite, session, "gpt", "claude", runs=2)
            response = await client.post(f"/evals/runs/{run.pk}/step")
            assert response.status_code == 200
            first = await EvalResult.objects.filter(run=run).afirst()
            assert first is not None and first.state == "failed"
            assert first.reasons[0].startswith(
                "gpt could not answer: cannot reach gpt at http://127.0.0.1:9/v1"
            )
            assert (await client.post(f"/s/{session.public_id}/disconnect")).status_code < 400
            await wait_until(lambda: not McpSession.objects.get(pk=session.pk).is_live, what="session ended")
            html = (await client.post(f"/evals/runs/{run.pk}/step")).content.decode()
            await run.arefresh_from_db()
            assert run.state == "stopped" and "Stopped: the session is not live any more" in html
            assert not STEP.search(html)
            states = [r.state async for r in EvalResult.objects.filter(run=run)]
            assert states == ["failed"] * 4
