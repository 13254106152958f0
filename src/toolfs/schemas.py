"""The pinned model-facing schemas of ``read``, ``write``, ``edit``, ``glob``, ``grep``,
``ls`` and ``notebook_edit`` (not in the default tool set: :data:`DEFAULT_TOOLS`).

These pydantic models are a public contract: field names, required/optional sets and
defaults do not change. :func:`tool_definitions` exports them as plain JSON Schema and
in the OpenAI function-tool (Chat Completions and Responses), Anthropic tool and MCP tool
shapes, and in the strict form (:func:`strict_input_schema`) that OpenAI's strict mode
and the Agents SDK send by default.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolfs.errors import fs_error

DEFAULT_LIMIT = 2000
DEFAULT_PDF_PAGES = 20
"""Pages a read of a PDF returns when ``limit`` is not given."""
MAX_IGNORE_PATTERNS = 1024
"""Wildcard rules one ``.gitignore`` may have honoured; literal names and paths, ``*.ext``
and ``name*`` rules are looked up by key and not limited."""

ToolName = Literal["read", "write", "edit", "glob", "grep", "ls", "notebook_edit"]
DEFAULT_TOOLS: tuple[str, ...] = ("read", "write", "edit", "glob", "grep", "ls")
"""The tools offered when none are named (coding agents do not need ``notebook_edit``)."""
ALL_TOOLS: tuple[str, ...] = (*DEFAULT_TOOLS, "notebook_edit")
"""Every tool; name the ones to offer with ``tools=``."""
DefinitionFormat = Literal["openai", "openai_responses", "anthropic", "mcp", "json_schema"]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ReadArgs(_Args):
    """Arguments of ``read``."""

    file_path: str = Field(description="Path of the file to read, relative to the workspace root.")
    offset: int | None = Field(
        default=None, ge=1,
        description="First line to return, 1-based. Default 1.")
    limit: int | None = Field(
        default=None, ge=1,
        description=f"Maximum number of lines to return. Default {DEFAULT_LIMIT}.")


class WriteArgs(_Args):
    """Arguments of ``write``."""

    file_path: str = Field(description="Path of the file to write, relative to the workspace root.")
    content: str = Field(description="The complete new UTF-8 text content of the file.")


class EditArgs(_Args):
    """Arguments of ``edit``."""

    file_path: str = Field(description="Path of the file to edit, relative to the workspace root.")
    old_string: str = Field(
        min_length=1,
        description="The exact literal text to replace; must not be empty.")
    new_string: str = Field(
        description="The literal replacement text; empty deletes the match. "
                    "Must differ from old_string.")
    replace_all: bool = Field(
        default=False,
        description="Replace every occurrence. When false, old_string must match exactly once.")

    @model_validator(mode="after")
    def _differs(self) -> EditArgs:
        if self.old_string == self.new_string:
            raise ValueError("old_string and new_string must differ")
        return self


class GlobArgs(_Args):
    """Arguments of ``glob``."""

    pattern: str = Field(
        min_length=1,
        description="Glob pattern matched against paths relative to `path`: `*` and `?` "
                    "within one path segment, `**` any number of segments, `[abc]`, "
                    "`{a,b}`. Names starting with `.` match only a segment that starts "
                    "with `.`.")
    path: str | None = Field(
        default=None,
        description="Directory to search, relative to the workspace root. Default: the root.")


class GrepArgs(_Args):
    """Arguments of ``grep``."""

    pattern: str = Field(
        min_length=1,
        description="Regular expression (RE2 syntax, as ripgrep) searched line by line.")
    path: str | None = Field(
        default=None,
        description="File or directory to search, relative to the workspace root. "
                    "Default: the root.")
    glob: str | None = Field(
        default=None,
        description="Only search files matching this glob (ripgrep -g: a glob without `/` "
                    "matches the file name at any depth).")
    output_mode: Literal["files_with_matches", "content", "count"] = Field(
        default="files_with_matches",
        description="files_with_matches: paths of matching files; content: matching lines "
                    "as path:line:text; count: matching lines per file.")
    ignore_case: bool = Field(default=False, description="Case-insensitive search.")
    context: int = Field(
        default=0, ge=0, le=100,
        description="Lines of context before and after each match (content mode).")
    head_limit: int | None = Field(
        default=None, ge=1,
        description="Show at most this many entries (files, lines or counts).")


class LsArgs(_Args):
    """Arguments of ``ls``."""

    path: str | None = Field(
        default=None,
        description="Directory to list, relative to the workspace root. Default: the root.")


class NotebookEditArgs(_Args):
    """Arguments of ``notebook_edit``."""

    # Built on first use: most sessions never offer the tool.
    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    file_path: str = Field(
        description="Path of the .ipynb notebook, relative to the workspace root.")
    cell_id: str = Field(
        description="The id of the cell, as read shows it (cell-N for a cell without an "
                    "id). For insert: the cell to insert after; \"\" inserts at the top.")
    new_source: str = Field(
        description="The cell's new source (replace) or the new cell's source (insert); "
                    "ignored for delete.")
    cell_type: Literal["code", "markdown"] | None = Field(
        default=None,
        description="The cell's type: required to insert a markdown cell (default code); "
                    "for replace, changes the cell's type (default: unchanged).")
    edit_mode: Literal["replace", "insert", "delete"] = Field(
        default="replace",
        description="replace the cell's source, insert a new cell after cell_id, or delete "
                    "the cell.")


ARGS_MODELS: dict[str, type[_Args]] = {
    "read": ReadArgs, "write": WriteArgs, "edit": EditArgs,
    "glob": GlobArgs, "grep": GrepArgs, "ls": LsArgs, "notebook_edit": NotebookEditArgs,
}

OBSERVATION_POLICY = (
    "Updating an existing file requires that you read or wrote that file earlier in this "
    "session; creating a new file does not. The update is refused if the file changed since "
    "you last read it: read it again, then retry."
)

DESCRIPTIONS: dict[str, str] = {
    "read": (
        "Read a UTF-8 text file and return its lines numbered like `cat -n`. Use offset and "
        f"limit to page through long files (default: the first {DEFAULT_LIMIT} lines). "
        "An image (PNG, JPEG, GIF, WebP) is shown to you as an image (offset and limit are "
        "ignored); a PDF gives the text of its pages, and offset and limit then count "
        f"pages (default: the first {DEFAULT_PDF_PAGES}). "
        "Reading a file, or any window of it, lets you edit or overwrite it afterwards. "
        "A Jupyter notebook (.ipynb) is shown as cells (id, type, numbered source, "
        "outputs); offset and limit then count cells."
    ),
    "notebook_edit": (
        "Edit one cell of a Jupyter notebook (.ipynb): replace its source, insert a new "
        "cell after it (cell_id \"\" inserts at the top), or delete it. Replacing a code "
        "cell's source clears its outputs and execution count, as Jupyter does when a "
        "cell is edited. Read the notebook first to see the cells and their ids; every "
        "other byte of the file stays as it was. " + OBSERVATION_POLICY
    ),
    "write": (
        "Create a UTF-8 text file, or replace its whole content. " + OBSERVATION_POLICY
    ),
    "edit": (
        "Replace an exact literal string in a UTF-8 text file. old_string must match exactly "
        "once unless replace_all is true. In a notebook (.ipynb) it is matched in the "
        "cells' sources, within one cell. " + OBSERVATION_POLICY
    ),
    "glob": (
        "Find files by name pattern (`**/*.py`, `src/**/test_*.{py,pyi}`). Returns matching "
        "file paths, newest first. Hidden files match only patterns that name them. A "
        "match is not a read: read a file before changing it."
    ),
    "grep": (
        "Search file contents with a regular expression (RE2 syntax, as ripgrep), line by "
        "line, in the UTF-8 text files under path. Skips hidden, binary, too-large and "
        "ignored (.gitignore) files. A hit is not a read: read a file before changing it."
    ),
    "ls": (
        "List the immediate children of a directory: files with their size, directories "
        "marked with a trailing /."
    ),
}

# MCP tool annotations: read is read-only; edit is not idempotent; write replaces
# content entirely, so repeating it leaves the same file.
ANNOTATIONS: dict[str, dict[str, Any]] = {
    "read": {"title": "Read file", "readOnlyHint": True, "destructiveHint": False,
             "idempotentHint": True, "openWorldHint": False},
    "write": {"title": "Write file", "readOnlyHint": False, "destructiveHint": True,
              "idempotentHint": True, "openWorldHint": False},
    "edit": {"title": "Edit file", "readOnlyHint": False, "destructiveHint": True,
             "idempotentHint": False, "openWorldHint": False},
    "glob": {"title": "Find files", "readOnlyHint": True, "destructiveHint": False,
             "idempotentHint": True, "openWorldHint": False},
    "grep": {"title": "Search file contents", "readOnlyHint": True,
             "destructiveHint": False, "idempotentHint": True, "openWorldHint": False},
    "ls": {"title": "List directory", "readOnlyHint": True, "destructiveHint": False,
           "idempotentHint": True, "openWorldHint": False},
    # insert adds a cell each time; delete removes content.
    "notebook_edit": {"title": "Edit notebook cell", "readOnlyHint": False,
                      "destructiveHint": True, "idempotentHint": False,
                      "openWorldHint": False},
}


def input_schema(tool: str) -> dict[str, Any]:
    """The JSON Schema of one tool's arguments (self-contained, no ``$defs``)."""
    schema = ARGS_MODELS[tool].model_json_schema()
    schema.pop("title", None)
    schema.pop("description", None)
    for prop in schema["properties"].values():
        prop.pop("title", None)
        # `int | None` renders as anyOf[int, null]; the model should see a plain integer.
        if "anyOf" in prop:
            variants = [v for v in prop.pop("anyOf") if v.get("type") != "null"]
            prop.update(variants[0])
            prop.pop("default", None)
    schema["additionalProperties"] = False
    return schema


def strict_input_schema(tool: str) -> dict[str, Any]:
    """The input schema of ``tool`` in the form strict mode needs (OpenAI structured
    outputs, the Agents SDK's default): every property required, each optional one
    nullable, no ``default`` keywords, the pinned constraints kept. ``null`` means "not
    given": :meth:`toolfs.Workspace.execute` applies the default."""
    schema = input_schema(tool)
    required = set(schema.get("required", ()))
    for key, prop in list(schema["properties"].items()):
        if key in required:
            continue
        prop.pop("default", None)
        description = prop.pop("description", None)
        # The description stays beside anyOf, where strict mode accepts it, and says what
        # null means (the pinned descriptions name the defaults).
        default = ARGS_MODELS[tool].model_fields[key].default
        shown = "" if default is None else f" ({json.dumps(default)})"
        schema["properties"][key] = {
            "anyOf": [prop, {"type": "null"}],
            "description": f"{description or ''} null: the default{shown}.".lstrip()}
    schema["required"] = list(schema["properties"])
    schema["additionalProperties"] = False
    return schema


def optional_fields(tool: str) -> frozenset[str]:
    """The arguments of ``tool`` a call may leave out (or send as ``null``)."""
    return frozenset(k for k, f in ARGS_MODELS[tool].model_fields.items()
                     if not f.is_required())


def tool_definitions(format: DefinitionFormat = "json_schema",
                     tools: list[str] | tuple[str, ...] | None = None, *,
                     strict: bool = False) -> list[dict[str, Any]]:
    """The tool definitions (the six of :data:`DEFAULT_TOOLS`, or those ``tools`` names
    in that order, e.g. :data:`ALL_TOOLS` with ``notebook_edit``) in the shape ``format``
    expects.

    * ``json_schema``: ``{"name", "description", "input_schema"}`` with plain JSON Schema;
    * ``openai``: ``{"type": "function", "function": {"name", "description", "parameters"}}``
      (Chat Completions);
    * ``openai_responses``: ``{"type": "function", "name", "description", "parameters",
      "strict"}`` (the Responses API's flat shape);
    * ``anthropic``: ``{"name", "description", "input_schema"}``;
    * ``mcp``: ``{"name", "title", "description", "inputSchema", "annotations"}``.

    ``strict=True`` gives :func:`strict_input_schema` schemas (and ``"strict": true`` in
    the OpenAI shapes); ``Workspace.execute`` treats the ``null`` s such a model sends
    for optional arguments as "not given".
    """
    names = list(DEFAULT_TOOLS) if tools is None else list(tools)
    unknown = [n for n in names if n not in ARGS_MODELS]
    if unknown:
        raise fs_error("invalid_arguments", f"unknown tool {unknown[0]!r}; the tools are "
                       + ", ".join(ARGS_MODELS))
    out: list[dict[str, Any]] = []
    for name in names:
        schema = strict_input_schema(name) if strict else input_schema(name)
        desc = DESCRIPTIONS[name]
        if format == "openai":
            function: dict[str, Any] = {"name": name, "description": desc, "parameters": schema}
            if strict:
                function["strict"] = True
            out.append({"type": "function", "function": function})
        elif format == "openai_responses":
            out.append({"type": "function", "name": name, "description": desc,
                        "parameters": schema, "strict": strict})
        elif format in ("anthropic", "json_schema"):
            out.append({"name": name, "description": desc, "input_schema": schema})
        elif format == "mcp":
            out.append({"name": name, "title": ANNOTATIONS[name]["title"], "description": desc,
                        "inputSchema": schema, "annotations": copy.deepcopy(ANNOTATIONS[name])})
        else:
            raise fs_error("invalid_arguments",
                           f"unknown format {format!r}; use openai, openai_responses, "
                           "anthropic, mcp or json_schema")
    return out
