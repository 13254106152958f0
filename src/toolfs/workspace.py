"""``Workspace``: one execution context (one agent) over one root, with the six tools
(``read``, ``write``, ``edit``, ``glob``, ``grep``, ``ls``) and the opt-in ``notebook_edit``."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import queue
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

from fsspec.core import url_to_fs
from fsspec.spec import AbstractFileSystem
from pydantic import ValidationError

from toolfs import deadline
from toolfs.errors import PROTOCOL_EXTRAS, FsError, fs_error, install_hint
from toolfs.policy.events import AuditLog, Subscriber
from toolfs.policy.filesystem import DIFF_CHARS, PolicyFileSystem
from toolfs.policy.ledger import LedgerSnapshot
from toolfs.policy.recorder import tool_scope
from toolfs.policy.rules import Policy
from toolfs.redact import Redactor
from toolfs.render import (
    MAX_OUTPUT_CHARS,
    ToolOutput,
    check_output_budget,
    diff_budget,
    render_output,
)
from toolfs.results import (
    EditResult,
    GlobResult,
    GrepResult,
    ListResult,
    MediaResult,
    NotebookEditResult,
    NotebookReadResult,
    ReadResult,
    ToolResult,
    WriteResult,
)
from toolfs.schemas import (
    ARGS_MODELS,
    DefinitionFormat,
    EditArgs,
    GlobArgs,
    GrepArgs,
    LsArgs,
    NotebookEditArgs,
    ReadArgs,
    WriteArgs,
    optional_fields,
)
from toolfs.schemas import tool_definitions as _tool_definitions
from toolfs.tools import notebook as notebook_tools
from toolfs.tools import search as tools_discovery
from toolfs.undo.fork import Fork, open_fork
from toolfs.undo.journal import JOURNAL_BYTES, Journal
from toolfs.undo.model import Change, Checkpoint, CommitResult, RewindResult
from toolfs.undo.persist import open_journal
from toolfs.undo.rewind import rewind as undo_rewind

T = TypeVar("T")

_DEFAULT_POLICY = Policy()

# Each tool's function over the policy filesystem, by the name in ARGS_MODELS; read,
# write and edit go through notebook_tools, which handles .ipynb files as cells
# and hands every other file to toolfs.tools.
_TOOLS: dict[str, Callable[[PolicyFileSystem, Any], ToolResult]] = {
    "read": notebook_tools.read, "write": notebook_tools.write, "edit": notebook_tools.edit,
    "glob": tools_discovery.glob, "grep": tools_discovery.grep, "ls": tools_discovery.ls,
    "notebook_edit": notebook_tools.notebook_edit,
}
_OPTIONAL = {name: optional_fields(name) for name in ARGS_MODELS}


class Workspace:
    """The six tools (and ``notebook_edit``) for one agent, confined to one root.

    ``Workspace("memory://proj")``, ``Workspace("/srv/repo")``,
    ``Workspace("s3://bucket/prefix", storage_options={...})`` or
    ``Workspace(fs, root="...")`` for a filesystem you already have.

    Options (all keyword): ``policy`` (``None`` turns the observation rules off),
    ``read_only``, ``deny`` (globs), ``size_cap``, ``first_block``, ``block_size``,
    ``cache_bytes``, ``context_id``, ``subscribers``, ``diff_chars``,
    ``trust_conditions`` -- see :class:`~toolfs.policy.PolicyFileSystem`;
    ``max_output_chars`` (default 100,000): the character budget of what :meth:`execute`
    returns to the model (a ``stale`` refusal's diff is kept within it: ``diff_chars``
    defaults to what fits); ``timeout`` (seconds, default 30.0, ``None``: no deadline):
    every tool call, with every request, retry and back-off in it, ends by then
    (``backend_error`` saying what is unknown; see :mod:`toolfs.deadline`).
    ``Workspace(..., policy=toolfs.Policy(on_stale="merge"))`` merges a change made from
    an outdated version when it does not overlap the other change (docs/policy.md).
    ``journal`` (an fsspec URL; default: in memory), ``journal_options`` (its storage
    options; default: ``storage_options``) and ``journal_bytes`` (default 256 MiB): the
    journal of this context's changes, for :meth:`changes` and :meth:`rewind`
    (docs/policy.md, "Undo and forks").
    """

    def __init__(
        self,
        url: str | AbstractFileSystem,
        storage_options: Mapping[str, Any] | None = None,
        *,
        root: str | None = None,
        policy: Policy | None = _DEFAULT_POLICY,
        **options: Any,
    ) -> None:
        self._redact = Redactor.for_options(dict(storage_options or {}))
        try:
            if isinstance(url, AbstractFileSystem):
                fs, path = url, root if root is not None else ""
                if storage_options:
                    raise fs_error("invalid_arguments",
                                   "storage_options only apply when a URL is given")
                # A filesystem made elsewhere still knows its credentials: mask them too.
                self._redact = Redactor.for_options(
                    dict(getattr(fs, "storage_options", None) or {}))
            else:
                try:
                    fs, path = url_to_fs(url, **dict(storage_options or {}))
                except (ImportError, ValueError, TypeError) as exc:
                    raise fs_error("invalid_arguments", f"cannot open {url}: {exc}"
                                   + _extra_hint(url, exc)) from exc
                if root is not None:
                    path = f"{path.rstrip('/')}/{root.strip('/')}" if root else path
            self.url = url if isinstance(url, str) else f"{type(url).__name__}:{path}"
            self._storage_options = dict(storage_options or {})
            self._options = {"policy": policy, **options}
            self.max_output_chars = check_output_budget(
                options.pop("max_output_chars", MAX_OUTPUT_CHARS))
            self.timeout = deadline.check_timeout(
                options.pop("timeout", deadline.DEFAULT_TIMEOUT))
            # A stale refusal's diff is shown whole in the model's text or counts for
            # nothing: it must fit the output budget.
            options.setdefault("diff_chars",
                               min(DIFF_CHARS, diff_budget(self.max_output_chars)))
            self.audit = AuditLog()
            subscribers = [self.audit, *options.pop("subscribers", [])]
            journal_url = options.pop("journal", None)
            journal_bytes = options.pop("journal_bytes", JOURNAL_BYTES)
            journal_options = options.pop("journal_options", None)
            self.fs = PolicyFileSystem(fs, path, policy=policy, subscribers=subscribers,
                                       **options)
            self.journal: Journal = open_journal(self.fs, journal_url,
                                                 journal_bytes=journal_bytes,
                                                 storage_options=self._storage_options
                                                 if journal_options is None
                                                 else journal_options)
            self.fs.journal = self.journal
        except FsError as err:
            masked = self._masked(err)
            raise masked from masked.__cause__
        except Exception as exc:  # a client library's own error (DNS, auth, ...)
            what = url if isinstance(url, str) else "the filesystem"
            failure = fs_error("backend_error",
                               f"cannot open {what}: {type(exc).__name__}: {exc}")
            failure.__cause__ = exc
            masked = self._masked(failure)
            raise masked from masked.__cause__

    # -- the tools ----------------------------------------------------------------

    # The typed methods skip building the arguments model when every argument already
    # has exactly the type and range the schema's strict validation would accept
    # unchanged (the model would hold the same values); anything else is validated,
    # so every refusal is the schema's own.

    def read(self, file_path: str, offset: int | None = None,
             limit: int | None = None) -> ReadResult | MediaResult | NotebookReadResult:
        """Read numbered lines; an image or a PDF gives a
        :class:`~toolfs.results.MediaResult` (``offset``/``limit`` count a PDF's pages),
        a notebook its cells (``offset``/``limit`` count cells). Raises
        :class:`~toolfs.errors.FsError`."""
        if (type(file_path) is str and _positive_or_none(offset)
                and _positive_or_none(limit)):
            return self._guarded(notebook_tools.read_file, file_path, offset, limit)
        return self._guarded(notebook_tools.read, _validated(
            ReadArgs, file_path=file_path, offset=offset, limit=limit))

    def write(self, file_path: str, content: str) -> WriteResult:
        """Create or replace a file; raises :class:`~toolfs.errors.FsError`."""
        if type(file_path) is str and type(content) is str:
            return self._guarded(notebook_tools.write_file, file_path, content)
        return self._guarded(notebook_tools.write, _validated(
            WriteArgs, file_path=file_path, content=content))

    def edit(self, file_path: str, old_string: str, new_string: str,
             replace_all: bool = False) -> EditResult | NotebookEditResult:
        """Replace literal text (in a notebook: in the cells' sources); raises
        :class:`~toolfs.errors.FsError`."""
        if (type(file_path) is str and type(old_string) is str and type(new_string) is str
                and type(replace_all) is bool and old_string and old_string != new_string):
            return self._guarded(notebook_tools.edit_file, file_path, old_string, new_string,
                                 replace_all)
        return self._guarded(notebook_tools.edit, _validated(
            EditArgs, file_path=file_path, old_string=old_string, new_string=new_string,
            replace_all=replace_all))

    def notebook_edit(self, file_path: str, cell_id: str, new_source: str,
                      cell_type: Literal["code", "markdown"] | None = None,
                      edit_mode: Literal["replace", "insert", "delete"] = "replace"
                      ) -> NotebookEditResult:
        """Replace, insert (after ``cell_id``; ``""``: at the top) or delete one cell of a
        notebook; replacing a code cell's source clears its outputs. Raises
        :class:`~toolfs.errors.FsError`."""
        with tool_scope("notebook_edit"):
            return self._guarded(notebook_tools.notebook_edit, _validated(
                NotebookEditArgs, file_path=file_path, cell_id=cell_id,
                new_source=new_source, cell_type=cell_type, edit_mode=edit_mode))

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        """Files whose path below ``path`` matches ``pattern``, newest first (at most
        ``glob_limit``); records no observation. Raises :class:`~toolfs.errors.FsError`."""
        return self._guarded(tools_discovery.glob, _validated(
            GlobArgs, pattern=pattern, path=path))

    def grep(self, pattern: str, path: str | None = None, glob: str | None = None,
             output_mode: str = "files_with_matches", ignore_case: bool = False,
             context: int = 0, head_limit: int | None = None) -> GrepResult:
        """Search the text files below ``path`` for an RE2 regular expression; records no
        observation. Raises :class:`~toolfs.errors.FsError`."""
        return self._guarded(tools_discovery.grep, _validated(
            GrepArgs, pattern=pattern, path=path, glob=glob, output_mode=output_mode,
            ignore_case=ignore_case, context=context, head_limit=head_limit))

    def ls(self, path: str | None = None) -> ListResult:
        """The immediate children of a directory (at most ``ls_limit``), sorted by name.
        Raises :class:`~toolfs.errors.FsError`."""
        return self._guarded(tools_discovery.ls, _validated(LsArgs, path=path))

    def execute(self, tool: str, arguments: Any) -> ToolOutput:
        """Run a tool from a model's call. Never raises for tool errors or bad input.

        ``arguments`` is a mapping, or a JSON object as a string (as the OpenAI SDK
        hands a function call's arguments over).
        """
        try:
            value = self._dispatch(tool, arguments)
        except FsError as known:
            return render_output(known, self.max_output_chars)
        except Exception as exc:  # the model must get a result, never a traceback
            err = fs_error("backend_error", f"{type(exc).__name__}: {exc}")
            err.__cause__ = exc
            err = self._masked(err)
            return render_output(err, self.max_output_chars)
        return render_output(value, self.max_output_chars)

    def masked(self, err: FsError) -> FsError:
        """``err`` (changed in place) with this workspace's credentials masked in its
        message, path, details and causes: for an adapter's own refusals, which do not
        pass through :meth:`run`."""
        return self._masked(err)

    def redacted(self, text: str) -> str:
        """``text`` with this workspace's credentials masked (an adapter's own wording)."""
        return self._redact.message(text)

    def _masked(self, err: FsError) -> FsError:
        """``err`` with credentials masked in its message, details and causes."""
        err.message = self._redact.message(err.message)
        err.args = (err.message,)
        if err.path is not None:
            err.path = self._redact.message(err.path)
        err.details = self._redact.data(err.details)
        self._redact.chain(err)
        return err

    def run(self, fn: Callable[[PolicyFileSystem], T]) -> T:
        """``fn(fs)`` on this context's policy filesystem, with the tools' guarantee for
        what leaves: an :class:`FsError`, credentials masked, whatever ``fn`` raised.

        For adapters that compose the policy filesystem's operations into a tool of
        another shape (``open_for_edit`` + ``ObservedFile.commit``, ``rm_file``, ...)."""
        return self._guarded(fn)

    def _guarded(self, tool: Callable[..., T], *args: Any) -> T:
        """``tool(fs, *args)``; every failure leaves as an ``FsError`` with credentials
        masked. The call ends by this workspace's ``timeout``."""
        try:
            with deadline.scope(self.timeout):
                return tool(self.fs, *args)
        except FsError as err:
            masked = self._masked(err)
            raise masked from masked.__cause__
        except Exception as exc:  # a bug or a client library's surprise: still an FsError
            failure = fs_error("backend_error", f"{type(exc).__name__}: {exc}")
            failure.__cause__ = exc
            masked = self._masked(failure)
            raise masked from masked.__cause__

    def _dispatch(self, tool: str, arguments: Any) -> ToolResult:
        model = ARGS_MODELS.get(tool) if isinstance(tool, str) else None
        if model is None:
            raise fs_error("invalid_arguments",
                           f"unknown tool {str(tool)[:50]!r}; the tools are "
                           + ", ".join(ARGS_MODELS))
        if isinstance(arguments, str | bytes):
            try:
                arguments = json.loads(arguments)
            except RecursionError:  # json's recursive decoder on deeply nested input
                raise fs_error("invalid_arguments",
                               "arguments are not valid JSON: nested too deeply") from None
            except ValueError as exc:
                raise fs_error("invalid_arguments",
                               f"arguments are not valid JSON: {exc}") from None
        if not isinstance(arguments, Mapping):
            raise fs_error("invalid_arguments", "arguments must be a JSON object")
        if not all(isinstance(k, str) for k in arguments):
            raise fs_error("invalid_arguments", "argument names must be strings")
        # A strict-mode model sends every property, the optional ones as null
        # (`tool_definitions(strict=True)`): null there means "not given".
        optional = _OPTIONAL[tool]
        given = {k: v for k, v in arguments.items() if v is not None or k not in optional}
        with tool_scope(tool):
            return self._guarded(_TOOLS[tool], _validate(model, given))

    # -- undo: the journal of this context's changes --------------------------------

    def checkpoint(self, label: str | None = None) -> Checkpoint:
        """A point in this context's journal to :meth:`rewind` to (``label``: a name to
        find it by)."""
        return self._guarded(lambda fs: self.journal.checkpoint(label))

    def changes(self, since: Checkpoint | str | int | None = None) -> list[Change]:
        """This context's changes (after checkpoint ``since``, or all), oldest first:
        every write, edit, notebook edit, delete and move it committed, through any
        tool or adapter. Never shown to the model unless an adapter offers it.

        On a fork, ``changes()`` (no ``since``) lists the fork's changes against the
        base versions they were made from (:meth:`toolfs.undo.fork.Fork.changes`): what
        :meth:`commit` would land."""
        def listed(fs: PolicyFileSystem) -> list[Change]:
            if since is None and self._fork is not None:
                return self._fork.changes()
            start = 0 if since is None else self.journal.find_checkpoint(since).position
            return self.journal.changes(start)
        return self._guarded(listed)

    def rewind(self, checkpoint: Checkpoint | str | int) -> RewindResult:
        """Bring every file this context changed after ``checkpoint`` back to its content
        then, all or nothing, never over someone else's change (``stale`` with the diff
        of their change; merged when ``Policy(on_stale="merge")`` and disjoint). See
        docs/policy.md, "Undo and forks"."""
        def rewound(fs: PolicyFileSystem) -> RewindResult:
            cp = self.journal.find_checkpoint(checkpoint)
            result = undo_rewind(fs, self.journal, cp.position)
            for err in result.refused.values():
                self._masked(err)
            return result
        return self._guarded(rewound)

    # -- context ------------------------------------------------------------------

    @property
    def context_id(self) -> str:
        return self.fs.context_id

    def tool_definitions(self, format: DefinitionFormat = "json_schema",
                         tools: list[str] | tuple[str, ...] | None = None, *,
                         strict: bool = False) -> list[dict[str, Any]]:
        """The tool definitions (see :func:`toolfs.tool_definitions`)."""
        return _tool_definitions(format, tools, strict=strict)

    def check_root(self) -> None:
        """Raise ``not_found`` if the root cannot hold files (a missing bucket or
        directory), ``not_a_file`` if it is a file, and ``unsupported`` if the service
        ignores conditional writes (unless ``trust_conditions`` or ``read_only``; see
        :meth:`~toolfs.policy.PolicyFileSystem.verify_conditions`). One request on object
        stores, plus the condition probe once per process and bucket (see
        docs/backends.md); servers call it once at start."""

        def check(fs: PolicyFileSystem) -> None:
            fs.store.check_root()
            fs.verify_conditions()

        self._guarded(check)

    def snapshot(self) -> LedgerSnapshot:
        """What this context observed, to :meth:`restore` after a restart."""
        return self.fs.ledger.snapshot()

    def restore(self, snapshot: LedgerSnapshot) -> None:
        """Resume from a :meth:`snapshot` (cached content is not restored)."""
        self.fs.ledger.restore(snapshot)

    def subscribe(self, subscriber: Subscriber) -> Subscriber:
        """Receive ``fs/*`` events (see :mod:`toolfs.policy.events`)."""
        return self.fs.subscribe(subscriber)

    def new_context(self, **overrides: Any) -> Workspace:
        """Another execution context (fresh ledger) over the same filesystem and root."""
        options = {k: v for k, v in self._options.items() if k != "context_id"}
        options.update(overrides)
        context = Workspace(self.fs.fs, root=self.fs.jail.root, **options)
        context._fork = self._fork  # another context of the same fork, if this is one
        return context

    # -- forks (toolfs.undo.fork; docs/policy.md, "Forks") ---------------------------

    _fork: Fork | None = None

    def fork(self, overlay: str | None = None, *,
             storage_options: Mapping[str, Any] | None = None) -> Workspace:
        """A copy-on-write view of this workspace, with the same policy, for one more
        context that starts from what this one observed: its changes go to an overlay
        (in memory, or at the fsspec URL ``overlay``, which survives the process and is
        reopened by forking with the same URL) until :meth:`commit` lands them here,
        all or nothing, or :meth:`discard` drops them. Other contexts here see nothing
        of them before."""
        def opened(fs: PolicyFileSystem) -> Workspace:
            made = open_fork(fs, overlay, storage_options)
            # A context of its own (its journal in memory), over the overlay's store.
            options = {k: v for k, v in self._options.items()
                       if k not in ("context_id", "journal")}
            child = Workspace(made.fs, root=fs.jail.root, **{**options, "store": made.store})
            child._fork = made
            child.restore(fs.ledger.snapshot())
            return child

        return self._guarded(opened)

    def commit(self) -> CommitResult:
        """Land this fork's changes in the workspace it was forked from, all or nothing
        (:meth:`toolfs.undo.fork.Fork.commit`); the fork goes on from there."""
        def committed(fs: PolicyFileSystem) -> CommitResult:
            result = self._forked().commit(fs)
            for err in result.refused.values():
                self._masked(err)
            return result

        return self._guarded(committed)

    def discard(self) -> None:
        """Drop this fork's changes and its overlay; the fork is spent."""
        self._guarded(lambda fs: self._forked().discard())

    def _forked(self) -> Fork:
        if self._fork is None:
            raise fs_error("invalid_arguments", "this workspace is not a fork; "
                           "commit and discard apply to the workspace fork() returned")
        return self._fork

    def __repr__(self) -> str:
        return f"Workspace({self._redact.message(self.url)!r}, context_id={self.context_id!r})"


class AsyncWorkspace:
    """The same tools as coroutines, for async agents and servers.

    Each call runs the synchronous tool on a worker thread; S3 and GCS I/O inside it is
    awaited on fsspec's own event loop. The caller's event loop is never blocked.
    Contexts made with :meth:`new_context` share their parent's ``max_workers`` threads.
    """

    def __init__(self, url: str | AbstractFileSystem | Workspace,
                 storage_options: Mapping[str, Any] | None = None, *,
                 max_workers: int = 32,
                 _pool: _Workers | None = None,
                 **options: Any) -> None:
        self.sync = url if isinstance(url, Workspace) else Workspace(
            url, storage_options, **options)
        self._owns_pool = _pool is None
        self._pool = _pool or _Workers(max_workers)

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.submit(fn, *args)

    def submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Start ``fn(*args)`` on this workspace's worker threads now, from the running
        event loop; the future settles on that loop (cancelling it before a worker takes
        the call means it never runs). Raises ``RuntimeError`` once closed."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        timeout = self.sync.timeout
        if timeout is not None:  # the call's time runs from now, its wait for a worker too
            fn, args = _within_deadline, (fn, timeout, time.monotonic(), args)
        self._pool.submit(future, fn, args)
        return future

    async def run(self, fn: Callable[[PolicyFileSystem], T]) -> T:
        """:meth:`Workspace.run` on a worker thread: ``fn(fs)`` may block."""
        return await self._run(self.sync.run, fn)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on this workspace's worker threads (for an adapter's own
        blocking function that calls :meth:`Workspace.run` or the sync tools)."""
        return await self._run(fn, *args)

    async def read(self, file_path: str, offset: int | None = None,
                   limit: int | None = None
                   ) -> ReadResult | MediaResult | NotebookReadResult:
        return await self._run(self.sync.read, file_path, offset, limit)

    async def write(self, file_path: str, content: str) -> WriteResult:
        return await self._run(self.sync.write, file_path, content)

    async def edit(self, file_path: str, old_string: str, new_string: str,
                   replace_all: bool = False) -> EditResult | NotebookEditResult:
        return await self._run(self.sync.edit, file_path, old_string, new_string, replace_all)

    async def notebook_edit(self, file_path: str, cell_id: str, new_source: str,
                            cell_type: Literal["code", "markdown"] | None = None,
                            edit_mode: Literal["replace", "insert", "delete"] = "replace"
                            ) -> NotebookEditResult:
        return await self._run(self.sync.notebook_edit, file_path, cell_id, new_source,
                               cell_type, edit_mode)

    async def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        return await self._run(self.sync.glob, pattern, path)

    async def grep(self, pattern: str, path: str | None = None, glob: str | None = None,
                   output_mode: str = "files_with_matches", ignore_case: bool = False,
                   context: int = 0, head_limit: int | None = None) -> GrepResult:
        return await self._run(self.sync.grep, pattern, path, glob, output_mode,
                               ignore_case, context, head_limit)

    async def ls(self, path: str | None = None) -> ListResult:
        return await self._run(self.sync.ls, path)

    async def execute(self, tool: str, arguments: Any) -> ToolOutput:
        """:meth:`Workspace.execute` on a worker thread. Never raises for tool errors,
        bad input or a worker pool that cannot take the call (closed): that is a
        ``backend_error`` result, so an agent framework never gets an exception where
        the model should get text. Cancellation still propagates."""
        try:
            return await self._run(self.sync.execute, tool, arguments)
        except Exception as exc:
            return self.failed_output(exc)

    def failed_output(self, exc: Exception) -> ToolOutput:
        """What :meth:`execute` answers for a call that could not run: a
        ``backend_error`` naming ``exc``, credentials masked."""
        err = fs_error("backend_error", f"{type(exc).__name__}: {exc}")
        err.__cause__ = exc
        return render_output(self.sync.masked(err), self.sync.max_output_chars)

    @property
    def context_id(self) -> str:
        return self.sync.context_id

    async def checkpoint(self, label: str | None = None) -> Checkpoint:
        """:meth:`Workspace.checkpoint` (a persisted journal writes a record)."""
        return await self._run(self.sync.checkpoint, label)

    async def changes(self, since: Checkpoint | str | int | None = None) -> list[Change]:
        """:meth:`Workspace.changes`."""
        return await self._run(self.sync.changes, since)

    async def rewind(self, checkpoint: Checkpoint | str | int) -> RewindResult:
        """:meth:`Workspace.rewind` on a worker thread."""
        return await self._run(self.sync.rewind, checkpoint)

    async def fork(self, overlay: str | None = None, *,
                   storage_options: Mapping[str, Any] | None = None) -> AsyncWorkspace:
        """:meth:`Workspace.fork` (an overlay URL is opened on a worker thread); the
        fork runs on the same worker threads."""
        made = await self._run(lambda: self.sync.fork(overlay,
                                                      storage_options=storage_options))
        return AsyncWorkspace(made, _pool=self._pool)

    async def commit(self) -> CommitResult:
        """:meth:`Workspace.commit` on a worker thread."""
        return await self._run(self.sync.commit)

    async def discard(self) -> None:
        """:meth:`Workspace.discard` on a worker thread."""
        await self._run(self.sync.discard)

    def new_context(self, **overrides: Any) -> AsyncWorkspace:
        """Another execution context over the same root, on the same worker threads."""
        return AsyncWorkspace(self.sync.new_context(**overrides), _pool=self._pool)

    def close(self) -> None:
        """Release the worker threads (those of the context that created them); calls
        already running finish."""
        if self._owns_pool:
            self._pool.shutdown()


def _extra_hint(url: str, exc: Exception) -> str:
    """The install command of the extra a URL's protocol needs, when opening it failed
    for a missing module (fsspec says "Install s3fs to access S3")."""
    if not isinstance(exc, ImportError):
        return ""
    for part in url.split("::"):
        protocol = part.split("://", 1)[0] if "://" in part else ""
        if protocol in PROTOCOL_EXTRAS:
            return f"; {install_hint(PROTOCOL_EXTRAS[protocol])}"
    return ""


class _Workers:
    """The worker threads of an :class:`AsyncWorkspace` and the contexts made from it.

    A lighter hop than ``loop.run_in_executor``: one ``SimpleQueue`` of
    ``(future, fn, args)``, and the result handed back with one
    ``call_soon_threadsafe`` (no ``concurrent.futures.Future`` and no chained
    callbacks). Threads start on demand, up to ``max_workers``, and wait on the queue;
    like the executor's, they finish the call they are running at interpreter exit.
    """

    def __init__(self, max_workers: int) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self._max = max_workers
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False
        _live_workers.add(self)

    def check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this AsyncWorkspace is closed")

    def submit(self, future: asyncio.Future[T], fn: Callable[..., T],
               args: tuple[Any, ...]) -> None:
        """Run ``fn(*args)`` on a worker; its outcome settles ``future`` on its loop."""
        self.check_open()
        self._queue.put((future, fn, args))
        if self._idle.acquire(blocking=False):
            return  # a waiting worker takes it
        with self._lock:
            if len(self._threads) < self._max and not self._closed:
                # The thread holds the pool weakly (as the executor's do): an
                # AsyncWorkspace dropped without close() lets its threads end.
                q = self._queue
                owner = weakref.ref(self, lambda _, q=q: q.put(None))  # type: ignore[misc]
                thread = threading.Thread(target=_work, args=(owner, q, self._idle),
                                          daemon=True, name=f"toolfs_{len(self._threads)}")
                self._threads.append(thread)
                thread.start()

    def shutdown(self, *, wait: bool = False) -> None:
        """No new calls; the workers exit once the queue is drained."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = list(self._threads)
        self._queue.put(None)
        if wait:
            for thread in threads:
                thread.join()


def _work(owner: weakref.ref[_Workers], q: queue.SimpleQueue[Any],
          idle: threading.Semaphore) -> None:
    """A worker's loop: run queued calls until the pool shuts down or is dropped."""
    get = q.get
    while True:
        item = get()
        if item is None:  # shutdown (or the pool was dropped): pass it on, then end
            q.put(None)
            return
        future, fn, args = item
        del item
        if future.cancelled():  # cancelled before it started: never run, as the
            del future, fn, args  # executor skips a cancelled work item
            idle.release()
            continue
        try:
            outcome: tuple[bool, Any] = (True, fn(*args))
        except BaseException as exc:  # handed to the caller, as an executor does
            outcome = (False, exc)
        with contextlib.suppress(RuntimeError):  # the caller's loop is closed
            future.get_loop().call_soon_threadsafe(_settle, future, outcome)
        del future, fn, args, outcome
        idle.release()
        if owner() is None:
            return


def _within_deadline(fn: Callable[..., T], timeout: float, since: float,
                     args: tuple[Any, ...]) -> T:
    """``fn(*args)`` under a deadline counted from ``since`` (when it was submitted)."""
    with deadline.scope(timeout, since=since):
        return fn(*args)


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.cancelled():
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


_live_workers: weakref.WeakSet[_Workers] = weakref.WeakSet()


@atexit.register
def _finish_running_calls() -> None:
    """At interpreter exit, let every worker finish the call it is running (a write
    half done would leave a temp file), as ``concurrent.futures`` does for its
    threads."""
    for workers in list(_live_workers):
        workers.shutdown(wait=True)


def _positive_or_none(value: object) -> bool:
    """``None`` or an ``int`` (not a ``bool``) of at least 1: what ``offset`` and
    ``limit`` accept as they are."""
    return value is None or (type(value) is int and value >= 1)


def _validated(model: type[T], **fields: Any) -> T:
    """Validate typed-method arguments (``None`` for offset/limit means "not given")."""
    return _validate(model, {k: v for k, v in fields.items()
                             if v is not None
                             or k not in ("offset", "limit", "head_limit", "cell_type")})


def _validate(model: type[T], given: dict[str, Any]) -> T:
    """Validate tool arguments, turning pydantic's error into ``invalid_arguments`` with
    plain sentences (no pydantic wording such as "Value error, ")."""
    try:
        return model.model_validate(given)  # type: ignore[attr-defined, no-any-return]
    except ValidationError as exc:
        names = ", ".join(model.model_fields)  # type: ignore[attr-defined]
        problems = []
        for e in exc.errors(include_url=False, include_input=False):
            where = ".".join(str(p) for p in e["loc"])
            msg = str(e["msg"]).removeprefix("Value error, ")
            if e["type"] == "extra_forbidden":
                problems.append(f"unknown argument {where[:50]!r} (the arguments are "
                                f"{names})")
            elif e["type"] == "missing":
                problems.append(f"missing required argument {where!r}")
            else:
                problems.append(f"{where}: {msg}" if where else msg)
        raise fs_error("invalid_arguments", "invalid arguments: " + "; ".join(problems),
                       details={"errors": problems}) from None
