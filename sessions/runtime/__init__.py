"""The session runtime: the only place that holds live MCP connections, one owner task each.

- ``host``: the ``Runtime`` that takes session starts (``messages.RUNTIME_CHANNEL``) and runs an
  owner per live session; the embedded set-up inside the web process.
- ``owner``: a session's owner, which enters and leaves the engine's context, takes commands on its
  own channel (``McpSession.worker_channel``) and publishes events to its session's group.
- ``recorder`` and ``store``: frames into the database in batches, on the runtime's database thread.
- ``messages``: the typed commands, replies and events; ``client``: how the web sends them.
- ``workers``: hosted engine workers' heartbeats, and sessions lost with a worker.
"""
