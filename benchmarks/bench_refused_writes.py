"""What the kept-path audit hook costs a process after its first refused write.

The first write refused through a file handle or ``pipe_file``
(:mod:`toolfs.policy.refused_writes`) installs a Python audit hook for the rest of the
process. Every audited event then calls it; it returns at once for events other than
the five it watches, and for those when no exception is being handled. Each workload
runs in a fresh interpreter, without and with the hook installed (by one refused
``pipe_file``), best of ``--rounds``; the ratio is with / without.

    python benchmarks/bench_refused_writes.py [--tiny] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap

from _common import markdown_table

WORKLOADS = {
    # name: (setup, timed statement); `n` is the repeat count
    "id() (an audited builtin)": ("", "for _ in range(n): id(n)"),
    "open + read a file": ("p = tmp + '/f.txt'; open(p, 'w').write('x' * 100)",
                           "for _ in range(n // 20):\n    with open(p) as f: f.read()"),
    "copy.deepcopy (id per object)": (
        "import copy; data = [{'a': [i, 2, {'b': 3}]} for i in range(100)]",
        "for _ in range(n // 2000): copy.deepcopy(data)"),
    "pandas read_csv + to_csv (local)": (
        "import pandas as pd; p = tmp + '/t.csv'; pd.DataFrame({'a': range(100)})"
        ".to_csv(p, index=False)",
        "for _ in range(n // 4000):\n    pd.read_csv(p).to_csv(p, index=False)"),
}

CHILD = """
import json, sys, tempfile, time, uuid
n, hooked, rounds = {n}, {hooked}, {rounds}
tmp = tempfile.mkdtemp()
if hooked:
    import fsspec
    from toolfs.errors import NotObserved
    open(tmp + "/kept.csv", "w").write("a\\n")
    fs = fsspec.filesystem("toolfs", target_protocol="file",
                           context_id=uuid.uuid4().hex)
    try:
        fs.pipe_file(tmp + "/kept.csv", b"b\\n")  # never read: refused, hook installed
    except NotObserved:
        pass
{setup}
best = float("inf")
for _ in range(rounds):
    t = time.perf_counter()
{stmt}
    best = min(best, time.perf_counter() - t)
print(json.dumps(best))
"""


def run(setup: str, stmt: str, n: int, hooked: bool, rounds: int) -> float:
    code = CHILD.format(n=n, hooked=hooked, rounds=rounds, setup=setup,
                        stmt=textwrap.indent(stmt, "    "))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=600)
    return float(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="few repeats, one round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=400_000)
    args = parser.parse_args()
    n, rounds = (8_000, 1) if args.tiny else (args.n, args.rounds)
    rows = []
    for name, (setup, stmt) in WORKLOADS.items():
        without = run(setup, stmt, n, False, rounds)
        with_hook = run(setup, stmt, n, True, rounds)
        rows.append([name, f"{without * 1000:.1f}", f"{with_hook * 1000:.1f}",
                     f"{with_hook / without:.2f}x"])
    print(f"n = {n}, best of {rounds} rounds, each in a fresh interpreter\n")
    print(markdown_table(["workload", "without hook (ms)", "with hook (ms)", "ratio"],
                         rows))


if __name__ == "__main__":
    main()
