"""Local ``grep``'s files read and searched by worker threads, answered in path order.

On local disk a grep's time goes to reading and checking each file (open, read, the
NUL and UTF-8 checks, RE2's search), one file after another. Here the sorted candidates
are cut into windows of :data:`WINDOW` files; :data:`WORKERS` threads each read and
search a whole window (through :meth:`~toolfs.policy.PolicyFileSystem.read_many`, the
same confined reads as the single-threaded loop) while the calling thread takes the
windows' answers **in path order** and counts them into the search exactly as that
loop does. The system calls, RE2's search and the reads release the GIL, so two
windows progress at once.

The result is the same by construction: only the calling thread changes the search's
state, file by file in the same order, and it stops at the same file (a window a worker
searched past the stop is dropped unseen: its files are neither counted nor shown).
Bounded: at most ``WORKERS + 1`` windows are asked for ahead of the one being counted,
a worker holds one file's bytes at a time, and keeps of a window at most the lines the
result can still show (``content`` mode: the search's limit plus one, across the
window), so memory stays within a few results' worth whatever the tree.
"""

from __future__ import annotations

import contextvars
import os
from collections import deque
from collections.abc import Callable, Generator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal, Protocol

from toolfs.errors import FsError
from toolfs.policy.filesystem import Found, PolicyFileSystem

WORKERS = min(2, os.cpu_count() or 1)
"""Threads reading and searching windows: two (more gain little: the Python half of
each file's work holds the GIL), or none on a one-core machine (the single loop)."""
WINDOW = 48
"""Files per window: large enough that handing a window over costs little against
reading it, small enough that a stop wastes little work."""

Outcome = Literal["searched", "not_text", "too_large", "unreadable"]


@dataclass(frozen=True)
class Examined:
    """What a worker found of one file; ``error`` is set for ``unreadable``."""

    found: Found
    outcome: Outcome
    hits: list[int]
    picked: list[tuple[int, bool, bytes]]
    error: FsError | None = None


class Searcher(Protocol):
    """The pure half of a search (:class:`toolfs.tools.search._Search`)."""

    limit: int

    def examine(self, data: bytes) -> tuple[bytes, list[int]] | None: ...

    def picked_lines(self, data: bytes, hits: list[int],
                     most: int | None = None) -> list[tuple[int, bool, bytes]]: ...


def _window(fs: PolicyFileSystem, files: list[Found], search: Searcher,
            cap: int) -> list[Examined]:
    """Read and examine ``files`` in order (a worker's task); stops early once it holds
    more lines than the search can show (the search stops within this window then)."""
    out: list[Examined] = []
    room = search.limit + 1
    outcomes = fs.read_many(files, length=cap + 1)
    try:
        for found, blob in outcomes:
            if isinstance(blob, FsError):
                out.append(Examined(found, "unreadable", [], [], blob))
                continue
            if blob.size > cap:
                out.append(Examined(found, "too_large", [], []))
                continue
            examined = search.examine(blob.data)
            if examined is None:
                out.append(Examined(found, "not_text", [], []))
                continue
            data, hits = examined
            picked = search.picked_lines(data, hits, room) if hits else []
            out.append(Examined(found, "searched", hits, picked))
            room -= len(picked)
            if room <= 0:
                break
    finally:
        close = getattr(outcomes, "close", None)
        if close is not None:
            close()
    return out


def examined_in_order(fs: PolicyFileSystem, candidates: list[Found], search: Searcher,
                      cap: int, stopped: Callable[[], bool]
                      ) -> Generator[Examined, None, None]:
    """Every candidate examined, in order, by :data:`WORKERS` threads; ``stopped()``
    (checked after each file the caller has taken) ends the iteration and drops what
    was read ahead. Each worker runs in a copy of the caller's context (the call's
    deadline goes with it)."""
    windows = [candidates[i:i + WINDOW] for i in range(0, len(candidates), WINDOW)]
    pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="toolfs-grep")
    pending: deque[Future[list[Examined]]] = deque()
    following = iter(windows)

    def submit() -> None:
        part = next(following, None)
        if part is not None:
            context = contextvars.copy_context()
            pending.append(pool.submit(context.run, _window, fs, part, search, cap))

    try:
        for _ in range(WORKERS + 1):
            submit()
        while pending:
            part = pending.popleft().result()
            submit()
            for examined in part:
                yield examined
                if stopped():
                    return
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


__all__ = ["WINDOW", "WORKERS", "Examined", "examined_in_order"]
