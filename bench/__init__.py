"""Benchmarks for the MCP client engine (sessions/engine): latency, notification ingestion, memory.

Run everything with ``.venv/bin/python -m bench``; see bench/README.md.
"""
