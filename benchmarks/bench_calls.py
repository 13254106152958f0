"""Per-call cost of the calls agents make most, against the issue-14 targets.

* **memory edit chain, 50 KB**: ``ws.edit`` on a 50 KB file in a ``memory://``
  workspace, each edit following the previous one (bytes from the ledger cache), and
  the same with CRLF line ends (also with strings that end in a newline), target
  ≤ 100 µs per call;
* **``ws.execute("read")``, 2,000 lines**: the whole tool call a model makes (argument
  validation, the read, the numbered text within the output budget, the result), on a
  2,000-line (~100 KB) file, memory and local, and the same file with CRLF line ends
  on memory, target ≤ 300 µs per call.

Each is timed with ``time.perf_counter_ns`` around every call, medians over rounds of
calls, beside a baseline measured in the same run: for the edit, ``str.replace`` on the
text plus ``MemoryFileSystem.pipe_file`` (the bare work of an edit in memory); for the
read, ``open`` + ``read`` + ``decode`` + ``splitlines`` (memory: ``cat_file`` + the
same). No assertions: it prints a Markdown table and which targets held.

With ``--base OTHER/src`` it compares builds instead: this checkout's toolfs time of each
call against another build's (say ``git worktree add /tmp/base HEAD~1``), each in its
own process, taking turns in bursts in one run.

Usage: ``python benchmarks/bench_calls.py [--tiny] [--base OTHER/src]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import fsspec

import toolfs
from _common import ask_worker, fmt_us, machine_facts, markdown_table, median_us, ratio

EDIT_TARGET_US = 100.0
READ_TARGET_US = 300.0
HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
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


Calls = tuple[Callable[[], object], Callable[[], object], Callable[[], None]]
"""A call's (toolfs, bare, clean-up)."""


def edit_chain_calls(newline: str = "\n", span_lines: bool = False) -> Calls:
    """Edits of a ~50 KB file in memory, each following the previous one, its lines
    ended by ``newline``; with ``span_lines``, the old and new strings end with the
    marker line's newline (the model sends LF)."""
    text = source_text(1_000, MARK_A).replace("\n", newline)  # ~50 KB
    root = f"memory://bench-calls-{uuid.uuid4().hex[:8]}"
    ws = toolfs.Workspace(root)
    ws.write("chain.py", text)
    flip = [MARK_A + "'\n", MARK_B + "'\n"] if span_lines else [MARK_A, MARK_B]

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

    return tool, bare, lambda: None


def execute_read_calls(backend: str, newline: str = "\n") -> Calls:
    """``execute("read")`` of a 2,000-line file, on ``backend`` (memory or local), its
    lines ended by ``newline``."""
    text = source_text(2_000, MARK_A).replace("\n", newline)
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

    def clean() -> None:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    return tool, bare, clean


CALLS: dict[str, tuple[str, Callable[[], Calls], float]] = {
    "edit": ("memory edit chain, 50 KB", edit_chain_calls, EDIT_TARGET_US),
    "edit-crlf": ("memory edit chain, 50 KB, CRLF lines", lambda: edit_chain_calls("\r\n"),
                  EDIT_TARGET_US),
    "edit-crlf-span": ("memory edit chain, 50 KB, CRLF lines, across a newline",
                       lambda: edit_chain_calls("\r\n", span_lines=True), EDIT_TARGET_US),
    "read-memory": ('execute("read"), 2,000 lines, memory',
                    lambda: execute_read_calls("memory"), READ_TARGET_US),
    "read-local": ('execute("read"), 2,000 lines, local',
                   lambda: execute_read_calls("local"), READ_TARGET_US),
    "read-crlf": ('execute("read"), 2,000 CRLF lines, memory',
                  lambda: execute_read_calls("memory", "\r\n"), READ_TARGET_US),
}
"""Each call: its label, how it is made, its target (µs, median)."""


def measure(make: Callable[[], Calls], calls: int, rounds: int) -> tuple[float, float]:
    """(toolfs µs, bare µs): medians of ``calls * rounds`` calls of each, interleaved."""
    tool, bare, clean = make()
    try:
        for _ in range(20):
            tool()
            bare()
        t, b = interleaved(calls, rounds, tool, bare)
    finally:
        clean()
    return median_us(t), median_us(b)


# One build's process for --base: reads "<call> <count>" per line, answers with that
# many toolfs timings (ns) of the call (made once, on its first burst).
_WORKER = r"""
import gc, json, os, sys
sys.path.insert(0, sys.argv[1])
import toolfs
if not os.path.realpath(toolfs.__file__).startswith(os.path.realpath(sys.argv[1])):
    raise SystemExit(f"toolfs came from {toolfs.__file__}, not from {sys.argv[1]}")
import bench_calls

made = {}
try:
    for line in sys.stdin:
        name, count = line.split()
        if name not in made:
            made[name] = bench_calls.CALLS[name][1]()
            for _ in range(20):
                made[name][0]()
        gc.disable()
        try:
            samples = bench_calls.timed(made[name][0], int(count))
        finally:
            gc.enable()
        print(json.dumps(samples), flush=True)
finally:
    for _, _, clean in made.values():
        clean()
"""


def compare_builds(base: Path, calls: int, rounds: int) -> None:
    """Each call's toolfs time in this checkout and in ``base`` (a ``src`` directory),
    in two processes that take turns in bursts of ``calls``, who goes first flipping
    each burst; the first burst of each call is a warm-up."""
    builds = [("this checkout", SRC), (f"base ({base})", base)]
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(src)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              cwd=HERE, env={**os.environ, "PYTHONPATH": str(HERE)})
             for _, src in builds]
    rows: list[list[object]] = []
    try:
        for name, (label, _, _) in CALLS.items():
            samples: list[list[int]] = [[] for _ in builds]
            for k in range(rounds + 1):
                for j in (0, 1) if k % 2 else (1, 0):
                    answer = ask_worker(procs[j], f"{name} {calls}", builds[j][0])
                    if k:
                        samples[j] += answer
            mine, theirs = (median_us(x) for x in samples)
            rows.append([label, len(samples[0]), fmt_us(mine), fmt_us(theirs),
                         ratio(mine, theirs)])
    finally:
        for proc in procs:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait()
    print(f"## Per-call cost: this checkout vs {base}")
    print()
    print(machine_facts())
    print()
    print(markdown_table(["call", "n per build", "this checkout µs (median)",
                          "base µs (median)", "this / base"], rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="a few calls (smoke test)")
    parser.add_argument("--base", type=Path, default=None,
                        help="the src directory of another build: compare its toolfs "
                             "times with this checkout's, in one run")
    args = parser.parse_args(argv)
    calls, rounds = (10, 2) if args.tiny else (500, 6)
    if args.base is not None:
        compare_builds(args.base.resolve(), calls, 2 * rounds)
        return 0

    rows: list[list[object]] = []
    held: list[str] = []
    for label, make, target in CALLS.values():
        us, bare_us = measure(make, calls, rounds)
        met = "yes" if us <= target else "no"
        rows.append([label, calls * rounds, fmt_us(us), fmt_us(bare_us),
                     ratio(us, bare_us), f"≤ {target:.0f} µs",
                     "yes" if met == "yes" else "**no**"])
        held.append(met)

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
