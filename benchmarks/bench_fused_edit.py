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

``CarefulEveryCheck`` is the careful by-hand edit (``bench_latency.Careful``, the steps
issue 14 lists) with the local store's other guarantees written in by hand as well: the
``lstat`` that confinement makes of the path, the directory opened and checked to be the
root, the target refused unless a regular file with write permission, its mode kept on the
new file, a temp file that never follows a symlink, the re-check made after the temp
file is fsynced (the smallest window for writers that do not lock, by comparing with the
bytes the edit came from), and the directory's stamps remembered so that crash leftovers
are looked for only when something else changed it. It has no ledger, events, line
numbers, snippet or result: what it costs over ``Careful`` is the price of those
guarantees, and what ``fused_edit`` costs over it is the price of toolfs's features.

Each round times ``ws.edit``, ``fused_edit``, ``CarefulEveryCheck`` and ``Careful`` one
after another on files of their own in one directory tree, rotating the order; the table
gives the medians and each against careful.

Usage: ``python benchmarks/bench_fused_edit.py [--size BYTES] [--calls N] [--tiny]``.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import secrets
import shutil
import stat
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
from toolfs.formats.text import apply_edit, decode, lines_around
from toolfs.policy.events import AuditLog
from toolfs.policy.observe_commit import _turn
from toolfs.results import EditResult


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
    with _turn(key):
        version = fs.store.put(key, data, Update(obs.version, known=cached))
        fs.ledger.record(key, version, size=len(data), content=data)
    audit.record("fs/written", fs.context_id, "edit", path, obs.version, version, None)
    return trusted(EditResult, tools._EDIT_SET, {
        "path": target.display, "replacements": outcome.count, "replace_all": False,
        "version": version, "lines": outcome.lines, "snippet": snippet,
        "snippet_start": start, "merged": False, "merged_lines": None})


class CarefulEveryCheck:
    """One local file edited by hand with every guarantee of toolfs's local store (see
    the module docstring); ``read`` first, then ``edit`` as often as wanted."""

    def __init__(self, path: str) -> None:
        self.dir, self.name = os.path.split(path)
        self.path = path
        st = os.stat(self.dir)
        self.root_id = (st.st_dev, st.st_ino)
        self.known = b""
        self.stamps: tuple[int, int] | None = None

    def read(self) -> str:
        with open(self.path, "rb") as f:
            self.known = f.read()
        return self.known.decode("utf-8")

    def edit(self, old: str, new: str) -> str:
        if stat.S_ISLNK(os.lstat(self.path).st_mode):  # confinement: a link is resolved
            raise RuntimeError("a symlink")
        data = self.known.decode("utf-8").replace(old, new, 1).encode("utf-8")
        dfd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(dfd, fcntl.LOCK_EX)
            try:
                dir_st = os.fstat(dfd)
                if (dir_st.st_dev, dir_st.st_ino) != self.root_id:
                    raise RuntimeError("the root moved")
                st = os.stat(self.name, dir_fd=dfd, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode) or not st.st_mode & 0o222 or not os.access(
                        self.name, os.W_OK, dir_fd=dfd, follow_symlinks=False):
                    raise RuntimeError("not a writable regular file")
                if self.stamps != (dir_st.st_mtime_ns, dir_st.st_ctime_ns):
                    os.listdir(dfd)  # where a crash's leftovers would be found
                tmp = f".{self.name}.tmp-{secrets.token_hex(6)}"
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                             0o666, dir_fd=dfd)
                try:
                    os.fchmod(fd, stat.S_IMODE(st.st_mode))
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view):]
                    os.fsync(fd)
                finally:
                    os.close(fd)
                cfd = os.open(self.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK,
                              dir_fd=dfd)
                try:
                    cst = os.fstat(cfd)
                    at = stat.S_ISREG(cst.st_mode) and \
                        os.pread(cfd, cst.st_size + 1, 0) == self.known
                finally:
                    os.close(cfd)
                if not at:
                    os.unlink(tmp, dir_fd=dfd)
                    raise RuntimeError("stale")  # never happens here: one writer
                os.replace(tmp, self.name, src_dir_fd=dfd, dst_dir_fd=dfd)
                os.fsync(dfd)
                after = os.fstat(dfd)
                self.stamps = (after.st_mtime_ns, after.st_ctime_ns)
            finally:
                fcntl.flock(dfd, fcntl.LOCK_UN)
        finally:
            os.close(dfd)
        self.known = data
        return hashlib.sha256(data).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1024, help="file size in bytes")
    parser.add_argument("--calls", type=int, default=4000, help="rounds of four edits")
    parser.add_argument("--tiny", action="store_true", help="a few calls (smoke test)")
    args = parser.parse_args()
    calls, warmup = (20, 5) if args.tiny else (args.calls, 300)
    text = make_text(args.size, "MARKER_ALPHA_0001")
    base = tempfile.mkdtemp(prefix="toolfs-fused-")
    try:
        names = ("layered", "fused", "every", "careful")
        roots = {name: os.path.join(base, name) for name in names}
        for root in roots.values():
            os.makedirs(root)
        layered, fused = toolfs.Workspace(roots["layered"]), toolfs.Workspace(roots["fused"])
        for ws in (layered, fused):
            ws.write("f.txt", text)
            ws.read("f.txt")
        for name in ("every", "careful"):
            with open(os.path.join(roots[name], "f.txt"), "w", encoding="utf-8") as f:
                f.write(text)
        every = CarefulEveryCheck(os.path.join(roots["every"], "f.txt"))
        careful = Careful(os.path.join(roots["careful"], "f.txt"))
        every.read()
        careful.read()
        toggles = [Toggle() for _ in names]
        # The fused edit must give what ws.edit gives (the version aside), and the
        # by-hand edits the same bytes.
        a = layered.edit("f.txt", *toggles[0].next())
        b = fused_edit(fused, "f.txt", *toggles[1].next())
        every.edit(*toggles[2].next())
        careful.edit(*toggles[3].next())
        if a.model_dump(exclude={"version"}) != b.model_dump(exclude={"version"}):
            raise SystemExit(f"fused_edit differs from ws.edit:\n{a}\n{b}")
        steps: list[Callable[[], object]] = [
            lambda: layered.edit("f.txt", *toggles[0].next()),
            lambda: fused_edit(fused, "f.txt", *toggles[1].next()),
            lambda: every.edit(*toggles[2].next()),
            lambda: careful.edit(*toggles[3].next()),
        ]
        samples: list[list[int]] = [[] for _ in names]
        clock = time.perf_counter_ns
        for i in range(warmup + calls):
            shift = i % len(steps)  # each edit comes after each other one equally often
            for j in range(shift, shift + len(steps)):
                j %= len(steps)
                t0 = clock()
                steps[j]()
                took = clock() - t0
                if i >= warmup:
                    samples[j].append(took)
        files = []
        for name in names:
            with open(os.path.join(roots[name], "f.txt"), "rb") as f:
                files.append(f.read())
        if any(data != files[0] for data in files):
            raise SystemExit("the four files differ")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    t, f_us, e, c = (statistics.median(s) / 1e3 for s in samples)
    print(f"## Local edit of {args.size:,} bytes: layered toolfs, the same steps fused, and "
          "by hand\n")
    print(f"{machine_facts()}\n")
    print(markdown_table(
        ["edit", "n", "µs (median)", "/ careful"],
        [["toolfs (ws.edit)", calls, f"{t:,.1f}", f"{t / c:.3f}x"],
         ["fused (one function)", calls, f"{f_us:,.1f}", f"{f_us / c:.3f}x"],
         ["by hand, every check of the local store", calls, f"{e:,.1f}", f"{e / c:.3f}x"],
         ["careful by hand (issue 14's steps)", calls, f"{c:,.1f}", "1.000x"]]))
    print(f"\nthe checks the issue's steps leave out: {(e - c) / c:.3f}x of the careful edit")
    print(f"toolfs's features (ledger, events, line numbers, snippet, result): "
          f"{(f_us - e) / c:.3f}x")
    print(f"the layers' share: {(t - f_us) / c:.3f}x")


if __name__ == "__main__":
    main()
