"""glob and ls over a huge prefix hold what their caps allow, not the prefix: the
listing's entries are consumed as they come (a store whose listing yields 50,000
entries lazily, as object stores yield pages), and the peak of Python memory during the
call stays far below what holding them would take. Counted, not timed."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from typing import Any

import fsspec

import toolfs
from toolfs.backends.base import Entry
from toolfs.backends.memory import MemoryStore

N = 50_000


class HugeListing(MemoryStore):
    """Memory, except that listing the root yields N generated files, one at a time,
    and counts them."""

    yielded = 0

    def list_files(self, prefix: str, *, sizes: bool = True) -> Iterator[Entry]:
        for i in range(N):
            HugeListing.yielded += 1
            yield Entry(path=f"/huge/d{i % 100:02}/f{i:06}.txt", kind="file", size=4,
                        mtime=float(i))

    def list_dir(self, path: str) -> Iterator[Entry]:
        for i in range(N):
            HugeListing.yielded += 1
            yield Entry(path=f"/huge/f{i:06}.txt", kind="file", size=4, mtime=float(i))


def _peak(call: Any) -> tuple[Any, float]:
    tracemalloc.start()
    try:
        out = call()
        return out, tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def test_glob_and_ls_stream_a_huge_listing() -> None:
    fs = fsspec.filesystem("memory")
    store = HugeListing(fs, root="/huge")
    ws = toolfs.Workspace(fs, root="/huge", store=store, content_cache_bytes=0)
    HugeListing.yielded = 0
    result, peak = _peak(lambda: ws.glob("**/*.txt"))
    assert HugeListing.yielded == N and len(result.paths) == 200 and result.truncated
    assert result.paths[0] == f"d{(N - 1) % 100:02}/f{N - 1:06}.txt"  # newest first
    # 50,000 entries held at once take about 11 MB as Entry objects, 25 MB as Found
    assert peak < 4, peak
    HugeListing.yielded = 0
    listing, peak = _peak(lambda: ws.ls())
    assert HugeListing.yielded == N and len(listing.entries) == 1000 and listing.truncated
    assert peak < 4, peak
