"""Requests of a pandas read and write through ``toolfs::s3://`` vs through s3fs alone.

Counted at the moto S3 emulator's server, per call, averaged over rounds; s3fs's listing
cache is emptied before each call, so every call starts as a fresh notebook cell would
after another writer's change. The toolfs write is the person's write after a read (the
case the guard lets through); the s3fs write is a plain ``to_csv``/``to_parquet``.

    python benchmarks/bench_dataframes.py [--tiny] [--rows N]
"""

from __future__ import annotations

import argparse
import io
from collections.abc import Callable
from typing import Any

import fsspec
import pandas as pd

from _common import markdown_table
from toolfs.policy import PolicyFileSystem
from toolfs.testing.emulators import S3Emulator

BUCKET = "toolfs-bench"


def count(emu: S3Emulator, call: Callable[[], object]) -> tuple[int, list[str]]:
    """Requests ``call`` makes at the server (the emulator's own log endpoints left out),
    with s3fs's listing cache emptied first."""
    fsspec.filesystem("s3", **emu.s3fs_storage_options()).invalidate_cache()
    emu.clear_requests()
    call()
    seen = [f"{r.method} {r.path}" + (f"?{r.query}" if r.query else "")
            for r in emu.requests() if not r.path.startswith("/_toolfs")]
    return len(seen), seen


def measure(emu: S3Emulator, rows: int, rounds: int) -> list[list[Any]]:
    s3 = emu.s3fs_storage_options()
    frame = pd.DataFrame({"region": [f"r{i % 7}" for i in range(rows)],
                          "amount": list(range(rows))})
    csv = frame.to_csv(index=False).encode()
    parquet = io.BytesIO()
    frame.to_parquet(parquet, index=False)
    raw = emu.s3fs_filesystem()
    raw.pipe(f"{BUCKET}/s3fs/sales.csv", csv)
    raw.pipe(f"{BUCKET}/s3fs/sales.parquet", parquet.getvalue())
    raw.pipe(f"{BUCKET}/toolfs/sales.csv", csv)
    raw.pipe(f"{BUCKET}/toolfs/sales.parquet", parquet.getvalue())
    person = {"s3": s3, "toolfs": {"context_id": "bench-person"}}
    cases: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        ("read_csv",
         lambda: pd.read_csv(f"toolfs::s3://{BUCKET}/toolfs/sales.csv",
                             storage_options=person),
         lambda: pd.read_csv(f"s3://{BUCKET}/s3fs/sales.csv", storage_options=s3)),
        ("read_parquet",
         lambda: pd.read_parquet(f"toolfs::s3://{BUCKET}/toolfs/sales.parquet",
                                 storage_options=person),
         lambda: pd.read_parquet(f"s3://{BUCKET}/s3fs/sales.parquet", storage_options=s3)),
        ("to_csv (after a read)",
         lambda: frame.to_csv(f"toolfs::s3://{BUCKET}/toolfs/sales.csv",
                              storage_options=person, index=False),
         lambda: frame.to_csv(f"s3://{BUCKET}/s3fs/sales.csv", storage_options=s3,
                              index=False)),
        ("to_parquet (after a read)",
         lambda: frame.to_parquet(f"toolfs::s3://{BUCKET}/toolfs/sales.parquet",
                                  storage_options=person, index=False),
         lambda: frame.to_parquet(f"s3://{BUCKET}/s3fs/sales.parquet", storage_options=s3,
                                  index=False)),
    ]
    totals = {name: [0, 0] for name, _, _ in cases}
    shown: dict[str, tuple[list[str], list[str]]] = {}
    for _ in range(rounds):
        for name, through_toolfs, through_s3fs in cases:
            n_toolfs, seen_toolfs = count(emu, through_toolfs)
            n_s3fs, seen_s3fs = count(emu, through_s3fs)
            totals[name][0] += n_toolfs
            totals[name][1] += n_s3fs
            shown.setdefault(name, (seen_toolfs, seen_s3fs))
    out: list[list[Any]] = []
    for name, (t, s) in totals.items():
        out.append([name, f"{t / rounds:g}", f"{s / rounds:g}", f"{t / s:.2f}x",
                    ", ".join(shown[name][0]), ", ".join(shown[name][1])])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tiny", action="store_true", help="one round, 100 rows")
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rows, rounds = (100, 1) if args.tiny else (args.rows, args.rounds)
    with S3Emulator() as emu:
        emu.create_bucket(BUCKET)
        try:
            table = measure(emu, rows, rounds)
        finally:
            PolicyFileSystem.clear_instance_cache()
    print(f"pandas through toolfs::s3:// vs s3fs alone, {rows} rows, {rounds} round(s)\n")
    print(markdown_table(["call", "toolfs requests", "s3fs requests", "ratio",
                          "toolfs sends", "s3fs sends"], table))


if __name__ == "__main__":
    main()
