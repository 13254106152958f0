"""``Jail`` resolves links below its real root with one ``lstat`` per component; the
answer must be exactly what ``os.path.realpath`` of the whole path gives (the rule it
replaced), inside or refused, for every shape of path."""

from __future__ import annotations

import os
import pathlib

import pytest

from toolfs.errors import FsError
from toolfs.policy.paths import Jail


def _tree(tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    real = tmp_path / "real-root"
    outside = tmp_path / "outside"
    for d in (real / "a" / "b", real / "other", outside / "deep"):
        d.mkdir(parents=True)
    (real / "f.txt").write_text("f")
    (real / "a" / "b" / "c.txt").write_text("c")
    (real / "other" / "o.txt").write_text("o")
    (outside / "deep" / "s.txt").write_text("s")
    os.symlink(real / "other", real / "a" / "in-link")          # dir link, inside
    os.symlink(real / "f.txt", real / "a" / "b" / "file-link")  # file link, inside
    os.symlink("../../other/o.txt", real / "a" / "b" / "rel-link")  # relative, inside
    os.symlink(outside / "deep", real / "a" / "out-link")       # dir link, outside
    os.symlink(outside / "deep" / "s.txt", real / "leak.txt")   # file link, outside
    os.symlink(real / "a" / "loop", real / "a" / "loop")        # a loop
    os.symlink(real, tmp_path / "root-link")                    # the root via a link
    return real, outside


PATHS = ["f.txt", "a", "a/b", "a/b/c.txt", "a/b/missing.txt", "a/missing/deeper/x.txt",
         "f.txt/under-a-file", "a/in-link/o.txt", "a/in-link/new.txt", "a/in-link",
         "a/b/file-link", "a/b/rel-link", "a/out-link/s.txt", "a/out-link/new.txt",
         "a/out-link", "leak.txt", "a/loop", "a/loop/x.txt", "missing.txt"]


def _old_rule(jail: Jail, rel: str) -> str | None:
    """``realpath`` of the joined path, ``None`` where it leaves the real root."""
    real = os.path.realpath(jail.join(rel))
    root = jail.real_root
    return real if real == root or real.startswith(root + "/") else None


@pytest.mark.parametrize("via_link", [False, True], ids=["real root", "root via a link"])
@pytest.mark.parametrize("rel", PATHS)
def test_resolution_matches_realpath(tmp_path: pathlib.Path, rel: str, via_link: bool) -> None:
    real, _ = _tree(tmp_path)
    jail = Jail(str(tmp_path / "root-link" if via_link else real), ("file", "local"),
                resolve_symlinks=True)
    expected = _old_rule(jail, rel)
    if expected is None:
        with pytest.raises(FsError) as exc:
            jail.resolve(rel)
        assert exc.value.code == "outside_root"
        return
    target = jail.resolve(rel)
    assert target.backend_path == expected
    assert target.reached == jail.display_of(expected)


def test_a_parent_of_the_root_swapped_for_a_link_is_noticed(tmp_path: pathlib.Path) -> None:
    """realpath re-resolved the root's parents on every call; the jail now stats the
    root once per call and falls back to realpath when it is no longer the directory
    it resolved at construction."""
    parent = tmp_path / "parent"
    (parent / "root").mkdir(parents=True)
    (parent / "root" / "f.txt").write_text("mine")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "root").mkdir(parents=True)
    (elsewhere / "root" / "f.txt").write_text("theirs")
    jail = Jail(str(parent / "root"), ("file", "local"), resolve_symlinks=True)
    assert jail.resolve("f.txt").backend_path == str(parent / "root" / "f.txt")
    parent.rename(tmp_path / "moved")
    os.symlink(elsewhere, parent)  # the root's path now leads elsewhere
    for rel in ("f.txt", "new.txt"):
        with pytest.raises(FsError) as exc:
            jail.resolve(rel)
        assert exc.value.code == "outside_root"


def test_a_re_created_root_keeps_working(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    jail = Jail(str(root), ("file", "local"), resolve_symlinks=True)
    root.rmdir()
    root.mkdir()
    (root / "f.txt").write_text("x")
    assert jail.resolve("f.txt").backend_path == str(root / "f.txt")
    assert jail.resolve("f.txt").reached == "f.txt"
