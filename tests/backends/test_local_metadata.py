"""Local disk: a replace keeps the file's mode and owner, as they are at the last check
before the swap; names of toolfs's temp-file form are never a tool's files; a move of a
symlink onto its target moves nothing."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

import toolfs
from toolfs.backends.local import temp_prefix


def _during_the_temp_fsync(monkeypatch: pytest.MonkeyPatch, act: Callable[[], None]) -> None:
    """Run ``act`` once, inside the fsync of the temp file (after the mode was taken)."""
    real_fsync, done = os.fsync, []

    def fsync(fd: int) -> None:
        real_fsync(fd)
        if not done and stat.S_ISREG(os.fstat(fd).st_mode):
            done.append(True)
            act()

    monkeypatch.setattr(os, "fsync", fsync)


def _workspace_with(tmp_path: Path, name: str, text: str, mode: int) -> toolfs.Workspace:
    path = tmp_path / name
    path.write_text(text)
    os.chmod(path, mode)
    ws = toolfs.Workspace(str(tmp_path))
    ws.read(name)
    return ws


def test_a_chmod_during_the_write_is_kept(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _workspace_with(tmp_path, "run.sh", "echo hi\n", 0o644)
    _during_the_temp_fsync(monkeypatch, lambda: os.chmod(tmp_path / "run.sh", 0o755))
    ws.edit("run.sh", "hi", "hello")
    assert (tmp_path / "run.sh").read_text() == "echo hello\n"
    assert stat.S_IMODE((tmp_path / "run.sh").stat().st_mode) == 0o755


def test_a_file_made_read_only_during_the_write_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _workspace_with(tmp_path, "run.sh", "echo hi\n", 0o644)
    _during_the_temp_fsync(monkeypatch, lambda: os.chmod(tmp_path / "run.sh", 0o444))
    with pytest.raises(toolfs.FsError) as caught:
        ws.edit("run.sh", "hi", "hello")
    assert caught.value.code == "denied"
    assert (tmp_path / "run.sh").read_text() == "echo hi\n"
    assert stat.S_IMODE((tmp_path / "run.sh").stat().st_mode) == 0o444
    assert sorted(os.listdir(tmp_path)) == ["run.sh"]  # no temp file left


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o755, 0o4755])
def test_a_replace_keeps_the_mode(tmp_path: Path, mode: int) -> None:
    ws = _workspace_with(tmp_path, "f", "a\n", mode)
    ws.edit("f", "a", "b")
    ws.write("f", "c\n")
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == mode


def test_a_replace_keeps_the_owner_and_group(tmp_path: Path) -> None:
    path = tmp_path / "app.py"
    path.write_text("x = 1\n")
    if os.geteuid() == 0:  # root may give a file away: make it someone else's
        os.chown(path, 1000, 1000)
    before = path.stat()
    ws = toolfs.Workspace(str(tmp_path))
    ws.read("app.py")
    ws.edit("app.py", "1", "2")
    after = path.stat()
    assert after.st_ino != before.st_ino  # replaced, not written in place
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)


def test_an_owner_change_during_the_write_is_kept(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # Only root can give a file away; others can only keep it theirs.
    owner = (1000, 1000) if os.geteuid() == 0 else (os.geteuid(), os.getegid())
    ws = _workspace_with(tmp_path, "app.py", "x = 1\n", 0o644)
    _during_the_temp_fsync(monkeypatch, lambda: os.chown(tmp_path / "app.py", *owner))
    ws.edit("app.py", "1", "2")
    after = (tmp_path / "app.py").stat()
    assert (after.st_uid, after.st_gid) == owner


@pytest.mark.parametrize("name", [".config.toolfs-tmp-notes", ".x.toolfs-tmp-0123456789ab",
                                  "sub/.toolfs-tmp-y", ".a.toolfs-tmp-0123456789ab/f.txt",
                                  "d/.notes.toolfs-tmp-x/g.txt"])
def test_names_of_the_temp_file_form_are_refused(tmp_path: Path, name: str) -> None:
    ws = toolfs.Workspace(str(tmp_path))
    out = ws.execute("write", {"file_path": name, "content": "notes\n"})
    assert out.error is not None and out.error.code == "invalid_arguments", out.text
    assert not (tmp_path / name).exists()


def test_only_names_of_the_exact_temp_form_are_removed_as_leftovers(tmp_path: Path) -> None:
    prefix = temp_prefix("config")
    leftover = f"{prefix}0123456789ab"
    lookalikes = [f"{prefix}notes", f"{prefix}0123456789abc", f"{prefix}0123456789AB"]
    for name in [leftover, *lookalikes]:
        (tmp_path / name).write_text("someone's\n")
    ws = toolfs.Workspace(str(tmp_path))
    ws.write("config", "a = 1\n")
    assert sorted(os.listdir(tmp_path)) == sorted(["config", *lookalikes])


def test_a_move_of_a_symlink_onto_its_target_moves_nothing(tmp_path: Path) -> None:
    (tmp_path / "target.txt").write_text("precious\n")
    os.symlink("target.txt", tmp_path / "link.txt")
    ws = toolfs.Workspace(str(tmp_path))
    ws.read("link.txt")
    ws.fs.mv("link.txt", "target.txt")
    assert (tmp_path / "target.txt").read_text() == "precious\n"
    assert (tmp_path / "link.txt").is_symlink()


def test_an_unconditional_write_keeps_a_chmod_made_during_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without a policy a write is an overwrite: no condition, but the mode and the
    # read-only refusal are still those of the file at the swap.
    (tmp_path / "run.sh").write_text("echo hi\n")
    ws = toolfs.Workspace(str(tmp_path), policy=None)
    _during_the_temp_fsync(monkeypatch, lambda: os.chmod(tmp_path / "run.sh", 0o700))
    ws.write("run.sh", "echo hello\n")
    assert stat.S_IMODE((tmp_path / "run.sh").stat().st_mode) == 0o700
    _during_the_temp_fsync(monkeypatch, lambda: os.chmod(tmp_path / "run.sh", 0o400))
    with pytest.raises(toolfs.FsError) as caught:
        ws.write("run.sh", "echo bye\n")
    assert caught.value.code == "denied"
    assert (tmp_path / "run.sh").read_text() == "echo hello\n"


def _deep_tree(base: Path, depth: int) -> str:
    """``a/a/.../a`` ``depth`` levels below ``base`` (made one level at a time: its full
    path is longer than PATH_MAX), with ``f.txt`` at the bottom; its relative path."""
    here = os.getcwd()
    try:
        os.chdir(base)
        for _ in range(depth):
            os.mkdir("a")
            os.chdir("a")
        with open("f.txt", "w") as f:
            f.write("hello\n")
    finally:
        os.chdir(here)
    return "/".join(["a"] * depth)


def _remove_deep_tree(base: Path, depth: int) -> None:
    """Remove what :func:`_deep_tree` made, bottom up (``shutil.rmtree``, pytest's too,
    recurses once per level and fails this deep)."""
    here = os.getcwd()
    try:
        os.chdir(base / "a")
        for _ in range(depth - 1):
            os.chdir("a")
        for _ in range(depth):
            for name in os.listdir("."):
                os.unlink(name) if not os.path.isdir(name) else os.rmdir(name)
            os.chdir("..")
        os.rmdir("a")
    finally:
        os.chdir(here)


def test_files_below_a_path_longer_than_path_max_are_listed(tmp_path: Path) -> None:
    depth = 2100  # ~4,200 characters: past PATH_MAX (4,096)
    deep = _deep_tree(tmp_path, depth)
    try:
        ws = toolfs.Workspace(str(tmp_path))
        assert ws.read(f"{deep}/f.txt").lines == ["hello"]
        ws.write(f"{deep}/g.txt", "hello too\n")
        assert sorted(p.rsplit("/", 1)[-1] for p in ws.glob("**/*.txt").paths) == [
            "f.txt", "g.txt"]
        assert len(ws.grep("hello").files) == 2
        assert [e.name for e in ws.ls(deep).entries] == ["f.txt", "g.txt"]
    finally:
        _remove_deep_tree(tmp_path, depth)


def test_a_directory_named_like_a_leftover_does_not_fail_the_write(tmp_path: Path) -> None:
    # Made by someone else (toolfs refuses such names): not a file of ours to remove.
    (tmp_path / f"{temp_prefix('a')}0123456789ab").mkdir()
    ws = toolfs.Workspace(str(tmp_path))
    assert ws.execute("write", {"file_path": "a", "content": "x\n"}).error is None
    assert (tmp_path / "a").read_text() == "x\n"


@pytest.mark.parametrize("swap", ["symlink", "other directory"])
def test_a_directory_swapped_while_queued_is_not_listed(tmp_path: Path, swap: str) -> None:
    # A listing queues the directories it finds and lists them later: one replaced
    # meanwhile (by a symlink to outside the root, or by another directory) is not
    # listed, so no name from outside the root is ever shown as the root's.
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "a.txt").write_text("a\n")
    (root / "sub" / "b.txt").write_text("b\n")
    (outside / "id_rsa").write_text("PRIVATE KEY\n")
    ws = toolfs.Workspace(str(root))
    listing = ws.fs.list_files()
    assert next(listing).path == "a.txt"  # the root is listed; sub is queued
    (root / "sub" / "b.txt").unlink()
    (root / "sub").rmdir()
    if swap == "symlink":
        os.symlink(outside, root / "sub")
    else:
        os.rename(outside, root / "sub")
    assert [f.path for f in listing] == []


def test_the_policy_filesystems_listings_leave_out_links_leading_out(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "ok.txt").write_text("ok\n")
    (outside / "secret.txt").write_text("secret\n")
    os.symlink(outside, root / "out")
    os.symlink(outside / "secret.txt", root / "leak.txt")
    fs = toolfs.Workspace(str(root)).fs
    assert [e.rsplit("/", 1)[-1] for e in fs.ls("", detail=False)] == ["ok.txt"]
    assert fs.find("") == ["ok.txt"]
    assert [(r, sorted(d), sorted(f)) for r, d, f in fs.walk("")] == [(".", [], ["ok.txt"])]
    assert fs.du("") == 3
