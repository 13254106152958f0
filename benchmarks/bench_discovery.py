"""grep and glob over a bucket: toolfs against the naive fsspec composition, and local
grep against ripgrep.

* S3 (moto server): a prefix of N small objects (2,000 by default). toolfs's grep is one
  paginated listing plus bounded-concurrency GETs; the naive tool is ``fs.glob`` plus one
  ``fs.cat_file`` per object, searched with Python's ``re``. glob: toolfs's listing against
  ``fs.glob``. Printed: wall time and requests counted at the server, and the ratio.
* Local: ``ws.grep`` against ``rg`` on the same tree (medians of 5 after a warm-up run;
  rg's process start included), when ``rg`` is on PATH
  ("baseline / toolfs" below 1 means toolfs is slower than ripgrep by its inverse).

Ratios come from one run on this machine; no threshold is asserted anywhere.

    python benchmarks/bench_discovery.py [--objects 2000] [--tiny]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common
import toolfs
from toolfs.testing.emulators import S3Emulator

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


def bench_s3(objects: int) -> list[list[object]]:
    rows: list[list[object]] = []
    with S3Emulator() as emu:
        emu.create_bucket("bench")
        fs = emu.s3fs_filesystem()
        fs.pipe({f"bench/repo/src/pkg{i % 20}/mod{i}.py": _body(i) for i in range(objects)})
        ws = toolfs.Workspace(fs, root="bench/repo")
        needle = re.compile(PATTERN)

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

        for name, ours, naive in (
                ("grep files_with_matches", lambda: ws.grep(PATTERN, glob="*.py"),
                 naive_grep),
                ("glob **/*.py", lambda: ws.glob("**/*.py"), naive_glob)):
            emu.clear_requests()
            t_ours, _ = _timed(ours)
            r_ours = emu.request_count()
            emu.clear_requests()
            t_naive, _ = _timed(naive)
            r_naive = emu.request_count()
            rows.append([f"S3, {objects} objects", name, f"{t_ours:.2f}", f"{t_naive:.2f}",
                         _common.ratio(t_naive, t_ours), r_ours, r_naive])
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
    parser.add_argument("--tiny", action="store_true", help="a small tree (smoke test)")
    args = parser.parse_args()
    objects = 60 if args.tiny else args.objects
    print(_common.machine_facts())
    rows = bench_s3(objects) + bench_local(objects, runs=1 if args.tiny else 5)
    print(_common.markdown_table(
        ["tree", "call", "toolfs s", "baseline s", "baseline / toolfs", "toolfs requests",
         "baseline requests"], rows))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
