"""The Playground: a chat with a configured model over a live session's tools, whose tool calls run
through the session (so they are on its timeline), each after the person's approval where it needs it."""
