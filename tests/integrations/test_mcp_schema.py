"""The output schemas the MCP server announces mean what the generated ones mean.

:func:`output_schema` rewrites the schema pydantic generates into one that a client
validates with fewer steps (``$ref`` s inlined, nullable ``anyOf`` s as type arrays).
Every real result, and every one-step corruption of it, must be judged alike by both.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from fsspec.implementations.memory import MemoryFileSystem
from jsonschema import Draft202012Validator

import toolfs
from toolfs.integrations.mcp_server import _generated_output_schema, output_schema

_CALLS: dict[str, list[dict[str, Any]]] = {
    "read": [{"file_path": "a.txt"}, {"file_path": "long.txt", "limit": 1},
             {"file_path": "a.txt", "offset": 9}, {"file_path": "missing"}, {"path": 1}],
    "write": [{"file_path": "new.txt", "content": "n\n"}, {"file_path": "a.txt", "content": ""}],
    "edit": [{"file_path": "b.txt", "old_string": "b", "new_string": "B"},
             {"file_path": "b.txt", "old_string": "zz", "new_string": "y"}],
    "glob": [{"pattern": "*.txt"}, {"pattern": "["}],
    "grep": [{"pattern": "a", "output_mode": "content", "context": 1},
             {"pattern": "a", "output_mode": "count"}, {"pattern": "a"}, {"pattern": "("}],
    "ls": [{}, {"path": "nope"}],
}


def _results(tool: str) -> list[Any]:
    fs = MemoryFileSystem()
    ws = toolfs.Workspace(fs, root=f"/schema-{tool}", max_output_chars=2000)
    ws.write("a.txt", "alpha\n")
    ws.write("b.txt", "b\nb\n")
    ws.write("long.txt", "x" * 5000 + "\n")
    ws.read("b.txt")
    return [ws.execute(tool, args).to_dict() for args in _CALLS[tool]]


def _corruptions(value: Any) -> Iterator[Any]:
    """``value`` with one member removed, added, nulled or given another type."""
    if isinstance(value, dict):
        yield {**value, "unexpected": 1}
        for key, member in value.items():
            yield {k: v for k, v in value.items() if k != key}
            for changed in (None, "text", 7, 1.5, True, [], {}, *_corruptions(member)):
                yield {**value, key: changed}
    elif isinstance(value, list) and value:
        for changed in (None, 7, "x", {}):
            yield [changed, *value[1:]]
        for changed in _corruptions(value[0]):
            yield [changed, *value[1:]]


@pytest.mark.parametrize("tool", list(_CALLS))
def test_the_announced_schema_judges_like_the_generated_one(tool: str) -> None:
    announced = Draft202012Validator(output_schema(tool))
    generated = Draft202012Validator(_generated_output_schema(tool))
    checked = 0
    for result in _results(tool):
        assert generated.is_valid(result) and announced.is_valid(result), result
        for corrupt in _corruptions(copy.deepcopy(result)):
            assert announced.is_valid(corrupt) == generated.is_valid(corrupt), corrupt
            checked += 1
    assert checked > 50


def test_the_announced_schema_has_no_references() -> None:
    for tool in _CALLS:
        text = str(output_schema(tool))
        assert "$ref" not in text and "$defs" not in text and "'title'" not in text
