"""What a commit stored, and what a handle asks of the filesystem that made it.

The handles (:mod:`toolfs.policy.handles`) carry a change's condition with its bytes and
call back into their owner, :class:`~toolfs.policy.observe_commit.ObserveCommit`, which
makes them. :class:`Committer` names the part of the owner they call, so that the
handles depend on this page and not on the commit path itself (no import circle).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from fsspec.spec import AbstractFileSystem

from toolfs.backends import Overwrite, PutMode, Update
from toolfs.backends.base import Blob
from toolfs.errors import FsError
from toolfs.formats.merge import Rebased
from toolfs.policy.events import Operation
from toolfs.policy.paths import Jail, Target
from toolfs.versions import FileVersion

Rebase = Callable[[bytes], Rebased | None]
"""Moves a change onto the current bytes of its file (``None``: it does not apply)."""


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


class Committer(Protocol):
    """The owner of the handles: :class:`~toolfs.policy.observe_commit.ObserveCommit`."""

    fs: AbstractFileSystem
    jail: Jail
    absolute_paths: bool
    context_id: str
    block_size: int

    def _fail(self, err: FsError, target: Target, op: Operation) -> FsError: ...

    def _get(self, target: Target, *, restartable: bool = False, **kw: Any) -> Blob: ...

    def _commit(self, target: Target, data: bytes, put: PutMode, op: Operation, *,
                exclusive: bool = False, rebase: Rebase | None = None) -> Commit: ...

    def stale_since(self, target: Target, err: FsError, base: bytes | None,
                    expected: FileVersion | None) -> FsError: ...

    def _delete(self, target: Target, mode: Update | Overwrite) -> None: ...


class PendingChange(Protocol):
    """What the words for people (:mod:`toolfs.policy.people`) read of a pending write."""

    mode: PutMode
    exclusive: bool
    _owner: Committer
    _target: Target
