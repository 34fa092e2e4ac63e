"""In the web app, a tool call whose reply is over INSPECTOR_MAX_MESSAGE_BYTES fails within a second, its
card saying so and naming the setting, instead of running until its time-out."""

from __future__ import annotations

import html
import json
import time
from typing import Any

import pytest
from support.web import live_runtime, logged_in_client, make_user, start_session, stdio_config

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MIB = 1024 * 1024


async def test_a_call_whose_reply_is_over_the_limit_fails_within_a_second_naming_the_setting(
    bad_stdio: Any, settings: Any
) -> None:
    settings.INSPECTOR_MAX_MESSAGE_BYTES = MIB
    async with live_runtime():
        alice = await make_user()
        spec = bad_stdio("big-id-last")  # the id written last, as the TypeScript SDK writes it
        session = await start_session(alice, stdio_config(spec["command"], spec["args"]))
        client = await logged_in_client(alice)
        started = time.monotonic()
        card = await client.post(
            f"/s/{session.public_id}/request",
            {"method": "tools/call", "params": json.dumps({"name": "t", "arguments": {"size": 8 * MIB}})},
        )
        took = time.monotonic() - started
        assert card.status_code == 200
        text = html.unescape(card.content.decode())
        assert (
            f"the reply is larger than {MIB} bytes (1 MiB), the largest message this client takes in; "
            "raise the limit with INSPECTOR_MAX_MESSAGE_BYTES"
        ) in text, text[:3000]
        assert took < 1.0, took
