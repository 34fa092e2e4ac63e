"""A live session that replays another's conversation (the web's "Replay against…"): the recorded
client's initialize, its requests and notifications in order, the server's requests answered as
recorded; ``sessions.replay`` sends them, as it does for ``mcp-inspector replay``. The owner connects
and records as for any session; the comparison is the read side's, from both sessions' frames."""

from __future__ import annotations

from sessions.engine import HANDSHAKE_VERSIONS, MODERN_VERSIONS, ClientOptions, ClientSession
from sessions.replay import (
    Asking,
    Conversation,
    RecordingProblem,
    answering,
    capabilities,
    client_info,
    converse,
)
from sessions.runtime import store

__all__ = ["CannotReplay", "SessionReplay"]


class CannotReplay(Exception):
    """The recording cannot be replayed (no initialize, a revision this client does not offer)."""


class SessionReplay:
    """The conversation a session replays, how it opens (the recorded client's initialize), and how it
    is sent once the session is ready."""

    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation
        self.asking = Asking()

    @classmethod
    async def load(cls, pk: int) -> SessionReplay | None:
        """The replay the session ``pk`` is to run, or None if it is not one (or ran it already)."""
        frames = await store.replay_source(pk)
        if frames is None:
            return None
        try:
            conversation = Conversation.of(frames)
        except RecordingProblem as exc:
            raise CannotReplay(str(exc)) from None
        version = conversation.initialize.get("protocolVersion")
        if version not in HANDSHAKE_VERSIONS and version not in MODERN_VERSIONS:
            raise CannotReplay(f"the recording's protocol revision {version!r} is not one this client offers")
        return cls(conversation)

    def adjust(self, options: ClientOptions) -> None:
        """Open as the recorded client did: its revision, capabilities and clientInfo (a stateless revision
        opens with server/discover: the handshake mode at that revision is stateless); and send only its
        own requests (no tools/list of the engine's before a call, no validation of the arguments)."""
        version = str(self.conversation.initialize.get("protocolVersion"))
        options.protocol_version = version
        options.mode = "handshake"
        options.capabilities = capabilities(self.conversation.initialize.get("capabilities"), version)
        options.client_info = client_info(self.conversation)
        options.validate = False
        options.learn_tools = False

    def install(self, client: ClientSession) -> None:
        """Answer the server's requests as the recording did (past that: the session's roots, or -32601)."""
        client.handlers.update(answering(self.conversation, self.asking, {}, client.roots))

    async def run(self, client: ClientSession) -> str:
        """Send the conversation; what the session's note says when it ends."""
        outcomes = await converse(client, self.conversation, self.asking)
        answered = sum(1 for outcome, _ in outcomes.values() if outcome.answer is not None)
        return f"replay finished: {answered} of {len(self.conversation.requests)} requests answered"
