"""MCP sessions: live connections to MCP servers and their timelines."""
