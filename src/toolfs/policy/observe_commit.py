"""The observe/commit logic of the policy: reads that record what this context saw, and
changes that store only on the condition that what it saw is still there.

:class:`ObserveCommit` is the layer of :class:`~toolfs.policy.PolicyFileSystem` that
every read which observes and every change goes through: ``open_observed`` records the
version of the bytes it yields in the ledger; ``prepare_write`` fixes a write's condition
from the ledger; ``_commit`` (the one place every change goes through) stores
conditionally and records the new version; ``_delete`` likewise for deletes. A change
refused because the file moved on is answered here too: ``stale`` with the diff since
the observed version (``_shown_change``, which counts as a read when the whole diff is
shown), or with ``Policy(on_stale="merge")`` merged onto the current bytes and committed
again (``_resolve_stale``, retried while the call's deadline lasts). Commits to one file
from this process take turns (``_turn``).

The fsspec methods that reach this logic (``open``, ``pipe_file``, ``rm_file``,
``mv``...) are in :mod:`toolfs.policy.filesystem`; the handles it returns are in
:mod:`toolfs.policy.handles`.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from dataclasses import replace
from typing import Any, Literal

from toolfs.backends import Create, Overwrite, PutMode, Update, conditions
from toolfs.backends.base import Blob
from toolfs.deadline import DEFAULT_TIMEOUT, remaining
from toolfs.errors import FsError, fs_error
from toolfs.escaping import escape_undecodable
from toolfs.formats.diff import text_diff
from toolfs.formats.merge import merge_write
from toolfs.policy.commits import Commit as Commit
from toolfs.policy.commits import Rebase as Rebase
from toolfs.policy.events import AuditLog, Operation
from toolfs.policy.guards import Guards
from toolfs.policy.handles import ObservedFile, PendingWrite
from toolfs.policy.paths import Target
from toolfs.policy.recorder import (
    ChangeKind,
    ChangeRecorder,
    PendingChange,
    current_move,
    current_tool,
)
from toolfs.versions import FileVersion

_COMMIT_STRIPES = 256
# Commits to one file from this process take turns (one re-entrant lock per stripe of
# paths, shared by every context): a commit and the ledger update after it happen in
# one turn, so a context's ledger never goes back to a version it already replaced; and
# a merge fetches, merges and commits in one turn, so that contexts of one process never
# collide with each other. Between processes (and machines) the conditional write alone
# decides, and a merge that meets another change retries (MERGE_BACKOFF).
_TURNS = [threading.RLock() for _ in range(_COMMIT_STRIPES)]
# A whole-file read that takes two requests starts over when the file changes between
# them (the rest is pinned to the first block's version); after this many tries it gives
# up with ``stale``, so a file rewritten without pause cannot hold a read forever.
READ_ATTEMPTS = 3
# A merge (``Policy(on_stale="merge")``) whose conditional commit meets yet another
# change is made again on that one, for as long as the call's deadline leaves time for
# another try and the diff read a refusal needs (agents on other machines, which no lock
# of this process can order, race on until one lands: a fixed count of retries refused
# one in five of 8 processes' edits on S3). Before retry n it waits a random time up to
# min(MERGE_BACKOFF * 2**n, MERGE_BACKOFF_CAP) seconds ("full jitter"), so that racing
# agents spread out instead of colliding again. A call without a deadline of its own
# retries for MERGE_WINDOW seconds.
MERGE_BACKOFF = 0.004
MERGE_BACKOFF_CAP = 0.25
MERGE_WINDOW = DEFAULT_TIMEOUT
DIFF_CHARS = 20_000
"""Default character budget of the diff a ``stale`` refusal or a write-intent event
carries (``diff_chars``); a ``Workspace`` lowers it to fit its output budget."""

def _turn(key: str) -> threading.RLock:
    """The turn (see ``_TURNS``) that commits to ``key`` take in this process."""
    return _TURNS[hash(key) % _COMMIT_STRIPES]


_UNFETCHED: FsError = fs_error("backend_error", "not fetched")
"""Marks the current bytes as not fetched yet (no request made)."""


def _another_merge(attempt: int, started: float, took: float) -> float | None:
    """The wait before merge retry ``attempt`` (1, 2, ...), a random time up to
    ``min(MERGE_BACKOFF * 2**attempt, MERGE_BACKOFF_CAP)``; ``None`` when what is left of
    the call's deadline (or of :data:`MERGE_WINDOW` from ``started``, without one) would
    not hold that wait, one more try like the last (``took`` seconds) and the read of the
    diff a refusal shows, with a try's length to spare (requests slow down under load: a
    deadline met inside a commit's request leaves its outcome unknown, worse than a
    ``stale``)."""
    left = remaining()
    if left is None:
        left = MERGE_WINDOW - (time.monotonic() - started)
    wait = random.uniform(0, min(MERGE_BACKOFF * 2**attempt, MERGE_BACKOFF_CAP))
    return wait if wait + 3 * took < left else None


class ObserveCommit(Guards):
    """Observing reads and conditional commits (see the module docstring)."""

    journal: ChangeRecorder | None = None
    """Told of every change before and after it is stored (a journal of this context's
    changes, :mod:`toolfs.policy.recorder`); ``None``: nothing is journaled."""

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
        token = None if self.journal is None else self._journal_before(target, put, op)
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
        if token is not None and self.journal is not None:
            self.journal.after_change(token, version, data)
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
        bytes (``rebase``, default :func:`~toolfs.formats.merge.merge_write`) and commit on
        exactly their version, made again on each newer version that meets it while the
        call's deadline lasts (:func:`_another_merge`); otherwise, when it does not apply
        (a real overlap) or time is up, raise ``stale`` with the diff since the observed
        version (:meth:`_shown_change`)."""
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
            started = time.monotonic()
            attempt = 0
            while True:
                tried = time.monotonic()
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
                attempt += 1
                wait = _another_merge(attempt, started, time.monotonic() - tried)
                if wait is None:  # the deadline leaves no time for another try
                    break
                time.sleep(wait)
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

    def _delete(self, target: Target, mode: Update | Overwrite) -> None:
        """Remove the file on condition ``mode``; the one place every delete goes through."""
        self._check_writable(target, "delete")
        if not self._conditions_verified or conditions.RESERVED_MARK in target.display:
            self._check_conditions(target, "delete")
        before = mode.expected if isinstance(mode, Update) else None
        self._before("fs/write-intent", "delete", target, before=before)
        token = None if self.journal is None else \
            self._journal_before(target, mode, "delete", deleting=True)
        with _turn(target.backend_path):
            try:
                self.store.delete(target.backend_path, mode)
            except FsError as err:
                if err.code == "stale":
                    err = self._explain_stale(target, mode, err)
                raise self._fail(err, target, "delete") from err.__cause__
            self.ledger.record(target.backend_path, None)
        if token is not None and self.journal is not None:
            self.journal.after_change(token, None, None)
        self._notify("fs/written", "delete", target, before=before)

    def _journal_before(self, target: Target, put: PutMode, op: Operation, *,
                        deleting: bool = False) -> object:
        """Tell the journal of a change about to be stored, with the bytes it replaces
        when this context holds them (no request here); it may refuse the change."""
        assert self.journal is not None
        key = target.backend_path
        before = put.expected if isinstance(put, Update) else None
        pre: bytes | None = None
        size: int | None = None
        if isinstance(put, Update):
            pre = put.known if put.known is not None else \
                self.ledger.content(key, put.expected)
            obs = self.ledger.held(key)  # a hint: no request, even from a shared ledger
            size = obs.size if obs is not None and obs.version == before else None
        kind: ChangeKind | None = "deleted" if deleting else None
        if not deleting and isinstance(put, Update | Create):
            kind = "updated" if isinstance(put, Update) else "created"

        def read() -> tuple[bytes | None, FileVersion | None]:
            # The bytes the change replaces, when the journal must keep them and this
            # context does not hold them: one request (pinned to the version replaced).
            try:
                blob = self.store.get(key, length=self.size_cap + 1, if_version=before)
            except FsError as err:
                if err.code == "not_found" and not err.details.get("bucket"):
                    return None, None
                raise self._fail(err, target, op) from err.__cause__
            return (blob.data if blob.complete else None), blob.version

        change = PendingChange(key=key, path=target.display, kind=kind, before=before,
                               pre_image=pre, size=size, tool=current_tool() or op,
                               move=current_move(), read_pre_image=read)
        try:
            return self.journal.before_change(change)
        except FsError as err:
            raise self._fail(err, target, op) from err.__cause__
