"""Forks on local disk: a root reached through a symlink, and symlinks inside it."""

from __future__ import annotations

import os
import pathlib

import toolfs


def test_a_fork_of_a_root_behind_a_symlink_commits_and_goes_on(tmp_path: pathlib.Path
                                                               ) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.txt").write_text("one\n")
    os.symlink(real, tmp_path / "link")
    ws = toolfs.Workspace(str(tmp_path / "link"))
    fork = ws.fork()
    fork.read("a.txt")
    fork.edit("a.txt", "one", "two")
    assert fork.commit().ok and (real / "a.txt").read_text() == "two\n"
    fork.edit("a.txt", "two", "three")  # observed at the version committed: no read
    assert fork.commit().ok and (real / "a.txt").read_text() == "three\n"


def test_a_symlink_in_the_root_reads_the_forks_bytes_and_stays_confined(
        tmp_path: pathlib.Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "target.txt").write_text("base\n")
    os.symlink(root / "target.txt", root / "alias.txt")
    (tmp_path / "outside.txt").write_text("secret\n")
    os.symlink(tmp_path / "outside.txt", root / "escape.txt")
    (root / ".env").write_text("KEY=1\n")
    os.symlink(root / ".env", root / "env-alias")
    fork = toolfs.Workspace(str(root), deny=[".env"]).fork()
    fork.read("target.txt")
    fork.edit("target.txt", "base", "forked")
    assert fork.read("alias.txt").lines == ["forked"]  # the link reaches the fork's bytes
    for path, code in (("escape.txt", "outside_root"), ("env-alias", "denied")):
        out = fork.execute("read", {"file_path": path})
        assert out.error is not None and out.error.code == code, out.text
    assert (root / "target.txt").read_text() == "base\n"
