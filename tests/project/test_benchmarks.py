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

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
# A header row followed by a separator row such as |---|--:|.
TABLE = re.compile(r"^\|.*\|[ \t]*\n\|(?:[ \t]*:?-+:?[ \t]*\|)+[ \t]*$", re.MULTILINE)


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


def test_bench_media() -> None:
    done = run("bench_media.py", timeout=300)
    assert_table(done)
    assert "toolfs ws.read" in done.stdout and "pypdf text" in done.stdout


def test_bench_window() -> None:
    done = run("bench_window.py")
    assert_table(done)
    assert "| local" in done.stdout
    if _s3_ready():  # the S3 variant runs only where the emulator and adapter exist
        assert "| s3 (moto)" in done.stdout, done.stdout


def test_bench_mcp() -> None:
    # The first run may install the reference server with npm; without node it is left
    # out with a note, and toolfs is measured alone.
    done = run("bench_mcp.py", timeout=400)
    assert_table(done)
    for call, server in (("read ~12 KB file", "toolfs (local)"),
                         ("edit one line", "toolfs (memory://)")):
        assert re.search(rf"^\| {re.escape(call)} +\| {re.escape(server)} +\|", done.stdout,
                         re.M), done.stdout
    assert "toolfs's slowest median:" in done.stdout, done.stdout


def test_bench_requests() -> None:
    done = run("bench_requests.py")
    assert_table(done)
    for backend in ("| S3 (moto)", "| GCS (fake-gcs-server)", "| Azure (Azurite)"):
        assert f"{backend} | edit after read |" in done.stdout, done.stdout


def test_bench_refused_writes() -> None:
    done = run("bench_refused_writes.py")
    assert_table(done)
    assert "| id() (an audited builtin) " in done.stdout, done.stdout


def test_bench_dataframes() -> None:
    done = run("bench_dataframes.py")
    assert_table(done)
    assert "| read_csv " in done.stdout and "| to_parquet (after a read) " in done.stdout


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


def test_bench_stale() -> None:
    done = run("bench_stale.py", "--backends", "memory,local")
    assert_table(done)
    assert "| merge" in done.stdout and "| refuse + read" in done.stdout


def test_chart_is_drawn_from_the_page() -> None:
    # docs/benchmarks.svg is what benchmarks/chart.py draws from docs/benchmarks.md now.
    done = subprocess.run([sys.executable, str(BENCHMARKS / "chart.py"), "--check"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def test_bench_notebook() -> None:
    done = run("bench_notebook.py")
    assert_table(done)
    assert "| notebook_edit insert + delete" in done.stdout


def test_bench_search() -> None:
    done = run("bench_search.py", timeout=300)
    assert_table(done)
    assert "| S3 (moto) |" in done.stdout and "| glob" in done.stdout


def test_bench_big_prefix() -> None:
    done = run("bench_big_prefix.py", timeout=300)  # --tiny: 300 objects on moto
    assert_table(done)
    assert "| streamed" in done.stdout and "whole listing first" in done.stdout, done.stdout


def test_bench_server() -> None:
    # `toolfs serve` behind haproxy on moto, --tiny: one replica with the static token,
    # three with the ledger and JWTs (the processes take most of the time to start).
    done = run("bench_server.py", timeout=600)
    assert_table(done)
    assert re.search(r"\| +1 \| in-process +\| static token ", done.stdout), done.stdout
    assert re.search(r"\| +3 \| --ledger +\| JWT ", done.stdout), done.stdout
    assert re.search(r"\| --ledger +\| read +\| +\d+ \| +1 \| PUT +\|", done.stdout), \
        done.stdout
    assert re.search(r"\| --ledger +\| edit +\| +\d+ \| +2 \| GET PUT \|", done.stdout), \
        done.stdout
    # Sticky routing: one request each.
    assert re.search(r"\| --ledger --sticky \| edit +\| +\d+ \| +1 \| PUT +\|",
                     done.stdout), done.stdout


def test_bench_auth() -> None:
    done = run("bench_auth.py", timeout=180)
    assert_table(done)
    assert "| JWT seen before (cache hit)" in done.stdout and "| OAuth JWT" in done.stdout


def test_bench_merge_processes() -> None:
    done = run("bench_merge_processes.py", timeout=300)  # --tiny: local and S3 (moto)
    assert_table(done)
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in done.stdout.splitlines()
            if line.startswith(("| local disk", "| S3 (moto)"))]
    assert len(rows) == 4, done.stdout
    # None lost; no refusal without the whole diff.
    assert all(row[-1] == "0" and row[-2] == "0" for row in rows), done.stdout
def test_bench_undo() -> None:
    done = run("bench_undo.py", timeout=300)
    assert_table(done)
    assert "| S3 versioned" in done.stdout and ": True |" in done.stdout, done.stdout
