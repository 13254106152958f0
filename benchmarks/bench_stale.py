"""Agents racing on one shared file: tool calls per landed edit, and wall time.

N agents (threads, one context each) make M edits each to their **own** line of one file,
as fast as they can: no edit overlaps another, so every one should land. Three ways of
handling a ``stale`` refusal:

* ``refuse + read``: the way before refusals showed their diff: each refusal costs a
  ``read`` and the edit again (the baseline);
* ``refuse + diff``: the refusal shows what changed and counts as a read, so the agent
  just sends its edit again;
* ``merge``: ``Policy(on_stale="merge")``: the edit lands on the current version unless
  it overlaps the other change.

Printed per backend: calls per landed edit, edits refused, share of edits that landed on
their first call, wall time, and each mode's wall time as a ratio to the baseline of the
same run. Every run ends with the file holding every agent's last value (checked).

    python benchmarks/bench_stale.py [--agents 8] [--edits 50] [--backends memory,local,s3]
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import _common
import toolfs
from toolfs.testing.emulators import S3Emulator

MODES = ("refuse + read", "refuse + diff", "merge")


@dataclass
class Tally:
    calls: int = 0
    refused: int = 0
    first: int = 0


def _agent(ws: toolfs.Workspace, k: int, edits: int, read_after_refusal: bool,
           tally: Tally, lock: threading.Lock) -> None:
    calls = refused = first = 0
    for i in range(edits):
        attempt = 0
        while True:
            out = ws.execute("edit", {"file_path": "shared.txt", "old_string": f"agent{k}={i}\n",
                                      "new_string": f"agent{k}={i + 1}\n"})
            calls += 1
            if not out.is_error:
                first += attempt == 0
                break
            assert out.error is not None and out.error.code == "stale", out.text
            refused += 1
            attempt += 1
            if read_after_refusal:
                ws.execute("read", {"file_path": "shared.txt"})
                calls += 1
    with lock:
        tally.calls += calls
        tally.refused += refused
        tally.first += first


def race(make: Callable[[toolfs.Policy], toolfs.Workspace], mode: str, agents: int,
         edits: int) -> tuple[Tally, float]:
    policy = toolfs.Policy(on_stale="merge" if mode == "merge" else "refuse")
    setup = make(policy)
    setup.write("shared.txt", "".join(f"agent{k}=0\n" for k in range(agents)))
    contexts = [setup.new_context() for _ in range(agents)]
    for ws in contexts:
        ws.read("shared.txt")
    tally, lock = Tally(), threading.Lock()
    threads = [threading.Thread(target=_agent, args=(ws, k, edits, mode == "refuse + read",
                                                     tally, lock))
               for k, ws in enumerate(contexts)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    final = "".join(setup.read("shared.txt", limit=agents).lines)
    assert final == "".join(f"agent{k}={edits}" for k in range(agents)), "an edit was lost"
    return tally, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--edits", type=int, default=50)
    parser.add_argument("--backends", default="memory,local")
    parser.add_argument("--tiny", action="store_true", help="a quick run (tests)")
    args = parser.parse_args()
    agents, edits = (3, 4) if args.tiny else (args.agents, args.edits)
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory(prefix="bench-stale-") as tmp, \
            contextlib.ExitStack() as stack:
        for backend in args.backends.split(","):
            s3: Any = None
            if backend == "s3":  # a moto server over HTTP, through s3fs
                emu = stack.enter_context(S3Emulator())
                emu.create_bucket("bench-stale")
                s3 = emu.s3fs_filesystem()

            def make(policy: toolfs.Policy, backend: str = backend,
                     s3: Any = s3) -> toolfs.Workspace:
                if backend == "s3":
                    return toolfs.Workspace(s3, root=f"bench-stale/{time.monotonic_ns()}",
                                            policy=policy)
                url = f"memory://bench-stale-{time.monotonic_ns()}" if backend == "memory" \
                    else tempfile.mkdtemp(dir=tmp)
                return toolfs.Workspace(url, policy=policy)

            base = 0.0
            for mode in MODES:
                tally, elapsed = race(make, mode, agents, edits)
                base = base or elapsed
                landed = agents * edits
                rows.append([backend, mode, f"{tally.calls / landed:.2f}", tally.refused,
                             f"{100 * tally.first / landed:.0f}%", f"{elapsed:.2f}",
                             _common.ratio(elapsed, base)])
    print(f"{agents} agents x {edits} edits, each agent on its own line of one file; "
          f"{_common.machine_facts()}\n")
    print(_common.markdown_table(
        ["backend", "on stale", "calls per landed edit", "refused", "landed first call",
         "wall s", "wall vs refuse + read"], rows))


if __name__ == "__main__":
    main()
