"""Edit matching and long-line streamed reads: toolfs against a C-level floor, same run.

Each row times one toolfs call and a baseline doing the least work possible on the same
input, measured in the same run, and prints the ratio (toolfs / baseline). The inputs are
the pathological ones of the hardening issue: a file of one-letter lines (every line a
match), one long line (every character a match), a whitespace-heavy text for the
``no_match`` hint, and a single line far longer than the whole-file cap, read streamed.
A linear implementation keeps the ratios roughly constant as ``--size-kb`` grows; the old
per-match line counting and per-offset regex made them grow with the input.

Usage: ``python benchmarks/bench_text.py [--tiny] [--size-kb N] [--line-mib N]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
import tracemalloc
from collections.abc import Callable

import _common
import toolfs
from toolfs.errors import FsError
from toolfs.formats.text import apply_edit


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """Fastest of ``repeat`` runs, in seconds (errors count as results)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        with contextlib.suppress(FsError):
            fn()
        best = min(best, time.perf_counter() - start)
    return best


def edit_rows(size: int, repeat: int) -> list[list[object]]:
    lines = "a\n" * (size // 2)
    one = "a" * size
    spaced = "x " * (size // 2)
    old_tokens = "x " * 2_000 + "y"
    cases: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        ("ambiguous_match, one-letter lines",
         lambda: apply_edit(lines, "a", "b", replace_all=False), lambda: lines.count("a")),
        ("replace_all, one-letter lines",
         lambda: apply_edit(lines, "a", "b", replace_all=True),
         lambda: lines.replace("a", "b")),
        ("ambiguous_match, one long line",
         lambda: apply_edit(one, "a", "b", replace_all=False), lambda: one.count("a")),
        ("replace_all, one long line",
         lambda: apply_edit(one, "a", "b", replace_all=True), lambda: one.replace("a", "b")),
        ("no_match hint, 2,000-token old_string",
         lambda: apply_edit(spaced, old_tokens, "z", replace_all=False),
         lambda: spaced.find(old_tokens)),
    ]
    rows: list[list[object]] = []
    for name, tool, floor in cases:
        t, b = best_of(tool, repeat), best_of(floor, repeat)
        rows.append([name, _common.fmt_bytes(size), f"{t * 1e3:,.2f}", f"{b * 1e3:,.2f}",
                     f"{t / b:,.1f}x" if b > 0 else "n/a", "-"])
    return rows


def read_row(line_bytes: int, repeat: int) -> list[object]:
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, "one.txt")
        with open(path, "wb") as fh:
            for _ in range(line_bytes // (1 << 20)):
                fh.write(b"x" * (1 << 20))
            fh.write(b"x" * (line_bytes % (1 << 20)) + b"\nsecond\n")
        # Under the cap, the file would be read whole: force the streamed path.
        ws = toolfs.Workspace(root, size_cap=min(line_bytes // 2, 10 << 20))

        def tool() -> object:
            return ws.read("one.txt", limit=1)

        def floor() -> object:
            with open(path, "rb") as fh:
                while block := fh.read(256 * 1024):
                    block.count(b"\n")
            return None

        t, b = best_of(tool, repeat), best_of(floor, repeat)
        tracemalloc.start()
        tool()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return ["streamed read, limit=1, one long line", _common.fmt_bytes(line_bytes),
            f"{t * 1e3:,.2f}", f"{b * 1e3:,.2f}", f"{t / b:,.1f}x",
            _common.fmt_bytes(peak)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="small inputs (a smoke run)")
    parser.add_argument("--size-kb", type=int, default=800, help="edit input size")
    parser.add_argument("--line-mib", type=int, default=100, help="streamed line size")
    args = parser.parse_args()
    size = 40_000 if args.tiny else args.size_kb * 1000
    line = (4 << 20) if args.tiny else args.line_mib << 20
    repeat = 1 if args.tiny else 3
    rows = [*edit_rows(size, repeat), read_row(line, repeat)]
    print(_common.markdown_table(
        ["case", "input", "toolfs ms", "baseline ms", "ratio", "toolfs peak"], rows))
    print("\nBaselines: str.count/str.replace/str.find on the same text; for the read, "
          "a plain block-by-block scan of the file counting newlines.")


if __name__ == "__main__":
    main()
