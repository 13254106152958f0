"""grep and glob over a bucket: toolfs against the naive fsspec composition, and local
grep against ripgrep.

* S3, on moto (one request at a time) and on SeaweedFS (a concurrent server): a prefix
  of N small objects (2,000 by default). toolfs's grep is one
  paginated listing plus bounded-concurrency GETs; the naive tool is ``fs.glob`` plus one
  ``fs.cat_file`` per object, searched with Python's ``re``. glob: toolfs's listing against
  ``fs.glob``. Printed: wall time and requests counted at the server, and the ratio.
  SeaweedFS runs a second time behind a proxy that adds ``--latency-ms`` (20 by default)
  to every GET, as a remote store's first-byte latency would.
* Local: ``ws.grep`` against ``rg`` on the same tree (medians of 5 after a warm-up run;
  rg's process start included), when ``rg`` is on PATH
  ("baseline / toolfs" below 1 means toolfs is slower than ripgrep by its inverse).

Ratios come from one run on this machine; no threshold is asserted anywhere.

    python benchmarks/bench_discovery.py [--objects 2000] [--latency-ms 20] [--tiny]
"""

from __future__ import annotations

import argparse
import importlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common
import toolfs
from toolfs.testing.emulators import S3Emulator
from toolfs.testing.faults import FaultProxy
from toolfs.testing.seaweedfs import SeaweedFSEmulator

PATTERN = r"needle_\d+"


def _body(i: int) -> bytes:
    lines = [f"line {n} of file {i}: nothing here" for n in range(40)]
    if i % 7 == 0:
        lines[20] = f"needle_{i} is here"
    return ("\n".join(lines) + "\n").encode()


def _timed(fn: object) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()  # type: ignore[operator]
    return time.perf_counter() - start, value


def _median(fn: object, runs: int) -> float:
    """Median wall time of ``runs`` calls (the first, warming caches, not counted)."""
    _timed(fn)
    return statistics.median(_timed(fn)[0] for _ in range(runs))


def bench_s3(objects: int, server: str = "moto", latency: float = 0.0) -> list[list[object]]:
    """grep and glob on one S3 server: ``moto`` (one request at a time) or ``seaweedfs``
    (concurrent). Times are taken straight at the server; requests are counted in a
    second, untimed pass through the emulator's counting proxy (SeaweedFS's proxy opens
    a connection per request, which would weigh on both sides' times). On SeaweedFS,
    with ``latency`` > 0, the calls run once more with that many seconds added to each
    GET."""
    rows: list[list[object]] = []
    emulator = S3Emulator() if server == "moto" else SeaweedFSEmulator()
    with emulator as emu:
        emu.create_bucket("bench")
        direct = {"direct": True} if server == "seaweedfs" else {}
        fs = emu.s3fs_filesystem(**direct)
        fs.pipe({f"bench/repo/src/pkg{i % 20}/mod{i}.py": _body(i) for i in range(objects)})
        counted_fs = emu.s3fs_filesystem()
        needle = re.compile(PATTERN)

        def calls(fs: Any) -> list[tuple[str, Any, Any]]:
            ws = toolfs.Workspace(fs, root="bench/repo")

            def naive_grep() -> list[str]:
                fs.invalidate_cache()
                hits = []
                for path in fs.glob("bench/repo/**/*.py"):
                    if needle.search(fs.cat_file(path).decode()):
                        hits.append(path)
                return hits

            def naive_glob() -> list[str]:
                fs.invalidate_cache()
                return list(fs.glob("bench/repo/**/*.py"))

            return [("grep files_with_matches", lambda: ws.grep(PATTERN, glob="*.py"),
                     naive_grep),
                    ("glob **/*.py", lambda: ws.glob("**/*.py"), naive_glob)]

        label = "S3 (moto)" if server == "moto" else "S3 (SeaweedFS)"
        for (name, ours, naive), (_, ours_counted, naive_counted) in zip(
                calls(fs), calls(counted_fs), strict=True):
            t_ours, _ = _timed(ours)
            t_naive, _ = _timed(naive)
            emu.clear_requests()
            ours_counted()
            r_ours = emu.request_count()
            emu.clear_requests()
            naive_counted()
            r_naive = emu.request_count()
            rows.append([f"{label}, {objects} objects", name, f"{t_ours:.2f}",
                         f"{t_naive:.2f}", _common.ratio(t_naive, t_ours), r_ours, r_naive])
        if server == "seaweedfs" and latency > 0:
            rows += _with_latency(emu, objects, latency, calls, rows[-2:])
    return rows


def _with_latency(emu: SeaweedFSEmulator, objects: int, latency: float, calls: Any,
                  counted: list[list[object]]) -> list[list[object]]:
    """The same calls with ``latency`` seconds added to every GET (a delaying proxy in
    front of SeaweedFS): what a remote object store's first-byte latency does to
    sequential against concurrent reads. Requests as counted without the delay."""
    s3fs = importlib.import_module("s3fs")
    rows: list[list[object]] = []
    with FaultProxy(emu.direct_endpoint_url, timeout=60.0) as proxy:
        proxy.plan("delay", method="GET", times=None, delay=latency)
        fs = s3fs.S3FileSystem(**{**emu.s3fs_storage_options(direct=True),
                                  "endpoint_url": proxy.endpoint_url,
                                  "skip_instance_cache": True})
        for (name, ours, naive), row in zip(calls(fs), counted, strict=True):
            t_ours, _ = _timed(ours)
            t_naive, _ = _timed(naive)
            rows.append([f"S3 (SeaweedFS, +{latency * 1000:.0f} ms per GET), {objects} "
                         "objects", name, f"{t_ours:.2f}", f"{t_naive:.2f}",
                         _common.ratio(t_naive, t_ours), row[5], row[6]])
    return rows


def bench_local(files: int, runs: int = 5) -> list[list[object]]:
    rg = shutil.which("rg")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i in range(files):
            path = root / "src" / f"pkg{i % 20}" / f"mod{i}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(_body(i))
        ws = toolfs.Workspace(str(root))
        t_ours = _median(lambda: ws.grep(PATTERN, output_mode="content"), runs)
        if rg is None:
            return [[f"local, {files} files", "grep content", f"{t_ours:.3f}", "n/a", "n/a",
                     "", ""]]
        t_rg = _median(lambda: subprocess.run(
            [rg, "-n", "--no-heading", PATTERN, "."], cwd=root, capture_output=True,
            check=False), runs)
    return [[f"local, {files} files", "grep content vs rg", f"{t_ours:.3f}", f"{t_rg:.3f}",
             _common.ratio(t_rg, t_ours), "", ""]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--latency-ms", type=float, default=20.0,
                        help="delay added to each GET in the extra SeaweedFS run (0: none)")
    parser.add_argument("--tiny", action="store_true", help="a small tree (smoke test)")
    args = parser.parse_args()
    objects = 60 if args.tiny else args.objects
    print(_common.machine_facts())
    rows = (bench_s3(objects, "moto")
            + bench_s3(objects, "seaweedfs", latency=args.latency_ms / 1000)
            + bench_local(objects, runs=1 if args.tiny else 5))
    print(_common.markdown_table(
        ["tree", "call", "toolfs s", "baseline s", "baseline / toolfs", "toolfs requests",
         "baseline requests"], rows))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
