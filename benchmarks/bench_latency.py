"""Latency of toolfs ``read``/``write``/``edit`` against the bare Python way of doing the same.

For each backend (local temp dir, fsspec memory) and file size (1 KB, 100 KB, 5 MB) it
times, interleaved with its baseline so that drift hits both alike:

* ``read``:  ``ws.read(path)`` (default window, 2000 lines) vs open + read + decode
  (memory: ``MemoryFileSystem.cat_file`` + decode);
* ``write``: ``ws.write(path, text)`` replacing the file vs encode + temp file + fsync +
  ``os.replace`` (memory: ``pipe_file``);
* ``edit``:  an edit chain (each ``ws.edit`` follows the previous one in the same
  workspace, so its bytes come from the ledger cache; the store still re-reads and
  hashes the file to check the version) vs read + ``str.replace`` + the bare write;
* ``read+edit``: ``ws.read`` then ``ws.edit`` vs bare read + bare edit (what an agent
  does for a file it has not read yet).

On local disk each op also has a **careful** baseline: the same op written by hand with
exactly toolfs's guarantees (``flock`` on the directory, a SHA-256 re-check of the file
against the version last seen, temp file + ``fsync``, ``os.replace``, ``fsync`` of the
directory, the SHA-256 of the new bytes as the next version to check). The target is
toolfs ≤ 1.2x careful for local writes and edits; the bare ratios are kept for
comparison with earlier runs.

Rounds (``--rounds R``): the whole run R times, each with fresh files and workspaces;
the table then gives each figure's median over the rounds, and a second table each
round's toolfs / careful ratio for local writes and edits, their median and how many
rounds held the target (one run's verdict moves with the machine's state by several
per cent; the median of rounds is the verdict).

Usage: ``python benchmarks/bench_latency.py [--tiny] [--backends local,memory]
[--sizes "1 KB,100 KB"] [--rounds R]``.
No assertions: it prints Markdown tables and which local targets held.
"""

from __future__ import annotations

import argparse
import fcntl
import gc
import hashlib
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import fsspec

import toolfs
from _common import fmt_us, machine_facts, markdown_table, median_us

TARGET = 1.5
"""toolfs / bare, local (the earlier target, kept for comparison)."""
CAREFUL_TARGET = 1.2
"""toolfs / careful, local writes and edits (issue 14)."""
CAREFUL_OPS = ("write", "edit")
SIZES = {"1 KB": 1_000, "100 KB": 100_000, "5 MB": 5_000_000}
# Iterations per size: small files are cheap and noisy, so they get many samples.
ITERATIONS = {"1 KB": 1000, "100 KB": 300, "5 MB": 50}
TINY_ITERATIONS = {"1 KB": 20, "100 KB": 10, "5 MB": 3}
MARK_A, MARK_B = "MARKER_ALPHA_0001", "MARKER_OMEGA_0002"

OPS_DOC = {
    "read": "ws.read (2000-line window) vs open+read+decode",
    "write": "ws.write (replace) vs encode+tmp+fsync+os.replace",
    "edit": "ws.edit chain (bytes from ledger cache) vs read+replace+bare write",
    "read+edit": "ws.read then ws.edit vs bare read + bare edit",
}


@dataclass(frozen=True)
class Row:
    backend: str
    size: str
    op: str
    iterations: int
    toolfs_us: float
    bare_us: float
    careful_us: float | None = None


def make_text(size: int, marker: str) -> str:
    """~100-byte ASCII lines with one unique marker in the middle line."""
    line_len = 100
    n = max(3, size // line_len)
    body = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor"
    lines = [f"{i:08d} {body}"[: line_len - 1] for i in range(n)]
    mid = n // 2
    lines[mid] = (f"{mid:08d} {marker} " + body)[: line_len - 1]
    text = "\n".join(lines) + "\n"
    return text[:size - 1] + "\n" if len(text) > size else text


# -- bare baselines ---------------------------------------------------------------


def bare_read(path: str) -> str:
    with open(path, "rb") as f:
        return f.read().decode("utf-8")


def bare_write(path: str, text: str, dir_fsync: bool = False) -> None:
    """What a careful tool does without toolfs: temp file, fsync, atomic rename.

    ``dir_fsync`` also syncs the directory, as toolfs does, so that a crash cannot
    forget the rename (off by default: the stated baseline does not do it).
    """
    data = text.encode("utf-8")
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    if dir_fsync:
        dfd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def bare_edit(path: str, old: str, new: str, dir_fsync: bool = False) -> None:
    bare_write(path, bare_read(path).replace(old, new), dir_fsync)


class Careful:
    """One local file handled by hand with toolfs's guarantees (see the module doc).

    ``version`` is the SHA-256 of the bytes last read or written; a write or edit stores
    only if the file still has it (checked under the directory lock, by re-reading and
    hashing the file), and leaves the digest of the new bytes for the next one.
    """

    def __init__(self, path: str) -> None:
        self.dir, self.name = os.path.split(path)
        self.path = path
        self.version: str | None = None

    def read(self) -> str:
        with open(self.path, "rb") as f:
            data = f.read()
        self.version = hashlib.sha256(data).hexdigest()
        return data.decode("utf-8")

    def _current(self, dfd: int) -> bytes:
        fd = os.open(self.name, os.O_RDONLY, dir_fd=dfd)
        try:
            size = os.fstat(fd).st_size
            return os.pread(fd, size + 1, 0)
        finally:
            os.close(fd)

    def _store(self, dfd: int, data: bytes) -> None:
        """Temp file + fsync, then replace and fsync the directory (lock held)."""
        tmp = f".{self.name}.tmp-{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666, dir_fd=dfd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        os.fsync(dfd)
        self.version = hashlib.sha256(data).hexdigest()

    def _locked(self, change: Callable[[int, bytes], bytes]) -> None:
        dfd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(dfd, fcntl.LOCK_EX)
            try:
                current = self._current(dfd)
                if hashlib.sha256(current).hexdigest() != self.version:
                    raise RuntimeError("stale")  # never happens here: one writer
                self._store(dfd, change(dfd, current))
            finally:
                fcntl.flock(dfd, fcntl.LOCK_UN)
        finally:
            os.close(dfd)

    def write(self, text: str) -> None:
        data = text.encode("utf-8")
        self._locked(lambda dfd, current: data)

    def edit(self, old: str, new: str) -> None:
        # The re-check reads the file under the lock; the edit is made from those bytes.
        self._locked(lambda dfd, current:
                     current.decode("utf-8").replace(old, new, 1).encode("utf-8"))


# -- measurement ------------------------------------------------------------------


def interleaved(n: int, warmup: int, *fns: Callable[[int], object]) -> list[list[int]]:
    """Time ``n`` calls of each function, rotating which goes first (cache/drift
    fairness); one list of samples per function."""
    for i in range(warmup):
        for fn in fns:
            fn(i)
    gc.collect()
    samples: list[list[int]] = [[] for _ in fns]
    clock = time.perf_counter_ns
    order = list(zip(fns, samples, strict=True))
    for i in range(warmup, warmup + n):
        shift = i % len(order)
        for fn, out in order[shift:] + order[:shift]:
            t0 = clock()
            fn(i)
            out.append(clock() - t0)
    return samples


class Toggle:
    """Alternates a file between two same-size markers so every edit changes it."""

    def __init__(self) -> None:
        self.has_a = True

    def next(self) -> tuple[str, str]:
        old, new = (MARK_A, MARK_B) if self.has_a else (MARK_B, MARK_A)
        self.has_a = not self.has_a
        return old, new


def bench_local(label: str, size: int, n: int, warmup: int, dir_fsync: bool) -> list[Row]:
    base = tempfile.mkdtemp(prefix="toolfs-bench-latency-")
    try:
        # Separate directories: the toolfs local store lists the target's directory
        # on each write (crash leftovers), and bare files must not inflate that.
        os.makedirs(os.path.join(base, "tfs"))
        bare_dir = os.path.join(base, "bare")
        os.makedirs(bare_dir)
        ws = toolfs.Workspace(os.path.join(base, "tfs"))
        text_a, text_b = make_text(size, MARK_A), make_text(size, MARK_B)
        rows: list[Row] = []

        careful_dir = os.path.join(base, "careful")
        os.makedirs(careful_dir)

        def run(op: str, t_fn: Callable[[int], object], b_fn: Callable[[int], object],
                c_fn: Callable[[int], object]) -> None:
            t, b, c = interleaved(n, warmup, t_fn, b_fn, c_fn)
            rows.append(Row("local", label, op, n, median_us(t), median_us(b),
                            median_us(c)))

        def careful(name: str) -> Careful:
            f = Careful(os.path.join(careful_dir, name))
            bare_write(f.path, text_a)
            f.read()
            return f

        # read
        bare_path = os.path.join(bare_dir, "r.txt")
        bare_write(bare_path, text_a)
        ws.write("r.txt", text_a)
        c_read = careful("r.txt")
        run("read", lambda i: ws.read("r.txt"), lambda i: bare_read(bare_path),
            lambda i: c_read.read().split("\n"))

        # write: replace an existing file with a new content of the same size
        bare_wpath = os.path.join(bare_dir, "w.txt")
        ws.write("w.txt", text_a)
        bare_write(bare_wpath, text_a)
        c_write = careful("w.txt")
        contents = (text_b, text_a)
        run("write", lambda i: ws.write("w.txt", contents[i % 2]),
            lambda i: bare_write(bare_wpath, contents[i % 2], dir_fsync),
            lambda i: c_write.write(contents[i % 2]))

        # edit chain
        bare_epath = os.path.join(bare_dir, "e.txt")
        ws.write("e.txt", text_a)
        bare_write(bare_epath, text_a)
        ws.read("e.txt")
        c_edit = careful("e.txt")
        t_tog, b_tog, c_tog = Toggle(), Toggle(), Toggle()
        run("edit", lambda i: ws.edit("e.txt", *t_tog.next()),
            lambda i: bare_edit(bare_epath, *b_tog.next(), dir_fsync),
            lambda i: c_edit.edit(*c_tog.next()))

        # read then edit
        bare_cpath = os.path.join(bare_dir, "c.txt")
        ws.write("c.txt", text_a)
        bare_write(bare_cpath, text_a)
        c_cycle_file = careful("c.txt")
        tc_tog, bc_tog, cc_tog = Toggle(), Toggle(), Toggle()

        def t_cycle(i: int) -> None:
            ws.read("c.txt")
            ws.edit("c.txt", *tc_tog.next())

        def b_cycle(i: int) -> None:
            bare_read(bare_cpath)
            bare_edit(bare_cpath, *bc_tog.next(), dir_fsync)

        def c_cycle(i: int) -> None:
            c_cycle_file.read().split("\n")
            c_cycle_file.edit(*cc_tog.next())

        run("read+edit", t_cycle, b_cycle, c_cycle)
        return rows
    finally:
        shutil.rmtree(base, ignore_errors=True)


def bench_memory(label: str, size: int, n: int, warmup: int, dir_fsync: bool) -> list[Row]:
    tag = uuid.uuid4().hex[:8]
    root = f"/toolfs-bench-{tag}"
    bare_root = f"/toolfs-bench-{tag}-bare"
    fs = fsspec.filesystem("memory")
    fs.makedirs(bare_root, exist_ok=True)
    ws = toolfs.Workspace(f"memory://{root}")
    text_a, text_b = make_text(size, MARK_A), make_text(size, MARK_B)
    rows: list[Row] = []

    def run(op: str, t_fn: Callable[[int], object], b_fn: Callable[[int], object]) -> None:
        t, b = interleaved(n, warmup, t_fn, b_fn)
        rows.append(Row("memory", label, op, n, median_us(t), median_us(b)))

    def b_read(path: str) -> str:
        return fs.cat_file(path).decode("utf-8")  # type: ignore[no-any-return]

    def b_write(path: str, text: str) -> None:
        fs.pipe_file(path, text.encode("utf-8"))

    def b_edit(path: str, old: str, new: str) -> None:
        b_write(path, b_read(path).replace(old, new))

    try:
        b_write(f"{bare_root}/r.txt", text_a)
        ws.write("r.txt", text_a)
        run("read", lambda i: ws.read("r.txt"), lambda i: b_read(f"{bare_root}/r.txt"))

        ws.write("w.txt", text_a)
        b_write(f"{bare_root}/w.txt", text_a)
        contents = (text_b, text_a)
        run("write", lambda i: ws.write("w.txt", contents[i % 2]),
            lambda i: b_write(f"{bare_root}/w.txt", contents[i % 2]))

        ws.write("e.txt", text_a)
        b_write(f"{bare_root}/e.txt", text_a)
        ws.read("e.txt")
        t_tog, b_tog = Toggle(), Toggle()
        run("edit", lambda i: ws.edit("e.txt", *t_tog.next()),
            lambda i: b_edit(f"{bare_root}/e.txt", *b_tog.next()))

        ws.write("c.txt", text_a)
        b_write(f"{bare_root}/c.txt", text_a)
        tc_tog, bc_tog = Toggle(), Toggle()

        def t_cycle(i: int) -> None:
            ws.read("c.txt")
            ws.edit("c.txt", *tc_tog.next())

        def b_cycle(i: int) -> None:
            b_read(f"{bare_root}/c.txt")
            b_edit(f"{bare_root}/c.txt", *bc_tog.next())

        run("read+edit", t_cycle, b_cycle)
        return rows
    finally:
        for r in (root, bare_root):
            if fs.exists(r):
                fs.rm(r, recursive=True)


def _median_row(same: tuple[Row, ...]) -> Row:
    """One case over the rounds: the median of each figure."""
    first = same[0]
    careful = [r.careful_us for r in same if r.careful_us is not None]
    return Row(first.backend, first.size, first.op, first.iterations,
               statistics.median(r.toolfs_us for r in same),
               statistics.median(r.bare_us for r in same),
               statistics.median(careful) if careful else None)


def _careful_ratio(r: Row) -> float:
    return r.toolfs_us / r.careful_us if r.careful_us else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true",
                        help="a few iterations per case (smoke test, numbers are noise)")
    parser.add_argument("--backends", default="local,memory",
                        help="comma-separated subset of local,memory")
    parser.add_argument("--bare-dir-fsync", action="store_true",
                        help="make the bare local write also fsync the directory, as "
                             "toolfs does (a like-for-like durability baseline)")
    parser.add_argument("--sizes", default=",".join(SIZES),
                        help="comma-separated subset of: " + ", ".join(SIZES))
    parser.add_argument("--rounds", type=int, default=1,
                        help="run everything R times with fresh files; report medians "
                             "over the rounds and each round's careful ratios")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")

    iterations = TINY_ITERATIONS if args.tiny else ITERATIONS
    warmup = 1 if args.tiny else 5
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    runners = {"local": bench_local, "memory": bench_memory}
    rounds: list[list[Row]] = []
    for _ in range(args.rounds):
        one: list[Row] = []
        for backend in backends:
            for label in sizes:
                one += runners[backend](label, SIZES[label], iterations[label], warmup,
                                        args.bare_dir_fsync)
        rounds.append(one)
    rows = [_median_row(same) for same in zip(*rounds, strict=True)]

    print(f"## toolfs latency vs bare Python{' (--tiny: smoke test only)' if args.tiny else ''}")
    print()
    print(machine_facts())
    if args.rounds > 1:
        print(f"rounds: {args.rounds}; each figure is the median of the rounds' medians")
    print()
    # Each ratio is the median of the rounds' ratios (one round: its ratio), and so is
    # the verdict on the careful target.
    bare_ratio = [statistics.median(one[i].toolfs_us / one[i].bare_us for one in rounds)
                  for i in range(len(rows))]
    careful_ratio = [statistics.median(_careful_ratio(one[i]) for one in rounds)
                     for i in range(len(rows))]

    def careful_cells(i: int) -> list[str]:
        r = rows[i]
        if r.careful_us is None:
            return ["-", "-", "-"]
        held = "-" if r.op not in CAREFUL_OPS else (
            "yes" if careful_ratio[i] <= CAREFUL_TARGET else "**no**")
        return [fmt_us(r.careful_us), f"{careful_ratio[i]:.2f}x", held]

    print(markdown_table(
        ["backend", "size", "op", "n", "toolfs µs (median)", "bare µs (median)",
         "toolfs / bare", "careful µs (median)", "toolfs / careful",
         f"≤ {CAREFUL_TARGET}x careful"],
        [[r.backend, r.size, r.op, r.iterations, fmt_us(r.toolfs_us), fmt_us(r.bare_us),
          f"{bare_ratio[i]:.2f}x", *careful_cells(i)]
         for i, r in enumerate(rows)]))
    print()
    print("What each op measures (bare = the plain-Python equivalent in the same run):")
    for op, doc in OPS_DOC.items():
        print(f"- {op}: {doc}")
    print("- careful (local): by hand with toolfs's guarantees: flock on the directory, "
          "SHA-256 re-check against the version last seen, temp file + fsync, os.replace, "
          "fsync of the directory, SHA-256 of the new bytes (read: read + decode + SHA-256 "
          "+ split into lines)")
    print("- memory backend baseline: fsspec MemoryFileSystem cat_file/pipe_file directly")
    print("- bare local write " + ("also fsyncs the directory (--bare-dir-fsync), like toolfs"
                                   if args.bare_dir_fsync else
                                   "does not fsync the directory; toolfs does"))
    local = [r for r in rows if r.backend == "local"]
    if local:
        checked = [i for i, r in enumerate(rows)
                   if r.backend == "local" and r.op in CAREFUL_OPS and r.careful_us]
        verdict = {i: careful_ratio[i] for i in checked}
        if args.rounds > 1:
            print()
            print(f"### {args.rounds} rounds: toolfs / careful, local writes and edits")
            print()
            print(markdown_table(
                ["size", "op", "each round", "median of rounds",
                 f"rounds ≤ {CAREFUL_TARGET}x"],
                [[rows[i].size, rows[i].op,
                  " / ".join(f"{_careful_ratio(one[i]):.2f}x" for one in rounds),
                  f"{verdict[i]:.2f}x",
                  f"{sum(_careful_ratio(one[i]) <= CAREFUL_TARGET for one in rounds)} "
                  f"of {args.rounds}"] for i in checked]))
        missed = [i for i in checked if verdict[i] > CAREFUL_TARGET]
        print()
        print(f"Target: toolfs ≤ {CAREFUL_TARGET}x careful for local writes and edits"
              + (" (median of rounds). " if args.rounds > 1 else ". ")
              + ("Met in every case." if not missed else
                 f"Missed in {len(missed)} of {len(checked)} cases: "
                 + ", ".join(f"{rows[i].op} {rows[i].size} ({verdict[i]:.2f}x)"
                             for i in missed) + "."))
        over = [i for i, r in enumerate(rows)
                if r.backend == "local" and bare_ratio[i] > TARGET]
        print(f"Earlier target, toolfs ≤ {TARGET}x bare: held in {len(local) - len(over)} "
              f"of {len(local)} local cases.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
