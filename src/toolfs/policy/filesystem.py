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
"""

from __future__ import annotations

import contextlib
import difflib
import io
import itertools
import logging
import os
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, ClassVar, Literal, get_args

from fsspec.spec import AbstractFileSystem

from toolfs._trusted import trusted
from toolfs.backends import (
    Create,
    Overwrite,
    PutMode,
    Store,
    Update,
    conditions,
    store_for,
    unwrapped,
)
from toolfs.backends.base import Blob, forget_listings
from toolfs.content_cache import DEFAULT_CACHE_BYTES, shared_cache
from toolfs.diff import text_diff
from toolfs.errors import FsError, fs_error
from toolfs.escaping import escape_undecodable
from toolfs.merge import Rebased, merge_write
from toolfs.policy.chaining import (
    ChainedBase,
    OneContextPerOptions,
    policy_option,
    target_filesystem,
)
from toolfs.policy.events import (
    EVENT_FIELDS_SET,
    AuditLog,
    EventType,
    FsEvent,
    Operation,
    Subscriber,
    Veto,
)
from toolfs.policy.ledger import Ledger
from toolfs.policy.paths import Jail, Target
from toolfs.policy.people import for_people
from toolfs.policy.rules import Policy, deny_matcher
from toolfs.versions import FileVersion

MiB = 1024 * 1024
# "Did you mean" compares names only in directories up to this size; past it, only a
# case-insensitive exact match is offered (difflib is quadratic-ish per name).
SIBLINGS_FUZZY_LIMIT = 2_000
SIBLINGS_SCAN_LIMIT = 100_000
_COMMIT_STRIPES = 256
# Commits to one file from this process take turns (one re-entrant lock per stripe of
# paths, shared by every context): a commit and the ledger update after it happen in
# one turn, so a context's ledger never goes back to a version it already replaced; and
# a merge fetches, merges and commits in one turn, so that contexts of one process never
# collide with each other. Between processes (and machines) the conditional write alone
# decides, and a merge that meets another change retries (MERGE_RETRIES).
_TURNS = [threading.RLock() for _ in range(_COMMIT_STRIPES)]
# A whole-file read that takes two requests starts over when the file changes between
# them (the rest is pinned to the first block's version); after this many tries it gives
# up with ``stale``, so a file rewritten without pause cannot hold a read forever.
READ_ATTEMPTS = 3
# A merge (``Policy(on_stale="merge")``) whose conditional commit meets yet another
# change is retried on that one up to this many times, then is ``stale``; before each
# retry it waits a random time up to MERGE_BACKOFF * 2**retry seconds, so that agents
# racing on one file spread out instead of colliding again (at most ~0.06 s in all).
MERGE_RETRIES = 3
MERGE_BACKOFF = 0.004
DIFF_CHARS = 20_000
"""Default character budget of the diff a ``stale`` refusal or a write-intent event
carries (``diff_chars``); a ``Workspace`` lowers it to fit its output budget."""
READ_AHEAD_HITS = 64
"""``read_many`` takes at most this many files of its input ahead of what it yielded
when they are cached (besides ``max_in_flight`` fetched ones): a streamed listing is
held by the window, not whole."""

Rebase = Callable[[bytes], Rebased | None]
"""Moves a change onto the current bytes of its file (``None``: it does not apply)."""
_OPERATIONS: frozenset[str] = frozenset(get_args(Operation))
_log = logging.getLogger("toolfs.events")


def _turn(key: str) -> threading.RLock:
    """The turn (see ``_TURNS``) that commits to ``key`` take in this process."""
    return _TURNS[hash(key) % _COMMIT_STRIPES]


@dataclass(frozen=True)
class Found:
    """One entry reached by :meth:`PolicyFileSystem.list_files` or
    :meth:`PolicyFileSystem.list_dir`: confined, not denied, as the listing described it."""

    path: str
    """Display path, relative to the root (undecodable names escaped)."""
    rel: str
    """Path relative to the listed directory (the ``path`` argument), escaped too."""
    backend_path: str
    """Where the bytes are: the wrapped filesystem's path (a listed symlink's target,
    the key the ledger records a read of it under)."""
    kind: Literal["file", "dir"]
    size: int | None
    mtime: float | None
    version: FileVersion | None = None
    """The version the listing gave (object stores), which validates cached content."""


@dataclass(frozen=True)
class Commit:
    """What a commit stored."""

    path: str
    created: bool
    version: FileVersion
    size: int
    merged: bool = False
    """The change was made from an older version and merged onto a newer one."""
    theirs: tuple[tuple[int, int], ...] = ()
    """When ``merged``: the other writer's change, as 1-based ``(first, last)`` line
    ranges of the stored file (``first == last + 1``: lines removed there)."""


class PolicyFileSystem(ChainedBase, metaclass=OneContextPerOptions):  # type: ignore[misc]
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
            (:mod:`toolfs.content_cache`): ``grep`` on a store whose listing carries
            versions (S3, GCS, Azure) does not download again an object listed at the
            version it cached. One cache per process and option set, shared by every
            context; 0 turns it off.
        content_cache_dir: hold that cache's bytes as files in this directory instead of
            in memory.
        grep_engine: ``"python"`` (default): local ``grep`` reads and searches every
            candidate itself; ``"ripgrep"``: it runs ripgrep, where there is one, as a
            prefilter that spares reading the files it finds no line in
            (:mod:`toolfs.ripgrep`; the answer is the same). Measured in
            docs/benchmarks.md: a gain only for selective patterns with a core to spare.
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
        grep_engine: Literal["python", "ripgrep"] = "python",
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
        """``ripgrep``: local grep uses ripgrep as a prefilter where installed."""
        self.content_cache = shared_cache(content_cache_bytes, content_cache_dir)
        """Listing-validated content of discovery reads (``None``: off)."""
        token = getattr(fs, "_fs_token", None)
        self._cache_namespace = f"{type(fs).__module__}.{type(fs).__qualname__}:" + (
            str(token) if token else f"id{id(fs)}")

    # -- plumbing -----------------------------------------------------------------

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        """``toolfs://dir/file.csv`` (or ``toolfs::...``) as this filesystem's path
        ``dir/file.csv``; lists element-wise, ``os.PathLike`` as a string. Nothing else
        changes: the jail judges the rest (``d/`` names a directory, ``..`` is refused)."""
        if isinstance(path, list | tuple):
            return type(path)(cls._strip_protocol(p) for p in path)
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if isinstance(path, str):
            for prefix in (f"{cls.protocol}://", f"{cls.protocol}::"):
                if path.startswith(prefix):
                    return path[len(prefix):]
        return path

    def _listed_name(self, backend_path: str) -> str:
        """The name ``ls``, ``info``, ``find`` and ``walk`` give a backend path: the one
        that opens it again here (``unstrip_protocol`` of it, a ``toolfs://`` URL,
        too)."""
        return backend_path if self.absolute_paths else self.jail.display_of(backend_path)

    def subscribe(self, subscriber: Subscriber) -> Subscriber:
        """Add an ``fs/*`` event subscriber; returns it (usable as a decorator)."""
        self.subscribers.append(subscriber)
        return subscriber

    def _event(self, type_: EventType, op: Operation, target: Target, *,
               before: FileVersion | None, after: FileVersion | None,
               reason: str | None,
               diff: Callable[[], str | None] | None = None) -> FsEvent | None:
        """The event for the subscribers; ``None`` when it was kept already, because the
        only subscriber is an :class:`AuditLog` (the default): it keeps the values, and no
        :class:`FsEvent` is made unless someone looks (two per write). ``diff`` makes
        the event's diff, only when an event is made."""
        path = target.resolved or target.display  # `reached`, without the property
        if not path.isascii():
            path = escape_undecodable(path)
        why = escape_undecodable(reason) if reason is not None else None
        if op in _OPERATIONS and type(self.context_id) is str:
            # Every value made here or checked just above: not validated again (see
            # toolfs._trusted).
            subscribers = self.subscribers
            if len(subscribers) == 1 and type(subscribers[0]) is AuditLog:
                subscribers[0].record(type_, self.context_id, op, path, before, after, why)
                return None
            shown = diff() if diff is not None else None
            return trusted(FsEvent, EVENT_FIELDS_SET | ({"diff"} if shown else set()), {
                "type": type_, "context_id": self.context_id, "operation": op,
                "path": path, "version_before": before, "version_after": after,
                "reason": why, "at": time.time(), "diff": shown})
        return FsEvent(type=type_, context_id=self.context_id, operation=op, path=path,
                       version_before=before, version_after=after, reason=why,
                       diff=diff() if diff is not None else None)

    def _before(self, type_: EventType, op: Operation, target: Target, *,
                before: FileVersion | None = None, after: FileVersion | None = None,
                diff: Callable[[], str | None] | None = None) -> None:
        """Emit a before-event; any subscriber error refuses the operation (``denied``)."""
        if not self.subscribers:
            return
        event = self._event(type_, op, target, before=before, after=after, reason=None,
                            diff=diff)
        if event is None:
            return
        for sub in list(self.subscribers):
            try:
                sub(event)
            except Veto as veto:
                err = fs_error("denied", f"vetoed: {veto.reason}", path=target.display)
                raise self._fail(err, target, op) from veto
            except Exception as exc:
                # A hook that cannot answer (an approval service down) must not be read
                # as consent.
                err = fs_error("denied", f"an {type_} subscriber failed: "
                               f"{type(exc).__name__}", path=target.display)
                raise self._fail(err, target, op) from exc

    def _notify(self, type_: EventType, op: Operation, target: Target, *,
                before: FileVersion | None = None, after: FileVersion | None = None,
                reason: str | None = None) -> None:
        """Emit an after-the-fact event; subscriber errors are logged, never raised."""
        if not self.subscribers:
            return
        event = self._event(type_, op, target, before=before, after=after, reason=reason)
        if event is None:
            return
        for sub in list(self.subscribers):
            try:
                sub(event)
            except Exception:  # the operation is done; its answer must say so
                _log.exception("toolfs: an %s subscriber failed (ignored)", type_)

    def resolve(self, path: str) -> Target:
        """Confine a path (raises ``outside_root``)."""
        return self.jail.resolve(path)

    def _file(self, path: str) -> Target:
        """Confine a path that must name a file: the root itself never is one."""
        target = self.jail.resolve(path)
        if target.display == "." or target.resolved == ".":  # target.reaches_root
            raise _root_not_a_file(target)
        return target

    def _deny_reason(self, target: Target) -> str | None:
        for name in dict.fromkeys((target.display, target.reached)):
            if self._denied(name):
                return f"{escape_undecodable(name)} matches a deny rule"
        return None

    def dir_denied(self, display: str) -> bool:
        """Whether the directory ``display`` (root-relative) is denied: a deny rule
        matches it, or every path below it (``.git/**`` and ``secrets/`` match
        ``.git/HEAD`` and ``secrets/x`` but not ``.git`` or ``secrets`` themselves; the
        probe is a name below that no rule could single out)."""
        if not self.deny:
            return False
        return self._denied(display) or self._denied(f"{display}/\uffff")

    def _check_writable(self, target: Target, op: Operation) -> None:
        if not self.read_only and not self.deny:
            return
        why = "this workspace is read-only" if self.read_only else self._deny_reason(target)
        if why is not None:
            err = fs_error("denied", why, path=target.display)
            raise self._fail(err, target, op)

    def _writable(self, path: str, op: Operation, *, via_store: bool = False) -> Target:
        """Confine a file to change (``_file`` written out, then the write checks);
        ``via_store``: the caller reaches it only through the store (see
        ``_root_checked``)."""
        target = self.jail.resolve(path, root_checked=via_store and self._root_checked)
        if target.display == "." or target.resolved == ".":  # target.reaches_root
            raise _root_not_a_file(target)
        if self.read_only or self.deny:
            self._check_writable(target, op)
        return target

    def _readable(self, path: str, *, file: bool = True, via_store: bool = False) -> Target:
        """Confine a path to read (a file unless ``file`` is false), refusing denied
        ones; ``via_store`` as for :meth:`_writable`."""
        if not file:
            target = self.resolve(path)
        else:  # _file, with the root check left to the store where it makes it
            target = self.jail.resolve(path, root_checked=via_store and self._root_checked)
            if target.display == "." or target.resolved == ".":  # target.reaches_root
                raise _root_not_a_file(target)
        why = self._deny_reason(target) if self.deny else None
        if why is not None:
            raise self._fail(fs_error("denied", why, path=target.display), target, "read")
        if not via_store:  # the caller reaches the filesystem itself: check the name
            self.store.check_path(target.backend_path)
        return target

    def _fail(self, err: FsError, target: Target, op: Operation) -> FsError:
        """Attach the display path and emit ``fs/denied`` for a refused operation."""
        err.path = target.display
        err.message = err.message.replace(target.backend_path, target.display)
        if isinstance(err.details.get("file"), str):
            # An adapter names the part of the path that is a file by its backend path.
            shown = self.jail.display_of(err.details["file"])
            err.message = err.message.replace(err.details["file"], shown)
            err.details["file"] = shown
        if err.code in ("stale", "not_observed", "denied"):
            self._notify("fs/denied", op, target, reason=f"{err.code}: {err.message}")
        if err.details.get("outcome") == "unknown":
            # A change cut off by the deadline may still land: what this context saw of
            # the file no longer says what is there, so the next update reads it again.
            self.ledger.forget(target.backend_path)
        return err

    def _not_found(self, target: Target, cause: FsError) -> FsError:
        if cause.details.get("bucket"):  # a missing bucket, not a missing file
            err = fs_error("not_found", cause.message, path=target.display,
                           details=cause.details)
            err.__cause__ = cause
            return err
        err = fs_error("not_found", f"{target.display} does not exist", path=target.display)
        if self.store.capabilities.cheap_listing:
            near = self._siblings(target)
            if near:
                err.details["did_you_mean"] = near
                err.message += f". Did you mean: {', '.join(near)}?"
        err.__cause__ = cause
        return err

    def _siblings(self, target: Target) -> list[str]:
        """Up to three names near the missing one, in its directory; bounded work. Only
        names a listing would show: the store's own listing (no crash leftovers, no
        links leading out), without denied ones."""
        parent = self.fs._parent(target.backend_path)
        try:
            names: list[str] = []
            for entry in self.store.list_dir(parent):
                name = entry.path.rstrip("/").rsplit("/", 1)[-1]
                if not conditions.is_reserved_name(name):
                    names.append(name)
                if len(names) >= SIBLINGS_SCAN_LIMIT:
                    break
        except Exception:  # a hint only; never let it mask the real error
            return []
        base = target.display.rsplit("/", 1)[-1]
        prefix = target.display[: len(target.display) - len(base)]
        folded = base.casefold()
        near = [n for n in names if n.casefold() == folded and n != base]
        if len(names) <= SIBLINGS_FUZZY_LIMIT:
            by_fold = {n.casefold(): n for n in names}
            # More than three: denied ones are dropped below.
            for m in difflib.get_close_matches(folded, list(by_fold), n=12, cutoff=0.6):
                if by_fold[m] not in near and by_fold[m] != base:
                    near.append(by_fold[m])
        shown = (n for n in near
                 if self.visible(prefix + n, f"{parent.rstrip('/')}/{n}"))
        return [escape_undecodable(prefix + n) for n in itertools.islice(shown, 3)]

    # -- reading ------------------------------------------------------------------

    def _get(self, target: Target, *, restartable: bool = False, **kw: Any) -> Blob:
        """``store.get`` with its errors in the model's terms; ``restartable``: a
        ``stale`` is raised as the store said it, unexplained and unreported, because
        the caller starts its read over (it had not read the file before)."""
        try:
            return self.store.get(target.backend_path, **kw)
        except FsError as err:
            if err.code == "stale" and restartable:
                raise
            if err.code == "not_found":
                raise self._not_found(target, err) from err.__cause__
            if err.code == "stale":
                err.message = f"{target.display} changed since you read it"
            raise self._fail(err, target, "read") from err.__cause__

    def open_observed(self, path: str) -> ObservedFile:
        """Open for reading and record the version of the bytes it yields."""
        target = self._readable(path, via_store=True)
        for attempt in range(1, READ_ATTEMPTS + 1):
            try:
                head = self._get(target, length=self.first_block)
            except FsError as err:
                if err.code == "not_found" and not err.details.get("bucket"):
                    self.ledger.record(target.backend_path, None)
                raise
            data = head.data
            if head.complete or head.size > self.size_cap:
                break  # one request (the fast path), or a file streamed in blocks later
            try:
                rest = self._get(target, start=len(data), if_version=head.version,
                                 restartable=True)
            except FsError as err:
                if err.code != "stale":
                    raise
                # Another writer committed between the two requests. This reader had
                # not read the file: nothing of it is stale, so read it afresh.
                if attempt < READ_ATTEMPTS:
                    continue
                changing = fs_error(
                    "stale", f"{target.display} kept changing while it was being read "
                    f"({READ_ATTEMPTS} attempts); read it again once the writes settle",
                    path=target.display, details={"attempts": READ_ATTEMPTS})
                raise self._fail(changing, target, "read") from err
            data += rest.data
            break
        complete = len(data) == head.size
        # Before recording: a subscriber may still refuse this read.
        self._before("fs/read", "read", target, after=head.version)
        self.ledger.record(target.backend_path, head.version, size=head.size,
                           content=data if complete else None)
        return ObservedFile(self, target, head.version, head.size, data)

    def open_for_edit(self, path: str) -> ObservedFile:
        """The bytes at the version this context observed (``not_observed``/``stale``).

        Without a policy (or without an observation where none is required), the
        current bytes. Records nothing: an edit stands on an earlier observation, and
        :meth:`ObservedFile.commit` stores on exactly the version these bytes have.
        """
        target = self._writable(path, "edit", via_store=True)
        obs, cached = self.ledger.observed(target.backend_path)
        if self.policy is None or (obs is None and not self.policy.require_observation):
            blob = self._get(target, length=self.size_cap + 1)
            self._check_cap(target, blob.size)
            return ObservedFile(self, target, blob.version, blob.size, blob.data)
        if obs is None:
            self._get(target, length=1)  # raises not_found when absent
            raise self._fail(fs_error(
                "not_observed",
                f"{target.display} exists but was not read in this context; read it "
                "before changing it", path=target.display), target, "edit")
        if obs.version is None:
            created = self._get(target, length=self.size_cap + 1)  # not_found if absent
            found = fs_error("stale", f"{target.display} was created since you saw it "
                             "absent", path=target.display)
            raise self._fail(self._shown_change(target, found, b"", None, created),
                             target, "edit")
        if obs.size is not None:
            self._check_cap(target, obs.size)
        if cached is not None:
            return ObservedFile(self, target, obs.version, len(cached), cached, cached=True)
        blob = self._get(target, if_version=obs.version)
        self._check_cap(target, blob.size)
        return ObservedFile(self, target, blob.version, blob.size, blob.data)

    def _check_cap(self, target: Target, size: int,
                   operation: Operation | Literal["change"] = "edit") -> None:
        """``too_large`` when ``size`` is over the cap: the size of the file (``edit``),
        of a write's content (``write``) or of what a change would make the file
        (``change``: ``details["result"]``, so the advice is to change less, not to read
        in windows)."""
        if size <= self.size_cap:
            return
        if operation == "change":
            raise fs_error(
                "too_large",
                f"the change would make {target.display} {size} bytes, over the "
                f"{self.size_cap}-byte cap for whole-file edits and writes",
                path=target.display,
                details={"size": size, "cap": self.size_cap, "result": True})
        if operation == "write":
            raise fs_error(
                "too_large",
                f"the content for {target.display} is {size} bytes, over the "
                f"{self.size_cap}-byte cap for writes; write less than that",
                path=target.display,
                details={"size": size, "cap": self.size_cap, "operation": "write"})
        raise fs_error(
            "too_large",
            f"{target.display} is {size} bytes, over the {self.size_cap}-byte cap for "
            "whole-file edits and writes", path=target.display,
            details={"size": size, "cap": self.size_cap})

    def _open(self, path: str, mode: str = "rb", block_size: Any = None,
              autocommit: bool = True, cache_options: Any = None, **kwargs: Any) -> Any:
        if mode == "rb":
            if kwargs.get("intent") == "edit":
                return self.open_for_edit(path)
            return self.open_observed(path)
        if mode == "wb":
            return _CommitOnClose(self.prepare_write(path))
        if mode == "xb":
            pending = self.prepare_write(path, create_only=True)
            self._refuse_existing(pending._target)  # at open, as open(path, "x") does
            return _CommitOnClose(pending)
        raise fs_error("unsupported", f"mode {mode!r} is not supported; use rb, wb or xb",
                       path=path)

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

    def _condition(self, target: Target) -> PutMode:
        """A write's condition, from what this context observed now."""
        if self.policy is None:
            return Overwrite()
        obs, known = self.ledger.observed(target.backend_path)
        if obs is not None and obs.version is not None:
            # The cached bytes of that version, if held, spare the store a digest.
            return Update(obs.version, known=known)
        if obs is None and not self.policy.require_observation:
            return Overwrite()
        return Create()

    def prepare_write(self, path: str, *, operation: Operation = "write",
                      create_only: bool = False) -> PendingWrite:
        """Start a write: confine and check ``path`` and fix the condition now, from
        what this context has observed; :meth:`PendingWrite.commit` stores on it."""
        target = self._writable(path, operation, via_store=True)
        put: PutMode = Create() if create_only else self._condition(target)
        return PendingWrite(self, target, put, operation, exclusive=create_only)

    def _refuse_existing(self, target: Target) -> None:
        """Refuse an exclusive create when it starts if the file exists (one small
        request): ``AlreadyExists``, a ``FileExistsError``. Its commit is a
        create-if-absent all the same, so a file created meanwhile is refused then."""
        try:
            self.store.get(target.backend_path, length=1)
        except FsError as err:
            if err.code == "not_found" and not err.details.get("bucket"):
                return
            raise self._fail(err, target, "write") from err.__cause__
        exists = self._explain_stale(target, Create(), fs_error("stale", "exists"),
                                     exclusive=True)
        raise self._fail(exists, target, "write")

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", *,
                  operation: Operation = "write", **kwargs: Any) -> Commit:
        """Commit ``value`` under the policy (see the module docstring).

        ``mode="create"`` refuses to replace an existing file whatever was observed.
        """
        pending = self.prepare_write(path, operation=operation, create_only=mode == "create")
        return pending.commit(bytes(value))

    def _commit(self, target: Target, data: bytes, put: PutMode, op: Operation, *,
                exclusive: bool = False, rebase: Rebase | None = None) -> Commit:
        """Store ``data`` on condition ``put``; the one place every change goes through.
        ``exclusive``: a create that never replaces a file (``xb``, ``mode="create"``),
        whatever was observed. An update whose version is outdated goes to
        :meth:`_resolve_stale` (merged, or refused with the diff); ``rebase`` moves it
        onto newer bytes there (default: a three-way line merge)."""
        outcome = self._store_put(target, data, put, op, exclusive=exclusive)
        if isinstance(outcome, Commit):
            return outcome
        return self._resolve_stale(target, data, put, op, outcome, exclusive=exclusive,
                                   rebase=rebase)

    def _store_put(self, target: Target, data: bytes, put: PutMode, op: Operation, *,
                   exclusive: bool = False) -> Commit | FsError:
        """One conditional store of ``data``: the commit, or the refusal of an outdated
        condition (``stale``/``not_observed``, explained, not yet reported); every
        other failure is raised."""
        # The checks of _check_writable and _check_cap, called only when they can refuse.
        if self.read_only or self.deny:
            self._check_writable(target, op)
        size = len(data)
        if size > self.size_cap:
            self._check_cap(target, size, "write" if op == "write" else "change")
        if not self._conditions_verified or conditions.RESERVED_MARK in target.display:
            self._check_conditions(target, op)
        before = put.expected if isinstance(put, Update) else None
        if self.subscribers:
            self._before("fs/write-intent", op, target, before=before,
                         diff=lambda: self._intent_diff(target, put, data))
        key = target.backend_path
        with _turn(key):
            if isinstance(put, Overwrite):
                # Unconditional: try a create first, so the result can say which it was.
                created = True
                try:
                    version = self.store.put(key, data, Create())
                except FsError as err:
                    if err.code != "stale":
                        raise self._fail(err, target, op) from err.__cause__
                    version, created = self._put(target, data, Overwrite(), op), False
            else:
                try:  # _put, written out
                    version = self.store.put(key, data, put)
                except FsError as err:
                    if err.code == "stale":
                        return self._explain_stale(target, put, err, exclusive=exclusive)
                    raise self._fail(err, target, op) from err.__cause__
                created = isinstance(put, Create)
            self.ledger.record(key, version, size=size, content=data)
        if self.subscribers:
            self._notify("fs/written", op, target, before=before, after=version)
        return Commit(path=target.display, created=created, version=version, size=size)

    def _intent_diff(self, target: Target, put: PutMode, data: bytes) -> str | None:
        """The diff a write-intent event shows: from the bytes the change replaces (none
        for a create; the observed ones for an update, when held) to ``data``."""
        if isinstance(put, Create):
            old: bytes | None = b""
        elif isinstance(put, Update):
            old = put.known if put.known is not None else \
                self.ledger.content(target.backend_path, put.expected)
        else:
            old = None
        if old is None:
            return None
        shown = escape_undecodable(target.display)
        try:
            diff = text_diff(old, data, old_label=f"{shown} (now)",
                             new_label=f"{shown} (after this change)",
                             max_chars=self.diff_chars)
        except FsError:  # not text
            return None
        return diff.text if diff is not None and diff.complete else None

    # -- outdated changes: the diff since, and merging ---------------------------------

    def _resolve_stale(self, target: Target, data: bytes, put: PutMode, op: Operation,
                       err: FsError, *, exclusive: bool, rebase: Rebase | None) -> Commit:
        """Answer a commit refused because the file changed since the version it was
        made from. With ``Policy(on_stale="merge")``, move the change onto the current
        bytes (``rebase``, default :func:`~toolfs.merge.merge_write`) and commit on
        exactly their version, retried :data:`MERGE_RETRIES` times; otherwise, or when it
        does not apply, raise ``stale`` with the diff since the observed version
        (:meth:`_shown_change`)."""
        base = None if exclusive or err.code != "stale" else self._observed_bytes(target, put)
        if base is None:  # nothing to diff from (or to merge): read it again
            raise self._fail(err, target, op) from err.__cause__
        expected = put.expected if isinstance(put, Update) else None
        current: Blob | FsError | None = _UNFETCHED
        if self.policy is not None and self.policy.on_stale == "merge":
            # One turn for the fetch, the merge and the commit (see _TURNS), unless a
            # write-intent hook would run inside it: a hook (a person approving) must
            # never hold up the other contexts' commits.
            hooks = any(type(sub) is not AuditLog for sub in self.subscribers)
            for attempt in range(1 + MERGE_RETRIES):
                if attempt:
                    time.sleep(random.uniform(0, MERGE_BACKOFF * 2**attempt))
                with contextlib.nullcontext() if hooks else _turn(target.backend_path):
                    current = self._current(target)
                    if not isinstance(current, Blob) or not current.complete:
                        break
                    rebased = rebase(current.data) if rebase is not None else \
                        merge_write(base, data, current.data)
                    if rebased is None:
                        break
                    outcome = self._store_put(target, rebased.data,
                                              Update(current.version, known=current.data), op)
                if isinstance(outcome, Commit):
                    return replace(outcome, merged=True, theirs=rebased.theirs)
                err, current = outcome, _UNFETCHED  # changed again meanwhile
        if current is _UNFETCHED:
            current = self._current(target)
        shown = err if isinstance(current, FsError) else \
            self._shown_change(target, err, base, expected, current)
        raise self._fail(shown, target, op) from err.__cause__

    def _observed_bytes(self, target: Target, put: PutMode) -> bytes | None:
        """The bytes of the version a refused change was made from: none for a file seen
        absent; an update's, when the caller or the ledger still holds them."""
        if isinstance(put, Create):
            return b""
        if isinstance(put, Update):
            return put.known if put.known is not None else \
                self.ledger.content(target.backend_path, put.expected)
        return None

    def _current(self, target: Target) -> Blob | FsError | None:
        """The file now, whole up to the cap (``None``: deleted; an error: unknown)."""
        try:
            return self.store.get(target.backend_path, length=self.size_cap + 1)
        except FsError as err:
            return None if err.code == "not_found" and not err.details.get("bucket") else err

    def _shown_change(self, target: Target, err: FsError, base: bytes,
                      expected: FileVersion | None, current: Blob | None) -> FsError:
        """``stale`` with what changed since ``base`` (the bytes of version ``expected``,
        or none for a file seen absent): ``details["diff"]`` and ``diff_complete``. When
        the whole change is shown, this context has now seen the current version and the
        ledger records it (``counts_as_read``), unless a parallel call of this context
        already recorded another version."""
        key, display = target.backend_path, escape_undecodable(target.display)
        details = {k: v for k, v in err.details.items() if k != "current_version"}
        if current is None:
            counts = self.ledger.record_if(key, expected, None)
            details.update(deleted=True, diff=None, diff_complete=True, counts_as_read=counts)
            message = f"{display} was deleted since you read it"
        else:
            diff, why = None, f"it is now over the {self.size_cap}-byte cap"
            if current.complete:
                why = "the change is too large to show"
                try:
                    diff = text_diff(base, current.data, max_chars=self.diff_chars,
                                     old_label=f"{display} (as you read it)",
                                     new_label=f"{display} (now)")
                except FsError:
                    why = "it is not text, so the change cannot be shown"
            complete = diff is not None and diff.complete
            counts = complete and self.ledger.record_if(
                key, expected, current.version, size=current.size, content=current.data)
            details.update(current_version=str(current.version),
                           diff=diff.text if diff is not None else None,
                           diff_complete=complete, counts_as_read=counts)
            message = err.message if diff is not None else f"{err.message}; {why}"
        out = fs_error("stale", message, path=target.display, details=details)
        out.__cause__ = err.__cause__
        return out

    def stale_since(self, target: Target, err: FsError, base: bytes | None,
                    expected: FileVersion | None) -> FsError:
        """A ``stale`` found while reading (an edit's text no longer matches), with the
        diff since ``base`` as for a refused commit; ``err`` unchanged without ``base``."""
        if base is None:
            return err
        current = self._current(target)
        if isinstance(current, FsError):
            return err
        return self._shown_change(target, err, base, expected, current)
    def verify_conditions(self) -> None:
        """Raise ``unsupported`` unless the service honours the conditional writes every
        change relies on (probed once per process and bucket on S3, GCS and Azure, see
        :mod:`toolfs.backends.conditions`; nothing to check on memory, local disk or the
        generic store). A no-op with ``trust_conditions`` or ``read_only``. The first
        change makes the same check; servers call this at start."""
        if self._conditions_verified or self.read_only:
            return
        conditions.verify(self.store, self.jail.join(""))
        self._conditions_verified = bool(conditions.scratch_dir(self.store, None))

    def _check_conditions(self, target: Target, op: Operation) -> None:
        """Before a change of ``target``: refuse toolfs's reserved names, and verify the
        store's conditions (see :meth:`verify_conditions`) unless known to hold."""
        if conditions.has_reserved_part(target.display):
            # A user file of that form would be hidden from listings (and on local
            # disk taken for a crashed write's leftover): refused before any request.
            err = fs_error("invalid_arguments", f"{target.display}: names of the form "
                           f".NAME{conditions.RESERVED_MARK}* are reserved for toolfs's "
                           "own temporary objects", path=target.display)
            raise self._fail(err, target, op)
        if self._conditions_verified:
            return
        try:
            conditions.verify(self.store, target.backend_path)
        except FsError as err:
            raise self._fail(err, target, op) from err.__cause__
        # A root naming a bucket: every later change goes to the bucket just checked.
        self._conditions_verified = bool(conditions.scratch_dir(self.store, None))

    def _put(self, target: Target, data: bytes, put: PutMode, op: Operation) -> FileVersion:
        try:
            return self.store.put(target.backend_path, data, put)
        except FsError as err:
            if err.code == "stale":
                err = self._explain_stale(target, put, err)
            raise self._fail(err, target, op) from err.__cause__

    def _explain_stale(self, target: Target, put: PutMode, err: FsError, *,
                       exclusive: bool = False) -> FsError:
        if exclusive:
            # No read makes an exclusive create of an existing file succeed: say that it
            # exists, not "read it first" (still `stale`, the code adapters look for).
            out = fs_error("stale", f"{target.display} already exists; an exclusive "
                           "create never replaces a file", path=target.display,
                           details={**err.details, "exists": True, "operation": "create"})
            out.__cause__ = err.__cause__
            return out
        obs = self.ledger.get(target.backend_path)
        if isinstance(put, Create) and obs is None and self.policy is not None:
            return fs_error(
                "not_observed",
                f"{target.display} already exists and was not read in this context; read "
                "it before replacing it", path=target.display)
        if isinstance(put, Create):
            msg = f"{target.display} was created by someone else since you saw it absent"
        else:
            msg = f"{target.display} changed since you read it"
        out = fs_error("stale", msg, path=target.display, details=err.details)
        out.__cause__ = err.__cause__
        return out

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
        with self.open_observed(path1) as src:  # also: path1 must be a file
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

    def _delete(self, target: Target, mode: Update | Overwrite) -> None:
        """Remove the file on condition ``mode``; the one place every delete goes through."""
        self._check_writable(target, "delete")
        if not self._conditions_verified or conditions.RESERVED_MARK in target.display:
            self._check_conditions(target, "delete")
        before = mode.expected if isinstance(mode, Update) else None
        self._before("fs/write-intent", "delete", target, before=before)
        with _turn(target.backend_path):
            try:
                self.store.delete(target.backend_path, mode)
            except FsError as err:
                if err.code == "stale":
                    err = self._explain_stale(target, mode, err)
                raise self._fail(err, target, "delete") from err.__cause__
            self.ledger.record(target.backend_path, None)
        self._notify("fs/written", "delete", target, before=before)

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

    # -- read-only forwarding -----------------------------------------------------

    def _fresh(self, backend_path: str) -> str:
        """``backend_path``, with the wrapped filesystem's cached listings of it, its
        parents and its subtree dropped: changes are stored through the store, which
        fsspec's listing caches (s3fs, gcsfs, adlfs) never hear of, so a cached listing
        would hide a file just written (pyarrow's ``get_file_info`` after a write)."""
        forget_listings(self.fs, backend_path)
        return backend_path

    def _entry(self, info: dict[str, Any]) -> dict[str, Any]:
        return {**info, "name": self._listed_name(self.fs._strip_protocol(info["name"]))}

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        target = self._readable(path, file=False)
        try:
            return self._entry(self.fs.info(self._fresh(target.backend_path), **kwargs))
        except FileNotFoundError as exc:
            raise fs_error("not_found", f"{target.display} does not exist",
                           path=target.display) from exc

    # A path named here is refused (``denied``) as a read of it would be; a listing
    # leaves out what a deny rule hides, as the discovery tools do.

    def _shown(self, backend_path: str, kind: str) -> bool:
        """Whether a listed entry may be shown: not a symlink leading out of the root
        (local disk), not toolfs's own temporary object, not denied itself, and not a
        directory whose every entry is denied (``secrets/**``)."""
        if conditions.RESERVED_MARK in backend_path and conditions.has_reserved_part(
                self.jail.display_of(backend_path)):
            return False
        if self.jail.resolve_symlinks and not _inside(os.path.realpath(backend_path),
                                                      self.jail.real_root):
            return False
        if not self.deny:
            return True
        display = self.jail.display_of(backend_path)
        if not self.visible(display, backend_path):
            return False
        return kind != "directory" or not self._denied(f"{display}/\uffff")

    def _named(self, path: str) -> Target:
        """Confine a path these methods describe (a file or a directory; ``d/`` is
        ``d``), refusing denied ones, checked for the client (see :meth:`_readable`)."""
        if path.endswith("/") and path.strip("/"):
            path = path.rstrip("/")
        return self._readable(path, file=False)

    def _described(self, target: Target, call: Callable[[str], Any]) -> Any:
        """``call(target's backend path)``, a missing path ``not_found`` by its display
        path (never the backend's own error, which names the backend path)."""
        try:
            return call(self._fresh(target.backend_path))
        except FileNotFoundError as exc:
            raise fs_error("not_found", f"{target.display} does not exist",
                           path=target.display) from exc

    def ls(self, path: str = "", detail: bool = True, **kwargs: Any) -> list[Any]:
        path = self._strip_protocol(path)
        target = self.search_root(path.rstrip("/") if path.strip("/") else path)
        entries = self._described(
            target, lambda p: self.fs.ls(self._fresh(p), detail=True, **kwargs))
        out = [self._entry(e) for e in entries
               if self._shown(self.fs._strip_protocol(e["name"]), e.get("type", ""))]
        return out if detail else [e["name"] for e in out]

    def exists(self, path: str, **kwargs: Any) -> bool:
        try:
            target = self._named(path)
        except FsError as err:
            if err.code in ("outside_root", "denied"):
                raise
            return False
        return bool(self.fs.exists(self._fresh(target.backend_path)))

    def isfile(self, path: str) -> bool:
        return bool(self.fs.isfile(self._fresh(self._named(path).backend_path)))

    def isdir(self, path: str) -> bool:
        if path in ("", ".", "/"):
            return True
        return bool(self.fs.isdir(self._fresh(self._named(path).backend_path)))

    def size(self, path: str) -> int:
        return int(self.info(path)["size"])

    def find(self, path: str = "", maxdepth: int | None = None, withdirs: bool = False,
             detail: bool = False, **kwargs: Any) -> Any:
        path = self._strip_protocol(path)
        base = self.search_root(path.rstrip("/") if path.strip("/") else path).backend_path
        found = self.fs.find(self._fresh(base), maxdepth=maxdepth, withdirs=withdirs,
                             detail=True)
        if not isinstance(found, dict):  # adlfs answers a file's name, not its details
            found = {name: self.fs.info(name) for name in found}
        own = self.fs._strip_protocol(base).rstrip("/")
        entries = {}
        for key, info in found.items():
            listed = self.fs._strip_protocol(key)
            if maxdepth is not None and listed.startswith(own + "/") and \
                    listed[len(own) + 1:].rstrip("/").count("/") >= maxdepth:
                continue  # adlfs's find ignores maxdepth: every client gets the same answer
            if self._shown(listed, info.get("type", "")):
                entries[self._listed_name(listed)] = self._entry(info)
        return entries if detail else sorted(entries)

    def walk(self, path: str = "", maxdepth: int | None = None, **kwargs: Any
             ) -> Iterator[Any]:
        path = self._strip_protocol(path)
        base = self.search_root(path.rstrip("/") if path.strip("/") else path).backend_path
        kwargs.pop("topdown", None)  # top-down only: denied directories are pruned
        for root, dirs, files in self.fs.walk(self._fresh(base), maxdepth=maxdepth, **kwargs):
            root = self.fs._strip_protocol(root)
            prefix = root.rstrip("/") + "/"
            dirs[:] = [d for d in dirs if self._shown(prefix + d, "directory")]
            files[:] = [f for f in files if self._shown(prefix + f, "file")]
            yield self._listed_name(root), dirs, files

    def modified(self, path: str) -> Any:
        return self._described(self._named(path), self.fs.modified)

    def created(self, path: str) -> Any:
        return self._described(self._named(path), self.fs.created)

    def ukey(self, path: str) -> str:
        return str(self._described(self._named(path), self.fs.ukey))

    # -- discovery (glob, grep, ls): listings, no observations ----------------------

    def search_root(self, path: str | None) -> Target:
        """Confine the directory (or file) a discovery tool starts from: the root for
        ``None``, ``""`` or ``"."``; ``outside_root`` or ``denied`` as for ``read``."""
        if path in (None, "", "."):
            return Target(self.jail.join(""), ".")
        assert path is not None
        if path.endswith("/") and path.strip("/"):  # `dir/` names the directory dir
            path = path.rstrip("/")
        return self._readable(path, file=False)

    def visible(self, display: str, backend_path: str) -> bool:
        """Whether a listed path may be shown: no deny rule matches it, nor (local) the
        file it reaches through symlinks -- the same rule as :meth:`_deny_reason`."""
        if not self.deny:
            return True
        reached = ""
        if self.jail.resolve_symlinks:
            real = self.jail.display_of(os.path.realpath(backend_path))
            reached = escape_undecodable(real) if real != display else ""
        return self._deny_reason(Target(backend_path, display, reached)) is None

    def _found(self, target: Target, listed: str, entry: Any, prefix: str) -> Found | None:
        base = listed.rstrip("/")
        name = entry.path.rstrip("/")
        if base and not name.startswith(base + "/"):
            return None
        rel = name[len(base) + 1:] if base else name.lstrip("/")
        parts = rel.split("/")
        if "" in parts or "." in parts or ".." in parts:
            return None
        if conditions.RESERVED_MARK in rel and any(map(conditions.is_reserved_name, parts)):
            return None  # toolfs's own temporary object (a probe's, a crashed write's)
        rel = escape_undecodable(f"{prefix}/{rel}" if prefix else rel)
        display = rel if target.is_root else f"{escape_undecodable(target.display)}/{rel}"
        if not self.visible(display, name):
            return None
        # A listed symlink is read where it leads, as `resolve` reads a path through it.
        return Found(path=display, rel=rel, backend_path=entry.target or name,
                     kind=entry.kind, size=entry.size, mtime=entry.mtime,
                     version=entry.version)

    def list_files(self, path: str | None = None, *, prefix: str = "",
                   sizes: bool = True, stats: dict[str, int] | None = None
                   ) -> Iterator[Found]:
        """Every file below the directory ``path`` (default: the root), or only below
        its subdirectory ``prefix`` (relative, ``/``-separated, literal): one flat
        listing (``Store.list_files``), fresh, in no particular order. Denied files are
        left out; nothing outside the root is listed. A missing directory lists nothing.
        Records no observation. ``sizes=False``: sizes and mtimes may be ``None`` where
        they would cost extra per file (see ``Store.list_files``). ``stats["listed"]``
        counts the files the store listed, denied ones included (whether the directory
        holds any file at all, on every backend alike)."""
        target = self.search_root(path)
        listed = target.backend_path
        if prefix:
            if any(p in ("", ".", "..") for p in prefix.split("/")) or "\x00" in prefix:
                return
            listed = f"{listed.rstrip('/')}/{prefix}" if listed else prefix
            if self._denied(prefix if target.is_root else f"{target.display}/{prefix}"):
                return
        cache = self.content_cache
        # What the cache holds below the listed directory and the listing does not name
        # was deleted: held in a set of the cached paths (bounded by the cache), never of
        # the listing (a prefix may hold millions of objects).
        unlisted = cache.paths_under(self._cache_namespace, listed) if cache else set()
        # The per-entry work of `_found`, with what is the same for every entry hoisted.
        base = listed.rstrip("/")
        head = f"{base}/" if base else ""
        cut = len(head)
        shown = "" if target.is_root else f"{escape_undecodable(target.display)}/"
        inside = f"{prefix}/" if prefix else ""
        check = bool(self.deny)
        new, fill = object.__new__, _fill_found
        listed_count = 0
        for entry in self.store.list_files(listed, sizes=sizes):
            if entry.kind != "file":
                continue
            listed_count += 1
            name = entry.path
            if unlisted:
                unlisted.discard(name)
            if name.endswith("/"):
                name = name.rstrip("/")
            if head:
                if not name.startswith(head):
                    continue
                rel = name[cut:]
            else:
                rel = name.lstrip("/")
            probe = f"/{rel}/"
            if "//" in probe or "/./" in probe or "/../" in probe:
                continue  # an empty, "." or ".." segment names no file of the tree
            if conditions.RESERVED_MARK in rel and any(
                    map(conditions.is_reserved_name, rel.split("/"))):
                continue  # toolfs's own temporary object (a probe's, a crashed write's)
            if inside:
                rel = inside + rel
            if not rel.isascii():
                rel = escape_undecodable(rel)
            display = shown + rel if shown else rel
            if check and not self.visible(display, name):
                continue
            found = new(Found)
            # A listed symlink is read where it leads, as `resolve` reads a path through it.
            fill(found, display, rel, entry.target or name, entry)
            yield found
        if stats is not None:
            stats["listed"] = stats.get("listed", 0) + listed_count
        if cache is not None and unlisted:
            cache.forget_paths(self._cache_namespace, unlisted)

    def list_dir(self, path: str | None = None) -> Iterator[Found]:
        """The immediate children of the directory ``path`` (``Store.list_dir``: one
        delimiter listing on object stores), denied ones left out. ``not_found`` for a
        missing directory (the root lists as empty), ``not_a_file`` for a file."""
        target = self.search_root(path)
        # Streamed as the listing pages come (memory bounded by the caller's cap, not by
        # the directory's size); an error of the listing is raised where it is met.
        entries = iter(self.store.list_dir(target.backend_path))
        while True:
            try:
                entry = next(entries, None)
            except FsError as err:
                if err.code == "not_found" and target.is_root:
                    return
                if err.code == "not_found":
                    raise self._not_found(target, err) from err.__cause__
                if err.code == "not_a_file":
                    err.details["operation"] = "ls"  # the advice: give a directory
                raise self._fail(err, target, "read") from err.__cause__
            if entry is None:
                return
            found = self._found(target, target.backend_path, entry, "")
            if found is None or "/" in found.rel:
                continue
            if found.kind == "dir" and self.deny and self._denied(f"{found.path}/\uffff"):
                continue  # a directory whose every entry is denied (``secrets/**``)
            yield found

    def read_many(self, found: Iterable[Found], *, length: int | None = None,
                  max_in_flight: int | None = None
                  ) -> Iterator[tuple[Found, Blob | FsError]]:
        """The bytes of listed files (``Store.get_many``: up to ``max_in_flight``
        requests outstanding, in input order); a failure is yielded, not raised.
        Records no observation. Stopping the iteration cancels what is in flight.

        ``found`` is consumed lazily, a few files ahead of what was yielded (at most
        ``max_in_flight`` requests plus :data:`READ_AHEAD_HITS` cached files), so a
        listing streamed in is never held whole.

        A file listed with a version (object stores) whose bytes the content cache holds
        at exactly that version costs no request; a whole file read here (within
        ``length``) is cached under the version its read returned."""
        cache = self.content_cache
        namespace = self._cache_namespace
        source = iter(found)
        # Input order: each file with its cached blob, or None (fetched, in this order,
        # by the current round of ``get_many``).
        queue: deque[tuple[Found, Blob | None]] = deque()
        exhausted = False

        def misses() -> Iterator[str]:
            """Feed ``get_many`` the files to fetch; the round ends (and a new one
            starts) once too many cached files wait in line, so that a run of hits
            never pulls the whole input."""
            nonlocal exhausted
            for f in source:
                hit: Blob | None = None
                if cache is not None and f.version is not None:
                    data = cache.get(namespace, f.backend_path, f.version)
                    if data is not None and (length is None or len(data) <= length):
                        hit = Blob(data=data, version=f.version, size=len(data))
                queue.append((f, hit))
                if hit is None:
                    yield f.backend_path
                elif len(queue) >= READ_AHEAD_HITS:
                    return
            exhausted = True

        while True:
            results = self.store.get_many(
                misses(), max_in_flight=max_in_flight or self.max_in_flight, length=length)
            try:
                for backend_path, outcome in results:
                    while queue[0][1] is not None:  # cached files before this one
                        yield _hit(queue.popleft())
                    listed = queue.popleft()[0]
                    assert listed.backend_path == backend_path
                    if cache is not None and listed.version is not None:
                        if isinstance(outcome, Blob) and outcome.complete and (
                                length is None or outcome.size < length):
                            # Keyed by the version of exactly these bytes (the read's).
                            cache.put(namespace, backend_path, outcome.version,
                                      outcome.data)
                        elif isinstance(outcome, FsError) and outcome.code == "not_found":
                            cache.forget(namespace, backend_path)
                    yield listed, outcome
            finally:
                close = getattr(results, "close", None)
                if close is not None:
                    close()
            while queue:  # every file fetched: the rest are cached
                yield _hit(queue.popleft())
            if exhausted:
                return

    def __repr__(self) -> str:
        return (f"PolicyFileSystem({type(self.fs).__name__}, root={self.jail.root!r}, "
                f"context_id={self.context_id!r})")


def _hit(item: tuple[Found, Blob | None]) -> tuple[Found, Blob]:
    """A file ``read_many`` found cached, with its blob."""
    found, blob = item
    assert blob is not None
    return found, blob


_UNFETCHED: FsError = fs_error("backend_error", "not fetched")
"""Marks the current bytes as not fetched yet (no request made)."""


def _fill_found(found: Found, display: str, rel: str, backend_path: str, entry: Any) -> None:
    """Set the fields of a :class:`Found` made with ``object.__new__`` (what its frozen
    dataclass ``__init__`` does, without a ``__setattr__`` call per field: a listing
    makes one per file)."""
    found.__dict__.update(path=display, rel=rel, backend_path=backend_path, kind=entry.kind,
                          size=entry.size, mtime=entry.mtime, version=entry.version)


def _root_not_a_file(target: Target) -> FsError:
    """``not_a_file`` for a path that reaches the root: by its name (``.``) or through a
    symlink inside the root (``self -> .``, ``docs/up -> ..``). The root is a directory,
    so the answer is the one for any directory, not ``outside_root``: the link does not
    leave the root (one that does is refused as ``outside_root`` by the jail)."""
    if target.display == ".":
        return fs_error("not_a_file", "the workspace root is a directory, not a file",
                        path=".")
    shown = escape_undecodable(target.display)
    return fs_error("not_a_file", f"{shown} leads to the workspace root, a directory, not "
                    "a file", path=shown)


class ObservedFile(io.RawIOBase):
    """A read-only file whose bytes all belong to one ``version``.

    Whole files (``complete``) are served from memory; larger ones fetch ``block_size``
    blocks on demand, each pinned to ``version`` (``stale`` if the file changed).
    """

    def __init__(self, owner: PolicyFileSystem, target: Target, version: FileVersion,
                 size: int, head: bytes, *, cached: bool = False) -> None:
        # No super().__init__(): io.RawIOBase keeps no state of its own to set up.
        self.cached = cached
        """True when the bytes came from the ledger's cache, not from the backend now."""
        self._owner = owner
        self.path = target.display
        self._target = target
        self.version = version
        self.size = size
        self._buf = head
        self._buf_start = 0
        self._pos = 0

    def verify(self) -> None:
        """Raise ``stale`` if the file is no longer at ``version`` (one small request),
        with the diff since, as a refused commit shows it."""
        try:
            self._owner._get(self._target, length=1, if_version=self.version,
                             restartable=True)
        except FsError as err:
            if err.code not in ("stale", "not_found") or err.details.get("bucket"):
                raise
            owner = self._owner
            base = self._buf if self.complete else None
            found = fs_error("stale", f"{self.path} changed since you read it", path=self.path)
            found.__cause__ = err
            raise owner._fail(owner.stale_since(self._target, found, base, self.version),
                              self._target, "edit") from err

    def commit(self, data: bytes, *, operation: Operation = "edit",
               rebase: Rebase | None = None) -> Commit:
        """Store ``data`` -- bytes derived from this file -- only if the file is still at
        ``version``, whatever the policy. This is how an edit lands: the condition is the
        version its bytes were computed from, not a later ledger entry. If the file
        changed since, the answer is ``stale`` with the diff, or with
        ``Policy(on_stale="merge")`` the change merged onto the current bytes by
        ``rebase`` (default: a three-way line merge of these bytes, ``data`` and the
        current bytes; ``Commit.merged``)."""
        # The bytes of `version` go along (when whole), so that a digest store can
        # compare the file with them rather than hash it again.
        known = self._buf if self._buf_start == 0 and len(self._buf) == self.size else None
        return self._owner._commit(self._target, bytes(data),
                                   Update(self.version, known=known), operation,
                                   rebase=rebase)

    def delete(self) -> None:
        """Delete the file only if it is still at ``version`` (else ``stale``), whatever
        the policy: the second half of a move whose copy was made from these bytes."""
        self._owner._delete(self._target, Update(self.version))

    @property
    def block_size(self) -> int:
        """Bytes fetched per request when streaming."""
        return self._owner.block_size

    @property
    def complete(self) -> bool:
        """True when the whole file is in memory."""
        return self._buf_start == 0 and len(self._buf) == self.size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def _fill(self, start: int, length: int) -> None:
        """Make the buffer hold ``[start, start + length)`` (as far as the file goes)."""
        end = min(self.size, start + length)
        buf_end = self._buf_start + len(self._buf)
        if self._buf_start <= start and end <= buf_end:
            return
        keep = self._buf[start - self._buf_start:] if self._buf_start <= start < buf_end else b""
        fetch_from = start + len(keep)
        want = max(end - fetch_from, self._owner.block_size)
        blob = self._owner._get(self._target, start=fetch_from, length=want,
                                if_version=self.version)
        self._buf, self._buf_start = keep + blob.data, start

    def read(self, size: int | None = -1) -> bytes:
        if self._pos == 0 and (size is None or size < 0) and self._buf_start == 0 \
                and len(self._buf) == self.size:
            self._pos = self.size  # the whole file, already in memory (an edit's read)
            return self._buf
        if size is None or size < 0:
            size = self.size - self._pos
        size = min(size, max(0, self.size - self._pos))
        if size == 0:
            return b""
        self._fill(self._pos, size)
        lo = self._pos - self._buf_start
        out = self._buf[lo:lo + size]
        self._pos += len(out)
        return out

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def readline(self, size: int | None = -1) -> bytes:
        parts: list[bytes] = []
        while self._pos < self.size:
            self._fill(self._pos, 1)
            lo = self._pos - self._buf_start
            nl = self._buf.find(b"\n", lo)
            end = len(self._buf) if nl == -1 else nl + 1
            parts.append(self._buf[lo:end])
            self._pos = self._buf_start + end
            if nl != -1:
                break
        return b"".join(parts)


class PendingWrite:
    """A write whose condition was fixed when it started (see
    :meth:`PolicyFileSystem.prepare_write`); :meth:`commit` stores on that condition."""

    def __init__(self, owner: PolicyFileSystem, target: Target, mode: PutMode,
                 operation: Operation, *, exclusive: bool = False) -> None:
        self._owner, self._target, self.operation = owner, target, operation
        self.mode = mode
        """The condition: ``Create``, ``Update(version observed)`` or ``Overwrite``."""
        self.exclusive = exclusive
        """A create that never replaces a file, whatever was observed."""

    @property
    def path(self) -> str:
        """The display path."""
        return self._target.display

    def commit(self, data: bytes) -> Commit:
        """Store ``data`` if the condition still holds (else ``stale``/``not_observed``;
        ``stale`` carries the diff since the observed version, and with
        ``Policy(on_stale="merge")`` a non-overlapping change is merged instead: see
        :meth:`ObservedFile.commit`)."""
        return self._owner._commit(self._target, bytes(data), self.mode, self.operation,
                                   exclusive=self.exclusive)


class _CommitOnClose(io.BytesIO):
    """``open(..., "wb")``: buffers, then commits on close, on the condition that held
    when the file was opened."""

    def __init__(self, pending: PendingWrite) -> None:
        super().__init__()
        self._pending = pending
        self._abandoned = False
        self.commit: Commit | None = None

    def abandon(self) -> None:
        """Make :meth:`close` commit nothing (the writer failed part-way)."""
        self._abandoned = True

    def close(self) -> None:
        if not self.closed:
            data = self.getvalue()
            super().close()
            if not self._abandoned:
                try:
                    self.commit = self._pending.commit(data)
                except FsError as err:  # a person's write (pandas, DuckDB...): their words
                    raise for_people(err, self._pending) from err.__cause__

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is not None:
            self.abandon()  # an exception inside the block commits nothing
        self.close()


class _TextCommitOnClose(io.TextIOWrapper):
    """``open(..., "w")``: the text layer over :class:`_CommitOnClose`, which leaves the
    write uncommitted when its ``with`` block raises, as the binary handle does (the
    plain wrapper's exit would close, and so commit, the buffer)."""

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is not None and isinstance(self.buffer, _CommitOnClose):
            self.buffer.abandon()
        self.close()


def _copy_blocks(src: ObservedFile, out: Any) -> None:
    """Write every byte of ``src`` to ``out``, a block at a time."""
    while True:
        block = src.read(max(src.block_size, 1))
        if not block:
            return
        out.write(block)


def _inside(real: str, root: str) -> bool:
    """Whether the real path ``real`` is ``root`` or below it."""
    return real == root or real.startswith(root.rstrip("/") + "/")
