"""The commands of Anthropic's text editor and memory tool, run against a workspace.

One engine (:class:`_Engine`) serves both tools of :mod:`toolfs.integrations.anthropic`
(:class:`~toolfs.integrations._anthropic_editor.TextEditor` and
:class:`~toolfs.integrations._anthropic_memory.MemoryTool`): it checks the model's input,
runs ``view``, ``create``, ``str_replace``, ``insert``, ``delete`` and ``rename`` through
the workspace's policy, and answers in the reference implementations' own words. It is
one concept that is longer than most modules: the six commands share the input checks,
the path mapping, the refusals and the wording, and cutting them apart would only spread
those over several files.

Result and error texts are the reference implementations' own strings, the ones the
models were trained on, each cited where it is used:

* text editor: Anthropic's reference editor, ``EditTool20250728`` in
  ``computer-use-demo/computer_use_demo/tools/edit.py`` (anthropic-quickstarts), cited
  below as *[editor]*;
* memory tool: the memory tool documentation's "Tool commands" section (*[memory docs]*)
  and the SDK's ``BetaLocalFilesystemMemoryTool``
  (``anthropic/lib/tools/_beta_builtin_memory_tool.py``, *[memory SDK]*); where the two
  differ, the docs win (they describe what the API's own tool description promises).

An error is that wording plus toolfs's code and what to do next (``Error [stale]: ...``),
the ``Error: ...`` shape the docs use. ``view`` is an observation; ``str_replace`` and ``insert``
need one and are ``stale`` after an outside change, exactly as ``edit``; each change is
committed through the handle its bytes were computed from.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import pydantic
from anthropic.lib.tools import ToolError

from toolfs import tools
from toolfs.errors import ADVICE, FsError, fs_error
from toolfs.policy.filesystem import Found, PolicyFileSystem
from toolfs.policy.paths import Target
from toolfs.render import (
    MAX_LINE_CHARS,
    ToolOutput,
    error_diff,
    number_line,
)
from toolfs.results import (
    EditResult,
    ListEntry,
    ListResult,
    ReadResult,
    ToolResult,
)
from toolfs.schemas import EditArgs, WriteArgs
from toolfs.text import decode, lines_around, normalize_newlines, split_lines
from toolfs.tools import MAX_OFFSET
from toolfs.versions import FileVersion
from toolfs.workspace import AsyncWorkspace, Workspace

T = TypeVar("T")

TEXT_EDITOR_TYPE = "text_editor_20250728"
TEXT_EDITOR_NAME = "str_replace_based_edit_tool"
MEMORY_ROOT = "/memories"

SNIPPET_CONTEXT = 4
"""Lines shown before and after a change (the reference editor's ``SNIPPET_LINES``)."""
MAX_SHOWN_PATH = 200
"""Characters of a model-given path echoed back in a message."""
MAX_SHOWN_OLD = 200
"""Characters of ``old_str`` echoed back in a message."""
MAX_DIRECTORY_ENTRIES = 1_000
"""Entries a directory ``view`` lists (two levels, hidden ones excluded)."""
MAX_SIZED_FILES = 10_000
"""Files a memory directory ``view`` adds up for its directories' sizes (one listing);
past that the directories' sizes are shown as ``-``."""
MAX_TREE_FILES = 1_000
"""Files one directory ``delete`` or ``rename`` moves or removes."""

# [editor] str_replace and insert: the sentence after the snippet.
_SNIPPET_NOTE = ("Review the changes and make sure they are as expected. Edit the file again "
                 "if necessary.")
_INSERT_NOTE = ("Review the changes and make sure they are as expected (correct indentation, no "
                "duplicate lines, etc). Edit the file again if necessary.")

# What the model should do next, in the words of these tools (toolfs's advice names
# read/edit/old_string, which the text editor and memory tool do not have).
_ADVICE: dict[str, str] = {
    "not_found": "Check the path (view a directory to list it); use the create command "
                 "for a new file.",
    "not_a_file": "Give the path of a file; view lists a directory.",
    "too_large": "View the file in windows with view_range; it cannot be rewritten whole.",
    "not_observed": "View the file first, then retry the command.",
    "stale": "The file changed since you last viewed it. View it again, then redo the "
             "change.",
    "no_match": "View the file and copy old_str exactly, including whitespace and "
                "indentation.",
    "ambiguous_match": "Add surrounding lines to old_str so that it matches exactly once.",
    "outside_root": "Use a path inside the workspace.",
}
_MEMORY_ADVICE: dict[str, str] = {
    **_ADVICE,
    "outside_root": "Use a path under /memories.",
    "not_found": "Check the path (view /memories to list it); use the create command for a "
                 "new file.",
}


def _shown(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


class _Refusal(Exception):
    """A command refused with the reference wording; ``error`` carries toolfs's code."""

    def __init__(self, message: str, error: FsError) -> None:
        super().__init__(message)
        self.message = message
        self.error = error


def _refuse(code: Any, message: str, *, path: str | None = None,
            cause: FsError | None = None) -> _Refusal:
    """A refusal with the reference ``message`` and toolfs's ``code``. With ``cause``,
    toolfs's own error (its message and details) travels as the output's ``error``,
    re-coded when the command means something else by it (a create-only write refused
    because the destination of a rename exists)."""
    if cause is None:
        return _Refusal(message, fs_error(code, message, path=path))
    if cause.code == code:
        return _Refusal(message, cause)
    err = fs_error(code, cause.message, path=cause.path, details=cause.details)
    err.__cause__ = cause
    return _Refusal(message, err)


@dataclass(frozen=True)
class _Done:
    text: str
    value: ToolResult | None


def _line_number(value: object) -> bool:
    """An ``int`` (not a ``bool``) small enough to be shown back: line numbers are
    echoed in answers, and Python will not print an int of more than 4,300 digits."""
    return isinstance(value, int) and not isinstance(value, bool) and \
        -MAX_OFFSET <= value <= MAX_OFFSET


def _invalid(message: str) -> _Refusal:
    return _refuse("invalid_arguments", message)


# -- input checks ----------------------------------------------------------------------

_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # command: (required, optional); insert takes new_str or insert_text (checked apart)
    "view": (("path",), ("view_range",)),
    "create": (("path", "file_text"), ()),
    "str_replace": (("path", "old_str"), ("new_str",)),
    "insert": (("path", "insert_line"), ("new_str", "insert_text")),
    "delete": (("path",), ()),
    "rename": (("old_path", "new_path"), ()),
}
_STRINGS = {"path", "file_text", "old_str", "new_str", "insert_text", "old_path", "new_path"}


def _checked(arguments: object, commands: tuple[str, ...], tool: str) -> dict[str, Any]:
    """The model's input, checked: a known command, its fields and their types."""
    if not isinstance(arguments, Mapping):
        raise _invalid("the input must be a JSON object")
    given = dict(arguments)
    command = given.get("command")
    allowed = f"The allowed commands for the {tool} tool are: {', '.join(commands)}"
    if command is None:
        raise _invalid(f"Parameter `command` is required. {allowed}")
    if not isinstance(command, str) or command not in commands:
        # [editor]: "Unrecognized command {command}. The allowed commands for the
        # {self.name} tool are: ..."
        raise _invalid(f"Unrecognized command {_shown(str(command), 50)}. {allowed}")
    required, optional = _FIELDS[command]
    for name in given:
        if name != "command" and name not in required + optional:
            raise _invalid(f"unknown parameter {_shown(str(name), 50)!r} for `{command}` "
                           f"(its parameters are {', '.join(required + optional)})")
    for name in required:
        if name not in given:
            raise _invalid(f"Parameter `{name}` is required for command: {command}")
    for name, value in given.items():
        if name in _STRINGS and not isinstance(value, str):
            raise _invalid(f"Parameter `{name}` must be a string")
        if name in _STRINGS and not _encodable(value):
            # JSON can carry a lone surrogate; no file can hold one. Refused here, as
            # the model's mistake, before it can surface as a storage failure.
            raise _invalid(f"Parameter `{name}` is not valid Unicode (a lone surrogate)")
    if command == "insert":
        if isinstance(given["insert_line"], bool) or not isinstance(given["insert_line"], int):
            raise _invalid("Parameter `insert_line` must be an integer")
        if not _line_number(given["insert_line"]):
            raise _invalid(f"Parameter `insert_line` must be from {-MAX_OFFSET} to "
                           f"{MAX_OFFSET}")
        texts = [given[k] for k in ("new_str", "insert_text") if k in given]
        if not texts:
            raise _invalid("Parameter `new_str` (or `insert_text`) is required for command: "
                           "insert")
        if len(texts) == 2 and texts[0] != texts[1]:
            raise _invalid("give `new_str` or `insert_text`, not two different texts")
        given["text"] = texts[0]
    if command == "view":
        view_range = given.get("view_range")
        if view_range is not None and not (
                isinstance(view_range, list | tuple) and len(view_range) == 2
                and all(isinstance(n, int) and not isinstance(n, bool) for n in view_range)):
            raise _invalid("Invalid `view_range`. It should be a list of two integers.")
        if view_range is not None and not all(_line_number(n) for n in view_range):
            raise _invalid(f"Invalid `view_range`: its elements must be from {-MAX_OFFSET} "
                           f"to {MAX_OFFSET}.")
    return given


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_text(text: str, path: str) -> None:
    """Refuse text that could not be stored and read back (NUL, lone surrogates)."""
    if "\x00" in text:
        raise fs_error("invalid_arguments", "the text contains a NUL character; only text "
                       "can be written", path=path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise fs_error("invalid_arguments", "the text is not valid Unicode (a lone "
                       "surrogate)", path=path) from exc


def _format_size(size: int) -> str:
    """``4.0K``-style sizes, as the SDK's reference backend shows them."""
    if size == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    i = min((size.bit_length() - 1) // 10, len(units) - 1)
    value = size / (1024 ** i)
    return f"{int(value)}{units[i]}" if value == int(value) else f"{value:.1f}{units[i]}"


# -- the engine: the commands over one workspace ----------------------------------------


class _Engine:
    """The commands of the text editor and the memory tool over one workspace.

    ``memory`` selects the memory tool's paths (``/memories/...``) and wording. Every
    method returns a :class:`_Done` or raises :class:`_Refusal` or
    :class:`~toolfs.errors.FsError`; :meth:`run` turns those into a ToolOutput.
    """

    def __init__(self, ws: Workspace | AsyncWorkspace, *, memory: bool,
                 max_characters: int | None = None) -> None:
        self.ws = ws.sync if isinstance(ws, AsyncWorkspace) else ws
        # An AsyncWorkspace's commands run on its own (bounded) worker threads.
        self.async_ws = ws if isinstance(ws, AsyncWorkspace) else None
        if not isinstance(self.ws, Workspace):
            raise TypeError("expected a toolfs.Workspace or toolfs.AsyncWorkspace")
        self.memory = memory
        self.tool = "memory" if memory else TEXT_EDITOR_NAME
        self.max_characters = max_characters
        self.advice = _MEMORY_ADVICE if memory else _ADVICE

    @property
    def fs(self) -> PolicyFileSystem:
        return self.ws.fs

    @property
    def budget(self) -> int:
        limit = self.ws.max_output_chars
        return limit if self.max_characters is None else min(limit, self.max_characters)

    # -- the entry point -----------------------------------------------------------

    def run(self, arguments: object, commands: tuple[str, ...]) -> ToolOutput:
        """Execute one command; never raises."""
        try:
            given = _checked(arguments, commands, self.tool)
            done = getattr(self, "_" + given["command"])(given)
        except _Refusal as refusal:
            # Credentials never reach the model, whichever wording carries the error.
            message = self.ws.redacted(refusal.message)
            return self._error_output(message, self.ws.masked(refusal.error))
        except FsError as known:
            masked = self.ws.masked(known)
            return self._error_output(masked.message, masked)
        except pydantic.ValidationError as exc:
            # toolfs's argument models refused a value the checks above let through:
            # the model's input, not the storage, is at fault.
            bad = fs_error("invalid_arguments", "; ".join(
                str(e.get("msg", "invalid value")) for e in exc.errors()[:3]))
            bad.__cause__ = exc
            return self._error_output(bad.message, bad)
        except Exception as exc:  # the model gets a result, never a traceback
            failure = fs_error("backend_error", f"{type(exc).__name__}: {exc}")
            failure.__cause__ = exc
            masked = self.ws.masked(failure)
            return self._error_output(masked.message, masked)
        return ToolOutput(text=done.text, value=done.value, error=None,
                          max_chars=self.ws.max_output_chars)

    async def arun(self, arguments: object, commands: tuple[str, ...]) -> ToolOutput:
        """:meth:`run` on a worker thread: the AsyncWorkspace's, else the loop's."""
        if self.async_ws is not None:
            return await self.async_ws.call(self.run, arguments, commands)
        return await asyncio.to_thread(self.run, arguments, commands)

    def _error_output(self, message: str, err: FsError) -> ToolOutput:
        # These tools' own words, unless the error carries advice for its situation
        # (a change too large, a write too large) rather than its code's.
        specific = err.advice != ADVICE.get(err.code)
        advice = err.advice if specific else self.advice.get(err.code, err.advice)
        if len(message) > 4000:
            message = message[:4000] + "..."
        head = f"Error [{err.code}]: {message}\n"
        diff = error_diff(err, self.ws.max_output_chars - len(head) - len(advice) - 1)
        return ToolOutput(text=f"{head}{diff}{advice}", value=None, error=err,
                          max_chars=self.ws.max_output_chars)

    # -- paths ---------------------------------------------------------------------

    def path(self, given: str) -> str:
        """The workspace path of a model-given path (memory: below ``/memories``)."""
        if not self.memory:
            return given
        if given != MEMORY_ROOT and not given.startswith(MEMORY_ROOT + "/"):
            # [memory SDK] _validate_path (stricter: "/memoriesX" is refused too)
            raise _refuse("outside_root",
                          f"Path must start with /memories, got: {_shown(given, MAX_SHOWN_PATH)}")
        rel = given[len(MEMORY_ROOT):].lstrip("/")
        if rel and any(part == ".." for part in rel.split("/")):
            raise self._escape(given)
        return rel or "."

    def _source_path(self, given: str) -> tuple[str, bool]:
        """:meth:`path` for a delete or a rename, which take a file or a directory:
        ``dir/`` names the directory ``dir`` (the second value: written as one)."""
        rel = self.path(given)
        if rel != "." and rel.endswith("/"):
            return rel.rstrip("/") or ".", True
        return rel, False

    def _escape(self, given: str) -> _Refusal:
        # [memory SDK] _validate_path
        return _refuse("outside_root",
                       f"Path {_shown(given, MAX_SHOWN_PATH)} would escape /memories directory")

    def _translate(self, err: FsError, shown: str, given: str) -> _Refusal | FsError:
        """toolfs's error in the reference wording where one exists."""
        if err.code == "not_found" and not err.details.get("bucket"):
            # [editor] validate_path and [memory docs] view, then toolfs's near misses
            extra = ""
            near = err.details.get("did_you_mean")
            if near:
                extra = f" Did you mean: {', '.join(self._shown_paths(near))}?"
            return _refuse("not_found", f"The path {shown} does not exist. Please provide a "
                           f"valid path.{extra}", cause=err)
        if err.code == "outside_root" and self.memory:
            return _Refusal(self._escape(given).message, err)
        if err.code == "not_a_file" and "file" not in err.details:
            # The path names a directory (not a path through a file).
            return _Refusal(self._is_a_directory(shown), err)
        if err.code == "not_a_file" and isinstance(err.details.get("file"), str):
            # A path through a file ("notes.md/x"): name the file as the model knows it.
            return _Refusal(f"{self._model_path(err.details['file'])} is a file, not a "
                            f"directory, so {shown} cannot be below it", err)
        if err.code == "not_observed":
            return _Refusal(f"{shown} has not been viewed in this session; view it before "
                            "changing it", err)
        message = err.message
        if err.code == "stale":
            message = message.replace("since you read it", "since you last viewed it")
        if self.memory and err.path and message.startswith(err.path + " "):
            # toolfs names files relative to the root; the model knows /memories/...
            message = self._model_path(err.path) + message[len(err.path):]
        return err if message == err.message else _Refusal(message, err)

    def _is_a_directory(self, shown: str) -> str:
        """A command other than view on a directory."""
        if self.memory:
            return f"The path {shown} is not a file."  # [memory SDK] str_replace, insert
        # [editor] validate_path
        return (f"The path {shown} is a directory and only the `view` command can be used "
                "on directories")

    def _shown_paths(self, paths: list[str]) -> list[str]:
        if not self.memory:
            return list(paths)
        return [f"{MEMORY_ROOT}/{p}" for p in paths]

    def _model_path(self, display: str) -> str:
        """How a workspace display path is shown to the model."""
        if not self.memory:
            return display
        return MEMORY_ROOT if display in ("", ".") else f"{MEMORY_ROOT}/{display}"

    def _call(self, fn: Callable[[], T], shown: str, given: str) -> T:
        try:
            return fn()
        except FsError as err:
            translated = self._translate(err, shown, given)
            if translated is err:
                raise
            raise translated from err

    # -- view ----------------------------------------------------------------------

    def _view(self, given: dict[str, Any]) -> _Done:
        raw = given["path"]
        shown = _shown(raw, MAX_SHOWN_PATH)
        rel = self.path(raw)
        view_range = given.get("view_range")
        if rel == "." or (not self.memory and raw in ("", ".")):
            return self._view_dir(".", shown, raw, view_range)
        if rel.endswith("/"):
            # "d/" is the directory d; "/" alone is an absolute path like any other
            # (the workspace root only when the root is "/"), never the root by default.
            return self._view_dir(rel.rstrip("/") or rel, shown, raw, view_range)
        start, end = 1, -1
        if view_range is not None:
            start, end = int(view_range[0]), int(view_range[1])
            if start < 1:
                raise _invalid(f"Invalid `view_range`: {list(view_range)}. Its first element "
                               f"`{start}` should be at least 1")
            if end != -1 and end < start:
                # [editor]: "Invalid `view_range`: {view_range}. Its second element
                # `{final_line}` should be larger or equal than its first `{init_line}`"
                raise _invalid(f"Invalid `view_range`: {list(view_range)}. Its second element "
                               f"`{end}` should be larger or equal than its first `{start}`")
            # An end past the last line shows up to the last line (as the [memory SDK]
            # does; the [editor] refuses it, which only costs the model a round trip).
        # No more lines than the budget could show (each numbered line takes at least 8
        # characters): a streamed read of a huge file stays bounded.
        room = self.budget // 8 + 1
        limit = room if end == -1 else min(end - start + 1, room)
        try:
            # The editor's and the memory tool's results are text: an image or a PDF
            # stays not_text there (beta_tools' read shows them).
            result = tools.read_text(self.fs, rel, start, limit)
        except FsError as err:
            if err.code == "not_a_file" and "file" not in err.details:
                return self._view_dir(rel, shown, raw, view_range)
            # Object stores have no directory objects: a prefix with files below it is
            # a directory all the same.
            if err.code == "not_found" and not err.details.get("bucket") and \
                    self._exists(rel):
                return self._view_dir(rel, shown, raw, view_range)
            raise self._translate(err, shown, raw) from err
        return _Done(self._render_view(result, shown, start, end), result)

    def _render_view(self, r: ReadResult, shown: str, start: int, end: int) -> str:
        if r.line_count == 0 and r.start_line > 1:
            total = r.total_lines
            if total is not None:
                # [editor]: "Invalid `view_range`: {view_range}. Its first element
                # `{init_line}` should be within the range of lines of the file: {[1, n]}"
                raise _refuse("invalid_arguments",
                              f"Invalid `view_range`: [{start}, {end}]. Its first element "
                              f"`{start}` should be within the range of lines of the file: "
                              f"[1, {total}]")
            raise _invalid(f"Invalid `view_range`: [{start}, {end}]: the file has fewer "
                           f"than {start} lines")
        if self.memory:
            # [memory docs] view, files: "Here's the content of {path} with line numbers:"
            header = f"Here's the content of {shown} with line numbers:"
        else:
            # [editor] _make_output: "Here's the result of running `cat -n` on {path}:"
            header = f"Here's the result of running `cat -n` on {shown}:"
        if not r.lines:
            return f"{header}\n(The file is empty.)"
        room = self.budget - len(header) - 200  # the footer's room
        rows: list[str] = []
        used = 0
        for i, line in enumerate(r.lines):
            n = r.start_line + i
            cut = r.cut_lines.get(n) if r.cut_lines else None
            row = number_line(n, line, MAX_LINE_CHARS)
            if cut is not None and len(line) <= MAX_LINE_CHARS:
                row += f"... [line truncated: {len(line)} of {cut.chars} characters shown]"
            if used + len(row) + 1 > room:
                if not rows:
                    # Not even the first line fits: show its start rather than nothing,
                    # which would send the model back for the same view forever.
                    full = cut.chars if cut is not None else len(line)
                    keep = max(1, room - 80)
                    rows.append(number_line(n, "", 0) + f"{line[:keep]}... [line truncated: "
                                f"{min(keep, len(line))} of {full} characters shown]")
                break
            rows.append(row)
            used += len(row) + 1
        last = r.start_line + len(rows) - 1
        footer = ""
        more = r.total_lines is None or last < r.total_lines
        if len(rows) < len(r.lines) or (end == -1 and more):
            of = "" if r.total_lines is None else f" of {r.total_lines}"
            footer = (f"\n(Output truncated: showing lines {r.start_line}-{last}{of}. "
                      f"Use view_range [{last + 1}, -1] to see more.)")
        return header + "\n" + "\n".join(rows) + footer

    def _hidden(self, name: str) -> bool:
        """Left out of a directory view: hidden items ([editor]: ``find -not -path
        '*/\\.*'``); the memory tool also leaves out ``node_modules`` ([memory docs])."""
        return name.startswith(".") or (self.memory and name == "node_modules")

    def _view_dir(self, rel: str, shown: str, raw: str,
                  view_range: Any) -> _Done:
        if view_range is not None:
            # [editor] view
            raise _invalid("The `view_range` parameter is not allowed when `path` points to "
                           "a directory.")
        top = None if rel == "." else rel
        tree: list[tuple[Found, str]] = []  # (entry, path relative to the viewed one)
        truncated = False
        level1 = self._call(lambda: list(self.fs.list_dir(top)), shown, raw)
        for found in sorted(level1, key=lambda f: f.rel):
            if len(tree) >= MAX_DIRECTORY_ENTRIES:
                truncated = True
                break
            if self._hidden(found.rel):
                continue
            tree.append((found, found.rel))
            if found.kind != "dir":
                continue
            try:
                level2 = sorted(self.fs.list_dir(found.path), key=lambda f: f.rel)
            except FsError:
                continue  # vanished or unreadable since the listing: shown as empty
            for inner in level2:
                if len(tree) >= MAX_DIRECTORY_ENTRIES:
                    truncated = True
                    break
                if not self._hidden(inner.rel):
                    tree.append((inner, f"{found.rel}/{inner.rel}"))
        if self.memory:
            lines = self._memory_listing(top, shown, tree)
        else:
            lines = self._editor_listing(shown, tree)
        text, used, kept = "", 0, 0
        for line in lines:
            if used + len(line) + 1 > self.budget - 200:
                truncated = True
                break
            used += len(line) + 1
            kept += 1
        text = "\n".join(lines[:kept])
        if truncated:
            text += f"\n(Listing truncated: {max(kept - 2, 0)} entries shown.)"
        entries = [ListEntry(name=path + "/", kind="dir", size=None) if f.kind == "dir"
                   else ListEntry(name=path, kind="file", size=f.size) for f, path in tree]
        return _Done(text, ListResult(path=rel, entries=entries, truncated=truncated))

    @staticmethod
    def _editor_listing(shown: str, tree: list[tuple[Found, str]]) -> list[str]:
        """[editor]: "Here's the files and directories up to 2 levels deep in {path},
        excluding hidden items:" then the output of ``find {path} -maxdepth 2 -not -path
        '*/\\.*'``: the path itself, then each entry as ``{path}/{name}``."""
        start = shown or "."
        base = "" if start == "/" else start.rstrip("/")
        header = (f"Here's the files and directories up to 2 levels deep in {start}, "
                  "excluding hidden items:")
        return [header, start, *(f"{base}/{path}" for _, path in tree)]

    def _memory_listing(self, top: str | None, shown: str,
                        tree: list[tuple[Found, str]]) -> list[str]:
        """[memory docs] view, directories: "Here're the files and directories up to 2
        levels deep in {path}, excluding hidden items and node_modules:" then one
        ``{size}\\t{path}`` row for the directory itself and for each entry (sizes as
        ``5.5K``; the [memory SDK] marks directories with a trailing ``/``). A directory's
        size is the total of the files below it, from one listing of at most
        MAX_SIZED_FILES files."""
        totals: dict[str, int] = {}
        root_total = 0
        complete = True
        for n, f in enumerate(self.fs.list_files(top)):
            if n >= MAX_SIZED_FILES:
                complete = False  # too many to add up in one view
                break
            size = f.size or 0
            root_total += size
            parts = f.rel.split("/")[:-1]
            for depth in range(1, min(len(parts), 2) + 1):
                key = "/".join(parts[:depth])
                totals[key] = totals.get(key, 0) + size

        def dir_size(path: str | None) -> str:
            if not complete:
                return "-"
            return _format_size(root_total if path is None else totals.get(path, 0))

        base = shown.rstrip("/")
        header = (f"Here're the files and directories up to 2 levels deep in {shown}, "
                  "excluding hidden items and node_modules:")
        rows = [header, f"{dir_size(None)}\t{shown}"]
        for found, path in tree:
            if found.kind == "dir":
                rows.append(f"{dir_size(path)}\t{base}/{path}/")
            else:
                rows.append(f"{_format_size(found.size or 0)}\t{base}/{path}")
        return rows

    # -- create --------------------------------------------------------------------

    def _create(self, given: dict[str, Any]) -> _Done:
        raw, text = given["path"], given["file_text"]
        shown = _shown(raw, MAX_SHOWN_PATH)
        rel = self._file_path(raw)
        try:
            result = tools.write(self.fs, WriteArgs(file_path=rel, content=text))
        except FsError as err:
            if err.code == "not_observed":
                # Replacing a file needs a view of it first, as toolfs's write does; the
                # refusal is the reference one (which never overwrites).
                if self.memory:  # [memory docs] create: "Error: File {path} already exists"
                    message = f"File {shown} already exists"
                else:  # [editor] validate_path
                    message = (f"File already exists at: {shown}. Cannot overwrite files "
                               "using command `create`.")
                raise _refuse("not_observed", message, cause=err) from err
            raise self._translate(err, shown, raw) from err
        if result.action == "created":
            # [editor] and [memory docs] create: "File created successfully at: {path}"
            return _Done(f"File created successfully at: {shown}", result)
        return _Done(f"File overwritten successfully at: {shown}", result)

    def _file_path(self, raw: str) -> str:
        rel = self.path(raw)
        if rel == ".":
            raise _refuse("not_a_file", self._is_a_directory(_shown(raw, MAX_SHOWN_PATH)))
        return rel

    # -- str_replace ---------------------------------------------------------------

    def _str_replace(self, given: dict[str, Any]) -> _Done:
        raw, old, new = given["path"], given["old_str"], given.get("new_str", "")
        shown = _shown(raw, MAX_SHOWN_PATH)
        rel = self._file_path(raw)
        if not old:
            raise _invalid("Parameter `old_str` must not be empty")
        if normalize_newlines(old) == normalize_newlines(new):
            raise _invalid("Parameters `old_str` and `new_str` are identical: nothing would "
                           "change")
        old_shown = _shown(old, MAX_SHOWN_OLD)
        try:
            result = tools.edit(self.fs, EditArgs(file_path=rel, old_string=old,
                                                  new_string=new))
        except FsError as err:
            if err.code == "no_match":
                # [editor] and [memory docs] str_replace, then toolfs's near-miss hint.
                hint = err.message.partition("old_string was not found in the file.")[2]
                raise _refuse("no_match", f"No replacement was performed, old_str "
                              f"`{old_shown}` did not appear verbatim in {shown}.{hint}",
                              cause=err) from err
            if err.code == "ambiguous_match":
                lines = ", ".join(str(n) for n in err.details.get("lines", [])[:20])
                more = ", ..." if err.details.get("count", 0) > 20 else ""
                # [memory docs]: "... Multiple occurrences of old_str `{old_str}` in lines:
                # {line_numbers}. Please ensure it is unique"; [editor]: "... in lines
                # {lines}. ..." with the Python list ("[2, 3]").
                where = f"in lines: {lines}{more}" if self.memory else f"in lines [{lines}{more}]"
                raise _refuse("ambiguous_match", f"No replacement was performed. Multiple "
                              f"occurrences of old_str `{old_shown}` {where}. "
                              "Please ensure it is unique", cause=err) from err
            raise self._translate(err, shown, raw) from err
        return _Done(self._edited(shown, result, insert=False), result)

    def _edited(self, shown: str, r: EditResult, *, insert: bool) -> str:
        snippet = self._snippet(r, self.budget - 2 * MAX_SHOWN_PATH - 400)
        if self.memory:
            if insert:  # [memory docs] and [memory SDK] insert
                return f"The file {shown} has been edited."
            # [memory SDK] str_replace ([memory docs]: "The memory file has been edited."
            # followed by a snippet of the edited file with line numbers)
            return ("The memory file has been edited. Here is the snippet showing the change "
                    f"(with line numbers):\n{snippet}")
        # [editor] insert and str_replace (SNIPPET_LINES = 4 around the change)
        if insert:
            return (f"The file {shown} has been edited. Here's the result of running `cat -n` "
                    f"on a snippet of the edited file:\n{snippet}\n{_INSERT_NOTE}")
        return (f"The file {shown} has been edited. Here's the result of running `cat -n` on "
                f"a snippet of {shown}:\n{snippet}\n{_SNIPPET_NOTE}")

    @staticmethod
    def _snippet(r: EditResult, room: int) -> str:
        """The numbered lines around a change, within ``room`` characters: a change of
        many lines is shown from its start, with how to see the rest (the [editor] clips
        its outputs the same way, at 16,000 characters)."""
        rows: list[str] = []
        used = 0
        for i, line in enumerate(r.snippet):
            row = number_line(r.snippet_start + i, line, max(1, min(MAX_LINE_CHARS,
                                                                    room - 80)))
            if rows and used + len(row) + 1 > room:
                last = r.snippet_start + len(rows) - 1
                rows.append(f"(Snippet truncated: lines {r.snippet_start}-{last} of the "
                            f"{len(r.snippet)} around the change shown. Use view with "
                            f"view_range [{last + 1}, -1] to see the rest.)")
                break
            rows.append(row)
            used += len(row) + 1
        return "\n".join(rows)

    # -- insert --------------------------------------------------------------------

    def _insert(self, given: dict[str, Any]) -> _Done:
        raw, line, text = given["path"], given["insert_line"], given["text"]
        shown = _shown(raw, MAX_SHOWN_PATH)
        rel = self._file_path(raw)
        with self._call(lambda: self.fs.open(rel, "rb", intent="edit"), shown, raw) as f:
            doc = decode(f.read(), f.path)
            body = doc.text
            lines = split_lines(body)
            if line < 0 or line > len(lines):
                if f.cached:
                    f.verify()  # an outdated view: "view it again" is the useful answer
                # [editor] and [memory docs] insert (the [memory SDK] says "within the
                # range [0, n].")
                raise _invalid(f"Invalid `insert_line` parameter: {line}. It should be within "
                               f"the range of lines of the file: [0, {len(lines)}]")
            _check_text(text, f.path)
            new_body, first, last = _inserted(body, line, text)
            commit = f.commit(doc.encode(new_body), operation="edit")
        start, snippet = lines_around(new_body, first, last, SNIPPET_CONTEXT)
        result = EditResult(path=commit.path, replacements=1, replace_all=False,
                            version=commit.version, lines=[line + 1],
                            snippet=snippet, snippet_start=start)
        return _Done(self._edited(shown, result, insert=True), result)

    # -- delete (memory) -----------------------------------------------------------

    def _delete(self, given: dict[str, Any]) -> _Done:
        raw = given["path"]
        shown = _shown(raw, MAX_SHOWN_PATH)
        rel, as_dir = self._source_path(raw)
        # [memory SDK] delete. By where the path leads, not how it is spelled: a symlink
        # to the root (`self -> .`, `docs/up -> ..`) names the root as well.
        if rel == "." or self._target(rel, shown, raw).reaches_root:
            raise _refuse("denied", "Cannot delete the /memories directory itself")
        if self._is_file(rel, shown, raw):
            if as_dir:  # `notes.md/`: there is no directory notes.md
                raise _refuse("not_found", f"The path {shown} does not exist")
            try:
                self.fs.rm_file(rel)
            except FsError as err:
                if err.code == "not_observed":
                    raise _refuse("not_observed", f"Cannot delete {shown}: view it first",
                                  cause=err) from err
                if err.code == "stale":
                    raise _refuse("stale", f"{shown} changed since you last viewed it; it "
                                  "was not deleted", cause=err) from err
                raise self._translate(err, shown, raw) from err
            # [memory docs] and [memory SDK] delete
            return _Done(f"Successfully deleted {shown}", None)
        files = self._tree(rel)
        if not files:  # [memory docs] delete: "Error: The path {path} does not exist"
            raise _refuse("not_found", f"The path {shown} does not exist")
        # Every file must have been viewed at its current version: a delete must not
        # remove an update this agent never saw. Checked for all before any is removed.
        unseen = [f.path for f in files
                  if self.fs.policy is not None and (
                      (obs := self.fs.ledger.get(f.backend_path)) is None
                      or obs.version is None)]
        if unseen:
            names = ", ".join(self._shown_paths(unseen[:10]))
            more = f" and {len(unseen) - 10} more" if len(unseen) > 10 else ""
            raise _refuse("not_observed", f"Cannot delete {shown}: view its files first "
                          f"({names}{more} not viewed)")
        done: list[str] = []
        for f in files:
            try:
                self.fs.rm_file(f.path)
            except FsError as err:
                kept = len(files) - len(done)
                msg = (f"Deleted {len(done)} of {len(files)} files in {shown}; stopped at "
                       f"{self._model_path(f.path)}: {err.message}. {kept} files remain.")
                raise _refuse(err.code, msg, cause=err) from err
            done.append(f.path)
        self._remove_empty_dirs(rel)
        return _Done(f"Successfully deleted {shown}", None)

    def _target(self, rel: str, shown: str, raw: str) -> Target:
        """``rel`` confined by the policy filesystem: where it leads, symlinks followed
        (``outside_root`` in the reference wording)."""
        return self._call(lambda: self.fs.resolve(rel), shown, raw)

    def _is_file(self, rel: str, shown: str, raw: str) -> bool:
        return self._call(lambda: self.fs.isfile(rel), shown, raw)

    def _tree(self, rel: str) -> list[Found]:
        files = list(itertools.islice(self.fs.list_files(rel), MAX_TREE_FILES + 1))
        if len(files) > MAX_TREE_FILES:
            raise _refuse("too_large", f"{self._model_path(rel)} holds more than "
                          f"{MAX_TREE_FILES} files, more than one command may change")
        return sorted(files, key=lambda f: f.path)

    def _remove_empty_dirs(self, rel: str) -> None:
        """Local and memory filesystems keep empty directories; remove those left (best
        effort: a directory another agent just wrote into is not empty and stays).
        Through the policy filesystem, never the raw one: denied directories (``.git``
        and everything in it) stay, symlinks are not walked through, nothing outside the
        root is touched. Object stores have no directories: nothing to do there."""
        # A failure leaves directories, never files, behind: the files are gone already.
        with contextlib.suppress(Exception):
            self.fs.remove_empty_dirs(rel)

    # -- rename (memory) -----------------------------------------------------------

    def _rename(self, given: dict[str, Any]) -> _Done:
        old_raw, new_raw = given["old_path"], given["new_path"]
        old_shown, new_shown = _shown(old_raw, MAX_SHOWN_PATH), _shown(new_raw, MAX_SHOWN_PATH)
        (old, old_as_dir), (new, _) = self._source_path(old_raw), self._source_path(new_raw)
        if old == ".":  # [memory SDK] rename
            raise _refuse("denied", "Cannot rename the /memories directory itself")
        if new == ".":
            raise _refuse("invalid_arguments", f"The destination {new_shown} already exists")
        if new == old or new.startswith(old + "/"):
            raise _invalid(f"Cannot rename {old_shown} into itself ({new_shown})")
        # The same checks on where the paths lead (symlinks followed): a link to the root
        # is the root, and a destination reached through a link may lie inside the
        # source all the same.
        source = self._target(old, old_shown, old_raw)
        if source.reaches_root:
            raise _refuse("denied", "Cannot rename the /memories directory itself")
        dest = self._target(new, new_shown, new_raw)
        if dest.reaches_root:
            raise _refuse("invalid_arguments", f"The destination {new_shown} already exists")
        src_at, dest_at = source.reached, dest.reached
        if self.fs.store.folds_case:
            src_at, dest_at = src_at.casefold(), dest_at.casefold()
        if dest_at == src_at or dest_at.startswith(src_at + "/"):
            raise _invalid(f"Cannot rename {old_shown} into itself ({new_shown})")
        if self._exists(new) or self._empty_dir(new, new_shown, new_raw):
            # [memory docs] rename: "Error: The destination {new_path} already exists"
            raise _refuse("invalid_arguments", f"The destination {new_shown} already exists")
        if self._is_file(old, old_shown, old_raw):
            if old_as_dir:  # `notes.md/`: there is no directory notes.md
                raise _refuse("not_found", f"The path {old_shown} does not exist")
            self._call(lambda: self._move(old, new, new_shown), old_shown, old_raw)
            # [memory docs] and [memory SDK] rename
            return _Done(f"Successfully renamed {old_shown} to {new_shown}", None)
        files = self._tree(old)
        if not files:  # [memory docs] rename: "Error: The path {old_path} does not exist"
            raise _refuse("not_found", f"The path {old_shown} does not exist")
        for moved, f in enumerate(files):
            suffix = f.path[len(old) + 1:] if old != "." else f.path
            try:
                self._move(f.path, f"{new}/{suffix}", self._model_path(f"{new}/{suffix}"))
            except (FsError, _Refusal) as exc:
                err = exc if isinstance(exc, FsError) else exc.error
                why = exc.message if isinstance(exc, _Refusal) else err.message
                msg = (f"Renamed {moved} of {len(files)} files of {old_shown} to {new_shown}; "
                       f"stopped at {self._model_path(f.path)}: {why}")
                raise _refuse(err.code, msg, cause=err) from exc
        self._remove_empty_dirs(old)
        return _Done(f"Successfully renamed {old_shown} to {new_shown}", None)

    def _empty_dir(self, rel: str, shown: str, given: str) -> bool:
        """An empty directory: local disk and memory keep them (a file cannot be created
        over one, and the failure would name the source); object stores have none."""
        if not self.fs.store.capabilities.cheap_listing:
            return False
        return self._call(lambda: self.fs.isdir(rel), shown, given)

    def _exists(self, rel: str) -> bool:
        """A file, or a directory with a file below it (object stores have no empty
        directories)."""
        if self.fs.isfile(rel):
            return True
        return next(iter(self.fs.list_files(rel)), None) is not None

    def _move(self, old: str, new: str, new_shown: str) -> None:
        """Move one file without losing an update: the bytes of one version of ``old``
        are created at ``new`` (only if nothing is there), then ``old`` is deleted only if
        it is still at that version; if it is not, the copy is removed again (only if it
        is still the copy), so the file ends up in exactly one place, with every update."""
        with self.fs.open(old, "rb") as src:  # an observation: the version of these bytes
            if not src.complete:
                raise fs_error("too_large", f"{src.path} is {src.size} bytes, over the "
                               f"{self.fs.size_cap}-byte cap for whole-file writes; it "
                               "cannot be renamed here", path=src.path)
            data = src.read()
            version = src.version
        try:
            copy = self.fs.pipe_file(new, data, mode="create", operation="write")
        except FsError as err:
            if err.code in ("stale", "not_observed"):  # created meanwhile by someone else
                raise _refuse("invalid_arguments", f"The destination {new_shown} already "
                              "exists", cause=err) from err
            raise
        try:
            self.fs.rm_file(old, version=version)
        except FsError as err:
            if err.code not in ("stale", "not_found"):
                # The delete may have happened all the same (a timeout, say): removing
                # the copy now could lose the file. Keep it, and say so.
                raise _refuse(err.code, f"{self._model_path(old)} was copied to "
                              f"{new_shown} but could not be deleted ({err.message}); both "
                              "may exist now: view them before retrying", cause=err) from err
            left = self._undo(new, copy.version)
            if err.code == "stale":
                raise _refuse("stale", f"{self._model_path(old)} changed while it was being "
                              f"renamed; nothing was renamed{left}", cause=err) from err
            raise _refuse("stale", f"{self._model_path(old)} was deleted while it was "
                          f"being renamed; nothing was renamed{left}", cause=err) from err

    def _undo(self, path: str, version: FileVersion) -> str:
        """Remove the copy a failed move made, only if it is still that copy; what is
        left over, for the answer ("" when nothing is)."""
        try:
            self.fs.rm_file(path, version=version)
        except FsError as err:
            if err.code == "not_found":
                return ""
            shown = self._model_path(path)
            if err.code == "stale":  # someone changed the copy already: theirs now
                return f" (but {shown} was changed meanwhile by someone else and stays)"
            return f" (but the copy at {shown} could not be removed: {err.message})"
        return ""


def _inserted(body: str, line: int, text: str) -> tuple[str, int, int]:
    """``body`` with ``text`` inserted as whole lines after line ``line`` (0: at the
    start), and the offset where it starts. The file's line ending is used for the new
    lines; the bytes around are unchanged, and a file without a final newline still has
    none (the new text then goes after a line break added to the old last line).
    Returns the new text and the span of the inserted lines in it."""
    crlf = body.count("\r\n")
    eol = "\r\n" if crlf and crlf * 2 >= body.count("\n") else "\n"
    added = normalize_newlines(text)
    if not added.endswith("\n"):
        added += "\n"
    added = added.replace("\n", eol)
    offset = 0
    for _ in range(line):
        nl = body.find("\n", offset)
        offset = len(body) if nl == -1 else nl + 1
    if offset == len(body) and body and not body.endswith("\n"):
        # After the last line of a file without a final newline: keep it without one.
        start = len(body) + len(eol)
        return body + eol + added[: -len(eol)], start, start + len(added) - len(eol)
    return body[:offset] + added + body[offset:], offset, offset + len(added)



# -- the commands each tool accepts ----------------------------------------------------

_EDITOR_COMMANDS = ("view", "create", "str_replace", "insert")
_MEMORY_COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")

def _result(output: ToolOutput) -> str:
    """A ToolOutput as the runner's tool result: the text, or ``ToolError`` (is_error)."""
    if output.is_error:
        raise ToolError(output.text)
    return output.text
