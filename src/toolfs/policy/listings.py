"""Discovery's view of the policy filesystem: listings and batched reads that record
no observation.

``glob``, ``grep`` and ``ls`` (:mod:`toolfs.search.discovery`) see the tree through
:class:`Listings`: ``list_files`` (one flat listing, fresh, confined, denied files left
out), ``list_dir`` (one directory's children) and ``read_many`` (bytes of listed files,
many requests in flight, validated by the content cache). None of them records what it
saw: discovery shows the model where to look, and an edit needs a ``read`` first. A
listed file is a :class:`Found`.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from toolfs.backends import conditions
from toolfs.backends.base import Blob
from toolfs.errors import FsError
from toolfs.escaping import escape_undecodable
from toolfs.policy.guards import Guards
from toolfs.policy.paths import Target
from toolfs.versions import FileVersion

READ_AHEAD_HITS = 64
"""``read_many`` takes at most this many files of its input ahead of what it yielded
when they are cached (besides ``max_in_flight`` fetched ones): a streamed listing is
held by the window, not whole."""


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


class Listings(Guards):
    """Listings and batched reads for discovery (see the module docstring)."""

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
        entries = iter(self.store.list_files(listed, sizes=sizes))
        try:  # a missing bucket is met by the first page: named as this context names it
            first = next(entries, None)
        except FsError as err:
            if err.code == "missing_bucket":
                raise self._fail(err, target, "read") from err.__cause__
            raise
        for entry in itertools.chain(() if first is None else (first,), entries):
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


def _fill_found(found: Found, display: str, rel: str, backend_path: str, entry: Any) -> None:
    """Set the fields of a :class:`Found` made with ``object.__new__`` (what its frozen
    dataclass ``__init__`` does, without a ``__setattr__`` call per field: a listing
    makes one per file)."""
    found.__dict__.update(path=display, rel=rel, backend_path=backend_path, kind=entry.kind,
                          size=entry.size, mtime=entry.mtime, version=entry.version)


def _hit(item: tuple[Found, Blob | None]) -> tuple[Found, Blob]:
    """A file ``read_many`` found cached, with its blob."""
    found, blob = item
    assert blob is not None
    return found, blob
