"""Websocket consumers that belong to the project rather than to an app."""

from __future__ import annotations

from channels.generic.websocket import AsyncJsonWebsocketConsumer


class HealthConsumer(AsyncJsonWebsocketConsumer):
    """Accept and report health, proving the websocket stack end to end."""

    async def connect(self) -> None:
        await self.accept()
        await self.send_json({"ok": True})
