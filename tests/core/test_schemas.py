"""The pinned schemas, the export formats, and the error-code set."""

from __future__ import annotations

import json
import uuid
from typing import Any

import jsonschema
import pytest

import toolfs
from toolfs import errors
from toolfs.schemas import DESCRIPTIONS, input_schema

EXPECTED = {
    "read": ({"file_path"}, {"offset", "limit"}),
    "write": ({"file_path", "content"}, set()),
    "edit": ({"file_path", "old_string", "new_string"}, {"replace_all"}),
}


@pytest.mark.parametrize("tool", sorted(EXPECTED))
def test_required_and_optional_fields_are_pinned(tool: str) -> None:
    schema = input_schema(tool)
    required, optional = EXPECTED[tool]
    assert set(schema["required"]) == required
    assert set(schema["properties"]) == required | optional
    assert schema["additionalProperties"] is False
    for name in schema["properties"]:
        assert name == name.lower() and " " not in name and "-" not in name  # snake_case
    jsonschema.Draft202012Validator.check_schema(schema)


def test_field_types_and_defaults() -> None:
    read, edit = input_schema("read"), input_schema("edit")
    assert read["properties"]["offset"] == {
        "type": "integer", "minimum": 1, "description": "First line to return, 1-based. "
        "Default 1."}
    assert read["properties"]["limit"]["type"] == "integer"
    assert read["properties"]["limit"]["minimum"] == 1
    assert edit["properties"]["replace_all"]["type"] == "boolean"
    assert edit["properties"]["replace_all"]["default"] is False
    assert edit["properties"]["old_string"]["minLength"] == 1
    assert toolfs.EditArgs(file_path="a", old_string="x", new_string="y").replace_all is False


def test_empty_old_string_and_identical_strings_rejected() -> None:
    with pytest.raises(ValueError):
        toolfs.EditArgs(file_path="a", old_string="", new_string="y")
    with pytest.raises(ValueError):
        toolfs.EditArgs(file_path="a", old_string="y", new_string="y")
    with pytest.raises(ValueError):
        toolfs.ReadArgs(file_path="a", limit=0)
    with pytest.raises(ValueError):
        toolfs.WriteArgs.model_validate({"file_path": "a", "content": "x", "mode": "w"})


@pytest.mark.parametrize("tool", ["write", "edit"])
def test_descriptions_state_the_observation_policy(tool: str) -> None:
    text = DESCRIPTIONS[tool]
    assert "read or wrote that file earlier" in text
    assert "creating a new file does not" in text
    assert "changed since" in text


def test_read_description_says_windows_count() -> None:
    assert "any window" in DESCRIPTIONS["read"]


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "mcp", "json_schema"])
def test_export_formats_are_valid(fmt: str) -> None:
    defs = toolfs.tool_definitions(format=fmt)  # type: ignore[arg-type]
    json.dumps(defs)
    assert len(defs) == 6
    for d in defs:
        if fmt == "openai":
            assert d["type"] == "function"
            name, schema = d["function"]["name"], d["function"]["parameters"]
            assert d["function"]["description"] == DESCRIPTIONS[name]
        elif fmt == "mcp":
            name, schema = d["name"], d["inputSchema"]
            assert d["annotations"]["readOnlyHint"] is (name not in ("write", "edit"))
        else:
            name, schema = d["name"], d["input_schema"]
        assert schema == input_schema(name)
        jsonschema.Draft202012Validator.check_schema(schema)
    assert [d.get("name") or d["function"]["name"] for d in defs] == [
        "read", "write", "edit", "glob", "grep", "ls"]
    assert toolfs.Workspace("memory://schema-test").tool_definitions(fmt) == defs  # type: ignore[arg-type]
    subset = toolfs.tool_definitions(fmt, tools=["grep", "read"])  # type: ignore[arg-type]
    assert [d.get("name") or d["function"]["name"] for d in subset] == ["grep", "read"]


def test_tool_subset_names_must_be_known() -> None:
    with pytest.raises(toolfs.FsError) as exc:
        toolfs.tool_definitions("mcp", tools=["read", "rm"])
    assert exc.value.code == "invalid_arguments" and "'rm'" in exc.value.message


def test_mcp_annotations() -> None:
    ann = {d["name"]: d["annotations"] for d in toolfs.tool_definitions("mcp")}
    assert ann["read"]["readOnlyHint"] is True
    assert ann["write"]["readOnlyHint"] is False and ann["edit"]["readOnlyHint"] is False
    assert ann["edit"]["idempotentHint"] is False


def test_unknown_format_is_a_clear_error() -> None:
    with pytest.raises(toolfs.FsError) as exc:
        toolfs.tool_definitions("xml")  # type: ignore[arg-type]
    assert exc.value.code == "invalid_arguments"


def test_error_codes_are_pinned() -> None:
    assert {
        "invalid_arguments", "not_found", "missing_bucket", "not_a_file", "not_text",
        "too_large",
        "not_observed", "stale", "no_match", "ambiguous_match", "outside_root", "denied",
        "backend_error", "unsupported"} == toolfs.ERROR_CODES


@pytest.mark.parametrize(("code", "builtin"), [
    ("not_found", FileNotFoundError), ("missing_bucket", FileNotFoundError),
    ("not_a_file", IsADirectoryError),
    ("stale", PermissionError), ("denied", PermissionError),
    ("outside_root", PermissionError), ("invalid_arguments", ValueError),
    ("backend_error", OSError), ("unsupported", NotImplementedError),
])
def test_errors_subclass_matching_builtins(code: errors.ErrorCode, builtin: type) -> None:
    e = errors.fs_error(code, "msg", path="p")
    assert isinstance(e, toolfs.FsError) and isinstance(e, builtin)
    assert e.code == code and e.to_dict()["code"] == code


def test_foreign_errors_are_translated_with_their_cause() -> None:
    from fsspec.spec import AbstractFileSystem

    class Broken(AbstractFileSystem):  # type: ignore[misc]
        def isdir(self, path: str) -> bool:
            return False

        def cat_file(self, path: str, start: object = None, end: object = None,
                     **kw: object) -> bytes:
            raise RuntimeError("disk on fire")

    ws = toolfs.Workspace(Broken(), root="broken")
    with pytest.raises(toolfs.FsError) as exc:
        ws.read("x.txt")
    assert exc.value.code == "backend_error"
    assert isinstance(exc.value.__cause__, RuntimeError)
    out = ws.execute("read", {"file_path": "x.txt"})
    assert out.error is not None and out.error.code == "backend_error"
    assert "disk on fire" in out.text and "Traceback" not in out.text


# -- the providers' own types, and strict mode -------------------------------------------


def _provider_type(fmt: str) -> object:
    if fmt == "openai":
        from openai.types.chat import ChatCompletionFunctionToolParam
        return ChatCompletionFunctionToolParam
    if fmt == "openai_responses":
        from openai.types.responses import FunctionToolParam
        return FunctionToolParam
    from anthropic.types import ToolParam
    return ToolParam


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("fmt", ["openai", "openai_responses", "anthropic"])
def test_definitions_validate_as_the_provider_sdk_types(fmt: str, strict: bool) -> None:
    """Each shape is exactly what the provider's own SDK type accepts (extra keys are
    forbidden, so a misspelt or misplaced field fails)."""
    import typing

    from pydantic import TypeAdapter

    kind: Any = _provider_type(fmt)
    adapter = TypeAdapter(kind)
    for d in toolfs.tool_definitions(fmt, strict=strict):  # type: ignore[arg-type]
        adapter.validate_python(d)
        assert set(d) <= set(typing.get_type_hints(kind)), d.keys()
        if fmt == "openai":
            from openai.types.shared_params import FunctionDefinition
            assert set(d["function"]) <= set(typing.get_type_hints(FunctionDefinition))
        if fmt == "openai_responses":
            assert d["type"] == "function" and d["strict"] is strict
            assert set(d) == {"type", "name", "description", "parameters", "strict"}
        if fmt == "openai":
            assert d["function"].get("strict", False) is strict


@pytest.mark.parametrize("tool", ["read", "write", "edit", "glob", "grep", "ls"])
def test_strict_schemas_are_what_strict_mode_needs(tool: str) -> None:
    """Every property required, the optional ones nullable with the pinned constraints
    kept, no defaults: the Agents SDK's own strict conversion leaves it unchanged."""
    from agents.strict_schema import ensure_strict_json_schema

    from toolfs.schemas import optional_fields, strict_input_schema

    strict, plain = strict_input_schema(tool), input_schema(tool)
    assert ensure_strict_json_schema(json.loads(json.dumps(strict))) == strict
    assert set(strict["required"]) == set(strict["properties"]) == set(plain["properties"])
    assert strict["additionalProperties"] is False
    for key, prop in strict["properties"].items():
        if key in optional_fields(tool):
            original = dict(plain["properties"][key])
            original.pop("default", None)
            original.pop("description", None)
            assert prop["anyOf"] == [original, {"type": "null"}]
            assert "null: the default" in prop["description"]
        else:
            assert prop == plain["properties"][key]
        assert "default" not in json.dumps(prop).replace("the default", "")
    jsonschema.Draft202012Validator.check_schema(strict)


_FULL_CALLS = {
    "read": {"file_path": "a.txt"},
    "write": {"file_path": "b.txt", "content": "new\n"},
    "edit": {"file_path": "a.txt", "old_string": "one", "new_string": "uno"},
    "glob": {"pattern": "*.txt"},
    "grep": {"pattern": "one"},
    "ls": {},
}


@pytest.mark.parametrize("tool", sorted(_FULL_CALLS))
def test_execute_takes_the_nulls_of_a_strict_call_as_not_given(tool: str) -> None:
    """A strict-mode call (every optional argument null) answers exactly as the same
    call with them left out; a null required argument is still refused."""
    from toolfs.schemas import optional_fields, strict_input_schema

    def run(arguments: dict[str, object]) -> str:
        ws = toolfs.Workspace(f"memory://strict-nulls-{uuid.uuid4().hex}")
        ws.write("a.txt", "one\n")
        return ws.execute(tool, arguments).text

    call = _FULL_CALLS[tool]
    nulls = {k: None for k in optional_fields(tool)}
    strict_call = {**call, **nulls}
    jsonschema.validate(strict_call, strict_input_schema(tool))
    plain = run(call)
    assert not plain.startswith("Error"), plain
    assert run(strict_call) == plain
    required = [k for k in input_schema(tool).get("required", ())]
    if required:
        refused = run({**strict_call, required[0]: None})
        assert refused.startswith("Error [invalid_arguments]"), refused
