"""Windowed read of a large file: bytes transferred and peak memory, toolfs vs fsspec.

A file of ~100-byte lines (1 GiB by default, 12 MiB with ``--tiny``; always larger than
toolfs's 10 MiB whole-file cap, so toolfs streams it) is read three ways, for a window of
``--limit`` lines starting at line 1 and at the middle line:

* ``toolfs ws.read``: ``Workspace(dir).read(path, offset=k, limit=2000)``;
* ``fsspec open+readline`` (the baseline): ``fs.open(path)`` and ``readline()`` until
  the window is complete;
* ``fsspec cat_file``: the whole file in one call, then the window cut out of it.

"Window" (the target's unit) means the bytes from the start of the file through the end
of the last requested line: the line number ``k`` can only be found by counting
newlines from the start, so no reader without a line index can transfer less. The bytes
of the requested lines alone are shown too ("lines bytes").

Transfer on local disk is the ``rchar`` delta of ``/proc/self/io`` (bytes returned by
read syscalls); ``read_bytes`` (what the block layer fetched, including kernel
readahead) is shown as "device"; the file is evicted from the page cache before each
measurement. Peak memory is tracemalloc's peak (Python allocations), in a separate
run so that tracing does not slow the timed one.

Targets for toolfs: transfer ≤ 2 x (window + one toolfs block), peak ≤ 64 MiB.

The S3 variant (a 100 MiB object on a moto server, bytes counted at the server) runs
when ``toolfs.testing.emulators.S3Emulator`` and ``toolfs.backends.s3`` both import;
see :func:`run_s3_variant`.

Usage: ``python benchmarks/bench_window.py [--tiny] [--size-mib N] [--s3 auto|on|off]``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import re
import shutil
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import fsspec

import toolfs
from _common import fmt_bytes, machine_facts, markdown_table

MiB = 1 << 20
PEAK_TARGET = 64 * MiB
LIMIT = 2000
FILE_NAME = "big.txt"


PERIOD = 41
"""Line lengths repeat every ``PERIOD`` lines (80..120 bytes, 100 on average)."""
_BODY = b"the quick brown fox jumps over the lazy dog 0123456789 " * 3


def line_len(i: int) -> int:
    """Length in bytes (newline included) of line ``i`` (1-based)."""
    return 80 + (i * 37) % PERIOD


_PERIOD_BYTES = sum(line_len(i) for i in range(1, PERIOD + 1))
# Body of each possible length: line = 10-digit number, space, body, newline.
_BODIES = {n: _BODY[: n - 12] for n in range(80, 80 + PERIOD)}


def line_bytes(i: int) -> bytes:
    n = line_len(i)
    return b"%010d " % i + _BODIES[n] + b"\n"


def line_start(i: int) -> int:
    """Byte offset of line ``i`` (1-based), without generating the file."""
    q, r = divmod(i - 1, PERIOD)
    return q * _PERIOD_BYTES + sum(line_len(q * PERIOD + j) for j in range(1, r + 1))


@dataclass(frozen=True)
class Layout:
    """Shape of a generated file."""

    lines: int
    size: int

    def window(self, k: int, limit: int) -> tuple[int, int]:
        """``(lines bytes, prefix bytes)`` of lines ``k .. k+limit-1``."""
        last = min(self.lines, k + limit - 1)
        end = line_start(last + 1) if last < self.lines else self.size
        return end - line_start(k), end

    @property
    def middle(self) -> int:
        return max(1, self.lines // 2)


@dataclass
class Row:
    backend: str
    method: str
    k: int
    lines_bytes: int
    prefix_bytes: int
    transferred: int | None
    device: int | None
    peak: int
    seconds: float
    requests: int | None = None
    is_toolfs: bool = False
    notes: list[str] = field(default_factory=list)


# -- the file ---------------------------------------------------------------------


def generate(write: Callable[[bytes], object], target_size: int) -> Layout:
    """Write whole lines until at least ``target_size`` bytes."""
    pos = i = 0
    while pos < target_size:
        # One period-aligned chunk of ~4 MiB per write keeps memory flat.
        count = min(PERIOD * 1000, max(PERIOD, (target_size - pos) // 80 + PERIOD))
        chunk = b"".join(line_bytes(j) for j in range(i + 1, i + count + 1))
        if pos + len(chunk) > target_size:  # stop at the first line past the target
            cut = chunk.find(b"\n", target_size - pos - 1) + 1
            chunk = chunk[:cut]
            count = chunk.count(b"\n")
        write(chunk)
        pos += len(chunk)
        i += count
    return Layout(lines=i, size=pos)


def evict(path: str) -> None:
    """Drop the file from the page cache so that device reads are real."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def proc_io() -> dict[str, int] | None:
    try:
        with open("/proc/self/io", encoding="ascii") as f:
            return {k: int(v) for k, v in (ln.split(":") for ln in f if ":" in ln)}
    except OSError:
        return None


# -- readers (each returns the window's lines, to check they agree) --------------


def read_toolfs(ws: toolfs.Workspace, path: str, k: int, limit: int) -> list[str]:
    return ws.read(path, offset=k, limit=limit).lines


class OverBudget(Exception):
    """A reader ran past its time budget; ``line`` is how far it got."""

    def __init__(self, line: int, seconds: float) -> None:
        super().__init__(f"gave up after {seconds:.0f} s at line {line:,}")
        self.line, self.seconds = line, seconds


def read_readline(fs: Any, path: str, k: int, limit: int,
                  budget: float = float("inf")) -> list[str]:
    """``fs.open`` + ``readline`` to the window; gives up after ``budget`` seconds.

    The budget exists for s3fs: its default file's ``readline`` reads a whole block
    (50 MiB by default) per line, so scanning far into a big object takes hours.
    """
    out: list[str] = []
    deadline = time.perf_counter() + budget
    with fs.open(path, "rb") as f:
        for n in range(k - 1):
            if not f.readline():
                return out
            if n % 16 == 0 and time.perf_counter() > deadline:
                raise OverBudget(n + 1, budget)
        while len(out) < limit:
            raw = f.readline()
            if not raw:
                break
            out.append(raw.decode("utf-8").rstrip("\r\n"))
            if len(out) % 16 == 0 and time.perf_counter() > deadline:
                raise OverBudget(k + len(out), budget)
    return out


def read_cat(fs: Any, path: str, k: int, limit: int) -> list[str]:
    data: bytes = fs.cat_file(path)
    pos = 0
    for _ in range(k - 1):  # bytes.find is C-speed; no per-line objects
        pos = data.find(b"\n", pos) + 1
        if pos == 0:
            return []
    out: list[str] = []
    while len(out) < limit and pos < len(data):
        nl = data.find(b"\n", pos)
        end = len(data) if nl == -1 else nl
        out.append(data[pos:end].decode("utf-8").rstrip("\r"))
        pos = end + 1
    return out


@dataclass(frozen=True)
class Reader:
    name: str
    is_toolfs: bool
    read: Callable[[int], list[str]]
    """Lines ``k .. k+limit-1`` for an offset ``k``."""


class Meter(Protocol):
    """Counts what one read transferred."""

    def start(self) -> None: ...

    def stop(self) -> tuple[int | None, int | None, int | None]:
        """``(transferred, device bytes, GET requests)``; ``None`` when unknown."""
        ...


class ProcIoMeter:
    """Local disk: ``/proc/self/io`` deltas, with the file evicted from the page cache."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._before: dict[str, int] | None = None

    def start(self) -> None:
        evict(self.path)
        self._before = proc_io()

    def stop(self) -> tuple[int | None, int | None, int | None]:
        after, before = proc_io(), self._before
        if after is None or before is None:
            return None, None, None
        return after["rchar"] - before["rchar"], after["read_bytes"] - before["read_bytes"], None


def run_readers(backend: str, layout: Layout, limit: int, readers: list[Reader],
                meter: Meter) -> list[Row]:
    """Each reader at k=1 and k=middle: one counted+timed run, one tracemalloc run."""
    rows: list[Row] = []
    for k in (1, layout.middle):
        lines_b, prefix_b = layout.window(k, limit)
        reference: list[str] | None = None
        for reader in readers:
            notes: list[str] = []
            lines: list[str] | None
            gc.collect()
            meter.start()
            t0 = time.perf_counter()
            try:
                lines = reader.read(k)
            except OverBudget as exc:
                lines, notes = None, [str(exc)]
            seconds = time.perf_counter() - t0
            transferred, device, requests = meter.stop()
            del lines
            # Tracing slows allocation-heavy code, so peak memory gets its own run.
            gc.collect()
            meter.start()
            tracemalloc.start()
            try:
                tracemalloc.reset_peak()
                try:
                    lines = reader.read(k)
                except OverBudget:
                    lines = None
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            meter.stop()
            row = Row(backend, reader.name, k, lines_b, prefix_b, transferred, device, peak,
                      seconds, requests=requests, is_toolfs=reader.is_toolfs, notes=notes)
            if lines is not None:
                if reference is None:
                    reference = lines
                elif lines != reference:
                    row.notes.append("WINDOW MISMATCH")
            rows.append(row)
            del lines
    return rows


# -- local ------------------------------------------------------------------------


def run_local(size: int, limit: int, block: int) -> list[Row]:
    base = tempfile.mkdtemp(prefix="toolfs-bench-window-")
    path = os.path.join(base, FILE_NAME)
    try:
        with open(path, "wb") as f:
            layout = generate(f.write, size)
            f.flush()
            os.fsync(f.fileno())
        ws = toolfs.Workspace(base)
        # Same workspace with the first request cut to one block: shows the knob that
        # decides the k=1 transfer.
        ws_small = toolfs.Workspace(base, first_block=block)
        fs = fsspec.filesystem("file")
        # Warm imports and first-call caches on a small file so the counters below see
        # only the window read.
        with open(os.path.join(base, "warm.txt"), "wb") as f:
            f.write(b"x\n" * 10)
        ws.read("warm.txt")
        ws_small.read("warm.txt")
        read_readline(fs, os.path.join(base, "warm.txt"), 1, 5)
        readers = [
            Reader("fsspec open+readline (baseline)", False,
                   lambda k: read_readline(fs, path, k, limit)),
            Reader("toolfs ws.read", True, lambda k: read_toolfs(ws, FILE_NAME, k, limit)),
            Reader(f"toolfs ws.read, first_block={fmt_bytes(block)}", True,
                   lambda k: read_toolfs(ws_small, FILE_NAME, k, limit)),
            Reader("fsspec cat_file (whole)", False, lambda k: read_cat(fs, path, k, limit)),
        ]
        return run_readers("local", layout, limit, readers, ProcIoMeter(path))
    finally:
        shutil.rmtree(base, ignore_errors=True)


# -- S3 variant -------------------------------------------------------------------
# HOOK: the S3 variant. It needs toolfs.testing.emulators.S3Emulator (a moto server with
# a server-side request log) and the S3 adapter toolfs.backends.s3, both written by
# other developers; s3_unavailable() says why the variant cannot run yet, and
# run_s3_variant() is the whole variant.


def s3_unavailable() -> str | None:
    """``None`` when the S3 variant can run, else the reason it cannot."""
    for module in ("s3fs", "moto", "toolfs.testing.emulators", "toolfs.backends.s3"):
        try:
            importlib.import_module(module)
        except Exception as exc:  # any import failure means "not ready"
            return f"{module} does not import ({type(exc).__name__}: {exc})"
    emulators = importlib.import_module("toolfs.testing.emulators")
    if not hasattr(emulators, "S3Emulator"):
        return "toolfs.testing.emulators has no S3Emulator"
    return None


_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


def served_bytes(requests: list[Any], key_path: str, size: int) -> tuple[int, int]:
    """``(bytes served for GETs of the object, GET count)`` from the server's log.

    Uses a recorded response size when the emulator logs one; otherwise the ``Range``
    header of each GET, clamped to the object (no header: the whole object).
    """
    total = gets = 0
    for req in requests:
        if req.method != "GET" or not req.path.endswith(key_path):
            continue
        gets += 1
        for attr in ("response_bytes", "bytes_sent", "response_size"):
            value = getattr(req, attr, None)
            if isinstance(value, int):
                total += value
                break
        else:
            m = _RANGE.fullmatch(str(req.headers.get("range", "")).strip())
            if m is None:
                total += size
            elif m.group(1) == "":  # suffix range: the last N bytes
                total += min(size, int(m.group(2) or 0))
            else:
                lo = int(m.group(1))
                hi = min(size - 1, int(m.group(2))) if m.group(2) else size - 1
                total += max(0, hi - lo + 1)
    return total, gets


class ServerLogMeter:
    """S3: bytes the emulator served for GETs of one object, from its request log."""

    def __init__(self, emulator: Any, key_path: str, size: int) -> None:
        self.emulator, self.key_path, self.size = emulator, key_path, size

    def start(self) -> None:
        self.emulator.clear_requests()

    def stop(self) -> tuple[int | None, int | None, int | None]:
        served, gets = served_bytes(self.emulator.requests(), self.key_path, self.size)
        return served, None, gets


def run_s3_variant(size: int, limit: int, block: int, budget: float) -> list[Row]:
    """The window benchmark against a moto S3 server (call only when available)."""
    emulators = importlib.import_module("toolfs.testing.emulators")
    bucket, key = "toolfs-bench", FILE_NAME
    with emulators.S3Emulator() as emu:
        emu.create_bucket(bucket)
        parts: list[bytes] = []
        layout = generate(parts.append, size)
        emu.s3fs_filesystem().pipe_file(f"{bucket}/{key}", b"".join(parts))
        parts.clear()
        opts = emu.s3fs_storage_options()
        ws = toolfs.Workspace(f"s3://{bucket}", storage_options=opts)
        ws_small = toolfs.Workspace(f"s3://{bucket}", storage_options=opts,
                                    first_block=block)
        ws.read(key, limit=1)  # warm imports and the client session
        ws_small.read(key, limit=1)
        obj = f"{bucket}/{key}"
        # A fresh s3fs per read, so no block cache is carried from one read to the next.
        readers = [
            Reader("fsspec open+readline (baseline)", False,
                   lambda k: read_readline(emu.s3fs_filesystem(), obj, k, limit, budget)),
            Reader("toolfs ws.read", True, lambda k: read_toolfs(ws, key, k, limit)),
            Reader(f"toolfs ws.read, first_block={fmt_bytes(block)}", True,
                   lambda k: read_toolfs(ws_small, key, k, limit)),
            Reader("fsspec cat_file (whole)", False,
                   lambda k: read_cat(emu.s3fs_filesystem(), obj, k, limit)),
        ]
        return run_readers("s3 (moto)", layout, limit, readers,
                           ServerLogMeter(emu, f"/{obj}", layout.size))


# -- report -----------------------------------------------------------------------


def render(rows: list[Row], block: int) -> str:
    baseline = {(r.backend, r.k): r for r in rows if "baseline" in r.method}
    table = []
    for r in rows:
        base = baseline.get((r.backend, r.k))
        allowed = 2 * (r.prefix_bytes + block)
        hit = "-"
        if r.is_toolfs:
            ok_t = r.transferred is not None and r.transferred <= allowed
            ok_m = r.peak <= PEAK_TARGET
            hit = ("yes" if ok_t else "**no**") + " / " + ("yes" if ok_m else "**no**")
        vs_base = ("n/a" if base is None or not base.transferred or r.transferred is None
                   else f"{r.transferred / base.transferred:.2f}x")
        table.append([
            r.backend, r.method + (f" ({', '.join(r.notes)})" if r.notes else ""), r.k,
            fmt_bytes(r.prefix_bytes), fmt_bytes(r.lines_bytes),
            "n/a" if r.transferred is None else fmt_bytes(r.transferred),
            "n/a" if r.transferred is None else f"{r.transferred / allowed:.2f}",
            vs_base,
            "-" if r.device is None else fmt_bytes(r.device),
            "-" if r.requests is None else r.requests,
            fmt_bytes(r.peak),
            "n/a" if base is None else f"{r.peak / max(1, base.peak):.1f}x",
            f"{r.seconds * 1000:,.1f}", hit])
    return markdown_table(
        ["backend", "method", "offset k", "window (start to last line)", "lines bytes",
         "transferred",
         "÷ 2(window+block)", "transfer vs baseline", "device", "GETs", "peak mem",
         "peak vs baseline", "ms", "target: transfer / memory"],
        table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true",
                        help="12 MiB local file and S3 object (smoke test)")
    parser.add_argument("--size-mib", type=int, default=None,
                        help="local file size (default 1024, --tiny 12)")
    parser.add_argument("--s3-size-mib", type=int, default=None,
                        help="S3 object size (default 100, --tiny 12)")
    parser.add_argument("--limit", type=int, default=LIMIT, help="lines per window")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="give up on the S3 readline baseline after this many seconds "
                             "(default 60, --tiny 0.5)")
    parser.add_argument("--s3", choices=("auto", "on", "off"), default="auto",
                        help="S3 variant: auto runs it when the emulator and adapter exist")
    args = parser.parse_args(argv)

    size = (args.size_mib or (12 if args.tiny else 1024)) * MiB
    s3_size = (args.s3_size_mib or (12 if args.tiny else 100)) * MiB
    budget = args.budget_s if args.budget_s is not None else (0.5 if args.tiny else 60.0)
    probe = toolfs.Workspace("memory://toolfs-bench-probe")
    block = probe.fs.block_size
    first_block, size_cap = probe.fs.first_block, probe.fs.size_cap
    if size <= size_cap:
        parser.error(f"--size-mib must exceed toolfs's whole-file cap ({fmt_bytes(size_cap)})")

    rows = run_local(size, args.limit, block)
    s3_note: str
    why = None if args.s3 == "off" else s3_unavailable()
    if args.s3 == "off":
        s3_note = "S3 variant: skipped (--s3 off)."
    elif why is not None:
        if args.s3 == "on":
            print(f"S3 variant requested but unavailable: {why}")
            return 2
        s3_note = f"S3 variant: not run ({why})."
    else:
        rows += run_s3_variant(s3_size, args.limit, block, budget)
        s3_note = f"S3 variant: {fmt_bytes(s3_size)} object on a local moto server."

    print(f"## Windowed read of a large file{' (--tiny: smoke test only)' if args.tiny else ''}")
    print()
    print(machine_facts())
    print(f"local file: {fmt_bytes(size)}; window: {args.limit} lines; toolfs defaults: "
          f"block {fmt_bytes(block)}, first block {fmt_bytes(first_block)}, "
          f"whole-file cap {fmt_bytes(size_cap)}. {s3_note}")
    print()
    print(render(rows, block))
    print()
    print("window = bytes from the start of the file through the last requested line "
          "(line k can only be found by counting newlines from the start); lines bytes = "
          "the requested lines alone. transferred = rchar delta (local) or bytes served "
          "for GETs, per the server's request log (S3). device = read_bytes delta "
          "(includes kernel readahead). peak mem = tracemalloc peak.")
    tfs = [r for r in rows if r.is_toolfs]
    misses: list[str] = []
    for r in tfs:
        allowed = 2 * (r.prefix_bytes + block)
        if r.transferred is None or r.transferred > allowed:
            misses.append(f"transfer {r.backend} {r.method} k={r.k}")
        if r.peak > PEAK_TARGET:
            misses.append(f"memory {r.backend} {r.method} k={r.k}")
    print()
    print("Targets (toolfs rows): transfer ≤ 2 x (window + one block), peak ≤ 64 MiB: "
          + ("met." if not misses else "missed: " + ", ".join(misses) + "."))
    if any("WINDOW MISMATCH" in r.notes for r in rows):
        print("WARNING: some readers returned a different window than the baseline.")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
