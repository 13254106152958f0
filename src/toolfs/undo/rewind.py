"""Rewind: bring every file this context changed after a checkpoint back to its content
at the checkpoint, never undoing someone else's work.

Per file, the journal's first record after the checkpoint says what the file was then
(its pre-image, or absent) and the last one what this context left (its version, and
its bytes while held). The restores are one all-or-nothing commit
(:func:`toolfs.undo.atomic.commit_all`), each conditional on the version this context
left: a file someone else changed since is refused ``stale`` with the diff of their
change, or with ``on_stale="merge"`` the undo is applied as a reverse three-way merge
(base: the bytes this context left; mine: the bytes at the checkpoint; theirs: the
current bytes) when it does not overlap their change. Updated files get their bytes
back, created files are deleted, deleted files come back, moves are moved back (the
copy deleted, the original created again). The rewind's own writes are journaled (tool
``rewind``), so rewinding to a checkpoint taken before it redoes the work.

A file whose bytes at the checkpoint the journal no longer has (dropped to stay within
``journal_bytes``) refuses the whole rewind, naming it: wrong bytes are never restored.
"""

from __future__ import annotations

from toolfs.errors import FsError, fs_error
from toolfs.policy.filesystem import PolicyFileSystem
from toolfs.undo.atomic import OnStale, Planned, commit_all
from toolfs.undo.journal import Journal, Record
from toolfs.undo.model import RewindResult

__all__ = ["plan_rewind", "rewind"]


def plan_rewind(journal: Journal, position: int) -> tuple[list[Planned], dict[str, FsError]]:
    """The restores a rewind to ``position`` makes, and the files it cannot restore."""
    first: dict[str, Record] = {}
    last: dict[str, Record] = {}
    for record in journal.records(position):
        first.setdefault(record.key, record)
        last[record.key] = record
    planned: list[Planned] = []
    lost: dict[str, FsError] = {}
    for key, start in first.items():
        end = last[key]
        if start.before is None and end.after is None:
            continue  # created and deleted again since: nothing of this context is left
        then = journal.pre_image(start) if start.before is not None else None
        if start.before is not None and then is None:
            lost[start.path] = fs_error(
                "unsupported",
                f"{start.path}: the journal no longer holds its bytes at this checkpoint "
                "(dropped to stay within journal_bytes, or the store's old version is "
                "gone), so it cannot be restored; nothing was rewound. Rewind to a later "
                "checkpoint, or raise journal_bytes",
                path=start.path, details={"position": start.position, "dropped": True})
            continue
        planned.append(Planned(path=end.path, expected=end.after, new=then,
                               base=end.after_bytes))
    return planned, lost


def rewind(fs: PolicyFileSystem, journal: Journal, position: int, *,
           on_stale: OnStale | None = None) -> RewindResult:
    """Rewind ``fs``'s context to journal ``position`` (see the module docstring)."""
    planned, lost = plan_rewind(journal, position)
    for n, plan in enumerate(planned):  # the bytes this context left: held by the ledger?
        if plan.base is None and plan.expected is not None:
            key = fs.resolve(plan.path).backend_path
            held = fs.ledger.content(key, plan.expected)
            if held is not None:
                planned[n] = Planned(plan.path, plan.expected, plan.new, held)
    if lost:
        return RewindResult(restored=[], refused=lost,
                            states=dict.fromkeys([p.path for p in planned] + list(lost),
                                                 "old"))
    result = commit_all(fs, planned, on_stale=on_stale, tool="rewind")
    return RewindResult(restored=result.committed, refused=result.refused,
                        states=result.states)
