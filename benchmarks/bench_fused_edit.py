"""What the layers cost a local edit: toolfs's ``ws.edit`` against the same steps in one function.

An experiment for a design decision, not product code. ``fused_edit`` below does what a
cached 1 KB edit chain does in toolfs, with the same calls for every guarantee: the
confinement (``Jail.resolve``, with its ``lstat``), the ledger's observation and cached
bytes, ``decode``/``apply_edit``/``lines_around``, the NUL and encoding checks of the
new text, the commit lock of the path's stripe, ``LocalStore.put`` on
``Update(version, known=bytes)``, the ledger's record, two audit records and the
``EditResult``. What it leaves out is the layering between them: ``Workspace._guarded``,
``tools.edit_file``, ``PolicyFileSystem.open``/``open_for_edit``, the ``ObservedFile``
handle (an ``io.RawIOBase``) and its ``commit``, ``_commit``'s checks for policies this
workspace does not have (read-only, deny rules, other subscribers), the events'
dispatch and the ``Commit`` record. It handles only the case it measures: a cached,
observed file in a default workspace.

Each round times ``ws.edit``, ``fused_edit`` and the careful by-hand edit
(``bench_latency.Careful``) one after another on files of their own in one directory
tree, rotating the order; the table gives the medians and each against careful.

Usage: ``python benchmarks/bench_fused_edit.py [--size BYTES] [--calls N] [--tiny]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable

import toolfs
from _common import machine_facts, markdown_table
from bench_latency import Careful, Toggle, make_text
from toolfs import tools
from toolfs._trusted import trusted
from toolfs.backends.base import Update
from toolfs.errors import fs_error
from toolfs.policy.events import AuditLog
from toolfs.policy.filesystem import _COMMIT_STRIPES
from toolfs.results import EditResult
from toolfs.text import apply_edit, decode, lines_around


def fused_edit(ws: toolfs.Workspace, file_path: str, old: str, new: str) -> EditResult:
    """``ws.edit(file_path, old, new)`` of a cached, observed file, as one function."""
    fs = ws.fs
    audit = fs.subscribers[0]
    if not (type(file_path) is str and type(old) is str and type(new) is str and old
            and old != new and len(fs.subscribers) == 1 and type(audit) is AuditLog
            and not fs.read_only and not fs.deny):
        raise ValueError("fused_edit handles only the measured case")
    target = fs.jail.resolve(file_path, root_checked=fs._root_checked)
    key = target.backend_path
    obs, cached = fs.ledger.observed(key)
    if obs is None or obs.version is None or cached is None:
        raise ValueError("fused_edit handles only a cached, observed file")
    doc = decode(cached, target.display)
    outcome = apply_edit(doc.text, old, new, replace_all=False, path=target.display,
                         max_bytes=fs.size_cap, bom=doc.bom, size=len(cached))
    if "\x00" in new:
        raise fs_error("invalid_arguments", "the text contains a NUL character")
    new.encode("utf-8")
    start, snippet = lines_around(outcome.text, *outcome.first_span,
                                  tools.SNIPPET_CONTEXT, start_line=outcome.lines[0])
    data = outcome.text.encode("utf-8")
    path = target.resolved or target.display
    if not path.isascii():
        raise ValueError("fused_edit handles only ASCII paths")
    audit.record("fs/write-intent", fs.context_id, "edit", path, obs.version, None, None)
    with fs._commit_locks[hash(key) % _COMMIT_STRIPES]:
        version = fs.store.put(key, data, Update(obs.version, known=cached))
        fs.ledger.record(key, version, size=len(data), content=data)
    audit.record("fs/written", fs.context_id, "edit", path, obs.version, version, None)
    return trusted(EditResult, tools._EDIT_SET, {
        "path": target.display, "replacements": outcome.count, "replace_all": False,
        "version": version, "lines": outcome.lines, "snippet": snippet,
        "snippet_start": start})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1024, help="file size in bytes")
    parser.add_argument("--calls", type=int, default=4000, help="rounds of three edits")
    parser.add_argument("--tiny", action="store_true", help="a few calls (smoke test)")
    args = parser.parse_args()
    calls, warmup = (20, 5) if args.tiny else (args.calls, 300)
    text = make_text(args.size, "MARKER_ALPHA_0001")
    base = tempfile.mkdtemp(prefix="toolfs-fused-")
    try:
        roots = {name: os.path.join(base, name) for name in ("layered", "fused", "careful")}
        for root in roots.values():
            os.makedirs(root)
        layered, fused = toolfs.Workspace(roots["layered"]), toolfs.Workspace(roots["fused"])
        for ws in (layered, fused):
            ws.write("f.txt", text)
            ws.read("f.txt")
        careful_path = os.path.join(roots["careful"], "f.txt")
        with open(careful_path, "w", encoding="utf-8") as f:
            f.write(text)
        careful = Careful(careful_path)
        careful.read()
        toggles = [Toggle(), Toggle(), Toggle()]
        # The fused edit must give what ws.edit gives (the version aside).
        a = layered.edit("f.txt", *toggles[0].next())
        b = fused_edit(fused, "f.txt", *toggles[1].next())
        careful.edit(*toggles[2].next())
        if a.model_dump(exclude={"version"}) != b.model_dump(exclude={"version"}):
            raise SystemExit(f"fused_edit differs from ws.edit:\n{a}\n{b}")
        steps: list[Callable[[], object]] = [
            lambda: layered.edit("f.txt", *toggles[0].next()),
            lambda: fused_edit(fused, "f.txt", *toggles[1].next()),
            lambda: careful.edit(*toggles[2].next()),
        ]
        samples: list[list[int]] = [[], [], []]
        clock = time.perf_counter_ns
        for i in range(warmup + calls):
            order = (0, 1, 2) if i % 2 else (2, 1, 0)
            for j in order:
                t0 = clock()
                steps[j]()
                took = clock() - t0
                if i >= warmup:
                    samples[j].append(took)
        if layered.read("f.txt").lines != fused.read("f.txt").lines:
            raise SystemExit("the two workspaces' files differ")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    t, f_us, c = (statistics.median(s) / 1e3 for s in samples)
    print(f"## Local edit of {args.size:,} bytes: layered toolfs vs the same steps fused\n")
    print(f"{machine_facts()}\n")
    print(markdown_table(
        ["edit", "n", "µs (median)", "/ careful"],
        [["toolfs (ws.edit)", calls, f"{t:,.1f}", f"{t / c:.3f}x"],
         ["fused (one function)", calls, f"{f_us:,.1f}", f"{f_us / c:.3f}x"],
         ["careful by hand", calls, f"{c:,.1f}", "1.000x"]]))
    print(f"\nthe layers' share: {(t - f_us) / c:.3f}x of the careful edit")


if __name__ == "__main__":
    main()
