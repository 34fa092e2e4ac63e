"""A team's model answers through the scripted model server (tests/servers/scripted_llm.py) with its key
decrypted for the request only; in the hosted mode every request is held to the egress rules, so a
model whose host the rules stop allowing is refused at connect time, with a sentence, not its key."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from support.paths import SERVERS
from support.processes import free_port, start_http_server

from sessions.playground import turns
from sessions.providers import ChatRequest, Message, ProviderError, complete
from sessions.teams.models import Team, TeamModel

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

KEY = "sk-team-live-key-0123456789"


@database_sync_to_async
def _team_model(url: str) -> int:
    team = Team.objects.create(name="team A")
    TeamModel.objects.create(team=team, name="ours", url=url, model="gpt-scripted", api_key=KEY)
    return team.pk


async def test_a_team_model_answers_with_its_key_and_is_refused_once_the_egress_rules_change(
    tmp_path: Path, settings: Any
) -> None:
    settings.INSPECTOR_HOSTED = True
    settings.INSPECTOR_EGRESS_ALLOW = ["127.0.0.1"]
    script, log = tmp_path / "script.json", tmp_path / "requests.jsonl"
    script.write_text(
        json.dumps({"key": KEY, "steps": [{"text": "Hello from the team's model.", "repeat": True}]})
    )
    port = free_port()
    with start_http_server(
        [sys.executable, str(SERVERS / "scripted_llm.py"), str(port), str(script), str(log)], port
    ):
        team_id = await _team_model(f"http://127.0.0.1:{port}/v1")
        config = await database_sync_to_async(turns.model_named)("ours", team_id)
        assert config is not None and config.connect is not None
        request = ChatRequest("", [Message("user", "hi")], [])
        reply = await complete(config, request)
        assert reply.text == "Hello from the team's model."
        assert len(log.read_text().splitlines()) == 1
        # The installation's allow-list no longer has the loopback address: the next request is refused
        # before any packet goes out.
        settings.INSPECTOR_EGRESS_ALLOW = []
        config = await database_sync_to_async(turns.model_named)("ours", team_id)
        assert config is not None
        with pytest.raises(ProviderError) as refused:
            await complete(config, request)
        assert "cannot reach" in str(refused.value) and KEY not in str(refused.value)
        assert len(log.read_text().splitlines()) == 1
        # Another team does not have the model.
        other = await Team.objects.acreate(name="team B")
        assert await database_sync_to_async(turns.model_named)("ours", other.pk) is None
