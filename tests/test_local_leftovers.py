"""A crashed write's temp file is removed by the next write of the same name, also when
this store skipped the directory scan on its writes just before (it does so only while
the directory's mtime and ctime are the ones its own last write left)."""

from __future__ import annotations

import os
import pathlib

import toolfs
from toolfs.backends.local import temp_prefix


def _leftover(directory: pathlib.Path, name: str, n: int) -> pathlib.Path:
    path = directory / f"{temp_prefix(name)}{n:012x}"
    path.write_bytes(b"half a write")
    return path


def test_a_leftover_made_between_two_writes_is_removed(tmp_path: pathlib.Path) -> None:
    (tmp_path / "sub").mkdir()
    ws = toolfs.Workspace(str(tmp_path), policy=None)
    for rel in ("a.txt", "sub/b.txt"):
        directory = (tmp_path / rel).parent
        name = rel.rsplit("/", 1)[-1]
        for n in range(5):
            ws.write(rel, f"version {n}\n")  # leaves the directory clean, remembered
            left = _leftover(directory, name, n)  # a writer in another process crashed
            ws.write(rel, f"version {n}b\n")
            assert not left.exists(), f"leftover {left.name} survived write {n}"
        assert sorted(os.listdir(directory)) == sorted(
            [name] + (["sub"] if directory == tmp_path else []))


def test_another_names_leftover_is_left_to_its_own_write(tmp_path: pathlib.Path) -> None:
    ws = toolfs.Workspace(str(tmp_path), policy=None)
    ws.write("a.txt", "a\n")
    other = _leftover(tmp_path, "b.txt", 1)
    ws.write("a.txt", "a2\n")
    assert other.exists()  # only a write of b.txt may remove b.txt's temp files
    ws.write("b.txt", "b\n")
    assert not other.exists()


def test_a_failed_write_forgets_the_clean_state(tmp_path: pathlib.Path) -> None:
    ws = toolfs.Workspace(str(tmp_path))
    ws.write("a.txt", "a\n")
    (tmp_path / "a.txt").write_text("changed behind its back\n")
    out = ws.execute("write", {"file_path": "a.txt", "content": "mine\n"})
    assert out.error is not None and out.error.code == "stale"
    left = _leftover(tmp_path, "a.txt", 7)
    ws.read("a.txt")
    ws.write("a.txt", "mine\n")
    assert not left.exists()
    assert sorted(os.listdir(tmp_path)) == ["a.txt"]
