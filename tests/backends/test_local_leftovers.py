"""A crashed write's temp file is removed by the next write of the same name, also when
this store skipped the directory scan on its writes just before (it does so only while
the directory's mtime and ctime are the ones its own last write there left, whichever
file that wrote)."""

from __future__ import annotations

import os
import pathlib
from typing import Any

import pytest

import toolfs
from toolfs.backends import local
from toolfs.backends.local import temp_prefix


def _leftover(directory: pathlib.Path, name: str, n: int) -> pathlib.Path:
    path = directory / f"{temp_prefix(name)}{n:012x}"
    path.write_bytes(b"half a write")
    return path


def _counting_listdir(monkeypatch: Any) -> list[object]:
    calls: list[object] = []
    real = os.listdir

    def listdir(path: Any = ".") -> list[str]:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(local.os, "listdir", listdir)
    return calls


def test_a_taken_temp_name_falls_back_to_a_random_one(tmp_path: pathlib.Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import itertools

    from toolfs.backends import local

    monkeypatch.setattr(local, "_temp_serials", itertools.count(5))
    taken = tmp_path / f"{local.temp_prefix('f.txt')}{5:012x}"
    taken.write_text("someone else's")
    dfd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        name, fd = local._create_temp(dfd, "f.txt")
        os.close(fd)
    finally:
        os.close(dfd)
    assert name != taken.name and name.startswith(local.temp_prefix("f.txt"))
    assert len(name) == len(taken.name)
    assert taken.read_text() == "someone else's"
    # And a write goes through whatever the serials give.
    monkeypatch.setattr(local, "_temp_serials", itertools.count(5))
    ws = toolfs.Workspace(str(tmp_path))
    ws.write("g.txt", "g\n")
    assert (tmp_path / "g.txt").read_text() == "g\n"


def test_temp_serials_start_at_random() -> None:
    from toolfs.backends import local

    starts = set()
    for _ in range(3):
        local._reseed_temp_serials()
        starts.add(next(local._temp_serials))
    assert len(starts) == 3


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


def test_writes_of_several_files_in_one_directory_scan_it_once(
        tmp_path: pathlib.Path, monkeypatch: Any) -> None:
    """The directory's stamps after this store's last write there, of any name, spare
    the next write's scan, whichever file it writes (an agent editing files side by
    side)."""
    ws = toolfs.Workspace(str(tmp_path), policy=None)
    for n in range(200):
        (tmp_path / f"sibling{n}.txt").write_text("x\n")
    scans = _counting_listdir(monkeypatch)
    for n in range(10):
        for name in ("a.txt", "b.txt", "c.txt"):
            ws.write(name, f"{name} {n}\n")
    assert len(scans) == 1, scans  # the first write only
    left = _leftover(tmp_path, "b.txt", 3)  # a writer in another process crashed
    ws.write("a.txt", "a again\n")  # the directory changed: scanned, b's temp kept
    assert len(scans) == 2 and left.exists()
    ws.write("c.txt", "c again\n")  # no scan: it knows b's temp is there
    ws.write("b.txt", "b again\n")  # no scan either, and b's own temp is removed
    assert len(scans) == 2 and not left.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("sibling")) \
        == ["a.txt", "b.txt", "c.txt"]


def test_many_leftovers_of_other_names_are_scanned_for_again(
        tmp_path: pathlib.Path, monkeypatch: Any) -> None:
    """More temp files of other names than a store remembers: each write scans again,
    and each name's write still removes exactly its own."""
    ws = toolfs.Workspace(str(tmp_path), policy=None)
    ws.write("a.txt", "a\n")
    many = [_leftover(tmp_path, f"z{n}.txt", n) for n in range(local._LEFTOVERS_MEMORY + 1)]
    scans = _counting_listdir(monkeypatch)
    ws.write("a.txt", "a2\n")
    ws.write("a.txt", "a3\n")
    assert len(scans) == 2 and all(p.exists() for p in many)
    ws.write("z0.txt", "z\n")
    assert not many[0].exists() and all(p.exists() for p in many[1:])


def test_parallel_writes_of_several_names_each_remove_their_own_leftovers(
        tmp_path: pathlib.Path) -> None:
    """Parallel calls of one context writing side by side in one directory while crashed
    writers leave temp files of every name: once each name is written again, none is
    left."""
    import fcntl
    import threading

    ws = toolfs.Workspace(str(tmp_path), policy=None)
    names = ("a.txt", "b.txt", "c.txt")
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(name: str) -> None:
        n = 0
        try:
            while not stop.is_set():
                ws.write(name, f"{name} {n}\n")
                n += 1
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(name,)) for name in names]
    for t in threads:
        t.start()
    try:
        for n in range(60):
            # A writer that crashes leaves its temp file while it holds the directory's
            # lock, as every toolfs writer does.
            dfd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
            try:
                fcntl.flock(dfd, fcntl.LOCK_EX)
                _leftover(tmp_path, names[n % 3], 1000 + n)
            finally:
                os.close(dfd)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    for name in names:
        ws.write(name, f"{name} last\n")
    assert sorted(os.listdir(tmp_path)) == sorted(names)
    assert all((tmp_path / name).read_text() == f"{name} last\n" for name in names)
