"""All-or-nothing commits of several files: the one mechanism behind ``rewind``,
``fork.commit()`` and a batch of ``apply_patch`` operations.

:func:`commit_all` takes a list of :class:`Planned` changes (a path, the version the
caller expects the file to be at -- or absent --, the new bytes or a delete, and the
bytes of the expected version) and lands them all or none, in three phases:

1. **Compute every result first.** Each file is read once (one request; the reads go
   out together, up to ``max_in_flight`` at a time) and checked:
   at the expected version it is ready; changed by someone else it is refused
   ``stale`` with the diff of that other change (``on_stale="refuse"``), or, with
   ``on_stale="merge"``, the change is merged onto the other one by a three-way line
   merge (:func:`toolfs.formats.merge.merge_write`) and refused when they overlap. Any refusal
   (also ``denied``, ``too_large``, a failed read) refuses the **whole set**, each file
   with its reason, before anything is written. One exception, for the request bound:
   on object stores a file to be *created* is not read first -- its conditional create
   (``If-None-Match``) refuses a file made meanwhile, and the store's create already
   spends a request checking the name is no directory. Creates are written first, so
   such a refusal rolls back at most other new files.
2. **Write each file conditionally** on the version that was checked (the backends'
   conditional puts: ``Create``, ``Update``; deletes on ``Update``), through the
   policy's one commit point, so the ledger, events and journal see every write.
   Writes go first, deletes last (a file moved back is never missing from both places).
3. **Roll back on failure.** If a write fails midway (a fault, the deadline, a
   concurrent change caught by its condition, a veto), the files already written are
   restored, each conditionally on the version this commit left, so a change someone
   else made since is never overwritten. A write whose outcome is unknown (no answer)
   is looked at once, and rolled back too if it landed. The roll back has its own
   short deadline (:data:`ROLLBACK_SECONDS`), since the call's own may be spent.

:class:`~toolfs.undo.model.CommitResult` says exactly where each file ended
(``states``: ``new``, ``old``, ``theirs``, ``unknown``). **No isolation**: another
reader may see some files new and others old while the commit runs (or rolls back);
what is guaranteed is that the commit never *ends* as a mix without saying so.

Cost on object stores, in the best case (nothing stale, nothing fails): two requests
per file, ``2N`` for ``N`` files, ``N`` of them conditional writes (an update or a
delete: a read and the write; a create: the store's directory check and the write).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from toolfs import deadline
from toolfs.backends import Create, Update
from toolfs.backends.base import Blob
from toolfs.errors import FsError, fs_error
from toolfs.escaping import escape_undecodable
from toolfs.formats.diff import text_diff
from toolfs.formats.merge import merge_write
from toolfs.policy.filesystem import Commit, PolicyFileSystem
from toolfs.policy.paths import Target
from toolfs.policy.recorder import tool_scope
from toolfs.undo.model import CommitResult, FileState
from toolfs.versions import FileVersion

__all__ = ["ROLLBACK_SECONDS", "Planned", "commit_all"]

ROLLBACK_SECONDS = 30.0
"""Seconds the roll back of a failed commit may take, from the failure, whatever was
left of the call's own deadline."""

OnStale = Literal["refuse", "merge"]


@dataclass(frozen=True)
class Planned:
    """One file's change in an all-or-nothing commit."""

    path: str
    """The display path (relative to the workspace root, as the tools take it)."""
    expected: FileVersion | None
    """The version the file must be at for the change to apply as planned; ``None``:
    the file must not exist."""
    new: bytes | None
    """The bytes to store; ``None`` deletes the file."""
    base: bytes | None = field(default=None, repr=False)
    """The bytes of ``expected``, when the caller holds them: the base of a merge and
    of the diff a ``stale`` refusal shows. Not needed to roll back (the current bytes
    are read in phase 1 anyway)."""
    tool: str | None = None
    """What the journal names as the change's tool (default: ``commit_all``'s)."""


@dataclass
class _Step:
    """One planned change, checked: what to store, on which condition."""

    plan: Planned
    target: Target
    data: bytes | None  # what to store (None: delete)
    condition: FileVersion | None  # the version checked (None: absent)
    old: bytes | None  # the bytes there now (None: absent): what a roll back restores
    merged: bool = False
    written: FileVersion | None = None  # the version this commit left (after a write)
    done: bool = False


def commit_all(fs: PolicyFileSystem, changes: Sequence[Planned], *,
               on_stale: OnStale | None = None, tool: str = "commit") -> CommitResult:
    """Land ``changes`` on ``fs`` all or nothing (see the module docstring).

    Args:
        fs: the policy filesystem of the context committing (its ledger, events and
            journal see every write).
        changes: one :class:`Planned` per file; a path may appear once.
        on_stale: ``"refuse"`` or ``"merge"``; default: the context's policy
            (``Policy(on_stale=...)``), else ``"refuse"``.
        tool: what the journal names the changes' tool (``rewind``, ``apply_patch``,
            ``commit``...).

    Returns:
        a :class:`~toolfs.CommitResult`: ``committed`` lists every path when the set
        landed; otherwise ``refused`` says why per file and ``states`` where each file
        ended. Raises ``invalid_arguments`` for a path given twice; nothing else.
    """
    if on_stale is None:
        on_stale = "merge" if fs.policy is not None and fs.policy.on_stale == "merge" \
            else "refuse"
    seen: set[str] = set()
    for plan in changes:
        if plan.path in seen:
            raise fs_error("invalid_arguments", f"{plan.path} appears twice in one commit",
                           path=plan.path)
        seen.add(plan.path)
    steps: list[_Step] = []
    refused: dict[str, FsError] = {}
    targets: dict[str, Target] = {}
    for plan in changes:  # phase 1: every result first, nothing written
        try:
            targets[plan.path] = _target(fs, plan)
        except FsError as err:
            refused[plan.path] = err
    # A create on an object store is not read first: its own condition (If-None-Match)
    # finds a file made meanwhile, and the store's create already spends a request on
    # its directory check; creates are written first, so such a refusal has at most
    # other new files to roll back. Everything else: one read per file, up to
    # max_in_flight at once (get_many spends no request explaining a 404).
    blind = {plan.path for plan in changes if plan.path in targets and plan.expected is None
             and plan.new is not None and fs.store.conditions_by_service}
    wanted = [t.backend_path for p, t in targets.items() if p not in blind]
    found: dict[str, Blob | FsError] = {}
    if fs.store.conditions_by_service and wanted:  # remote: the reads go out together
        found = dict(fs.store.get_many(wanted, max_in_flight=fs.max_in_flight,
                                       length=fs.size_cap + 1))
    else:  # local stores: get (a listing's get_many has stat versions there, not digests)
        for key in wanted:
            try:
                found[key] = fs.store.get(key, length=fs.size_cap + 1)
            except FsError as err:
                found[key] = err
    for plan in changes:
        target = targets.get(plan.path)
        if target is None:
            continue
        if plan.path in blind:
            steps.append(_Step(plan, target, plan.new, None, None))
            continue
        try:
            step = _check(fs, plan, target, found[target.backend_path], on_stale)
        except FsError as err:
            refused[plan.path] = err
            continue
        if step is not None:
            steps.append(step)
    paths = [plan.path for plan in changes]
    if refused:
        return CommitResult(committed=[], refused=refused,
                            states=dict.fromkeys(paths, "old"))
    # Creates first (see above), then updates, deletes last: a file moved back is never
    # missing from both places.
    order = [s for s in steps if s.data is not None and s.condition is None] + \
        [s for s in steps if s.data is not None and s.condition is not None] + \
        [s for s in steps if s.data is None]
    failure: tuple[_Step, FsError] | None = None
    for step in order:  # phase 2: each file on the version checked
        try:
            with tool_scope(step.plan.tool or tool):
                _write(fs, step)
        except FsError as err:
            failure = (step, err)
            break
        except Exception as exc:  # a subscriber's or a client's surprise: still a failure
            failure = (step, _unexpected(exc, step.plan.path))
            break
    states: dict[str, FileState] = dict.fromkeys(paths, "new")
    versions = {s.plan.path: s.written for s in steps if s.done}
    merged = [s.plan.path for s in steps if s.merged]
    if failure is None:
        return CommitResult(committed=paths, states=states, merged=merged,
                            versions=versions)
    # phase 3: restore what was written, each on the version this commit left
    failed, error = failure
    refused[failed.plan.path] = error
    states = dict.fromkeys(paths, "old")
    if error.code == "backend_error":  # no answer: the write may have landed
        with deadline.grace(ROLLBACK_SECONDS):
            states[failed.plan.path] = _landed(fs, failed)
    rolled_back: list[str] = []
    with deadline.grace(ROLLBACK_SECONDS), tool_scope(f"{tool} (rolled back)"):
        for step in reversed([s for s in order if s.done]):
            state, why = _roll_back(fs, step)
            states[step.plan.path] = state
            if state == "old":
                rolled_back.append(step.plan.path)
            elif why is not None:
                refused.setdefault(step.plan.path, why)
    return CommitResult(committed=[p for p in paths if states[p] == "new"],
                        refused=refused, states=states, rolled_back=rolled_back,
                        merged=merged, versions={s.plan.path: s.written for s in steps
                                                 if s.done and states[s.plan.path] == "new"})


def _target(fs: PolicyFileSystem, plan: Planned) -> Target:
    """The confined path of a planned change, refused early when it may not change."""
    target = fs._writable(plan.path, "write" if plan.new is not None else "delete",
                          via_store=True)
    if plan.new is not None and len(plan.new) > fs.size_cap:
        fs._check_cap(target, len(plan.new), "change")
    return target


def _check(fs: PolicyFileSystem, plan: Planned, target: Target, read: Blob | FsError,
           on_stale: OnStale) -> _Step | None:
    """Phase 1 for one file, given its current bytes (``read``): the step to take,
    ``None`` when nothing is to be done, or a refusal (raised)."""
    op: Literal["write", "delete"] = "write" if plan.new is not None else "delete"
    current: Blob | None = None
    if isinstance(read, FsError):
        if read.code != "not_found" or read.details.get("bucket"):
            raise fs._fail(read, target, op)
    else:
        current = read
    now = current.version if current is not None else None
    if current is not None and not current.complete:  # its old bytes could not come back
        raise fs._fail(fs_error(
            "too_large", f"{target.display} is {current.size} bytes, over the "
            f"{fs.size_cap}-byte cap: it cannot be changed or restored whole",
            path=target.display, details={"size": current.size, "cap": fs.size_cap}),
            target, op)
    if now == plan.expected:
        if current is None and plan.new is None:
            return None  # already absent: nothing to delete
        return _Step(plan, target, plan.new, now,
                     current.data if current is not None else None)
    if on_stale == "merge" and plan.new is not None and plan.base is not None \
            and plan.expected is not None and current is not None:
        rebased = merge_write(plan.base, plan.new, current.data)
        if rebased is not None:
            return _Step(plan, target, rebased.data, now, current.data, merged=True)
    raise fs._fail(_stale(fs, target, plan, current, on_stale), target, op)


def _stale(fs: PolicyFileSystem, target: Target, plan: Planned, current: Blob | None,
           on_stale: OnStale) -> FsError:
    """``stale`` for a file someone else changed since ``plan.expected``, with the diff
    of their change (``details["diff"]``) when both versions are held as text."""
    shown = escape_undecodable(target.display)
    overlap = on_stale == "merge" and plan.new is not None and plan.base is not None \
        and plan.expected is not None and current is not None
    if plan.expected is None:
        message = f"{shown} was created by someone else meanwhile"
    elif current is None:
        message = f"{shown} was deleted by someone else meanwhile"
    else:
        message = f"{shown} was changed by someone else meanwhile" + (
            "; that change overlaps this one, so they cannot be merged" if overlap else "")
    details: dict[str, object] = {
        "expected_version": str(plan.expected) if plan.expected is not None else None,
        "current_version": str(current.version) if current is not None else None,
        "deleted": current is None and plan.expected is not None,
        "overlap": overlap}
    before = plan.base if plan.expected is not None else b""
    after = current.data if current is not None else b""
    diff = None
    if before is not None:
        try:
            diff = text_diff(before, after, old_label=f"{shown} (expected)",
                             new_label=f"{shown} (now)", max_chars=fs.diff_chars)
        except FsError:  # not text: the versions say it
            diff = None
    details["diff"] = diff.text if diff is not None else None
    details["diff_complete"] = diff is not None and diff.complete
    if before is None:
        message += ("; the bytes it had at the expected version are no longer held, so "
                    "that change cannot be shown")
    return fs_error("stale", message, path=target.display, details=details)


def _write(fs: PolicyFileSystem, step: _Step) -> None:
    """Phase 2 for one file: store (or delete) on exactly the version checked."""
    if step.data is None:
        assert step.condition is not None
        fs._delete(step.target, Update(step.condition, known=step.old))
        step.written, step.done = None, True
        return
    put = Create() if step.condition is None else Update(step.condition, known=step.old)
    outcome = fs._store_put(step.target, step.data, put, "write")
    if not isinstance(outcome, Commit):  # changed since phase 1: caught by its condition
        if step.condition is None:  # (the policy would say "read it first")
            outcome = fs_error("stale", f"{escape_undecodable(step.target.display)} was "
                               "created by someone else meanwhile", path=step.target.display,
                               details={"exists": False, "expected_version": None})
        raise fs._fail(outcome, step.target, "write")
    step.written, step.done = outcome.version, True


def _landed(fs: PolicyFileSystem, step: _Step) -> FileState:
    """Where a write whose outcome is unknown ended: looked at once; when it landed,
    it is marked done so that the roll back restores it."""
    current = fs._current(step.target)
    if isinstance(current, FsError):
        return "unknown"
    if step.data is None:
        if current is None:
            step.done = True
            return "new"
        return "old" if current.version == step.condition else "theirs"
    if current is None:
        return "old" if step.condition is None else "theirs"
    if current.version == step.condition:
        return "old"
    if current.complete and current.data == step.data:
        step.written, step.done = current.version, True
        return "new"
    return "theirs"


def _roll_back(fs: PolicyFileSystem, step: _Step) -> tuple[FileState, FsError | None]:
    """Phase 3 for one file written: restore its old bytes (or its absence) on the
    version this commit left; a file changed since keeps that change (``theirs``)."""
    try:
        if step.data is None:  # deleted: bring it back, only if nobody made it anew
            assert step.old is not None
            outcome = fs._store_put(step.target, step.old, Create(), "write")
        elif step.condition is None:  # created: remove it, only if still ours
            assert step.written is not None
            fs._delete(step.target, Update(step.written, known=step.data))
            return "old", None
        else:
            assert step.old is not None and step.written is not None
            outcome = fs._store_put(step.target, step.old,
                                    Update(step.written, known=step.data), "write")
    except FsError as err:
        if err.code == "stale":
            return "theirs", err
        return ("unknown" if err.code == "backend_error" else "new"), err
    except Exception as exc:
        return "unknown", _unexpected(exc, step.plan.path)
    if isinstance(outcome, Commit):
        return "old", None
    return "theirs", outcome


def _unexpected(exc: Exception, path: str) -> FsError:
    """A failure that is not an ``FsError`` (a subscriber's, a client's), as one."""
    err = fs_error("backend_error", f"{type(exc).__name__}: {exc}", path=path)
    err.__cause__ = exc
    return err
