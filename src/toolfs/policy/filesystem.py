"""``PolicyFileSystem``: the wrapper filesystem that enforces the observation policy.

It wraps any fsspec filesystem, confines every path to a root, records what this
execution context observed, and commits every change through the backend's
conditional store.

**The condition travels with the bytes.** A change is committed through the handle it
was derived from, never re-derived from a path and the ledger at commit time:

* ``open(path, "rb")`` returns an :class:`ObservedFile`. Its ``version`` is the version of
  exactly the bytes it yields, and opening it records that version as observed. Files up
  to the whole-file cap are fetched whole when opened (``complete`` is true); larger ones
  stream in blocks pinned to that version, so a concurrent change gives ``stale``, never
  a torn view. ``open(path, "rb", intent="edit")`` yields the bytes *at the observed
  version* (from the ledger's cache when it holds them) and records nothing new.
* :meth:`ObservedFile.commit` stores bytes derived from that file on exactly its
  ``version`` (whatever the policy): two parallel edits of one context computed from the
  same version cannot both land; the second is ``stale``.
* :meth:`PolicyFileSystem.prepare_write` takes a write's condition from what this context
  observed *when the write starts* and returns a :class:`PendingWrite`; its ``commit``
  stores on that condition. ``pipe_file``, ``open(path, "wb")``, ``write_text``, ``pipe``,
  ``put_file``, ``cp_file``, ``mv`` and ``touch`` all end up there.
* ``rm_file`` deletes under the same rules as an update; ``rm(path, recursive=True)``
  (:meth:`PolicyFileSystem.rm_tree`) deletes a directory's files each on the version this
  context observed, after checking every one. Every other mutating method raises
  ``denied``; read-only methods are forwarded with paths confined, and fresh.

Events (:mod:`toolfs.policy.events`): ``fs/read`` and ``fs/write-intent`` are emitted
*before* anything is recorded or stored, and a subscriber that raises (``Veto`` or any
other error) refuses the operation with ``denied``; ``fs/written`` and ``fs/denied`` are
notifications after the fact, and a subscriber that raises there is logged and ignored,
so the tool's answer always matches what happened on storage.

This module is the fsspec face: construction, and the fsspec methods that read, write,
move and delete. :class:`PolicyFileSystem` joins layers that each hold one concern, in
their own modules: :mod:`toolfs.policy.guards` (confinement, deny rules, ``read_only``,
events, the wording of refusals), :mod:`toolfs.policy.observe_commit` (reads that record,
conditional commits, stale diffs and merges), :mod:`toolfs.policy.handles` (the handles
a change travels with), :mod:`toolfs.policy.listings` (discovery's listings) and
:mod:`toolfs.policy.forwarding` (the read-only lookups).
"""

from __future__ import annotations

import contextlib
import io
import os
import uuid
from glob import has_magic
from typing import Any, ClassVar, Literal

from fsspec import utils as fsspec_utils
from fsspec.spec import AbstractFileSystem

from toolfs.backends import Overwrite, Store, Update, store_for, unwrapped
from toolfs.errors import FsError, fs_error
from toolfs.escaping import escape_undecodable
from toolfs.policy.chaining import (
    ChainedBase,
    OneContextPerOptions,
    policy_option,
    target_filesystem,
)
from toolfs.policy.content_cache import DEFAULT_CACHE_BYTES, shared_cache
from toolfs.policy.events import Operation, Subscriber
from toolfs.policy.forwarding import Forwarding
from toolfs.policy.handles import (
    ObservedFile,
    PendingWrite,
    _CommitOnClose,
    _TextCommitOnClose,
    target_names,
)
from toolfs.policy.ledger import Ledger
from toolfs.policy.listings import Found, Listings
from toolfs.policy.observe_commit import DIFF_CHARS, Commit, ObserveCommit
from toolfs.policy.paths import Jail, Target
from toolfs.policy.recorder import ChangeRecorder, move_scope
from toolfs.policy.refused_writes import keep
from toolfs.policy.rules import Policy, deny_matcher
from toolfs.versions import FileVersion

__all__ = ["DIFF_CHARS", "Commit", "Found", "ObservedFile", "PendingWrite", "PolicyFileSystem"]
# Commit, Found, ObservedFile, PendingWrite and DIFF_CHARS live in the layers below and
# are re-exported here, where code written before the split imports them from.

MiB = 1024 * 1024


class PolicyFileSystem(Forwarding, Listings, ObserveCommit, ChainedBase,  # type: ignore[misc]
                       metaclass=OneContextPerOptions):
    """An fsspec filesystem that guards another one for one execution context.

    Two ways to make one:

    * ``PolicyFileSystem(fs, root)`` (what ``Workspace`` does): paths are relative to
      ``root`` (``toolfs://dir/file.csv`` is ``dir/file.csv``); every construction is a
      new context.
    * From fsspec, by protocol: ``toolfs::s3://bucket/prefix/file.csv`` (a chained URL,
      with ``storage_options={"s3": {...}, "toolfs": {...}}``) or
      ``fsspec.filesystem("toolfs", target_protocol="s3", target_options={...})``. Paths
      are the wrapped filesystem's own (``bucket/prefix/file.csv``), ``root`` confines
      them (default: the whole filesystem), and instances are cached by their options,
      so calls with the same options share one context (see
      :mod:`toolfs.policy.chaining`).

    Args:
        fs: the filesystem to wrap (or ``target_protocol`` and ``target_options``).
        root: the jail, in ``fs``'s own path form (``/srv/repo``, ``bucket/prefix``).
        context_id: names this context in events and snapshots (default: random).
        policy: the observation rules; ``None`` turns them off (writes are unconditional;
            an edit is still conditional on the version it read), leaving confinement,
            ``read_only``, ``deny`` and caps in force.
        read_only: refuse every change with ``denied``.
        deny: gitignore-style globs (``.git/**``, ``.env``) refused with ``denied``; they
            are matched on the path the model gave *and* on the file actually reached
            through symlinks, case-folded where the filesystem folds case.
        size_cap: largest file that is read whole, edited or written (bytes).
        first_block: bytes asked for by the first request of a read; files up to this
            size cost one request.
        block_size: bytes per request when streaming a file over ``size_cap``.
        cache_bytes: memory bound of the observed-content cache.
        store: the conditional-store adapter (default: chosen by ``fs``'s type).
        target_protocol, target_options: the filesystem to wrap, by protocol and
            options, when ``fs`` is not given (fsspec's chaining passes these).
        fo: the path of a chained URL (fsspec passes it; the path is also what is
            opened, so it is not kept).
        diff_chars: the most characters of diff a ``stale`` refusal (or a write-intent
            event) carries; a refusal whose whole diff fits counts as an observation of
            the current version.
        trust_conditions: skip the check that the service honours conditional writes
            (S3, GCS, Azure: probed once per process and bucket before the first write,
            see :mod:`toolfs.backends.conditions`) and write even where it failed,
            accepting that concurrent changes may be lost there.
        content_cache_bytes: byte budget of the discovery content cache
            (:mod:`toolfs.policy.content_cache`): ``grep`` on a store whose listing carries
            versions (S3, GCS, Azure) does not download again an object listed at the
            version it cached. One cache per process and option set, shared by every
            context; 0 turns it off.
        content_cache_dir: hold that cache's bytes as files in this directory instead of
            in memory.
        journal: told of every change before and after it is stored (a
            :class:`toolfs.undo.Journal`; :mod:`toolfs.policy.recorder`), so that the
            changes can be listed and rewound; a ``Workspace`` gives its own.
        grep_engine: ``"ripgrep"`` (default): local ``grep`` is answered by ripgrep where
            an ``rg`` binary is available (:mod:`toolfs.search.ripgrep`; its answer defines
            which files match, the differences are in docs/contract.md); ``"python"``,
            and wherever ripgrep is missing or cannot answer exactly: toolfs reads and
            searches every candidate itself (:mod:`toolfs.search.grep_workers`). Object stores
            and memory always use the Python engine.
    """

    protocol: ClassVar[str] = "toolfs"
    # fsspec's own cache keys instances by their arguments and thread; two contexts
    # must never share a ledger, so it is off, and OneContextPerOptions caches only the
    # instances fsspec builds by protocol (one per set of options: one context).
    cachable: ClassVar[bool] = False
    _strip_tokenize_options: ClassVar[tuple[str, ...]] = ("fo",)

    def __init__(
        self,
        fs: AbstractFileSystem | None = None,
        root: str | None = None,
        *,
        context_id: str | None = None,
        policy: Policy | None = Policy(),  # noqa: B008 - frozen value object
        read_only: bool = False,
        deny: tuple[str, ...] | list[str] = (),
        size_cap: int = 10 * MiB,
        first_block: int = 1 * MiB,
        block_size: int = 256 * 1024,
        cache_bytes: int = 32 * MiB,
        store: Store | None = None,
        subscribers: list[Subscriber] | None = None,
        glob_limit: int = 200,
        grep_limit: int = 10_000,
        ls_limit: int = 1_000,
        max_in_flight: int = 16,
        gitignore: bool = True,
        target_protocol: str | None = None,
        target_options: dict[str, Any] | None = None,
        fo: str | None = None,
        diff_chars: int = DIFF_CHARS,
        trust_conditions: bool = False,
        content_cache_bytes: int = DEFAULT_CACHE_BYTES,
        content_cache_dir: str | None = None,
        journal: ChangeRecorder | None = None,
        grep_engine: Literal["python", "ripgrep"] = "ripgrep",
    ) -> None:
        super().__init__()
        policy = policy_option(policy)
        self.absolute_paths = fs is None
        """Paths are the wrapped filesystem's own (a filesystem made by protocol), not
        relative to the root."""
        if fs is None:
            if not target_protocol:
                raise fs_error("invalid_arguments", "give the filesystem to wrap (fs) or "
                               "its protocol (target_protocol)")
            fs = target_filesystem(target_protocol, target_options, fo)
            root = fs.root_marker if root is None else fs._strip_protocol(root)
        root = root or ""
        if store is None:  # a DirFileSystem over a known backend gets that backend's store
            fs, root = unwrapped(fs, root)
        self.fs = fs
        protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
        self.store = store or store_for(fs, root=root or None, size_cap=size_cap)
        self.jail = Jail(root, tuple(protocols),
                         resolve_symlinks=self.store.capabilities.symlinks,
                         own_protocol=self.protocol, absolute=self.absolute_paths)
        # Reads and writes that reach a file only through the store leave the stat of the
        # root (a parent swapped for a symlink) to a store that makes that check on each
        # walk of this same root: the local store opens the root anyway and checks the
        # directory it got, so the check costs no extra call there.
        self._root_checked = bool(getattr(self.store, "checks_root", False)) and \
            self.store.root == self.jail.real_root
        self.context_id = context_id or uuid.uuid4().hex[:12]
        self.policy = policy
        self.read_only = read_only
        self.deny = tuple(deny)
        self._denied = deny_matcher(self.deny, fold_case=self.store.folds_case)
        self.size_cap = size_cap
        self.first_block = max(1, min(first_block, size_cap))
        self.block_size = block_size
        self.ledger = Ledger(self.context_id, cache_bytes=cache_bytes)
        self.subscribers: list[Subscriber] = list(subscribers or [])
        for name, value in (("glob_limit", glob_limit), ("grep_limit", grep_limit),
                            ("ls_limit", ls_limit), ("max_in_flight", max_in_flight)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise fs_error("invalid_arguments", f"{name} must be a positive integer")
        self.glob_limit = glob_limit
        """Most paths one ``glob`` returns (newest first)."""
        self.grep_limit = grep_limit
        """Most entries (files, lines or counts) one ``grep`` holds."""
        self.ls_limit = ls_limit
        """Most entries one ``ls`` returns."""
        self.max_in_flight = max_in_flight
        """Reads ``grep`` keeps outstanding on remote backends."""
        self.gitignore = gitignore
        """``grep`` skips what ``.gitignore`` files inside the root ignore."""
        if isinstance(diff_chars, bool) or not isinstance(diff_chars, int) or diff_chars < 0:
            raise fs_error("invalid_arguments", "diff_chars must be a non-negative integer")
        self.diff_chars = diff_chars
        """Most characters of diff a ``stale`` refusal or write-intent event carries."""
        self.trust_conditions = trust_conditions
        """Write without checking that the service honours conditional writes."""
        # Set once the store's conditions are known to hold for every path this
        # filesystem writes (its root names the one bucket they all go to).
        self._conditions_verified = trust_conditions or not self.store.conditions_by_service
        if isinstance(content_cache_bytes, bool) or not isinstance(content_cache_bytes, int) \
                or content_cache_bytes < 0:
            raise fs_error("invalid_arguments",
                           "content_cache_bytes must be a non-negative integer")
        if grep_engine not in ("python", "ripgrep"):
            raise fs_error("invalid_arguments", "grep_engine must be 'python' or 'ripgrep'")
        self.grep_engine = grep_engine
        """``ripgrep``: local grep is answered by ripgrep where installed."""
        self.text_codecs: dict[str, str] = {}
        """Display path -> codec of the UTF-16/32 files (with a BOM) this context last
        read or edited as such: ``write`` over one keeps its encoding without a request
        (:func:`toolfs.tools.write_file`)."""
        if journal is not None and not isinstance(journal, ChangeRecorder):
            raise fs_error("invalid_arguments", "journal must be a change recorder (a "
                           "toolfs.undo.Journal)")
        self.journal = journal
        self.content_cache = shared_cache(content_cache_bytes, content_cache_dir)
        """Listing-validated content of discovery reads (``None``: off)."""
        token = getattr(fs, "_fs_token", None)
        self._cache_namespace = f"{type(fs).__module__}.{type(fs).__qualname__}:" + (
            str(token) if token else f"id{id(fs)}")

    # -- reading ------------------------------------------------------------------

    def _open(self, path: str, mode: str = "rb", block_size: Any = None,
              autocommit: bool = True, cache_options: Any = None, **kwargs: Any) -> Any:
        if mode == "rb":
            if kwargs.get("intent") == "edit":
                return self.open_for_edit(path)
            return self.open_observed(path)
        if mode in ("wb", "xb"):
            try:
                pending = self.prepare_write(path, create_only=mode == "xb")
                if mode == "xb":
                    self._refuse_existing(pending._target)  # at open, as open(path, "x")
            except Exception as err:
                # A library that cleans up after a failed open removes the path it gave.
                keep(err, self._kept_names(path))
                raise
            return _CommitOnClose(pending)
        raise fs_error("unsupported", f"mode {mode!r} is not supported; use rb, wb or xb",
                       path=path)

    def _kept_names(self, path: str) -> list[str]:
        """The names a writer may know the file of a refused write by: the path it gave,
        the wrapped filesystem's (on local disk: the file itself) and the display path
        (see :mod:`toolfs.policy.refused_writes`)."""
        names = [path, self._strip_protocol(path)] if isinstance(path, str) else []
        try:
            target = self.resolve(path)
        except Exception:  # a path the jail refuses: the names given are all there is
            return names
        return [*names, *target_names(self, target)]

    def open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        """Open a file: ``rb`` observes, ``wb``/``xb`` commit on close; text modes wrap.

        A write handle commits when closed, and never when its ``with`` block raises."""
        if "b" not in mode:
            raw = self._open(path, mode.replace("t", "") + "b", **kwargs)
            enc = {k: kwargs[k] for k in ("encoding", "errors", "newline") if k in kwargs}
            wrapper = _TextCommitOnClose if isinstance(raw, _CommitOnClose) else \
                io.TextIOWrapper
            return wrapper(raw, **{"encoding": "utf-8", **enc})
        return self._open(path, mode, **kwargs)

    def cat_file(self, path: str, start: int | None = None, end: int | None = None,
                 **kwargs: Any) -> bytes:
        """Bytes of a file (a range when given); records an observation."""
        f = self.open_observed(path)
        if start is None and end is None:
            return f.read()
        size = f.size
        lo = 0 if start is None else (start if start >= 0 else max(0, size + start))
        hi = size if end is None else (end if end >= 0 else max(0, size + end))
        f.seek(lo)
        return f.read(max(0, hi - lo))

    def _source_dir(self, path: str, err: FsError) -> bool:
        """Whether ``path``, whose read failed with ``err``, is a directory (a copy of it
        makes the directory): asked only after a failed read, so copying a file costs no
        extra request."""
        if err.code not in ("not_found", "not_a_file") or err.details.get("bucket"):
            return False
        try:
            return self.isdir(path)
        except FsError:
            return False

    def _read_whole(self, path: str) -> bytes:
        """The bytes of one observed version of a file for a copy (``too_large`` over
        the cap, before anything past the first block is fetched)."""
        with self.open_observed(path) as src:
            if not src.complete and src.size > self.size_cap:
                self._check_cap(src._target, src.size, "write")
            return bytes(src.read())

    def _tree_pairs(self, path: str, dest: str, *, recursive: bool, maxdepth: Any,
                    dest_is_dir: bool) -> tuple[list[str], list[str]]:
        """The ``(sources, destinations)`` of a copy of ``path`` (a name, a directory or
        a glob pattern of this filesystem) to ``dest``, as fsspec's ``get`` and ``copy``
        expand them. fsspec finds the parent to cut off the sources by their last ``/``,
        which a name at the top of the root (``src``, ``src/file``) lacks: so a second
        ``get("src", "target", recursive=True)``, into the ``target`` the first made,
        gave ``target/file`` again instead of ``target/src/file``, as fsspec's own
        filesystems do (whose names all start with ``/``). Here every name is given a
        leading ``/`` for fsspec's cut."""
        from fsspec.implementations.local import trailing_sep
        from fsspec.utils import other_paths

        sources = self.expand_path(path, recursive=recursive, maxdepth=maxdepth)
        if not recursive or maxdepth is not None:  # a non-recursive glob copies no directory
            sources = [p for p in sources if not (trailing_sep(p) or self.isdir(p))]
        if not sources:
            return [], []
        exists = (has_magic(path) and len(sources) == 1) or (
            not has_magic(path) and dest_is_dir and not trailing_sep(path))
        return sources, other_paths([f"/{p}" for p in sources], dest, exists=exists)

    def get(self, rpath: Any, lpath: Any, recursive: bool = False, callback: Any = None,
            maxdepth: Any = None, **kwargs: Any) -> None:
        """fsspec's ``get`` (files and trees to local disk, each through
        :meth:`get_file`), a source at the top of the root nested as any other is
        (:meth:`_tree_pairs`)."""
        if isinstance(rpath, str) and isinstance(lpath, (str, os.PathLike)):
            from fsspec.implementations.local import (
                LocalFileSystem,
                make_path_posix,
                trailing_sep,
            )
            local = make_path_posix(os.fspath(lpath))
            rpath, lpath = self._tree_pairs(
                self._strip_protocol(rpath), local, recursive=recursive, maxdepth=maxdepth,
                dest_is_dir=trailing_sep(local) or LocalFileSystem().isdir(local))
            if not rpath:
                return
            contained = getattr(fsspec_utils, "check_contained", None)
            if contained is not None:  # fsspec >= 2026.9: no name places a copy above it
                contained(local, lpath)
        if callback is None:
            super().get(rpath, lpath, recursive=recursive, maxdepth=maxdepth, **kwargs)
        else:
            super().get(rpath, lpath, recursive=recursive, callback=callback,
                        maxdepth=maxdepth, **kwargs)

    def copy(self, path1: Any, path2: Any, recursive: bool = False, maxdepth: Any = None,
             on_error: str | None = None, **kwargs: Any) -> None:
        """fsspec's ``copy`` (each file through :meth:`cp_file`), a source at the top of
        the root nested as any other is (:meth:`_tree_pairs`)."""
        if isinstance(path1, str) and isinstance(path2, str):
            from fsspec.implementations.local import trailing_sep

            path1, path2 = self._strip_protocol(path1), self._strip_protocol(path2)
            path1, path2 = self._tree_pairs(
                path1, path2, recursive=recursive, maxdepth=maxdepth,
                dest_is_dir=trailing_sep(path2) or self.isdir(path2))
            if not path1:
                return
        super().copy(path1, path2, recursive=recursive, maxdepth=maxdepth,
                     on_error=on_error, **kwargs)

    def get_file(self, rpath: str, lpath: Any, callback: Any = None,
                 **kwargs: Any) -> None:
        """Download to a local file (an observation, like any read), making its parent
        directories; a directory ``rpath`` makes the local directory, as every fsspec
        filesystem does for recursive and glob gets. A file over ``size_cap`` streams in
        blocks pinned to the version opened (``stale`` if it changes meanwhile); the local
        file appears whole or not at all (written aside, then renamed)."""
        try:
            src = self.open_observed(rpath)
        except FsError as err:
            if not isinstance(lpath, (str, os.PathLike)) or not self._source_dir(rpath, err):
                raise
            os.makedirs(lpath, exist_ok=True)
            return
        with src:
            if not isinstance(lpath, (str, os.PathLike)):  # a file-like object
                _copy_blocks(src, lpath)
                return
            local = os.fspath(lpath)
            parent = os.path.dirname(local)
            if parent:
                os.makedirs(parent, exist_ok=True)
            aside = f"{local}.toolfs-{uuid.uuid4().hex[:8]}.part"
            try:
                with open(aside, "wb") as out:
                    _copy_blocks(src, out)
                os.replace(aside, local)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.remove(aside)
                raise

    # -- writing ------------------------------------------------------------------

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", *,
                  operation: Operation = "write", **kwargs: Any) -> Commit:
        """Commit ``value`` under the policy (see the module docstring).

        ``mode="create"`` refuses to replace an existing file whatever was observed.
        """
        try:
            pending = self.prepare_write(path, operation=operation,
                                         create_only=mode == "create")
            return pending.commit(bytes(value))
        except Exception as err:
            keep(err, self._kept_names(path))
            raise

    def write_bytes(self, path: str, value: bytes, **kwargs: Any) -> Commit:
        return self.pipe_file(path, value, **kwargs)

    def write_text(self, path: str, value: str, encoding: str | None = None,
                   errors: str | None = None, newline: str | None = None,
                   **kwargs: Any) -> Commit:
        if newline not in (None, "", "\n"):
            value = value.replace("\n", newline)
        return self.pipe_file(path, value.encode(encoding or "utf-8", errors or "strict"))

    def put_file(self, lpath: str, rpath: str, callback: Any = None, mode: str = "overwrite",
                 **kwargs: Any) -> None:
        """Upload a local file through the policy (a guarded write of ``rpath``; a
        local directory makes the directory ``rpath``). ``mode="create"`` never
        replaces a file."""
        if os.path.isdir(lpath):
            self.makedirs(rpath, exist_ok=True)
            return
        pending = self.prepare_write(rpath, create_only=mode == "create")
        size = os.path.getsize(lpath)
        if size > self.size_cap:  # refused before the file is read into memory
            self._check_cap(pending._target, size, "write")
        with open(lpath, "rb") as f:
            pending.commit(f.read(self.size_cap + 1))

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        """Copy: an observed read of ``path1`` and a guarded write of ``path2`` (its
        condition taken before the read: a create when this context has not seen it,
        an update of the version it saw). A directory ``path1`` makes the directory
        ``path2``, as every fsspec filesystem does for recursive and glob copies."""
        try:
            pending = self.prepare_write(path2)
        except FsError as err:  # `dir/`: only a directory can be copied there
            if err.code != "not_a_file" or not self.isdir(path1):
                raise
            self.makedirs(path2, exist_ok=True)
            return
        try:
            data = self._read_whole(path1)
        except FsError as err:
            if not self._source_dir(path1, err):
                raise
            self.makedirs(path2, exist_ok=True)
            return
        pending.commit(data)

    def mv(self, path1: str, path2: str, recursive: bool = False, maxdepth: Any = None,
           **kwargs: Any) -> None:
        """Move one file without losing an update: a guarded write of ``path2`` with the
        bytes of one observed version of ``path1``, then a delete of ``path1`` on exactly
        that version. If the delete is refused (``stale``: changed meanwhile, even by
        this context), the copy is removed again if it is still the copy, and the refusal
        raised: the file stays where it was, with every update. If the delete's outcome
        is unknown (``backend_error``), the copy is kept (``details["copy_kept"]``);
        after any other refusal (``denied`` too) it is removed. Two paths that reach
        the same file (another spelling, a symlink and its target) move nothing, as
        ``os.rename`` does."""
        if recursive:
            raise fs_error("unsupported", "recursive moves are not supported", path=path1)
        source, dest = self._writable(path1, "delete"), self._writable(path2, "write")
        same = source.backend_path == dest.backend_path or (
            self.store.folds_case
            and source.backend_path.casefold() == dest.backend_path.casefold())
        pending = None if same else self.prepare_write(path2)  # its condition: now
        with self.open_observed(path1) as src, move_scope(source.display, dest.display):
            if same:
                return
            if not src.complete:
                raise fs_error("too_large", f"{src.path} is {src.size} bytes, over the "
                               f"{self.size_cap}-byte cap for whole-file writes; it cannot "
                               "be moved", path=src.path)
            assert pending is not None
            copy = pending.commit(src.read())
            try:
                src.delete()
            except FsError as err:
                if err.code == "backend_error":
                    # The delete may have happened all the same (a timeout after the
                    # store applied it): removing the copy could lose the file. Any
                    # other answer is a refusal (stale, denied, a veto) that changed
                    # nothing, and the copy goes.
                    err.details["copy_kept"] = copy.path
                    raise
                try:
                    self.rm_file(path2, version=copy.version)
                except FsError:
                    # Someone changed or removed the copy already: what they did stands.
                    err.details["copy_kept"] = copy.path
                raise

    def rm_file(self, path: str, *, version: FileVersion | None = None) -> None:
        """Delete a file; needs a fresh observation, like an update.

        With ``version``, delete only if the file is at exactly that version (one this
        context read or wrote: a :class:`Commit`'s, an :class:`ObservedFile`'s), whatever
        the ledger says now -- how a move undoes its copy without touching a newer one.
        """
        target = self._writable(path, "delete")
        obs = self.ledger.get(target.backend_path)
        mode: Update | Overwrite
        if version is not None:
            mode = Update(version)
        elif self.policy is None:
            mode = Overwrite()
        elif obs is None or obs.version is None:
            # "Read it first" would send the model to read a directory; say what it is
            # (only on this refusal path, so a normal delete costs no extra request).
            if self._directory(target):
                err = fs_error("not_a_file", f"{target.display} is a directory; only files "
                               "can be deleted", path=target.display)
                raise self._fail(err, target, "delete")
            # A missing file is not_found, whatever the verb: reading it cannot help.
            self._get(target, length=1)  # raises not_found when absent
            if obs is None:
                err = fs_error("not_observed", f"read {target.display} before deleting it",
                               path=target.display)
            else:
                err = fs_error("stale", f"{target.display} was created since you saw it "
                               "absent; read it before deleting it", path=target.display)
            raise self._fail(err, target, "delete")
        elif self.ledger.write_refused(target.backend_path):
            raise self._fail(_refused_then_deleted(target), target, "delete")
        else:
            mode = Update(obs.version)
        self._delete(target, mode)

    def _directory(self, target: Target) -> bool:
        """``target`` is a directory on the backend (a failing probe: not known to be)."""
        try:
            self.store.check_path(target.backend_path)
            return bool(self.fs.isdir(self._fresh(target.backend_path)))
        except Exception:  # a refusal follows either way; the probe only picks its words
            return False

    def remove_empty_dirs(self, path: str, *, limit: int = 10_000) -> list[str]:
        """Remove the empty directories at and below the directory ``path``, deepest
        first (what deleting or moving every file of a directory leaves behind on local
        disk and in memory; object stores have none), and return their display paths.

        Never touched: the root (``denied``; also through a symlink that leads to it), a
        denied directory (``denied``) and, below ``path``, a denied directory with
        everything below it (:meth:`dir_denied`: ``.git/**`` keeps ``.git`` and every
        directory in it); a directory that is not empty; anything reached through a
        symlink below ``path``, which is never walked through; anything outside the root,
        even if a directory is swapped for a symlink meanwhile (see
        ``Store.remove_empty_dirs``). At most ``limit`` directories are looked at."""
        target = self.resolve(path)
        if target.reaches_root:
            err = fs_error("denied", "the workspace root is never removed",
                           path=target.display)
            raise self._fail(err, target, "delete")
        if self.read_only:
            raise self._fail(fs_error("denied", "this workspace is read-only",
                                      path=target.display), target, "delete")
        for name in dict.fromkeys((target.display, target.reached)):
            if self.dir_denied(name):
                err = fs_error("denied", f"{escape_undecodable(name)} matches a deny rule",
                               path=target.display)
                raise self._fail(err, target, "delete")

        def keep(backend_path: str) -> bool:
            return self.dir_denied(self.jail.display_of(backend_path))

        removed = self.store.remove_empty_dirs(target.backend_path, keep, limit=limit)
        return [escape_undecodable(self.jail.display_of(p)) for p in removed]

    def rm(self, path: Any, recursive: bool = False, maxdepth: Any = None) -> None:
        """Delete files through :meth:`rm_file`; ``recursive``: a directory with every
        file below it, on what this context observed (:meth:`rm_tree`)."""
        for p in [path] if isinstance(path, str) else list(path):
            if recursive:
                self.rm_tree(p, maxdepth=maxdepth)
            else:
                self.rm_file(p)

    def rm_tree(self, path: str, *, maxdepth: int | None = None) -> list[str]:
        """Delete the directory ``path`` with every file below it (a file: just it), and
        return the display paths of the files deleted.

        Conditional on what this context observed, like any delete: every file must be
        at the version this context last read or wrote. It is checked before anything
        is deleted -- a file this context never read (``not_observed``), a denied one
        (``denied``) or one outside the root refuses the whole delete, naming it --
        and again by each conditional delete: a file changed since is ``stale``, the
        files deleted before it stay deleted (``details["deleted"]``) and nothing
        after it is touched. The empty directories left are then removed
        (:meth:`remove_empty_dirs`); the root itself never is (``denied``)."""
        shown = path.rstrip("/") if path.strip("/") else path
        target = self.search_root(shown)
        if target.reaches_root:
            err = fs_error("denied", "the workspace root is never removed; delete the "
                           "files in it by name", path=target.display)
            raise self._fail(err, target, "delete")
        if not self.isdir(shown):
            self.rm_file(shown)
            return [target.display]
        files = self.find(shown, maxdepth=maxdepth)  # files only
        hidden = self._hidden_files(target, maxdepth)
        if hidden:
            err = fs_error("denied", f"{target.display} holds files a deny rule hides "
                           f"({hidden}); they are never deleted", path=target.display)
            raise self._fail(err, target, "delete")
        targets = [self._writable(f, "delete") for f in files]
        seen = {t.backend_path: self.ledger.get(t.backend_path) for t in targets}
        unread = [] if self.policy is None else [
            t.display for t in targets
            if (obs := seen[t.backend_path]) is None or obs.version is None]
        refused = [t for t in targets if self.ledger.write_refused(t.backend_path)]
        if refused and self.policy is not None:
            raise self._fail(_refused_then_deleted(refused[0]), target, "delete")
        if unread:
            listed = ", ".join(unread[:5]) + (f" and {len(unread) - 5} more"
                                              if len(unread) > 5 else "")
            err = fs_error("not_observed", f"{target.display} holds files not read in this "
                           f"context ({listed}); read them before deleting the directory",
                           path=target.display, details={"files": unread[:50]})
            raise self._fail(err, target, "delete")
        deleted: list[str] = []
        for t in targets:
            obs = seen[t.backend_path]
            mode: Update | Overwrite = (Overwrite() if obs is None or obs.version is None
                                        else Update(obs.version))
            try:
                self._delete(t, mode)
            except FsError as err:
                err.details["deleted"] = list(deleted)
                raise
            deleted.append(t.display)
        self.remove_empty_dirs(shown)
        return deleted

    def _hidden_files(self, target: Target, maxdepth: int | None) -> str | None:
        """The first file below ``target`` a deny rule hides from listings, if any."""
        if not self.deny:
            return None
        for root, _dirs, names in self.fs.walk(self._fresh(target.backend_path), maxdepth=maxdepth):
            root = self.fs._strip_protocol(root).rstrip("/")
            for name in names:
                display = self.jail.display_of(f"{root}/{name}")
                if not self.visible(display, f"{root}/{name}"):
                    return escape_undecodable(display)
        return None

    def touch(self, path: str, truncate: bool = True, **kwargs: Any) -> None:
        """Create an empty file; truncating an existing one is a guarded write."""
        target = self._writable(path, "write")
        self.store.check_path(target.backend_path)
        if not truncate and self.fs.exists(self._fresh(target.backend_path)):
            return  # nothing changes: content versions do not move on touch
        self.pipe_file(path, b"")

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        """Make a directory and its parents (``a/b/`` is ``a/b``); ``denied`` on a file.
        On object stores directories are implied by the files in them."""
        if path.endswith("/") and path.strip("/"):
            path = path.rstrip("/")
        target = self.resolve(path)
        self.store.check_path(target.backend_path)
        self._check_writable(target, "mkdir")
        if self.fs.isfile(self._fresh(target.backend_path)):
            raise fs_error("denied", f"{target.display} is a file", path=target.display)
        self.fs.makedirs(target.backend_path, exist_ok=exist_ok)

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        self.makedirs(path, exist_ok=True)

    def _refuse(self, what: str) -> FsError:
        return fs_error("denied", f"{what} is not available through the policy filesystem")

    def rmdir(self, path: str) -> None:
        raise self._refuse("rmdir")

    def chmod(self, path: str, mode: int, **kwargs: Any) -> None:
        raise self._refuse("chmod")

    def setxattrs(self, path: str, **kwargs: Any) -> None:
        raise self._refuse("setxattrs")

    def start_transaction(self) -> Any:
        raise self._refuse("transactions")

    def link(self, *args: Any, **kwargs: Any) -> None:
        raise self._refuse("link")

    def symlink(self, *args: Any, **kwargs: Any) -> None:
        raise self._refuse("symlink")

    def __repr__(self) -> str:
        return (f"PolicyFileSystem({type(self.fs).__name__}, root={self.jail.root!r}, "
                f"context_id={self.context_id!r})")


def _refused_then_deleted(target: Target) -> FsError:
    """A delete right after a refused write of the same file (and no read since): what a
    library cleaning up after its failed write does. The refusal counted as a read when
    it showed the whole change, but the file holds another writer's change that this
    context never chose to remove."""
    return fs_error("stale", f"a write to {target.display} was just refused because "
                    "someone else changed it, and the file keeps their change; deleting "
                    "it now would remove that change. Read it again before deleting it",
                    path=target.display, details={"refused_write": True})


def _copy_blocks(src: ObservedFile, out: Any) -> None:
    """Write every byte of ``src`` to ``out``, a block at a time."""
    while True:
        block = src.read(max(src.block_size, 1))
        if not block:
            return
        out.write(block)
