"""Forks: a copy-on-write view of a workspace whose changes land all or nothing.

``ws.fork()`` (:meth:`toolfs.Workspace.fork`) opens a :class:`Fork` here and makes a
workspace over its overlay (:mod:`toolfs.undo.overlay`) with the same policy: the same
root and confinement, deny rules, ``on_stale`` mode, caps and hooks. The fork starts
from what the forking context had observed (its ledger is copied), so the agent can go on
editing what it read without reading it again.

* Its changes go to the overlay (in memory, or at an fsspec URL that survives the
  process); reads of the files it has not changed fall through to the base; a delete is
  a whiteout; ``glob``, ``grep`` and ``ls`` show the merged view. Other contexts on the
  base see nothing of it.
* :meth:`Fork.changes` lists its changes against the base versions they were made from.
* :meth:`Fork.commit` lands them in the base through
  :func:`toolfs.undo.atomic.commit_all`: each file conditionally on the base version the
  fork's change was made from, all or nothing. A base file someone changed since is
  refused ``stale`` with the diff of that change (``on_stale="refuse"``), or merged by
  three-way line merge when the changes are disjoint (``on_stale="merge"``). Committed
  through the base context's policy filesystem, so its ledger, events and journal see
  every write. After a commit the fork **continues**: its overlay is empty, it is a fork
  of the base as it now is, and its context has observed the versions just committed.
* :meth:`Fork.discard` drops the overlay (and its objects at a URL); the fork is then
  spent: every later call on it is refused (``denied``).

A fork of a fork works the same way: its base is the parent fork, and its commit lands
in the parent's overlay.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from fsspec.core import split_protocol, url_to_fs
from fsspec.spec import AbstractFileSystem

from toolfs.errors import FsError, fs_error
from toolfs.policy.filesystem import PolicyFileSystem
from toolfs.undo.atomic import Planned, commit_all
from toolfs.undo.model import Change, ChangeKind, CommitResult
from toolfs.undo.overlay import OverlayState, Record, private_memory
from toolfs.undo.overlay_fs import OverlayFileSystem

__all__ = ["Fork", "open_fork"]

DISCARDED = ("this fork was discarded: its changes are gone and it can no longer be "
             "used; fork the workspace again")
MEMORY_ROOT = "/fork"


class Fork:
    """A fork's overlay, and the policy filesystem its commit lands in (the parent)."""

    def __init__(self, parent: PolicyFileSystem, state: OverlayState) -> None:
        self.parent = parent
        """The policy filesystem of the context that forked (its commit point)."""
        self.state = state
        self.fs = OverlayFileSystem(state)
        """The merged view, for the fork's own :class:`PolicyFileSystem`."""

    @property
    def store(self) -> Any:
        return self.fs.store

    @property
    def url(self) -> str | None:
        """The overlay's URL; ``None``: in memory."""
        return self.state.url

    def changes(self) -> list[Change]:
        """The fork's changes against the base versions they were made from, by path:
        ``created`` (``before`` is ``None``), ``updated``, ``deleted`` (``after`` is
        ``None``), ``moved`` (``path`` to ``to_path``: the delete of a base file and the
        create of its copy, made by one move); each :class:`~toolfs.Change` gives its
        diff (from the base bytes the change was made from, kept in the overlay, to the
        fork's)."""
        self.state.check_open()
        records = self.state.snapshot()
        by_path = {r.rel: r for r in records}
        moved: dict[str, Record] = {}  # the source's record -> (paired below)
        for rec in records:
            if rec.state == "deleted" and rec.move is not None and rec.move[0] == rec.rel:
                dest = by_path.get(rec.move[1])
                if dest is not None and dest.state == "written" and dest.base is None \
                        and dest.move == rec.move:
                    moved[rec.rel] = dest
        paired = {dest.rel for dest in moved.values()}
        out: list[Change] = []
        for rec in records:
            if rec.rel in paired:
                continue  # shown as the move of its source
            kind: ChangeKind
            dest = moved.get(rec.rel)
            if dest is not None:
                out.append(Change(path=rec.rel, kind="moved", before=rec.base,
                                  after=dest.version, to_path=dest.rel, at=rec.at,
                                  tool=rec.tool, position=len(out),
                                  _load=self._loader(rec, dest)))
                continue
            if rec.state == "deleted":
                kind = "deleted"
            else:
                kind = "created" if rec.base is None else "updated"
            out.append(Change(path=rec.rel, kind=kind, before=rec.base, after=rec.version,
                              to_path=None, at=rec.at, tool=rec.tool, position=len(out),
                              _load=self._loader(rec, rec)))
        return out

    def _loader(self, rec: Record, dest: Record
                ) -> Callable[[], tuple[bytes | None, bytes | None]]:
        """The bytes before (``rec``'s base) and after (``dest``'s, the same record
        but for a move) of one change, read when a diff is asked for."""
        state = self.state

        def load() -> tuple[bytes | None, bytes | None]:
            before = state.pre_image(rec) if rec.base is not None else None
            try:
                after = state.data(dest) if dest.state == "written" else None
            except FsError:  # committed or changed since the listing
                after = None
            return before, after

        return load

    def commit(self, child: PolicyFileSystem) -> CommitResult:
        """Land every change in the parent, all or nothing (see the module docstring);
        ``child`` is the fork's own policy filesystem (its context's observations move to
        the versions committed). Changes of the fork are refused while it commits."""
        state = self.state
        with state.committing():
            records = state.snapshot()
            plans = []
            for rec in records:
                new = state.data(rec) if rec.state == "written" else None
                plans.append(Planned(rec.rel, rec.base, new, state.pre_image(rec),
                                     tool=f"fork commit: {rec.tool}"))
            result = commit_all(self.parent, plans, tool="fork commit")
            if not result.ok:
                self._rebase_rolled_back(records, result)
                return result
            # Landed: the overlay lets go of them (reads fall through to what it just
            # committed), and the fork's context has observed the versions committed.
            for rec in records:
                version = result.versions.get(rec.rel)
                key = _ledger_key(child, rec.rel)
                state.drop_record(rec)
                if rec.state == "deleted":
                    child.ledger.record(key, None)
                elif version is not None:
                    child.ledger.record(key, version)
            return result

    def _rebase_rolled_back(self, records: list[Record], result: CommitResult) -> None:
        """After a commit rolled back: a file restored to the very bytes the fork's
        change was made from may have a new version (GCS generations, Azure ETags);
        its record moves to that version, so the next commit does not find it changed.
        One read per file rolled back; a file that differs keeps its record as it was."""
        by_path = {rec.rel: rec for rec in records}
        for path in result.rolled_back:
            rec = by_path.get(path)
            if rec is None or rec.base is None:
                continue  # a create rolled back is absent again, as recorded
            pre = self.state.pre_image(rec)
            try:
                blob = self.parent.store.get(self.state.roots.join(rec.rel),
                                             length=self.parent.size_cap + 1)
            except FsError:
                continue
            if pre is not None and blob.complete and blob.data == pre \
                    and blob.version != rec.base:
                self.state.put_record(replace(rec, base=blob.version))

    def discard(self) -> None:
        """Drop the overlay and every object it holds; the fork is spent."""
        self.state.close(DISCARDED)


def _ledger_key(fs: PolicyFileSystem, rel: str) -> str:
    """The key ``fs``'s ledger records ``rel`` under (its backend path, through any
    symlink the root's path holds)."""
    try:
        return fs.jail.resolve(rel).backend_path
    except FsError:
        return fs.jail.join(rel)


def _bottom(fs: AbstractFileSystem) -> AbstractFileSystem:
    """The real filesystem under any number of fork overlays."""
    while isinstance(fs, OverlayFileSystem):
        fs = fs.base
    return fs


def _identity(parent: PolicyFileSystem) -> str:
    """Names the base a fork overlays: its filesystem and root (for a fork of a fork,
    the parent fork's overlay too)."""
    fs = parent.fs
    if isinstance(fs, OverlayFileSystem):
        where = fs.state.url or f"memory:{fs.fsid}"
        return f"fork[{where}] of {fs.state.identity}"
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return f"{protocol}://{parent.jail.root}"


def _protocols(fs: AbstractFileSystem) -> tuple[str, ...]:
    return fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)


def open_fork(parent: PolicyFileSystem, overlay: str | None = None,
              storage_options: Mapping[str, Any] | None = None) -> Fork:
    """Open a fork of ``parent``'s context: a new overlay in memory (``overlay=None``),
    or the one at the fsspec URL ``overlay`` (made there, or reopened when it already
    holds this base's fork). The URL is opened with ``storage_options``; without them,
    on the base's own store, with the base's client (its credentials).

    Refused (``invalid_arguments``): an overlay URL inside the base's root or holding
    it (the fork's objects would show in the base, or the base's be removed with the
    overlay), or one that belongs to another base."""
    base_fs, root = parent.fs, parent.jail.root
    if overlay is None:
        upper: AbstractFileSystem = private_memory()
        upper_root, url = MEMORY_ROOT, None
    else:
        if not isinstance(overlay, str) or not overlay.strip():
            raise fs_error("invalid_arguments", "overlay must be an fsspec URL or None")
        bottom = _bottom(base_fs)
        protocol, _ = split_protocol(overlay)
        if storage_options is None and (protocol or "file") in _protocols(bottom):
            upper, upper_root = bottom, bottom._strip_protocol(overlay)
        else:
            try:
                upper, upper_root = url_to_fs(overlay, **dict(storage_options or {}))
            except (ImportError, ValueError, TypeError) as exc:
                raise fs_error("invalid_arguments",
                               f"cannot open the overlay {overlay}: {exc}") from exc
        upper_root = upper_root.rstrip("/")
        url = overlay
        if type(upper) is type(bottom) or set(_protocols(upper)) & set(_protocols(bottom)):
            for base_root in {root, parent.jail.real_root}:
                a, b = upper_root.rstrip("/") + "/", base_root.rstrip("/") + "/"
                if a.startswith(b) or b.startswith(a):
                    raise fs_error(
                        "invalid_arguments",
                        f"the overlay {overlay} and the workspace root {root} overlap; "
                        "give the fork an overlay URL outside the root (and not above "
                        "it)", details={"overlay": overlay})
        if not upper_root:
            raise fs_error("invalid_arguments", f"the overlay {overlay} names no prefix; "
                           "give a bucket prefix or directory of its own")
    if url is not None and {"file", "local"} & set(_protocols(upper)):
        upper.makedirs(upper_root, exist_ok=True)  # the local store needs its directory
    state = OverlayState(base_fs=base_fs, base_store=parent.store, root=root,
                         real_root=parent.jail.real_root, upper_fs=upper,
                         upper_root=upper_root, identity=_identity(parent), url=url)
    if url is not None:
        state.open_url()
    return Fork(parent, state)
