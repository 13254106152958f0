"""The values of undo and all-or-nothing commits: checkpoints, changes and results.

Plain frozen dataclasses, exported from :mod:`toolfs` (``toolfs.Checkpoint``,
``toolfs.Change``, ``toolfs.RewindResult``, ``toolfs.CommitResult``).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from toolfs.errors import FsError
from toolfs.escaping import escape_undecodable
from toolfs.formats.diff import text_diff
from toolfs.versions import FileVersion

ChangeKind = Literal["created", "updated", "deleted", "moved"]
FileState = Literal["new", "old", "theirs", "unknown"]
"""Where one file of an all-or-nothing commit ended:

``new``
    it holds the commit's bytes (or, for a delete, is gone);
``old``
    it holds what it held before the commit: never written, or written and then
    restored (rolled back) -- the bytes are the old ones, the version may be new;
``theirs``
    someone else changed it after this commit wrote it, so the roll back left their
    change in place (their bytes stand; nothing of theirs is overwritten);
``unknown``
    a write or its roll back failed without an answer (a timeout, a dropped
    connection): read the file to see which; ``CommitResult.refused`` says why.
"""


@dataclass(frozen=True)
class Checkpoint:
    """A point in one context's journal to :meth:`~toolfs.Workspace.rewind` to."""

    id: str
    label: str | None
    created_at: datetime.datetime
    """When it was taken (UTC)."""
    position: int
    """The number of journal entries this context had made when it was taken: a rewind
    undoes the entries from this position on."""


@dataclass(frozen=True)
class Change:
    """One change this context committed, as :meth:`~toolfs.Workspace.changes` lists
    it."""

    path: str
    """The display path (for a move: where the file was)."""
    kind: ChangeKind
    before: FileVersion | None
    """The version the change replaced (``None``: the file did not exist)."""
    after: FileVersion | None
    """The version it left (``None``: deleted)."""
    to_path: str | None
    """For a move: where the file went."""
    at: datetime.datetime
    """When it was committed (UTC)."""
    tool: str
    """The call that made it: ``write``, ``edit``, ``delete``, ``move``,
    ``notebook_edit``, ``apply_patch``, ``rewind``..."""
    position: int = 0
    """Its place in the journal (0 is the first change of the context)."""
    _load: Callable[[], tuple[bytes | None, bytes | None]] | None = field(
        default=None, compare=False, repr=False)

    def contents(self) -> tuple[bytes | None, bytes | None]:
        """The bytes before and after the change (``None``: absent, or no longer held:
        the journal dropped them, or a later change replaced them)."""
        return self._load() if self._load is not None else (None, None)

    def diff(self, max_chars: int | None = 20_000) -> str:
        """The unified diff of the change (a sentence when it is not text or the bytes
        are no longer held)."""
        before, after = self.contents()
        shown = escape_undecodable(self.path)
        if self.kind == "moved":
            head = f"moved {shown} -> {escape_undecodable(self.to_path or '')}\n"
            if before is not None and after is not None and before == after:
                return head
        else:
            head = ""
        if (before is None and self.before is not None) or \
                (after is None and self.after is not None):
            return head + f"(the bytes of {shown} are no longer held by the journal)\n"
        try:
            diff = text_diff(before or b"", after or b"",
                             old_label=f"{shown} (before)" if self.before else "/dev/null",
                             new_label=f"{escape_undecodable(self.to_path or self.path)} "
                                       "(after)" if self.after else "/dev/null",
                             max_chars=max_chars)
        except FsError:
            return head + f"(binary: {len(before or b'')} -> {len(after or b'')} bytes)\n"
        if diff is None:
            return head + "(the diff is too costly to compute)\n"
        return head + diff.text


class Changes(list[Change]):
    """What :meth:`~toolfs.Workspace.changes` returns: a plain list of
    :class:`Change`, oldest first, which a notebook shows as HTML diffs
    (:mod:`toolfs.integrations.display`)."""


@dataclass(frozen=True)
class CommitResult:
    """What an all-or-nothing commit of several files did
    (:func:`toolfs.undo.atomic.commit_all`; ``fork.commit()``, a patch batch)."""

    committed: list[str]
    """The files that hold the commit's bytes: every file of the set when it landed,
    none when it was refused or rolled back (see ``states`` when a roll back failed)."""
    refused: dict[str, FsError] = field(default_factory=dict)
    """Why, per file: each file that refused the set before anything was written
    (``stale`` with the other change's diff, ``too_large``, ``denied``...), or the
    write that failed midway and any roll back that failed."""
    states: dict[str, FileState] = field(default_factory=dict)
    """Every file of the set: ``new``, ``old``, ``theirs`` or ``unknown``
    (see :data:`FileState`)."""
    rolled_back: list[str] = field(default_factory=list)
    """Files written, then restored after a later write failed."""
    merged: list[str] = field(default_factory=list)
    """Files whose change was merged onto another context's change (merge mode)."""
    versions: dict[str, FileVersion | None] = field(default_factory=dict)
    """The version each written file was left at (``None``: deleted)."""

    @property
    def ok(self) -> bool:
        """Whether the whole set landed."""
        return not self.refused and all(s == "new" for s in self.states.values())


@dataclass(frozen=True)
class RewindResult:
    """What :meth:`~toolfs.Workspace.rewind` did."""

    restored: list[str]
    """Files brought back to their content at the checkpoint (all of them, or none)."""
    refused: dict[str, FsError] = field(default_factory=dict)
    """Why not, per file (``stale`` with the diff of the other change; or the file
    whose write failed midway, the others then rolled back)."""
    states: dict[str, FileState] = field(default_factory=dict)
    """Every file the rewind touched or would have: see :data:`FileState`."""
