"""The commands of Anthropic's text editor and memory tool, run against a workspace.

One engine (:class:`_Engine`) serves both tools of :mod:`toolfs.integrations.anthropic`
(:class:`~toolfs.integrations._anthropic_editor.TextEditor` and
:class:`~toolfs.integrations._anthropic_memory.MemoryTool`): it checks the model's input,
runs ``view``, ``create``, ``str_replace``, ``insert``, ``delete`` and ``rename`` through
the workspace's policy, and answers in the reference implementations' own words.
It is built in layers, each its own module: the input checks and refusals
(:mod:`~toolfs.integrations._anthropic_input`), the paths and wording over one workspace
(:mod:`~toolfs.integrations._anthropic_engine_base`), the memory tool's own ``delete``
and ``rename`` (:mod:`~toolfs.integrations._anthropic_memory_commands`), and here the
entry point with the commands both tools share: ``view``, ``create``, ``str_replace``
and ``insert``.

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
from typing import Any

import pydantic
from anthropic.lib.tools import ToolError

from toolfs import tools
from toolfs.errors import ADVICE, FsError, fs_error
from toolfs.formats.notebook import is_notebook_path
from toolfs.formats.text import decode, lines_around, normalize_newlines, split_lines
from toolfs.integrations._anthropic_input import (
    _INSERT_NOTE,
    _SNIPPET_NOTE,
    MAX_DIRECTORY_ENTRIES,
    MAX_SHOWN_OLD,
    MAX_SHOWN_PATH,
    MAX_SIZED_FILES,
    SNIPPET_CONTEXT,
    _check_text,
    _checked,
    _Done,
    _format_size,
    _invalid,
    _Refusal,
    _refuse,
    _shown,
)
from toolfs.integrations._anthropic_memory_commands import _MemoryCommands
from toolfs.policy.listings import Found
from toolfs.render import (
    MAX_LINE_CHARS,
    ToolOutput,
    error_diff,
    number_line,
)
from toolfs.render.notebook import render_notebook_edit, render_notebook_read
from toolfs.results import (
    EditResult,
    ListEntry,
    ListResult,
    MediaResult,
    NotebookEditResult,
    NotebookReadResult,
    ReadResult,
)
from toolfs.schemas import EditArgs, WriteArgs
from toolfs.tools import notebook as notebook_tools


class _Engine(_MemoryCommands):
    """The commands of the text editor and the memory tool over one workspace.

    ``memory`` selects the memory tool's paths (``/memories/...``) and wording. Every
    method returns a :class:`_Done` or raises :class:`_Refusal` or
    :class:`~toolfs.errors.FsError`; :meth:`run` turns those into a ToolOutput.
    """

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
            # stays not_text there (beta_tools' read shows them). A notebook is shown as
            # its cells, as read shows it (view_range counts cells), so that the model
            # edits cell sources, not the JSON.
            result: ReadResult | NotebookReadResult
            if is_notebook_path(rel):
                got = notebook_tools.read_file(self.fs, rel, start, limit)
                assert not isinstance(got, MediaResult)  # a .ipynb is never media
                result = got
            else:
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
        if isinstance(result, NotebookReadResult):
            return _Done(self._render_notebook(result, shown, start, end), result)
        return _Done(self._render_view(result, shown, start, end), result)

    def _render_notebook(self, r: NotebookReadResult, shown: str, start: int,
                         end: int) -> str:
        """A notebook's cells (see :mod:`toolfs.render.notebook`), after a line saying
        how to change them with this tool's commands."""
        if r.cell_count == 0 and r.start_cell > 1 and r.total_cells:
            raise _refuse("invalid_arguments",
                          f"Invalid `view_range`: [{start}, {end}]. For a notebook it counts "
                          f"cells; its first element `{start}` should be within the range "
                          f"of cells of the notebook: [1, {r.total_cells}]")
        header = (f"{shown} is a Jupyter notebook, shown as its cells (view_range counts "
                  "cells; str_replace changes text within one cell's source; each cell's "
                  "lines are numbered from 1):")
        # Its results are text: an image output is named, never said to be shown.
        cells = [c.model_copy(update={"outputs": [
            o if o.image is None or o.image.image is None else o.model_copy(update={
                "image": o.image.model_copy(update={
                    "image": None, "not_shown": "this tool's results are text"})})
            for o in c.outputs]}) for c in r.cells]
        return header + "\n" + render_notebook_read(
            r.model_copy(update={"path": shown, "cells": cells}),
            self.budget - len(header) - 1)

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
            # A .ipynb must be a valid notebook (nbformat 4), as write checks it.
            result = notebook_tools.write(self.fs, WriteArgs(file_path=rel, content=text))
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
            # In a notebook, old_str is matched within the cells' sources and the change
            # leaves every byte outside the touched cell as it was (toolfs.formats.notebook).
            result = notebook_tools.edit(self.fs, EditArgs(file_path=rel, old_string=old,
                                                           new_string=new))
        except FsError as err:
            if err.code == "no_match":
                # [editor] and [memory docs] str_replace, then toolfs's near-miss hint.
                hint = err.message.partition("old_string was not found in the file.")[2]
                cells = err.message.partition("old_string was not found in any cell's "
                                              "source.")
                if cells[1]:  # a notebook: its hint names cells, not the JSON
                    hint = f" It was looked for in the notebook's cell sources.{cells[2]}"
                raise _refuse("no_match", f"No replacement was performed, old_str "
                              f"`{old_shown}` did not appear verbatim in {shown}.{hint}",
                              cause=err) from err
            if err.code == "ambiguous_match":
                more = ", ..." if err.details.get("count", 0) > 20 else ""
                if "cells" in err.details:  # a notebook: in which cells
                    listed = ", ".join(str(c) for c in err.details["cells"][:20])
                    raise _refuse("ambiguous_match", f"No replacement was performed. Multiple "
                                  f"occurrences of old_str `{old_shown}` in cells: "
                                  f"{listed}{more}. Please ensure it is unique",
                                  cause=err) from err
                lines = ", ".join(str(n) for n in err.details.get("lines", [])[:20])
                # [memory docs]: "... Multiple occurrences of old_str `{old_str}` in lines:
                # {line_numbers}. Please ensure it is unique"; [editor]: "... in lines
                # {lines}. ..." with the Python list ("[2, 3]").
                where = f"in lines: {lines}{more}" if self.memory else f"in lines [{lines}{more}]"
                raise _refuse("ambiguous_match", f"No replacement was performed. Multiple "
                              f"occurrences of old_str `{old_shown}` {where}. "
                              "Please ensure it is unique", cause=err) from err
            raise self._translate(err, shown, raw) from err
        if isinstance(result, NotebookEditResult):
            edited = ("The memory file has been edited." if self.memory
                      else f"The file {shown} has been edited.")
            return _Done(f"{edited} " + render_notebook_edit(
                result.model_copy(update={"path": shown}), self.budget - len(edited) - 1),
                result)
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
        if is_notebook_path(rel):
            # Its lines are JSON, which view does not show: a cell is added with
            # str_replace (in a cell's source) or notebook_edit.
            raise _invalid(f"{shown} is a Jupyter notebook, which view shows as cells: "
                           "insert counts lines of text. Use str_replace to add lines "
                           "within a cell's source.")
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
