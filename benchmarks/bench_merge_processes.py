"""Agents in separate processes racing on one file: the share of edits that land on the
first call.

N processes (default 8; agents on different machines, which no lock of one process can
order) each edit their **own** line of one file M times (default 10), with a random
5-25 ms pause between edits, on one backend at a time, all starting together. Two modes:

* ``merge``: ``Policy(on_stale="merge")``: a refused commit is merged onto the current
  version and committed again until the call's deadline (the target: >= 95% of the edits
  land on their first call, none lost);
* ``refuse``: the default policy: a refusal carries the diff since the agent's read, and
  the agent sends the same edit again without a read. Every refusal is checked for the
  whole diff (``diff_complete`` and ``counts_as_read``); one without it is counted.

Every run ends with the file holding every agent's last value (checked: none lost).

    python benchmarks/bench_merge_processes.py [--processes 8] [--edits 10]
        [--backends local,s3,gcs,azure]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import pickle
import random
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

import fsspec

import _common
import toolfs
from toolfs.testing.azurite import AzuriteEmulator
from toolfs.testing.emulators import GCSEmulator, S3Emulator

PAUSE = (0.005, 0.025)
MODES: tuple[Literal["merge", "refuse"], ...] = ("merge", "refuse")
NAMES = {"local": "local disk", "s3": "S3 (moto)", "gcs": "GCS (fake-gcs-server)",
         "azure": "Azure (Azurite)"}


def _agent(made: bytes, k: int, edits: int, gate: Any, out: str) -> None:
    """One process: ``edits`` edits of line ``k`` in each mode (see the docstring)."""
    cls, options, root = pickle.loads(made)
    fs = cls(skip_instance_cache=True, **options)
    rng = random.Random(k)
    report = {}
    for mode in MODES:
        ws = toolfs.Workspace(fs, root=root, policy=toolfs.Policy(on_stale=mode))
        path = f"{mode}.txt"
        ws.read(path)
        gate.wait(300)
        first = calls = partial = 0
        for i in range(edits):
            time.sleep(rng.uniform(*PAUSE))
            for attempt in range(1000):
                calls += 1
                done = ws.execute("edit", {"file_path": path, "old_string": f"agent{k}={i}\n",
                                           "new_string": f"agent{k}={i + 1}\n"})
                if not done.is_error:
                    first += attempt == 0
                    break
                err = done.error
                assert err is not None and err.code == "stale", done.text
                if not (err.details.get("diff_complete") is True
                        and err.details.get("counts_as_read") is True):
                    partial += 1
                    ws.read(path)
        report[mode] = {"first": first, "calls": calls, "partial": partial}
    Path(out).write_text(json.dumps(report))


def race(fs: Any, root: str, processes: int, edits: int, tmp: str) -> dict[str, dict[str, int]]:
    """One backend's race in both modes; the totals per mode, and whether any was lost."""
    ws = toolfs.Workspace(fs, root=root)
    start = "".join(f"agent{k}=0\n" for k in range(processes))
    for mode in MODES:
        ws.write(f"{mode}.txt", start)
    # The filesystem's class and options (an s3fs session of this process stays here).
    options = {k: v for k, v in fs.storage_options.items() if k != "session"}
    made = pickle.dumps((type(fs), options, root))
    ctx = multiprocessing.get_context("spawn")
    gate = ctx.Barrier(processes)
    outs = [str(Path(tmp) / f"{time.monotonic_ns()}-{k}.json") for k in range(processes)]
    workers = [ctx.Process(target=_agent, args=(made, k, edits, gate, outs[k]))
               for k in range(processes)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(1200)
        assert p.exitcode == 0, f"an agent failed ({p.exitcode})"
    reports = [json.loads(Path(o).read_text()) for o in outs]
    totals: dict[str, dict[str, int]] = {}
    for mode in MODES:
        final = ws.fs.cat_file(f"{mode}.txt").decode().splitlines()
        want = [f"agent{k}={edits}" for k in range(processes)]
        lost = sum(1 for got, exp in zip(final, want, strict=True) if got != exp)
        totals[mode] = {key: sum(r[mode][key] for r in reports)
                        for key in ("first", "calls", "partial")}
        totals[mode]["lost"] = lost
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--edits", type=int, default=10)
    parser.add_argument("--backends", default="local,s3,gcs,azure")
    parser.add_argument("--tiny", action="store_true", help="a quick run (tests)")
    args = parser.parse_args()
    processes, edits = (3, 3) if args.tiny else (args.processes, args.edits)
    backends = ["local", "s3"] if args.tiny else args.backends.split(",")
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory(prefix="bench-merge-") as tmp, \
            contextlib.ExitStack() as stack:
        for backend in backends:
            fs: Any = fsspec.filesystem("file")
            root = tempfile.mkdtemp(dir=tmp)
            if backend != "local":
                emu_cls = {"s3": S3Emulator, "gcs": GCSEmulator, "azure": AzuriteEmulator}[backend]
                emu: Any = stack.enter_context(emu_cls())
                emu.create_bucket("bench-merge")
                fs = (emu.s3fs_filesystem() if backend == "s3" else emu.gcsfs_filesystem()
                      if backend == "gcs" else emu.adlfs_filesystem())
                root = "bench-merge/race"
            totals = race(fs, root, processes, edits, tmp)
            landed = processes * edits
            for mode in MODES:
                t = totals[mode]
                rows.append([NAMES.get(backend, backend), mode,
                             f"{t['first']} of {landed} ({100 * t['first'] / landed:.0f}%)",
                             f"{t['calls'] / landed:.2f}", t["partial"], t["lost"]])
    print(f"{processes} processes x {edits} edits, each on its own line of one file, "
          f"{PAUSE[0] * 1000:g}-{PAUSE[1] * 1000:g} ms apart; {_common.machine_facts()}\n")
    print(_common.markdown_table(
        ["backend", "on stale", "landed on the first call", "calls per edit",
         "refusals without the whole diff", "lost"], rows))


if __name__ == "__main__":
    main()
