"""Evals: saved prompts with expectations, run many times against several models over an MCP server's
tools. Pure Python, no Django, so the CLI runs them as the web does (docs/playground.md, "Evals")."""

from sessions.evals.expect import judge, matches
from sessions.evals.report import below, junit, pass_rates, summary, transcript_text
from sessions.evals.runner import CaseResult, ToolOutcome, run_case
from sessions.evals.suite import Expect, Suite, SuiteProblem, TestCase, parse_suite

__all__ = [
    "CaseResult",
    "Expect",
    "Suite",
    "SuiteProblem",
    "TestCase",
    "ToolOutcome",
    "below",
    "judge",
    "junit",
    "matches",
    "parse_suite",
    "pass_rates",
    "run_case",
    "summary",
    "transcript_text",
]
