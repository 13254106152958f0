"""The handles a change travels with: the condition goes with the bytes.

An :class:`ObservedFile` is what a read returned; every byte it yields belongs to one
version, and its :meth:`~ObservedFile.commit` stores bytes derived from it on exactly that
version. A :class:`PendingWrite` is a write whose condition was fixed when it started;
``open(path, "wb")`` buffers into one and commits on close. They hold no logic of their
own beyond that: the owner's commit path (:mod:`toolfs.policy.observe_commit`) checks,
stores and answers. Kept apart so that a reader finds "what a handle promises" in one
short page.
"""

from __future__ import annotations

import io
from types import TracebackType
from typing import TYPE_CHECKING, Any

from toolfs.backends import PutMode, Update
from toolfs.errors import FsError, fs_error
from toolfs.policy.events import Operation
from toolfs.policy.paths import Target
from toolfs.policy.people import for_people
from toolfs.versions import FileVersion

if TYPE_CHECKING:  # the owner makes the handles; they only call back into it
    from toolfs.policy.observe_commit import Commit, ObserveCommit, Rebase


class ObservedFile(io.RawIOBase):
    """A read-only file whose bytes all belong to one ``version``.

    Whole files (``complete``) are served from memory; larger ones fetch ``block_size``
    blocks on demand, each pinned to ``version`` (``stale`` if the file changed).
    """

    def __init__(self, owner: ObserveCommit, target: Target, version: FileVersion,
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

    def __init__(self, owner: ObserveCommit, target: Target, mode: PutMode,
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
