"""The pinned schemas, the export formats, and the error-code set."""

from __future__ import annotations

import json

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
        "invalid_arguments", "not_found", "not_a_file", "not_text", "too_large",
        "not_observed", "stale", "no_match", "ambiguous_match", "outside_root", "denied",
        "backend_error", "unsupported"} == toolfs.ERROR_CODES


@pytest.mark.parametrize(("code", "builtin"), [
    ("not_found", FileNotFoundError), ("not_a_file", IsADirectoryError),
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
