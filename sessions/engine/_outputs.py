"""Tools' output schemas: learned from every tools/list, held against each tools/call result.

A tool that declares an ``outputSchema`` must answer with ``structuredContent`` that conforms to it
(a result with ``isError: true`` is exempt). ``jsonschema`` is imported on the first check that
needs it (about 0.1 s), so sessions whose tools declare no output schema never pay for it.
"""

from __future__ import annotations

from typing import Any

from ._frames import Frame

__all__ = ["MATCHES", "OUTPUT_CODES", "check", "learn"]

MATCHES = "structuredContent matches the tool's outputSchema"
"""The note on a tools/call result whose structuredContent was checked and conforms."""
OUTPUT_CODES = frozenset({"output-schema", "structured-content"})
"""The verdict codes this module gives."""


def learn(result: Any, schemas: dict[str, dict[str, Any]]) -> None:
    """Keep the latest ``outputSchema`` of each tool a tools/list page lists (a page lists some tools)."""
    tools = result.get("tools") if isinstance(result, dict) else None
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            continue
        schema = tool.get("outputSchema")
        if isinstance(schema, dict):
            schemas[tool["name"]] = schema
        else:
            schemas.pop(tool["name"], None)


def check(result: dict[str, Any], schema: dict[str, Any] | None, frame: Frame, at: str) -> None:
    """Hold a tools/call result to its tool's output schema (``None``: the tool declares none)."""
    if schema is None or result.get("isError") is True or result.get("resultType") == "input_required":
        return
    structured = result.get("structuredContent")
    if structured is None:
        frame.flag(
            "structured-content",
            "error",
            f"{at}the tool declares an outputSchema but the result has no structuredContent",
        )
        return
    problem = mismatch(structured, schema)
    if problem is not None:
        frame.flag("output-schema", "error", f"{at}{problem}")
    elif frame.note is None and frame.rpc_kind != "batch":
        frame.note = MATCHES


def mismatch(instance: Any, schema: dict[str, Any]) -> str | None:
    """Why ``instance`` does not conform to ``schema`` (JSON Schema 2020-12 unless it says), or None."""
    import jsonschema
    from jsonschema.exceptions import best_match

    try:
        validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        validator_class.check_schema(schema)
        error = best_match(validator_class(schema).iter_errors(instance))
    except jsonschema.SchemaError as exc:
        return f"the tool's outputSchema is not a valid JSON Schema: {exc.message}"
    except Exception as exc:  # an unresolvable $ref, a schema nested beyond recursion: never crash the reader
        return f"the tool's outputSchema could not be applied: {type(exc).__name__}: {exc}"
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "(root)"
    return f"structuredContent does not match the tool's outputSchema at {where}: {error.message}"
