"""Per-call cost of the calls agents make most, against the issue-14 targets.

* **memory edit chain, 50 KB**: ``ws.edit`` on a 50 KB file in a ``memory://``
  workspace, each edit following the previous one (bytes from the ledger cache), target
  ≤ 100 µs per call;
* **``ws.execute("read")``, 2,000 lines**: the whole tool call a model makes (argument
  validation, the read, the numbered text within the output budget, the result), on a
  2,000-line (~100 KB) file, memory and local, target ≤ 300 µs per call.

Each is timed with ``time.perf_counter_ns`` around every call, medians over rounds of
calls, beside a baseline measured in the same run: for the edit, ``str.replace`` on the
text plus ``MemoryFileSystem.pipe_file`` (the bare work of an edit in memory); for the
read, ``open`` + ``read`` + ``decode`` + ``splitlines`` (memory: ``cat_file`` + the
same). No assertions: it prints a Markdown table and which targets held.

Usage: ``python benchmarks/bench_calls.py [--tiny]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable

import fsspec

import toolfs
from _common import fmt_us, machine_facts, markdown_table, median_us, ratio

EDIT_TARGET_US = 100.0
READ_TARGET_US = 300.0
MARK_A, MARK_B = "MARKER_ALPHA_0001", "MARKER_OMEGA_0002"


def source_text(lines: int, marker: str) -> str:
    """~50-byte Python-like lines with one unique marker in the middle one."""
    rows = [f"    value_{i:05d} = compute(value_{i:05d}, {i % 97}) + 1"
            for i in range(lines)]
    rows[lines // 2] = f"    MARKER = '{marker}'"
    return "\n".join(rows) + "\n"


def timed(fn: Callable[[], object], calls: int) -> list[int]:
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - t0)
    return samples


def interleaved(calls: int, rounds: int, *fns: Callable[[], object]) -> list[list[int]]:
    """Samples of each function, in rounds that alternate which goes first."""
    out: list[list[int]] = [[] for _ in fns]
    gc.disable()
    try:
        for r in range(rounds):
            order = list(enumerate(fns))
            for i, fn in order if r % 2 else order[::-1]:
                out[i] += timed(fn, calls)
    finally:
        gc.enable()
    return out


def edit_chain(calls: int, rounds: int) -> tuple[float, float]:
    """(toolfs µs, bare µs) per edit of a ~50 KB file in memory."""
    text = source_text(1_000, MARK_A)  # ~50 KB
    root = f"memory://bench-calls-{uuid.uuid4().hex[:8]}"
    ws = toolfs.Workspace(root)
    ws.write("chain.py", text)
    flip = [MARK_A, MARK_B]

    def tool() -> None:
        ws.edit("chain.py", flip[0], flip[1])
        flip.reverse()

    fs = fsspec.filesystem("memory")
    bare_path = f"/bench-calls-bare-{uuid.uuid4().hex[:8]}/chain.py"
    fs.pipe_file(bare_path, text.encode())
    bare_flip = [MARK_A, MARK_B]

    def bare() -> None:
        current = fs.cat_file(bare_path).decode()
        fs.pipe_file(bare_path, current.replace(bare_flip[0], bare_flip[1], 1).encode())
        bare_flip.reverse()

    for _ in range(20):
        tool()
        bare()
    t, b = interleaved(calls, rounds, tool, bare)
    return median_us(t), median_us(b)


def execute_read(backend: str, calls: int, rounds: int) -> tuple[float, float]:
    """(toolfs µs, bare µs) per ``execute("read")`` of a 2,000-line file."""
    text = source_text(2_000, MARK_A)
    tmp: str | None = None
    if backend == "local":
        tmp = tempfile.mkdtemp(prefix="toolfs-bench-calls-")
        path = os.path.join(tmp, "big.py")
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        ws = toolfs.Workspace(tmp)

        def bare() -> None:
            with open(path, "rb") as f:
                f.read().decode("utf-8").splitlines()
    else:
        ws = toolfs.Workspace(f"memory://bench-calls-{uuid.uuid4().hex[:8]}")
        ws.write("big.py", text)
        fs = fsspec.filesystem("memory")
        bare_path = f"/bench-calls-bare-{uuid.uuid4().hex[:8]}/big.py"
        fs.pipe_file(bare_path, text.encode())

        def bare() -> None:
            fs.cat_file(bare_path).decode("utf-8").splitlines()

    args = {"file_path": "big.py"}

    def tool() -> None:
        output = ws.execute("read", args)
        assert not output.is_error, output.text

    try:
        for _ in range(20):
            tool()
            bare()
        t, b = interleaved(calls, rounds, tool, bare)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return median_us(t), median_us(b)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="a few calls (smoke test)")
    args = parser.parse_args(argv)
    calls, rounds = (10, 2) if args.tiny else (500, 6)

    rows: list[list[object]] = []
    held: list[str] = []
    edit_us, edit_bare = edit_chain(calls, rounds)
    rows.append(["memory edit chain, 50 KB", calls * rounds, fmt_us(edit_us),
                 fmt_us(edit_bare), ratio(edit_us, edit_bare), f"≤ {EDIT_TARGET_US:.0f} µs",
                 "yes" if edit_us <= EDIT_TARGET_US else "**no**"])
    held.append("yes" if edit_us <= EDIT_TARGET_US else "no")
    for backend in ("memory", "local"):
        read_us, read_bare = execute_read(backend, calls, rounds)
        rows.append([f'execute("read"), 2,000 lines, {backend}', calls * rounds,
                     fmt_us(read_us), fmt_us(read_bare), ratio(read_us, read_bare),
                     f"≤ {READ_TARGET_US:.0f} µs",
                     "yes" if read_us <= READ_TARGET_US else "**no**"])
        held.append("yes" if read_us <= READ_TARGET_US else "no")

    print(f"## Per-call cost{' (--tiny: smoke test only)' if args.tiny else ''}")
    print()
    print(machine_facts())
    print()
    print(markdown_table(["call", "n", "toolfs µs (median)", "bare µs (median)",
                          "toolfs / bare", "target", "met"], rows))
    print()
    print("- bare: the edit as str.replace + MemoryFileSystem.pipe_file; the read as "
          "read + decode + splitlines, without numbering, budget or result")
    print(f"- targets held: {held.count('yes')} of {len(held)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
