"""The policy's hook for a journal of changes: what every commit and delete reports.

The policy layer knows nothing of journals, checkpoints or rewinds (they live above it,
in :mod:`toolfs.undo`). It offers one small protocol instead: a
:class:`~toolfs.policy.PolicyFileSystem` whose ``journal`` attribute holds a
:class:`ChangeRecorder` calls it around the one place every change goes through
(``_store_put`` for writes, ``_delete`` for deletes):

* :meth:`ChangeRecorder.before_change` before anything is stored, with what the policy
  already holds of the bytes the change replaces (never a request of its own). The
  recorder may refuse the change there (a pre-image it cannot keep: ``too_large``),
  and nothing changes; it returns a token.
* :meth:`ChangeRecorder.after_change` once the store confirmed the change, with the new
  version. A change that failed reports nothing more (the token is dropped).

Two context variables name what a change belongs to: :func:`tool_scope` (the tool or
call that made it: ``apply_patch``, ``rewind``...; default: the policy operation) and
:func:`move_scope` (the copy and the delete of one move, which a journal shows as one
``moved`` change).
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from toolfs.versions import FileVersion

ChangeKind = Literal["created", "updated", "deleted"]

_tool: contextvars.ContextVar[str | None] = contextvars.ContextVar("toolfs_tool",
                                                                 default=None)
_move: contextvars.ContextVar[tuple[int, str, str] | None] = contextvars.ContextVar(
    "toolfs_move", default=None)
_moves = itertools.count(1)


@dataclass(frozen=True)
class PendingChange:
    """A change about to be stored, as the policy describes it to a recorder."""

    key: str
    """The wrapped filesystem's path (the store's key)."""
    path: str
    """The display path (relative to the workspace root)."""
    kind: ChangeKind | None
    """``created`` (a create), ``updated`` (an update of ``before``), ``deleted``;
    ``None`` for an unconditional write of a file whose state the policy does not know
    (``Policy`` off): the recorder finds out (it may read the file)."""
    before: FileVersion | None
    """The version the change replaces (``None``: absent, or unknown when ``kind`` is
    ``None``)."""
    pre_image: bytes | None
    """The bytes of ``before`` when the policy holds them (an edit's observed bytes, the
    ledger's cache); ``None``: absent or not held."""
    size: int | None
    """The size of ``before`` when known (what was observed)."""
    tool: str
    """The call that made the change (:func:`tool_scope`, else the policy operation)."""
    move: tuple[int, str, str] | None = None
    """``(id, from, to)`` display paths when the change is half of a move."""
    read_pre_image: Callable[[], tuple[bytes | None, FileVersion | None]] | None = None
    """Reads the file's current bytes and version (one request; ``(None, None)``:
    absent), for a recorder that must keep a pre-image the policy does not hold."""


@runtime_checkable
class ChangeRecorder(Protocol):
    """A journal of changes, as the policy calls it (see the module docstring)."""

    def before_change(self, change: PendingChange) -> object:
        """Called before ``change`` is stored; raise an ``FsError`` to refuse it (nothing
        changes). Returns a token for :meth:`after_change`."""

    def after_change(self, token: object, after: FileVersion | None,
                     data: bytes | None) -> None:
        """Called once the change is stored: ``after`` is the new version (``None`` for a
        delete), ``data`` the bytes stored. Never raises (the change is done)."""


def current_tool() -> str | None:
    """The tool the running call was named by :func:`tool_scope`, if any."""
    return _tool.get()


def current_move() -> tuple[int, str, str] | None:
    """The move the running change belongs to, if any (:func:`move_scope`)."""
    return _move.get()


@contextlib.contextmanager
def tool_scope(name: str) -> Iterator[None]:
    """Within this block, changes are journaled as made by ``name`` (the innermost
    scope names them)."""
    token = _tool.set(name)
    try:
        yield
    finally:
        _tool.reset(token)


@contextlib.contextmanager
def move_scope(source: str, dest: str) -> Iterator[None]:
    """Within this block, the write of ``dest`` and the delete of ``source`` are one
    move (display paths)."""
    token = _move.set((next(_moves), source, dest))
    try:
        yield
    finally:
        _move.reset(token)
