"""Helpers shared by the benchmark scripts (tables, timing, machine facts).

The scripts run as ``python benchmarks/bench_*.py``, so this directory is on
``sys.path`` and ``import _common`` works without making ``benchmarks`` a package.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Sequence
from typing import Any


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table; numbers right-aligned."""
    cells = [[str(c) for c in row] for row in rows]
    numeric = [
        all(_looks_numeric(r[i]) for r in cells) if cells else False
        for i in range(len(headers))
    ]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        padded = [v.rjust(w) if num else v.ljust(w)
                  for v, w, num in zip(values, widths, numeric, strict=True)]
        return "| " + " | ".join(padded) + " |"

    sep = "|" + "|".join(
        ("-" * (w + 1) + ":") if num else ("-" * (w + 2))
        for w, num in zip(widths, numeric, strict=True)) + "|"
    return "\n".join([line(list(headers)), sep, *(line(r) for r in cells)])


def _looks_numeric(text: str) -> bool:
    t = text.replace(",", "").replace("x", "").replace("%", "").strip()
    if t in ("", "-", "n/a"):
        return True
    try:
        float(t)
    except ValueError:
        return False
    return True


def median_us(samples_ns: Sequence[int]) -> float:
    """Median of nanosecond samples, in microseconds."""
    return statistics.median(samples_ns) / 1000.0


def fmt_us(us: float) -> str:
    return f"{us:,.0f}" if us >= 100 else f"{us:,.1f}"


def fmt_bytes(n: float) -> str:
    """Human bytes with binary units (KiB, MiB, GiB)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:,.2f} {unit}"
    return f"{n:,.0f} B"


def ratio(value: float, base: float) -> str:
    if base <= 0:
        return "n/a"
    return f"{value / base:.2f}x"


def machine_facts() -> str:
    """One line naming the machine, so a pasted table carries its context."""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for row in f:
                if row.startswith("model name"):
                    cpu = row.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    # The CPUs this process may use, as `nproc` counts them (not the host's total).
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    # Shared machines: the load when the run started says how busy the CPUs were.
    load = (f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg")
            else "")
    return (f"machine: {cpus} CPUs ({cpu}), Python {platform.python_version()} "
            f"({sys.implementation.name}), {platform.system()} {platform.release()}{load}")


def ask_worker(proc: subprocess.Popen[str], request: str, who: str) -> Any:
    """Send one request line to a benchmark's worker process (one build's, in the
    ``*_builds`` comparisons); its answer, one line of JSON."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(request + "\n")
    proc.stdin.flush()
    answer = proc.stdout.readline()
    if not answer:
        raise SystemExit(f"the {who} worker stopped")
    return json.loads(answer)
