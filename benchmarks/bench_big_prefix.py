"""glob, ls and grep over a big prefix (100,000 objects by default) on the object-store
emulators: wall time, listing pages requested, GETs and the peak of Python memory
(tracemalloc) per call.

The prefix is flat (``big/f000000.txt`` ...), 1 object in 100 a ``.md``, one object in
50 holding a match. Rows:

* ``glob **/*.md`` and ``ls big``: always streamed (their caps bound what they hold);
  the baseline row is the memory of holding the listing (``list(list_files(...))``).
* ``grep needle, glob=*.md`` (1 object in 100 read) and ``grep needle, head_limit=10``:
  streamed (this build) against the whole listing sorted first (the build before it,
  the same code with the store's ``lists_in_order`` off), measured in the same run.

Times are taken in a pass without tracemalloc; pages, GETs and the memory peak in a
second pass (tracemalloc slows Python down). The content cache is off, so every grep
reads what it searches. Ratios come from one run on this machine; nothing is asserted.

    python benchmarks/bench_big_prefix.py [--objects 100000]
        [--servers s3,seaweedfs,gcs,azure]

(moto and Azurite take one write at a time: writing 100,000 objects to them takes the
better part of an hour on a loaded machine; SeaweedFS and fake-gcs-server take them in
a few minutes.)
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import fsspec

import _common
import toolfs
from toolfs.backends.base import Blob, Entry
from toolfs.backends.memory import MemoryStore
from toolfs.errors import fs_error
from toolfs.testing.azurite import AzuriteEmulator
from toolfs.testing.emulators import GCSEmulator, S3Emulator
from toolfs.testing.seaweedfs import SeaweedFSEmulator
from toolfs.versions import FileVersion

NAMES = {"s3": "S3 (moto)", "seaweedfs": "S3 (SeaweedFS)", "gcs": "GCS (fake-gcs-server)",
         "azure": "Azure (Azurite)"}


def _objects(n: int) -> dict[str, bytes]:
    out = {}
    for i in range(n):
        ext = "md" if i % 100 == 3 else "txt"
        out[f"big/f{i:06}.{ext}"] = b"needle %d\n" % i if i % 50 == 3 else b"hay\n"
    return out


@contextlib.contextmanager
def _server(kind: str, objects: int) -> Iterator[tuple[Any, Any, str]]:
    """The emulator, an fsspec filesystem on it and the workspace root, with the
    objects written (in batches: the write is not what is measured)."""
    emu: Any = {"s3": S3Emulator, "seaweedfs": SeaweedFSEmulator, "gcs": GCSEmulator,
                "azure": AzuriteEmulator}[kind]()
    with emu:
        if kind == "azure":
            bucket = emu.new_container("bench")
            fs = writer = emu.adlfs_filesystem()
        else:
            bucket = "bench-bucket"
            emu.create_bucket(bucket)
            fs = writer = (emu.gcsfs_filesystem() if kind == "gcs" else emu.s3fs_filesystem())
            if kind == "seaweedfs":  # written past the counting proxy (much faster)
                fs, writer = emu.s3fs_filesystem(), emu.s3fs_filesystem(direct=True)
        items = list(_objects(objects).items())
        for start in range(0, len(items), 2000):
            writer.pipe({f"{bucket}/ws/{k}": v for k, v in items[start:start + 2000]})
        fs.invalidate_cache()
        yield emu, fs, f"{bucket}/ws"


def _is_page(r: Any) -> bool:
    return "list-type" in r.params or r.path.endswith("/o") \
        or r.params.get("comp") == ["list"]


def _measure(emu: Any, call: Callable[[], Any]) -> tuple[float, int, int, int]:
    """(seconds, pages, GETs of objects, peak bytes) of ``call``."""
    start = time.perf_counter()
    call()
    seconds = time.perf_counter() - start
    emu.clear_requests()
    tracemalloc.start()
    try:
        call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    reqs = [r for r in emu.requests() if not r.path.startswith("/_toolfs")]
    pages = sum(1 for r in reqs if _is_page(r))
    return seconds, pages, len(reqs) - pages, peak


def bench(kind: str, objects: int) -> list[list[object]]:
    rows: list[list[object]] = []
    with _server(kind, objects) as (emu, fs, root):
        ws = toolfs.Workspace(fs, root=root, content_cache_bytes=0, gitignore=False,
                             timeout=None)  # a 100,000-object listing: minutes
        store = ws.fs.store
        name = f"{NAMES[kind]}, {objects:,} objects"

        def row(what: str, how: str, m: tuple[float, int, int, int],
                base: tuple[float, int, int, int] | None = None) -> None:
            rows.append([name, what, how, f"{m[0]:.2f}", m[1], m[2], _common.fmt_bytes(m[3]),
                         _common.ratio(base[3], m[3]) if base else "",
                         _common.ratio(base[0], m[0]) if base else ""])

        held = _measure(emu, lambda: list(ws.fs.list_files("big", sizes=False)))
        row("the listing, held whole", "baseline", held)
        row("glob **/*.md", "streamed", _measure(emu, lambda: ws.glob("**/*.md")), held)
        row("ls big", "streamed", _measure(emu, lambda: ws.ls("big")), held)
        for what, call in (
                ("grep needle, glob=*.md", lambda: ws.grep("needle", path="big",
                                                           glob="*.md")),
                ("grep needle, head_limit=10", lambda: ws.grep("needle", path="big",
                                                               head_limit=10))):
            store.lists_in_order = False  # the build before streaming
            try:
                whole = _measure(emu, call)
            finally:
                store.lists_in_order = True
            row(what, "whole listing first", whole)
            row(what, "streamed", _measure(emu, call), whole)
    return rows


class _Generated(MemoryStore):
    """No server: a listing of ``count`` files generated in key order, one at a time, as
    an object store's pages come, and reads answering generated bytes; so what toolfs
    itself holds is measured at any size in seconds (a server's client parses one page
    at a time on top of it)."""

    lists_in_order = True
    count = 0

    def list_files(self, prefix: str, *, sizes: bool = True) -> Iterator[Entry]:
        for i in range(self.count):
            ext = "md" if i % 100 == 3 else "txt"
            yield Entry(path=f"/gen/big/f{i:06}.{ext}", kind="file", size=10,
                        mtime=float(i))

    def get(self, path: str, *, start: int = 0, length: int | None = None,
            if_version: FileVersion | None = None) -> Blob:
        if "/big/f" not in path:
            raise fs_error("not_found", f"{path} does not exist", path=path)
        i = int(path.rsplit("/f", 1)[1][:6])
        data = b"needle %d\n" % i if i % 50 == 3 else b"hay\n"
        return Blob(data=data, version=FileVersion.of_bytes(data), size=len(data))


def bench_generated(objects: int) -> list[list[object]]:
    """The rows of :func:`bench` for a generated listing (pages: n/a)."""
    fs = fsspec.filesystem("memory")
    store = _Generated(fs, root="/gen")
    store.count = objects
    ws = toolfs.Workspace(fs, root="/gen", store=store, content_cache_bytes=0,
                          gitignore=False)
    name = f"generated listing, {objects:,} files"
    rows: list[list[object]] = []

    def measure(call: Callable[[], Any]) -> tuple[float, int]:
        start = time.perf_counter()
        call()
        seconds = time.perf_counter() - start
        tracemalloc.start()
        try:
            call()
            return seconds, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    def row(what: str, how: str, m: tuple[float, int],
            base: tuple[float, int] | None = None) -> None:
        rows.append([name, what, how, f"{m[0]:.2f}", "n/a", "", _common.fmt_bytes(m[1]),
                     _common.ratio(base[1], m[1]) if base else "",
                     _common.ratio(base[0], m[0]) if base else ""])

    held = measure(lambda: list(ws.fs.list_files("big", sizes=False)))
    row("the listing, held whole", "baseline", held)
    row("glob **/*.md", "streamed", measure(lambda: ws.glob("**/*.md")), held)
    for what, call in (
            ("grep needle, glob=*.md", lambda: ws.grep("needle", path="big", glob="*.md")),
            ("grep needle, head_limit=10", lambda: ws.grep("needle", path="big",
                                                           head_limit=10))):
        store.lists_in_order = False
        try:
            whole = measure(call)
        finally:
            store.lists_in_order = True
        row(what, "whole listing first", whole)
        row(what, "streamed", measure(call), whole)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--servers", default="s3,seaweedfs,gcs,azure")
    parser.add_argument("--generated", action="store_true",
                        help="also a generated listing of --objects files (no server)")
    parser.add_argument("--tiny", action="store_true", help="300 objects, S3 only")
    args = parser.parse_args()
    objects, servers = (300, ["s3"]) if args.tiny else (
        args.objects, [s for s in args.servers.split(",") if s])
    print(_common.machine_facts())
    headers = ["store", "call", "how", "seconds", "pages", "GETs", "peak memory",
               "memory: baseline / this", "time: baseline / this"]
    runs: list[Callable[[], list[list[object]]]] = [lambda: bench_generated(objects)] \
        if args.generated or args.tiny else []
    runs += [functools.partial(bench, kind, objects) for kind in servers]
    for run in runs:  # each table printed as soon as it is measured
        print()
        print(_common.markdown_table(headers, run()), flush=True)


if __name__ == "__main__":
    main()
