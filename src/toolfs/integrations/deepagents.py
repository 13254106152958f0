"""A Deep Agents backend over a toolfs workspace (extra ``deepagents``).

``create_deep_agent(model, backend=ToolfsBackend(ws))`` gives a deep agent's built-in file
tools (``ls``, ``read_file``, ``write_file``, ``edit_file``, ``delete``, ``glob``,
``grep``) any fsspec filesystem toolfs supports, with toolfs's guarantees underneath: the
observation policy (an update needs a read in this context), conditional writes on the
backend (a stale edit is refused, never merged over someone else's change), confinement
to the root, deny rules, size caps, byte fidelity (CRLF, BOM and the final newline of an
edited file are kept).

Deep Agents' conventions, mapped as its own ``StateBackend``/``FilesystemBackend`` map them:

* **Paths** are absolute virtual paths: ``/src/app.py`` is ``src/app.py`` below the
  workspace root, and results name files the same way.
* **read** takes a 0-based ``offset`` and a ``limit`` and returns the raw window
  (``ReadResult.file_data``, LF line endings, the terminator of the window's last line
  as in the file) with ``start_line``/``end_line`` (1-based), ``total_lines`` and
  ``next_offset``; the middleware adds the ``@@ lines A-B of T @@`` header. A negative
  offset reads from the start; a non-positive limit returns no lines
  (``no_lines_requested``); an offset past the end is the error
  ``Line offset N exceeds file length (T lines)``; an empty or blank file returns its
  content without pagination (the middleware's empty-file reminder). Images, audio,
  video and PDFs (by extension) are returned whole as base64.
* **grep** searches a *literal* string (toolfs's RE2 search on the escaped pattern),
  ``glob``'s and ``grep``'s include globs use Deep Agents' own matcher semantics (a
  pattern without ``/`` matches the name at any depth, relative to the search path).
* **Errors** are the result types' ``error`` strings, never exceptions. The failures
  Deep Agents' backends report keep their wording (``File '/x' not found``,
  ``Error: String not found in file: '...'``, ``Path '/d': path_not_found``, ...); the
  failures only toolfs has (``stale``, ``not_observed``, ``denied``, ``outside_root``,
  ``not_text``, ``too_large``, ``invalid_arguments``, ``backend_error``) are toolfs's text:
  ``Error [code] (path): message`` and the advice on the next line. Upload and download
  use the protocol's ``FileOperationError`` literals where one fits.

Where Deep Agents' conventions and toolfs's guarantees pull apart, the guarantee wins:

* ``write_file``'s description says a file need not be read before it is replaced;
  under toolfs's default policy replacing an existing file that this context never
  read is refused with ``not_observed`` (read it, then retry). Creating a file never
  needs a read. ``Workspace(..., policy=Policy(require_observation=False))`` restores
  Deep Agents' rule for files this context has not seen (a file it has seen is still
  replaced only at the version it saw).
* ``edit_file`` and ``write_file`` are conditional on the version this context read:
  if another agent, a subagent, a parallel call or a person changed the file since, the
  result is ``stale`` and nothing is written. Deep Agents' own backends write last-wins;
  its middleware only refuses two mutations of one path in the same model turn.
* Each conversation (LangGraph ``thread_id``) and each subagent run (Deep Agents'
  ``task`` tool, which hands it the parent's backend) has its own execution context: a
  subagent reads before it changes a file, and an update based on a read from before
  another conversation's or a subagent's change is ``stale``.
* ``delete`` removes one file, on the same condition as an edit; a directory with every
  file in it (as Deep Agents does) only when this context read each at its current
  version, all checked before any is deleted.
* ``upload_files`` writes under the policy too (a file this context never read is not
  replaced); ``download_files`` is a read of the whole file (streamed past the size
  cap, as Deep Agents' own backends return it), so it records an observation: Deep
  Agents' summarization middleware downloads its history file, then edits it, and that
  edit lands only on the version it downloaded (and is refused ``too_large`` past the
  cap, never replaced by the new section alone).
* Lines are split on ``\\n`` (``\\r\\n`` counts as one terminator), as toolfs's edit and
  grep and ripgrep count them; Python's ``str.splitlines`` (Deep Agents' slicer) also
  splits on form feeds, ``\\u2028`` and other separators, which shifts its numbering on
  such files. A UTF-8 BOM is not shown (and is kept on edit); an edit keeps CRLF line
  endings where ``FilesystemBackend`` rewrites the file with LF.
* ``old_string == new_string`` is refused (``invalid_arguments``) instead of being a no-op
  rewrite, and an empty grep pattern matches every line (as ``"" in line`` does).
* Every call is bounded: ``glob`` returns at most the workspace's ``glob_limit`` files
  (newest first, ``truncated=True`` beyond), ``grep`` at most ``grep_limit`` matches,
  ``ls`` at most ``ls_limit`` entries (``LsResult`` has no flag to say it was cut), and a
  file over ``size_cap`` is read in windows, never whole.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import heapq
import math
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from toolfs.errors import missing_extra

try:
    from deepagents.backends import utils as _da_utils
    from deepagents.backends.protocol import (
        BackendProtocol,
        DeleteResult,
        EditResult,
        FileData,
        FileDownloadResponse,
        FileInfo,
        FileUploadResponse,
        GlobResult,
        GrepMatch,
        GrepResult,
        LsResult,
        ReadResult,
        WriteResult,
    )
    from deepagents.backends.utils import InvalidGlobPatternError, compile_grep_include_glob
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("deepagents", "toolfs.integrations.deepagents", exc) from exc

from toolfs import tools as _tools
from toolfs.errors import FsError, fs_error
from toolfs.formats import media
from toolfs.formats.notebook import is_notebook_path
from toolfs.formats.text import decode, split_lines
from toolfs.integrations._contexts import AgentContexts
from toolfs.integrations._langgraph import agent_key
from toolfs.policy.filesystem import Found, ObservedFile, PolicyFileSystem
from toolfs.render import render_error
from toolfs.render.notebook import notebook_lines
from toolfs.results import NotebookReadResult
from toolfs.tools import notebook as notebook_tools
from toolfs.workspace import AsyncWorkspace, Workspace

__all__ = ["ToolfsBackend"]

T = TypeVar("T")

# RE2 metacharacters; escaping exactly these turns a literal into a pattern that matches
# only itself (RE2 accepts a backslash before any punctuation).
_RE2_SPECIAL = frozenset("\\.+*?()|[]{}^$")


def _classify(path: str) -> str:
    """Deep Agents' read classification by extension (``text``, ``image``, ...)."""
    # A private helper of deepagents (the one its own backends use); without it every
    # file is text, which only loses the multimodal reads.
    classify: Callable[[str], str] | None = getattr(
        _da_utils, "_get_backend_read_file_type", None)
    return classify(path) if classify is not None else "text"


_IMAGE_TYPES = {"png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg",
                "gif": "image/gif", "webp": "image/webp"}


def _fitted_image(data: bytes, rel: str, shown: str) -> bytes:
    """An image's bytes made to fit every provider's per-image limits (toolfs.formats.media), in
    the format Deep Agents will label it with (its extension's); as stored when the
    content is not of that format, or when it cannot be converted here (malformed, too
    many pixels, no ``toolfs[media]``): Deep Agents' own backends send every image as
    stored."""
    kind = media.sniff(data[:media.SNIFF_BYTES])
    suffix = rel.rsplit(".", 1)[-1].lower()
    if kind is None or kind.kind != "image" or _IMAGE_TYPES.get(suffix) != kind.mime_type:
        return data
    try:
        return media.show_image(data, kind, shown, keep_format=True).image.data
    except FsError:  # undecodable here, or no toolfs[media]: as Deep Agents sends it
        return data


def _literal(pattern: str) -> str:
    """An RE2 pattern matching ``pattern`` literally ("" matches every line)."""
    if not pattern:
        return "^"
    return "".join("\\" + c if c in _RE2_SPECIAL else c for c in pattern)


def _rel(path: str | None) -> str:
    """A Deep Agents path (``/src/a.py``) as a path below the workspace root."""
    return (path or "").lstrip("/")


def _file(path: str) -> str:
    """A Deep Agents file path below the workspace root (``/`` is the root directory)."""
    return _rel(path) or "."


def _shown(display: str) -> str:
    """A toolfs display path as Deep Agents names it."""
    return "/" if display in ("", ".") else "/" + display.lstrip("/")


def _iso(mtime: float | None) -> str | None:
    if mtime is None or math.isnan(mtime):
        return None
    return datetime.fromtimestamp(mtime, UTC).isoformat()


class ToolfsBackend(BackendProtocol):
    """Deep Agents' ``BackendProtocol`` over a toolfs workspace (one execution context).

    ``ToolfsBackend(ws)`` with a :class:`~toolfs.Workspace` or an
    :class:`~toolfs.AsyncWorkspace`; the async methods run on the AsyncWorkspace's
    worker threads (or on ``asyncio.to_thread`` for a plain Workspace). What this
    backend read is what its edits are conditional on, so give each agent its own
    (``ToolfsBackend(ws.new_context())``). See the module docstring for how Deep Agents'
    conventions map onto toolfs.

    Conversations and subagents: one compiled agent serves many conversations (LangGraph
    ``thread_id`` s), and Deep Agents gives its subagents (the ``task`` tool) the
    parent's backend object. Each conversation, and each subagent run within one, gets
    its own execution context here (a ``ws.new_context()``, told apart by the ``thread_id``
    and the LangGraph namespace of the ``task`` call; its events also go to
    ``workspace``'s subscribers, its audit log and hooks included). So a subagent reads a
    file before changing it, and an update based on a read from before another
    conversation or a subagent changed the file is refused ``stale`` instead of storing
    over that change. ``workspace`` is the context of runs without a ``thread_id`` and of
    direct calls.
    """

    def __init__(self, ws: Workspace | AsyncWorkspace) -> None:
        self._async: AsyncWorkspace | None
        if isinstance(ws, AsyncWorkspace):
            self.workspace, self._async = ws.sync, ws
        elif isinstance(ws, Workspace):
            self.workspace, self._async = ws, None
        else:
            raise TypeError(f"ToolfsBackend takes a toolfs Workspace or AsyncWorkspace, "
                            f"not {type(ws).__name__}")
        self._contexts = AgentContexts(self.workspace)
        self._pinned = threading.local()  # the calling agent's context, in a worker

    # -- plumbing -------------------------------------------------------------------

    @property
    def fs(self) -> PolicyFileSystem:
        return self.workspace.fs

    def _agent_workspace(self) -> Workspace:
        """The execution context of the agent making this call: the backend's own, or
        that of the conversation or subagent run (made on its first call)."""
        key = agent_key()
        return self.workspace if key is None else self._contexts.get(key)

    @property
    def _ws(self) -> Workspace:
        """The context this call runs in: pinned by the async twin that dispatched it to
        a worker thread (where LangGraph's config is not visible), else the caller's."""
        pinned: Workspace | None = getattr(self._pinned, "ws", None)
        return pinned if pinned is not None else self._agent_workspace()

    def _guarded(self, fn: Callable[[PolicyFileSystem], T]) -> T:
        """Run ``fn`` on the policy filesystem; every failure is an ``FsError`` with
        credentials masked, as from the workspace's own tools."""
        return self._ws.run(fn)

    def _text(self, err: FsError, *, prefixed: bool) -> str:
        """toolfs's model text for ``err``, paths named as Deep Agents names them.

        ``prefixed``: the middleware puts ``Error: `` before this result type's errors
        (read, ls, glob), so the text starts at the code.
        """
        shown = fs_error(err.code, err.message, path=err.path, details=err.details)
        if err.path is not None:
            path = _shown(err.path)
            if shown.message.startswith(err.path + " "):
                shown.message = path + shown.message[len(err.path):]
            shown.path = path
        text = render_error(shown, self.workspace.max_output_chars)
        return text.removeprefix("Error ") if prefixed else text

    async def _run(self, failed: Callable[[str], T], fn: Callable[..., T], *args: Any,
                   prefixed: bool = False) -> T:
        """``fn(*args)`` on a worker thread, in the calling agent's context; a failure
        to run it at all (a closed worker pool) is ``failed(text)``, never an exception
        into Deep Agents' tool node (``prefixed`` as for :meth:`_text`)."""
        try:
            ws = self._agent_workspace()  # here, where LangChain's config context is set
        except FsError as unmade:
            return failed(self._text(self.workspace.masked(unmade), prefixed=prefixed))

        def pinned() -> T:
            self._pinned.ws = ws
            try:
                return fn(*args)
            finally:
                self._pinned.ws = None

        try:
            if self._async is not None:
                return await self._async.call(pinned)
            return await asyncio.to_thread(pinned)
        except Exception as exc:
            err = fs_error("backend_error", f"{type(exc).__name__}: {exc}")
            err.__cause__ = exc
            return failed(self._text(ws.masked(err), prefixed=prefixed))

    # -- ls -------------------------------------------------------------------------

    def ls(self, path: str) -> LsResult:
        """The immediate children of ``path``: files with their size, directories with a
        trailing ``/``, sorted by path (at most the workspace's ``ls_limit``)."""
        try:
            listing = self._ws.ls(_rel(path) or None)
        except FsError as err:
            if err.code == "not_found":
                return LsResult(error=f"Path '{path}': path_not_found")
            if err.code == "not_a_file":
                return LsResult(error=f"Path '{path}': not_a_directory")
            return LsResult(error=self._text(err, prefixed=True))
        base = "" if listing.path in ("", ".") else listing.path.rstrip("/") + "/"
        entries: list[FileInfo] = []
        for e in listing.entries:
            if e.kind == "dir":
                entries.append({"path": _shown(base + e.name) + "/", "is_dir": True, "size": 0})
            else:
                entries.append({"path": _shown(base + e.name), "is_dir": False,
                                "size": e.size or 0})
        entries.sort(key=lambda fi: fi["path"])
        return LsResult(entries=entries)

    async def als(self, path: str) -> LsResult:
        return await self._run(lambda e: LsResult(error=e), self.ls, path, prefixed=True)

    # -- read -----------------------------------------------------------------------

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """The raw lines ``offset`` (0-based) to ``offset + limit - 1``; records the
        version of the bytes they came from (what a later edit is conditional on)."""
        offset, limit = max(int(offset), 0), max(int(limit), 0)
        rel = _file(file_path)
        try:
            kind = _classify(file_path)
            if kind != "text":
                return self._guarded(lambda fs: self._read_binary(fs, rel, kind))
            if is_notebook_path(rel):
                return self._guarded(lambda fs: self._read_notebook(fs, rel, offset, limit))
            return self._guarded(lambda fs: self._read_text(fs, rel, offset, limit))
        except FsError as err:
            if err.code in ("not_found", "not_a_file") and not err.details.get("bucket"):
                near = err.details.get("did_you_mean") or []
                hint = (". Did you mean: " + ", ".join(_shown(p) for p in near) + "?"
                        if near else "")
                return ReadResult(error=f"File '{file_path}' not found{hint}")
            return ReadResult(error=self._text(err, prefixed=True))

    def _read_binary(self, fs: PolicyFileSystem, rel: str, kind: str) -> ReadResult:
        with fs.open(rel, "rb") as f:
            if not f.complete:
                raise fs_error("too_large", f"{f.path} is {f.size} bytes, over the "
                               f"{fs.size_cap}-byte cap for reading a binary file whole",
                               path=f.path, details={"size": f.size, "cap": fs.size_cap})
            data = f.read()
        if kind == "image":
            data = _fitted_image(data, rel, f.path)
        return ReadResult(file_data=FileData(
            content=base64.standard_b64encode(data).decode("ascii"), encoding="base64"))

    def _read_notebook(self, fs: PolicyFileSystem, rel: str, offset: int,
                       limit: int) -> ReadResult:
        """A notebook as its cells, as toolfs's read shows them (each cell's header line,
        its source lines as they are, its outputs summarised), windowed by the lines of
        that view; edit_file's ``old_string`` is then matched within the cells' sources.
        A ``.ipynb`` that is not a notebook (broken JSON) is read as the text it is."""
        got = notebook_tools.read_file(fs, rel, 1, 10**9)  # every cell: windowed by lines
        if not isinstance(got, NotebookReadResult):
            return self._read_text(fs, rel, offset, limit)
        lang = f", {got.language}" if got.language else ""
        lines = [f"Notebook {_shown(got.path)}: {got.total_cells} cells{lang}. Shown as "
                 "its cells: edit_file changes text within one cell's source.",
                 *notebook_lines(got)]
        if limit == 0:
            return ReadResult(file_data=FileData(content="", encoding="utf-8"),
                              no_lines_requested=True)
        total = len(lines)
        if offset >= total:
            return ReadResult(error=f"Line offset {offset} exceeds file length "
                                    f"({total} lines)")
        end = min(offset + limit, total)
        return ReadResult(
            file_data=FileData(content="\n".join(lines[offset:end]) + "\n",
                               encoding="utf-8"),
            total_lines=total, start_line=offset + 1, end_line=end,
            next_offset=end if end < total else None)

    def _read_text(self, fs: PolicyFileSystem, rel: str, offset: int,
                   limit: int) -> ReadResult:
        with fs.open(rel, "rb") as f:
            if f.complete:
                return self._window_whole(f, offset, limit)
            return self._window_streamed(f, offset, limit)

    @staticmethod
    def _window_whole(f: ObservedFile, offset: int, limit: int) -> ReadResult:
        doc = decode(f.read(), f.path)
        if doc.text.strip() == "":  # empty or blank: the middleware's empty-file reminder
            return ReadResult(file_data=FileData(content=doc.text, encoding="utf-8"))
        if limit == 0:
            return ReadResult(file_data=FileData(content="", encoding="utf-8"),
                              no_lines_requested=True)
        lines = split_lines(doc.text)
        total = len(lines)
        if offset >= total:
            return ReadResult(error=f"Line offset {offset} exceeds file length "
                                    f"({total} lines)")
        end = min(offset + limit, total)
        window = lines[offset:end]
        final = "\n" if end < total or doc.text.endswith("\n") else ""
        return ReadResult(
            file_data=FileData(content="\n".join(window) + final, encoding="utf-8"),
            total_lines=total, start_line=offset + 1, end_line=end,
            next_offset=end if end < total else None)

    @staticmethod
    def _window_streamed(f: ObservedFile, offset: int, limit: int) -> ReadResult:
        """A window of a file over the whole-file cap, streamed by toolfs's windowed read
        (pinned to one version; the total is known only when the window reaches the end)."""
        if limit == 0:
            return ReadResult(file_data=FileData(content="", encoding="utf-8"),
                              no_lines_requested=True)
        r = _tools._read_stream(f, offset + 1, limit)
        if r.line_count == 0:
            total = "" if r.total_lines is None else f" ({r.total_lines} lines)"
            return ReadResult(error=f"Line offset {offset} exceeds file length{total}")
        shown = []
        for i, line in enumerate(r.lines):
            cut = (r.cut_lines or {}).get(r.start_line + i)
            shown.append(line if cut is None else
                         f"{line}... [line truncated: {len(line)} of {cut.chars} characters "
                         "shown]")
        at_end = r.total_lines is not None and r.end_line >= r.total_lines
        final = "\n"
        if at_end:  # the last byte, from the same version (a ranged read at most)
            f.seek(f.size - 1)
            final = "\n" if f.read(1) == b"\n" else ""
        return ReadResult(
            file_data=FileData(content="\n".join(shown) + final, encoding="utf-8"),
            total_lines=r.total_lines, start_line=r.start_line, end_line=r.end_line,
            next_offset=None if at_end else r.end_line)

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        return await self._run(lambda e: ReadResult(error=e), self.read, file_path, offset,
                               limit, prefixed=True)

    # -- write and edit ---------------------------------------------------------------

    def write(self, file_path: str, content: str) -> WriteResult:
        """Create ``file_path``, or replace it on the version this context observed."""
        try:
            self._ws.write(_file(file_path), content)
        except FsError as err:
            return WriteResult(error=self._text(err, prefixed=False))
        return WriteResult(path=file_path)

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        return await self._run(lambda e: WriteResult(error=e), self.write, file_path, content)

    def edit(self, file_path: str, old_string: str, new_string: str,
             replace_all: bool = False) -> EditResult:
        """Replace ``old_string`` in the file as this context read it; stored only on
        that version (``stale`` if it changed since)."""
        try:
            done = self._ws.edit(_file(file_path), old_string, new_string, replace_all)
        except FsError as err:
            return EditResult(error=self._edit_error(err, file_path, old_string))
        return EditResult(path=file_path, occurrences=done.replacements)

    def _edit_error(self, err: FsError, file_path: str, old_string: str) -> str:
        if err.code in ("not_found", "not_a_file") and not err.details.get("bucket"):
            return f"Error: File '{file_path}' not found"
        if err.code == "invalid_arguments" and old_string == "":
            return _da_utils.EMPTY_OLD_STRING_ERROR
        if err.code == "no_match":
            # Deep Agents' sentence, then toolfs's whitespace hint when it has one.
            hint = err.message.removeprefix("old_string was not found in the file.")
            return f"Error: String not found in file: '{old_string}'{hint}"
        if err.code == "ambiguous_match":
            count = err.details.get("count")
            return (f"Error: String '{old_string}' appears {count} times in file. Use "
                    "replace_all=True to replace all instances, or provide a more specific "
                    "string with surrounding context.")
        return self._text(err, prefixed=False)

    async def aedit(self, file_path: str, old_string: str, new_string: str,
                    replace_all: bool = False) -> EditResult:
        return await self._run(lambda e: EditResult(error=e), self.edit, file_path,
                               old_string, new_string, replace_all)

    # -- delete ---------------------------------------------------------------------

    def delete(self, file_path: str) -> DeleteResult:
        """Delete a file on the version this context observed (like an edit); a
        directory with every file in it, as Deep Agents does, when this context has read
        each at its current version (``PolicyFileSystem.rm_tree``: checked for all
        before any is deleted)."""
        rel = _file(file_path)
        try:
            self._guarded(lambda fs: fs.rm(rel, recursive=True))
        except FsError as err:
            if err.code == "not_observed":
                # Unread (a missing file is not_found): Deep Agents words a missing
                # file its own way.
                try:
                    exists = self._guarded(lambda fs: fs.exists(rel))
                except FsError:
                    exists = True
                if not exists:
                    return DeleteResult(error=f"Error: '{file_path}' not found")
            elif err.code == "not_found":
                return DeleteResult(error=f"Error: '{file_path}' not found")
            return DeleteResult(error=self._text(err, prefixed=False))
        return DeleteResult(path=file_path)

    async def adelete(self, file_path: str) -> DeleteResult:
        return await self._run(lambda e: DeleteResult(error=e), self.delete, file_path)

    # -- glob and grep ----------------------------------------------------------------

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        """Files below ``path`` matching ``pattern`` by Deep Agents' rules, newest first
        (at most the workspace's ``glob_limit``); records no observation."""
        try:
            matches = compile_grep_include_glob(pattern)
        except InvalidGlobPatternError as exc:
            return GlobResult(error=str(exc))
        rel = _rel(path) or None

        def newest_first(f: Found) -> tuple[int, float, str]:
            return (0, -f.mtime, f.path) if f.mtime is not None and not math.isnan(f.mtime) \
                else (1, 0.0, f.path)

        def search(fs: PolicyFileSystem) -> list[Found]:
            found = (f for f in fs.list_files(rel) if matches(f.rel))
            return heapq.nsmallest(fs.glob_limit + 1, found, key=newest_first)

        try:
            best = self._guarded(search)
        except FsError as err:
            if err.code in ("not_found", "not_a_file"):
                return GlobResult(matches=[])
            return GlobResult(error=self._text(err, prefixed=True))
        limit = self.fs.glob_limit
        infos: list[FileInfo] = []
        for f in best[:limit]:
            info: FileInfo = {"path": _shown(f.path), "is_dir": False, "size": f.size or 0}
            when = _iso(f.mtime)
            if when is not None:
                info["modified_at"] = when
            infos.append(info)
        truncated = len(best) > limit
        return GlobResult(matches=infos, truncated=truncated,
                          truncation_reason="budget" if truncated else None)

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        return await self._run(lambda e: GlobResult(error=e), self.glob, pattern, path,
                               prefixed=True)

    def grep(self, pattern: str, path: str | None = None, glob: str | None = None, *,
             max_count: int | None = None) -> GrepResult:
        """Lines containing the literal ``pattern`` in the text files below ``path``
        (hidden, binary, ignored and oversized files skipped, as ripgrep does); at most
        ``max_count`` matches (and the workspace's ``grep_limit``)."""
        if glob is not None:
            try:
                compile_grep_include_glob(glob)
            except InvalidGlobPatternError as exc:
                return GrepResult(error=str(exc), matches=[])
        rel = _rel(path) or None
        include = glob
        if glob is not None and "/" in glob:
            # Deep Agents matches a glob with `/` against the path below the search path;
            # toolfs's (ripgrep's) against the path below the workspace root.
            below = glob.lstrip("/")
            include = "/" + (f"{rel.rstrip('/')}/{below}" if rel else below)
        try:
            found = self._ws.grep(_literal(pattern), rel, include,
                                        output_mode="content", head_limit=max_count)
        except FsError as err:
            if err.code == "not_found":
                return GrepResult(matches=[])
            return GrepResult(error=self._text(err, prefixed=False))
        hits: list[GrepMatch] = [{"path": _shown(m.path), "line": m.line, "text": m.text}
                                 for m in found.matches if not m.context]
        return GrepResult(matches=hits, truncated=found.truncated)

    async def agrep(self, pattern: str, path: str | None = None, glob: str | None = None,
                    *, max_count: int | None = None) -> GrepResult:
        return await self._run(lambda e: GrepResult(error=e, matches=[]),
                               lambda: self.grep(pattern, path, glob, max_count=max_count))

    # -- upload and download ------------------------------------------------------------

    @staticmethod
    def _operation_error(err: FsError) -> str | None:
        """The protocol's ``FileOperationError`` for ``err``, where one fits."""
        return {"not_found": "file_not_found", "not_a_file": "is_directory",
                "denied": "permission_denied", "outside_root": "invalid_path"}.get(err.code)

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Store each ``(path, bytes)`` under the policy: creating a file always works;
        replacing one needs this context to have observed it (else ``not_observed``)."""
        out: list[FileUploadResponse] = []
        for path, content in files:
            put = functools.partial(_put, rel=_file(path), data=content)
            try:
                self._guarded(put)
            except FsError as err:
                out.append(FileUploadResponse(
                    path=path, error=self._operation_error(err) or self._text(err, prefixed=False)))
            else:
                out.append(FileUploadResponse(path=path))
        return out

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        return await self._run(
            lambda e: [FileUploadResponse(path=p, error=e) for p, _ in files],
            self.upload_files, files)

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """The bytes of each file, whole (streamed past the size cap); each is an
        observed read."""
        out: list[FileDownloadResponse] = []
        for path in paths:
            try:
                data = self._guarded(functools.partial(_whole, rel=_file(path)))
            except FsError as err:
                out.append(FileDownloadResponse(
                    path=path, error=self._operation_error(err) or self._text(err, prefixed=False)))
            else:
                out.append(FileDownloadResponse(path=path, content=data))
        return out

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        return await self._run(
            lambda e: [FileDownloadResponse(path=p, error=e) for p in paths],
            self.download_files, paths)

    def __repr__(self) -> str:
        return f"ToolfsBackend({self.workspace!r})"


def _put(fs: PolicyFileSystem, *, rel: str, data: bytes) -> None:
    fs.pipe_file(rel, data)


def _whole(fs: PolicyFileSystem, *, rel: str) -> bytes:
    """The whole file (observed), streamed block by block past the size cap, all from
    one version: a download is the file's bytes, as from Deep Agents' own backends.

    Not ``too_large``: the summarization middleware takes a failed download of its
    history file for "no file yet" and writes only the new section, which would replace
    the whole history (this context observed it when the download opened it). Whole,
    the history's append is refused ``too_large`` by the edit instead, and kept."""
    with fs.open(rel, "rb") as f:
        return bytes(f.read())
