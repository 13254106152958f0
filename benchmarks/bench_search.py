"""Search at scale: local grep against ripgrep, glob and ls against a bare os.scandir walk,
and grep on S3, GCS and Azure with the listing-validated content cache.

* **Local.** Two trees (5,760 then 10,700 files) copied from the source files of the
  installed packages (site-packages). ``ws.grep`` in the three output modes against bare
  ``rg`` with the same output (``-l``, ``-c``, ``-n``) measured in the same loop: the
  ripgrep engine (the default) with every match kept and with the default ``grep_limit``,
  and the Python engine (``grep_engine="python"``); whether the ripgrep engine's files are
  exactly those bare ``rg -l`` finds. glob and ls against an ``os.scandir`` walk that
  gathers the same facts (``--no-glob-ls`` leaves them out). Medians of several runs after
  a warm-up, process start included for rg; ratio = toolfs / baseline (below 1: toolfs is
  faster).
* **Object stores.** A prefix of N objects (2,000 by default) on moto, fake-gcs-server
  and Azurite: requests of a cold grep, a second grep of the unchanged prefix, a grep
  after K objects changed, and a read of a file grep just fetched, counted at the
  emulator.
Big prefixes (streamed listings, memory) are ``bench_big_prefix.py``'s.

Ratios come from one run on this machine; no threshold is asserted anywhere.

    python benchmarks/bench_search.py [--objects 2000] [--changes 10] [--tiny]
        [--only local|stores] [--no-glob-ls]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from typing import Any

import fsspec

import toolfs
from toolfs.search import ripgrep
from toolfs.testing.azurite import AzuriteEmulator
from toolfs.testing.emulators import GCSEmulator, S3Emulator

SOURCE_EXT = (".py", ".pyi", ".txt", ".md", ".rst", ".json", ".toml", ".cfg", ".c", ".h",
              ".js", ".ts", ".html", ".css")
PATTERNS = [r"def \w+\(", "zzqx_no_match", "import", r"(?i)utf-?8"]
MODES = {"files_with_matches": "-l", "count": "-c", "content": "-n"}


def build_tree(dest: str, min_files: int, min_bytes: int) -> tuple[int, int]:
    """Copy source files of the installed packages into ``dest`` until both minimums
    are met (in a stable order, so runs compare)."""
    src = sysconfig.get_path("purelib")
    files = total = 0
    for dirpath, dirs, names in os.walk(src):
        dirs.sort()
        for name in sorted(names):
            if not name.endswith(SOURCE_EXT):
                continue
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            out = os.path.join(dest, os.path.relpath(path, src))
            os.makedirs(os.path.dirname(out), exist_ok=True)
            shutil.copyfile(path, out)
            files += 1
            total += os.path.getsize(out)
            if files >= min_files and total >= min_bytes:
                return files, total
    return files, total


def median_ms(fn: Callable[[], object], runs: int) -> float:
    return timed(fn, runs)[0]


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median wall ms and median CPU ms (this process and its children: rg) of ``runs``
    calls after a warm-up (page cache, imports, rg lookup). CPU time says more than
    wall time on a machine whose cores other work is using."""
    fn()
    walls, cpus = [], []
    for _ in range(runs):
        cpu, start = _cpu(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - start)
        cpus.append(_cpu() - cpu)
    return statistics.median(walls) * 1000, statistics.median(cpus) * 1000


def interleaved(fns: list[Callable[[], object]], runs: int) -> list[tuple[float, float]]:
    """:func:`timed` of each of ``fns``, their runs taken in turn (one of each per
    round, after a warm-up of each), so that a load that changes over the rounds
    weighs on all of them alike."""
    for fn in fns:
        fn()
    walls: list[list[float]] = [[] for _ in fns]
    cpus: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for i, fn in enumerate(fns):
            cpu, start = _cpu(), time.perf_counter()
            fn()
            walls[i].append(time.perf_counter() - start)
            cpus[i].append(_cpu() - cpu)
    return [(statistics.median(w) * 1000, statistics.median(c) * 1000)
            for w, c in zip(walls, cpus, strict=True)]


def _pair(t: tuple[float, float]) -> str:
    return f"{t[0]:.0f} ({t[1]:.0f})"


def _ratio(a: tuple[float, float], b: tuple[float, float]) -> str:
    cpu = f"{a[1] / b[1]:.2f}x" if b[1] > 0 else "-"
    return f"{a[0] / b[0]:.2f}x ({cpu})"


def scandir_walk(root: str) -> int:
    """The bare walk glob is compared with: every file's path and mtime."""
    stack, n = [root], 0
    while stack:
        with os.scandir(stack.pop()) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                else:
                    e.stat(follow_symlinks=False)
                    n += 1
    return n


def scandir_one(path: str) -> int:
    """The bare listing ls is compared with: one directory's entries and their stat."""
    with os.scandir(path) as it:
        return sum(1 for e in it if e.stat(follow_symlinks=False))


def rg_files(rg: str, pattern: str, root: str) -> set[str]:
    """The files bare ``rg -l`` finds, relative to ``root``."""
    out = subprocess.run([rg, "--no-config", "-l", "--null", pattern, "."], cwd=root,
                         capture_output=True).stdout
    return {p.decode()[2:] for p in out.split(b"\0") if p}


def bench_local(runs: int, trees: list[tuple[int, int]], glob_ls: bool) -> None:
    rg = ripgrep.ripgrep_binary()
    for min_files, min_bytes in trees:
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "tree")
            files, size = build_tree(root, min_files, min_bytes)
            _bench_tree(rg, root, files, size, runs)
            if glob_ls:
                _bench_glob_ls(root, runs)


def _bench_tree(rg: str | None, root: str, files: int, size: int, runs: int) -> None:
    print(f"\nLocal tree: {files} files, {size / 2**20:.0f} MiB (site-packages sources); "
          f"rg: {rg or 'not installed'}; {os.cpu_count()} CPUs; load average "
          f"{os.getloadavg()[0]:.1f}\n")
    local = fsspec.filesystem("file")
    # grep_limit above the matching files of every pattern: the answers are compared whole.
    engine = toolfs.Workspace(local, root=root, grep_engine="ripgrep", grep_limit=1_000_000)
    python = toolfs.Workspace(local, root=root, grep_engine="python", grep_limit=1_000_000)
    capped = toolfs.Workspace(local, root=root, grep_engine="ripgrep")
    print("Wall ms (CPU ms in brackets: this process and rg); ratio = toolfs / bare rg "
          "(wall, CPU), bare rg run in the same rounds (runs taken in turn) with the same "
          "output (-l, -c, -n). "
          "ripgrep = the default engine (grep_limit 1,000,000: every match kept); "
          "capped = the same with the default grep_limit (10,000 entries); "
          "python = grep_engine=\"python\". files = the files toolfs's ripgrep engine "
          "reports are exactly those bare `rg -l` finds.\n")
    print("| pattern | mode | rg | ripgrep | / rg | capped | / rg | python | / rg | files |")
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|---|")
    nan = (float("nan"), float("nan"))
    for pattern in PATTERNS:
        expected = rg_files(rg, pattern, root) if rg is not None else set()
        for mode, flag in MODES.items():
            cmd = [rg or "rg", "--no-config", flag, pattern, root]

            def bare(c: list[str] = cmd) -> object:
                return subprocess.run(c, capture_output=True)

            def ours(p: str = pattern, m: str = mode) -> object:
                return engine.grep(p, output_mode=m)

            def cut(p: str = pattern, m: str = mode) -> object:
                return capped.grep(p, output_mode=m)

            def default(p: str = pattern, m: str = mode) -> object:
                return python.grep(p, output_mode=m)

            if rg is not None:
                base, mine, short = interleaved([bare, ours, cut], runs)
            else:
                base, (mine, short) = nan, interleaved([ours, cut], runs)
            py = timed(default, max(1, runs // 2))
            same = set(engine.grep(pattern).files) == expected
            print(f"| `{pattern}` | {mode} | {_pair(base)} | {_pair(mine)} | "
                  f"{_ratio(mine, base)} | {_pair(short)} | {_ratio(short, base)} | "
                  f"{_pair(py)} | {_ratio(py, base)} | {same} |")
            sys.stdout.flush()


def _bench_glob_ls(root: str, runs: int) -> None:
    python = toolfs.Workspace(fsspec.filesystem("file"), root=root)
    walk = timed(lambda: scandir_walk(root), runs)
    glob_ms = timed(lambda: python.glob("**/*.py"), runs)
    wide = os.path.join(root, "wide")
    os.makedirs(os.path.join(root, "empty"))
    os.makedirs(wide)
    for i in range(2000):
        with open(os.path.join(wide, f"f{i:04}.txt"), "wb") as out:
            out.write(b"x\n")
    rows = [("glob `**/*.py`", "os.scandir walk + stat of every file", walk, glob_ms)]
    for name, entries in (("wide", 2000), ("empty", 0)):
        def listed(n: str = name) -> object:
            return scandir_one(os.path.join(root, n))

        def ls(n: str = name) -> object:
            return python.ls(n)

        rows.append((f"ls of {entries} entries", "one os.scandir + stat",
                     timed(listed, runs * 20), timed(ls, runs * 20)))
    print("\n| call | baseline | baseline ms | toolfs ms | toolfs / baseline |")
    print("|---|---|--:|--:|--:|")
    for call, what, plain, ours in rows:
        print(f"| {call} | {what} | {plain[0]:.2f} ({plain[1]:.1f}) | "
              f"{ours[0]:.2f} ({ours[1]:.1f}) | {_ratio(ours, plain)} |")


def _objects(i: int) -> bytes:
    lines = [f"line {n} of object {i}" for n in range(30)]
    if i % 9 == 0:
        lines[12] = f"needle_{i} here"
    return ("\n".join(lines) + "\n").encode()


def _counted(emu: Any, call: Callable[[], object]) -> tuple[object, list[Any]]:
    emu.clear_requests()
    out = call()
    return out, [r for r in emu.requests() if not r.path.startswith("/_toolfs")]


def bench_stores(objects: int, changes: int) -> None:
    print(f"\nObject stores: a prefix of {objects} objects; K = {changes} changed behind "
          "toolfs's back; requests counted at the emulator\n")
    print("| backend | cold grep | second grep (unchanged) | of which listing | "
          f"grep after {changes} changes | read after grep | same results |")
    print("|---|--:|--:|--:|--:|--:|---|")
    for emu_cls in (S3Emulator, GCSEmulator, AzuriteEmulator):
        with emu_cls() as emu:
            print(_store_row(emu, objects, changes))
    sys.stdout.flush()


def _store_row(emu: Any, objects: int, changes: int) -> str:
    emu.create_bucket("bench")
    fs: Any = (emu.s3fs_filesystem() if isinstance(emu, S3Emulator)
               else emu.adlfs_filesystem() if isinstance(emu, AzuriteEmulator)
               else emu.gcsfs_filesystem())
    fs.pipe({f"bench/repo/src/p{i % 20}/m{i:05}.py": _objects(i) for i in range(objects)})
    ws = toolfs.Workspace(fs, root="bench/repo", content_cache_bytes=256 << 20,
                          gitignore=False)

    def grep() -> Any:
        return ws.grep("needle_\\d+", path="src", output_mode="content")

    cold_r, cold = _counted(emu, grep)
    warm_r, warm = _counted(emu, grep)
    listing = [r for r in warm if "/m0" not in r.path and "%2Fm0" not in r.path]
    for i in range(changes):
        fs.pipe_file(f"bench/repo/src/p{i % 20}/m{i:05}.py", _objects(i) + b"x\n")
    after_r, after = _counted(emu, grep)
    _, read = _counted(emu, lambda: ws.read("src/p1/m00001.py"))
    fresh = toolfs.Workspace(fs, root="bench/repo", content_cache_bytes=0, gitignore=False)
    same = cold_r == warm_r and after_r == fresh.grep("needle_\\d+", path="src",
                                                      output_mode="content")
    name = {S3Emulator: "S3 (moto)", GCSEmulator: "GCS (fake-gcs-server)",
            AzuriteEmulator: "Azure (Azurite)"}[type(emu)]
    return (f"| {name} | {len(cold)} | {len(warm)} | {len(listing)} | {len(after)} "
            f"| {len(read)} | {same} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--changes", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tiny", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--only", choices=["local", "stores"], default=None)
    parser.add_argument("--no-glob-ls", action="store_true",
                        help="leave out the glob and ls rows (their target is withdrawn)")
    args = parser.parse_args()
    if args.tiny:
        args.objects, args.changes, args.runs = 30, 3, 1
    # The two trees of issue 39: 5,760 source files, then 10,700.
    trees = [(200, 1_000_000)] if args.tiny else [(5760, 0), (10_700, 0)]
    if args.only in (None, "local"):
        bench_local(args.runs, trees, glob_ls=not args.no_glob_ls)
    if args.only in (None, "stores"):
        bench_stores(args.objects, args.changes)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
