"""What every operation of the policy filesystem checks before it touches storage, and
how it says no.

:class:`Guards` is the lowest layer of :class:`~toolfs.policy.PolicyFileSystem`. It holds
the context's settings (set by ``PolicyFileSystem.__init__``) and the checks that need no
version: confinement to the root (the jail), deny rules, ``read_only``, the ``fs/*``
events (a subscriber of a before-event may veto), and the wording of refusals (display
paths, "did you mean"). The layers above stand on it and on nothing of each other:
:mod:`toolfs.policy.observe_commit` (reads that record, conditional commits),
:mod:`toolfs.policy.listings` (discovery's listings) and
:mod:`toolfs.policy.forwarding` (fsspec's read-only lookups); the fsspec face,
:mod:`toolfs.policy.filesystem`, joins them.
"""

from __future__ import annotations

import difflib
import itertools
import logging
import os
import time
from collections.abc import Callable
from typing import get_args

from fsspec.spec import AbstractFileSystem

from toolfs._trusted import trusted
from toolfs.backends import Store, conditions
from toolfs.errors import FsError, fs_error
from toolfs.escaping import escape_undecodable
from toolfs.policy.content_cache import ContentCache
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
from toolfs.policy.rules import Policy
from toolfs.versions import FileVersion

# "Did you mean" compares names only in directories up to this size; past it, only a
# case-insensitive exact match is offered (difflib is quadratic-ish per name).
SIBLINGS_FUZZY_LIMIT = 2_000
SIBLINGS_SCAN_LIMIT = 100_000
_OPERATIONS: frozenset[str] = frozenset(get_args(Operation))
_log = logging.getLogger("toolfs.events")


class Guards:
    """Confinement, deny rules, ``read_only`` and events: the checks every layer of
    :class:`~toolfs.policy.PolicyFileSystem` makes (see the module docstring). The
    attributes are set by ``PolicyFileSystem.__init__``, which documents them."""

    fs: AbstractFileSystem
    store: Store
    jail: Jail
    absolute_paths: bool
    context_id: str
    policy: Policy | None
    read_only: bool
    deny: tuple[str, ...]
    _denied: Callable[[str], bool]
    size_cap: int
    first_block: int
    block_size: int
    ledger: Ledger
    subscribers: list[Subscriber]
    max_in_flight: int
    diff_chars: int
    _root_checked: bool
    _conditions_verified: bool
    content_cache: ContentCache | None
    _cache_namespace: str

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
            shown = diff() if diff is not None and _diff_wanted(subscribers) else None
            return trusted(FsEvent, EVENT_FIELDS_SET | ({"diff"} if shown else set()), {
                "type": type_, "context_id": self.context_id, "operation": op,
                "path": path, "version_before": before, "version_after": after,
                "reason": why, "at": time.time(), "diff": shown})
        return FsEvent(type=type_, context_id=self.context_id, operation=op, path=path,
                       version_before=before, version_after=after, reason=why,
                       diff=diff() if diff is not None and _diff_wanted(self.subscribers)
                       else None)

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
        if err.code != "missing_bucket":  # its message names the bucket, which is no path
            err.message = err.message.replace(target.backend_path, target.display)
        if isinstance(err.details.get("file"), str):
            # An adapter names the part of the path that is a file by its backend path.
            shown = self.jail.display_of(err.details["file"])
            err.message = err.message.replace(err.details["file"], shown)
            err.details["file"] = shown
        if err.code in ("stale", "not_observed", "denied"):
            self._notify("fs/denied", op, target, reason=f"{err.code}: {err.message}")
        if err.code in ("stale", "not_observed") and op in ("write", "edit") \
                and not self._known_to_exist(err, target):
            # Another writer's change is there: a delete that follows (a library
            # cleaning up after its failed write) must not remove it (rm_file).
            self.ledger.note_refused_write(target.backend_path)
        if err.details.get("outcome") == "unknown":
            # A change cut off by the deadline may still land: what this context saw of
            # the file no longer says what is there, so the next update reads it again.
            self.ledger.forget(target.backend_path)
        return err

    def _known_to_exist(self, err: FsError, target: Target) -> bool:
        """An exclusive create refused because the file exists, when this context knows
        that file (it read or wrote a version of it): nothing of someone else's is at
        risk, and a delete stays conditional on the version it knows."""
        if not err.details.get("exists"):
            return False
        seen = self.ledger.get(target.backend_path)
        return seen is not None and seen.version is not None

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


def _diff_wanted(subscribers: list[Subscriber]) -> bool:
    """Whether a subscriber may read an event's diff: all but those that say they never
    do (``wants_diff = False``), for whom computing it would be wasted (milliseconds on
    a large file)."""
    return any(getattr(s, "wants_diff", True) for s in subscribers)
