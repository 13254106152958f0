"""A fork whose overlay is at a URL outlives its process: another process reopens it by
forking the same base with the same URL, sees every change, and commits it."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import toolfs

_FORKER = """
import sys, toolfs
root, overlay = sys.argv[1], sys.argv[2]
fork = toolfs.Workspace(root).fork(overlay=overlay)
fork.read("a.txt")
fork.edit("a.txt", "alpha", "ALPHA")
fork.write("new/b.txt", "made in another process\\n")
fork.read("gone.txt")
fork.fs.rm_file("gone.txt")
print("forked", flush=True)
"""


def test_a_url_overlay_is_reopened_and_committed_by_another_process(
        tmp_path: pathlib.Path) -> None:
    root, overlay = tmp_path / "root", tmp_path / "overlay"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    (root / "gone.txt").write_text("bye\n")
    done = subprocess.run([sys.executable, "-c", _FORKER, str(root), str(overlay)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and "forked" in done.stdout, done.stderr
    assert (root / "a.txt").read_text() == "alpha\n" and (root / "gone.txt").exists()
    fork = toolfs.Workspace(str(root)).fork(overlay=str(overlay))
    assert {(c.path, c.kind) for c in fork.changes()} == {
        ("a.txt", "updated"), ("new/b.txt", "created"), ("gone.txt", "deleted")}
    assert fork.read("a.txt").lines == ["ALPHA"]
    assert fork.commit().ok
    assert (root / "a.txt").read_text() == "ALPHA\n"
    assert (root / "new" / "b.txt").read_text() == "made in another process\n"
    assert not (root / "gone.txt").exists()
