"""Two builds of toolfs, side by side: local writes and edits against the careful baseline.

``bench_latency.py``'s verdict (toolfs / careful) moves by several percent with the
machine's state, more than one change to the write path is worth. This script measures
a change against the commit before it, in one run: each build runs in its own process
with its own workspace, a local directory, beside a careful by-hand copy of the same op
(``bench_latency.Careful``, toolfs's guarantees written by hand); every toolfs call is
followed by the careful one. The builds take turns in bursts (who goes first flips each
burst), so load from other processes hits both alike. The first burst is a warm-up.

The table gives, per build, the median toolfs and careful times and their ratio, and the
ratio of this checkout's toolfs / careful to the other build's. A third column splits
toolfs's time: the local store alone (``LocalStore.put`` of the same new bytes on the
same condition, on a file of its own, what a write or edit costs below the policy and
the tool), against the same careful calls.

The toolfs file and the store's file share a directory, as files an agent edits side
by side do; ``--siblings N`` puts N more files there (never written).

Usage: ``python benchmarks/bench_latency_builds.py --base OTHER/src [--op edit|write]
[--size BYTES] [--siblings N] [--bursts N] [--tiny]``, where ``OTHER`` is, say, ``git worktree add
/tmp/base HEAD~1``. Without ``--base`` the build is compared with itself (a check of the
method: ~1.00x).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import ask_worker, machine_facts, markdown_table

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"

# One build's process: reads a burst length per line, answers with that many triples of
# (toolfs ns, careful ns, store-alone ns).
_WORKER = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import toolfs
if not os.path.realpath(toolfs.__file__).startswith(os.path.realpath(sys.argv[1])):
    raise SystemExit(f"toolfs came from {toolfs.__file__}, not from {sys.argv[1]}")
from bench_latency import MARK_A, MARK_B, Careful, Toggle, make_text

op, size, base, siblings = sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
text_a = make_text(size, MARK_A)
text_b = text_a.replace(MARK_A, MARK_B)
for d in ("tfs", "careful"):
    os.makedirs(os.path.join(base, d))
for n in range(siblings):  # other files in the directory, never written here
    with open(os.path.join(base, "tfs", f"sibling{n}.txt"), "w") as f:
        f.write("x\n")
ws = toolfs.Workspace(os.path.join(base, "tfs"))
ws.write("f.txt", text_a)
ws.read("f.txt")
from toolfs.backends.base import Update
from toolfs.versions import FileVersion
store = ws.fs.store
store_key = os.path.join(os.path.realpath(base), "tfs", "s.txt")
ws.write("s.txt", text_a)
current = text_a.encode()
version = FileVersion.of_bytes(current)
s_tog = Toggle()
path = os.path.join(base, "careful", "f.txt")
with open(path, "w", encoding="utf-8") as f:
    f.write(text_a)
careful = Careful(path)
careful.read()
t_tog, c_tog = Toggle(), Toggle()
contents = [text_b, text_a]
i = 0
clock = time.perf_counter_ns
for line in sys.stdin:
    pairs = []
    for _ in range(int(line)):
        if op == "edit":
            t0 = clock(); ws.edit("f.txt", *t_tog.next())
            t1 = clock(); careful.edit(*c_tog.next())
            t2 = clock()
            data = current.decode("utf-8").replace(*s_tog.next(), 1).encode("utf-8")
        else:
            t0 = clock(); ws.write("f.txt", contents[i % 2])
            t1 = clock(); careful.write(contents[i % 2])
            t2 = clock()
            data = contents[i % 2].encode("utf-8")
        version = store.put(store_key, data, Update(version, known=current))
        t3 = clock()
        current = data
        i += 1
        pairs.append((t1 - t0, t2 - t1, t3 - t2))
    print(json.dumps(pairs), flush=True)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, default=SRC,
                        help="the src directory of the build to compare with "
                             "(default: this checkout's own)")
    parser.add_argument("--op", choices=("edit", "write"), default="edit")
    parser.add_argument("--size", type=int, default=1024, help="file size in bytes")
    parser.add_argument("--siblings", type=int, default=0,
                        help="other files in the toolfs directory (never written)")
    parser.add_argument("--bursts", type=int, default=40,
                        help="bursts of 100 calls per build, the first a warm-up")
    parser.add_argument("--tiny", action="store_true", help="3 bursts of 5 (smoke test)")
    args = parser.parse_args()
    bursts, burst = (3, 5) if args.tiny else (max(2, args.bursts), 100)
    builds = [("this checkout", SRC), (f"base ({args.base})", args.base)]
    samples: list[list[tuple[int, int, int]]] = [[] for _ in builds]
    with tempfile.TemporaryDirectory(prefix="toolfs-builds-") as tmp:
        procs = []
        for n, (_, src) in enumerate(builds):
            base = os.path.join(tmp, str(n))
            os.makedirs(base)
            procs.append(subprocess.Popen(
                [sys.executable, "-c", _WORKER, str(src), args.op, str(args.size), base,
                 str(args.siblings)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=HERE,
                env={**os.environ, "PYTHONPATH": str(HERE)}))
        try:
            for k in range(bursts):
                order = range(len(procs)) if k % 2 else reversed(range(len(procs)))
                for j in order:
                    answer = ask_worker(procs[j], str(burst), builds[j][0])
                    if k:
                        samples[j].extend(answer)
        finally:
            for proc in procs:
                if proc.stdin is not None:
                    proc.stdin.close()
                proc.wait()

    beside = f", {args.siblings:,} other files beside it" if args.siblings else ""
    print(f"## local {args.op} of {args.size:,} bytes{beside}: this checkout vs "
          f"{args.base}\n")
    print(f"{machine_facts()}\n")
    rows, ratios = [], []
    for (name, _), triples in zip(builds, samples, strict=True):
        t, c, st = (statistics.median(x[k] for x in triples) / 1e3 for k in range(3))
        ratios.append(t / c)
        rows.append([name, len(triples), f"{t:,.1f}", f"{c:,.1f}", f"{t / c:.3f}x",
                     f"{st:,.1f}", f"{st / c:.3f}x"])
    print(markdown_table(["build", "n", "toolfs µs (median)", "careful µs (median)",
                          "toolfs / careful", "store alone µs (median)",
                          "store alone / careful"], rows))
    print(f"\nthis checkout's toolfs / careful over the base's: {ratios[0] / ratios[1]:.3f}x")


if __name__ == "__main__":
    main()
