"""The benchmark scripts run: each ``--tiny`` run exits 0 and prints a Markdown table.

No timings are asserted; the numbers of a ``--tiny`` run are noise. bench_requests.py (S3,
GCS and Azure) and bench_throughput.py (S3) start their own emulators (moto,
fake-gcs-server, which the ``test`` extra installs, and Azurite, which npm installs on
first use).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
# A header row followed by a separator row such as |---|--:|.
TABLE = re.compile(r"^\|.*\|[ \t]*\n\|(?:[ \t]*:?-+:?[ \t]*\|)+[ \t]*$", re.MULTILINE)
EXIT_SKIP = 77  # bench_mcp.py: the reference server cannot be installed or started


def run(script: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCHMARKS / script), "--tiny", *args],
                          capture_output=True, text=True, timeout=timeout, check=False)


def assert_table(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert TABLE.search(done.stdout), f"no Markdown table in:\n{done.stdout}"


def test_bench_latency() -> None:
    done = run("bench_latency.py")
    assert_table(done)
    assert "| local" in done.stdout and "| memory" in done.stdout


def test_bench_latency_rounds() -> None:
    done = run("bench_latency.py", "--rounds", "2", "--backends", "local", "--sizes", "1 KB")
    assert_table(done)
    assert "### 2 rounds: toolfs / careful" in done.stdout, done.stdout
    # One row per local write and edit, with both rounds' ratios.
    rows = [line for line in done.stdout.splitlines()
            if re.match(r"\| 1 KB +\| (write|edit) +\|.* / .*\| \d of 2 +\|$", line)]
    assert len(rows) == 2, done.stdout
    assert "(median of rounds)" in done.stdout


def test_bench_latency_builds() -> None:
    # Without --base the build is compared with itself.
    for op in ("edit", "write"):
        done = run("bench_latency_builds.py", "--op", op)
        assert_table(done)
        assert "| this checkout" in done.stdout and "| base (" in done.stdout, done.stdout
        assert re.search(r"over the base's: \d+\.\d{3}x$", done.stdout.strip()), done.stdout


def _s3_ready() -> bool:
    modules = ("s3fs", "moto", "toolfs.testing.emulators", "toolfs.backends.s3")
    try:
        return all(importlib.util.find_spec(m) is not None for m in modules)
    except ModuleNotFoundError:
        return False


def test_bench_window() -> None:
    done = run("bench_window.py")
    assert_table(done)
    assert "| local" in done.stdout
    if _s3_ready():  # the S3 variant runs only where the emulator and adapter exist
        assert "| s3 (moto)" in done.stdout, done.stdout


def test_bench_mcp() -> None:
    # The first run may install the reference server with npm.
    done = run("bench_mcp.py", "--rounds", "2", timeout=400)
    if done.returncode == EXIT_SKIP:
        reason = (done.stdout.strip() or done.stderr.strip())[-500:]
        print(reason)
        pytest.skip(reason)
    assert_table(done)
    assert "edit correctness case" in done.stdout
    assert "Where the time goes" in done.stdout, done.stdout
    assert "2 rounds, each with freshly started servers" in done.stdout, done.stdout


def test_bench_mcp_builds() -> None:
    # Without --base the build is compared with itself, both clients.
    done = run("bench_mcp_builds.py", timeout=200)
    assert_table(done)
    for row in ("| read (SDK client)", "| edit (bare client)"):
        assert row in done.stdout, done.stdout


def test_bench_requests() -> None:
    done = run("bench_requests.py")
    assert_table(done)
    for backend in ("| S3 (moto)", "| GCS (fake-gcs-server)", "| Azure (Azurite)"):
        assert f"{backend} | edit after read |" in done.stdout, done.stdout


def test_bench_throughput() -> None:
    done = run("bench_throughput.py")
    assert_table(done)
    assert "| 16 distinct files" in done.stdout and "| 1 shared file" in done.stdout
    # The script exits 1 (and prints FAILED:) if toolfs ever loses an update.
    assert "Verified: every successful toolfs edit" in done.stdout, done.stdout
    assert "no lost updates" in done.stdout, done.stdout


def test_bench_discovery() -> None:
    done = run("bench_discovery.py", timeout=300)
    assert_table(done)
    assert "| S3 (moto), 60 objects" in done.stdout and "grep files_with_matches" in done.stdout
    assert "| S3 (SeaweedFS), 60 objects" in done.stdout


def test_bench_calls() -> None:
    done = run("bench_calls.py")
    assert_table(done)
    assert "memory edit chain, 50 KB" in done.stdout and "2,000 lines, local" in done.stdout


def test_bench_calls_builds() -> None:
    # --base with this checkout's own src: the build is compared with itself.
    done = run("bench_calls.py", "--base", str(BENCHMARKS.parent / "src"))
    assert_table(done)
    for label in ("memory edit chain, 50 KB", '2,000 lines, memory', '2,000 lines, local'):
        assert re.search(rf"\| [^|]*{re.escape(label)} *\| +40 \|.*\| +\d+\.\d\dx \|$",
                         done.stdout, re.M), done.stdout


def test_bench_fused_edit() -> None:
    # The script exits non-zero if the fused edit answers differently from ws.edit, or
    # if the four edits leave different bytes.
    done = run("bench_fused_edit.py")
    assert_table(done)
    for row in ("| fused (one function)", "| by hand, every check of the local store"):
        assert row in done.stdout, done.stdout
    for share in ("the checks the issue's steps leave out", "toolfs's features",
                  "the layers' share"):
        assert re.search(rf"{share}[^:]*: -?\d+\.\d{{3}}x", done.stdout), done.stdout


def test_bench_search() -> None:
    done = run("bench_search.py", timeout=300)
    assert_table(done)
    assert "| S3 (moto) |" in done.stdout and "| glob" in done.stdout
