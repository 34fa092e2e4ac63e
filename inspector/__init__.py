"""MCP Inspector: a browser-based inspector for MCP servers."""
