"""What ``PolicyFileSystem`` does as an fsspec filesystem where the policy decides, on
every backend: the refusals it makes on purpose (each with the policy's error) and the
fsspec behaviours that hold with it (every mutating method guarded or denied, the
read-only ones confined, no filesystem cached between contexts, exclusive creates raise
``FileExistsError``, a recursive delete is conditional on what this context observed).
fsspec's own abstract suite runs in ``tests/policy/test_fsspec_abstract.py``."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import fsspec
import pytest

import toolfs
from tests.backend_fixtures import Backend
from toolfs import FsError, PolicyFileSystem
from toolfs.errors import AlreadyExists, Stale


def test_policy_fs_is_never_cached_between_contexts() -> None:
    mem = fsspec.filesystem("memory")
    a = PolicyFileSystem(mem, "/cache-test")
    b = PolicyFileSystem(mem, "/cache-test")
    assert a is not b
    assert a.ledger is not b.ledger
    assert PolicyFileSystem.cachable is False


class FsspecSemantics:
    """The policy filesystem's fsspec face is guarded and confined (sync and async)."""

    def test_notebook_style_file_api_is_guarded(self, backend: Backend) -> None:
        backend.put("nb.txt", b"one\n")
        fs = backend.workspace().fs
        with pytest.raises(FsError) as exc:
            fs.write_text("nb.txt", "two\n")
        assert exc.value.code == "not_observed"
        with fs.open("nb.txt", "r") as f:
            assert f.read() == "one\n"
        with fs.open("nb.txt", "w") as f:
            f.write("two\n")
        assert backend.get("nb.txt") == b"two\n"
        backend.put("nb.txt", b"three\n")
        with pytest.raises(FsError) as exc, fs.open("nb.txt", "wb") as f:
            f.write(b"four\n")
        assert exc.value.code == "stale"
        assert backend.get("nb.txt") == b"three\n"
        assert fs.cat_file("nb.txt") == b"three\n"
        fs.pipe_file("nb.txt", b"five\n")
        assert backend.get("nb.txt") == b"five\n"

    def test_every_mutating_method_is_guarded_or_denied(
            self, backend: Backend, tmp_path: object) -> None:
        import pathlib

        backend.put("m.txt", b"data\n")
        backend.put("other.txt", b"other\n")
        fs = backend.workspace().fs
        local = pathlib.Path(str(tmp_path)) / "upload.txt"
        local.write_bytes(b"up\n")
        unobserved = [
            lambda: fs.pipe_file("m.txt", b"x"), lambda: fs.pipe("m.txt", b"x"),
            lambda: fs.write_bytes("m.txt", b"x"), lambda: fs.write_text("m.txt", "x"),
            lambda: fs.rm_file("m.txt"), lambda: fs.rm("m.txt"),
            lambda: fs.put_file(str(local), "m.txt"), lambda: fs.touch("m.txt"),
            lambda: fs.cp_file("other.txt", "m.txt"), lambda: fs.mv("other.txt", "m.txt"),
            lambda: fs.copy("other.txt", "m.txt"),
            lambda: fs.rm("m.txt", recursive=True),  # a recursive delete: on observations too
        ]
        for call in unobserved:
            with pytest.raises(FsError) as exc:
                call()
            assert exc.value.code == "not_observed"
            assert backend.get("m.txt") == b"data\n"
        for name, call in [("rmdir", lambda: fs.rmdir("dir")),
                           ("mkdir on a file", lambda: fs.makedirs("m.txt")),
                           ("transaction", lambda: fs.start_transaction())]:
            with pytest.raises(FsError) as exc:
                call()
            assert exc.value.code == "denied", name
        assert backend.get("m.txt") == b"data\n"
        fs.cat_file("m.txt")
        fs.put_file(str(local), "m.txt")
        assert backend.get("m.txt") == b"up\n"
        fs.rm_file("m.txt")
        assert not backend.exists("m.txt")

    def test_read_only_methods_are_confined(self, backend: Backend) -> None:
        backend.put("a/b.txt", b"x\n")
        fs = backend.workspace().fs
        assert fs.exists("a/b.txt") and fs.isfile("a/b.txt") and fs.isdir("a")
        assert fs.info("a/b.txt")["name"] == "a/b.txt"
        assert fs.find("") == ["a/b.txt"]
        assert [e for e in fs.ls("a", detail=False)] == ["a/b.txt"]
        for bad in ["../x", "/etc/passwd", "a/../../x"]:
            with pytest.raises(FsError) as exc:
                fs.info(bad)
            assert exc.value.code == "outside_root"


class SyncFsspecSemantics:
    """fsspec calls on the policy filesystem keep fsspec's meaning under the policy."""

    def test_an_exclusive_create_of_an_existing_file_is_a_file_exists_error(self,
            backend: Backend, tmp_path: Path) -> None:
        backend.put("a.txt", b"old\n")
        fs = backend.workspace().fs
        (tmp_path / "up.txt").write_bytes(b"up\n")
        with pytest.raises(FileExistsError):
            fs.put_file(str(tmp_path / "up.txt"), "a.txt", mode="create")
        with pytest.raises(FileExistsError) as at_open:
            fs.open("a.txt", "xb")  # refused at open, not only when closed
        with pytest.raises(FileExistsError) as piped:
            fs.pipe_file("a.txt", b"new\n", mode="create")
        for err in (at_open.value, piped.value):
            assert isinstance(err, AlreadyExists) and isinstance(err, Stale)
            assert err.code == "stale" and err.details["exists"] is True
        again = pickle.loads(pickle.dumps(piped.value))
        assert isinstance(again, FileExistsError) and again.code == "stale"
        assert backend.get("a.txt") == b"old\n"

    def test_an_exclusive_create_checks_again_when_it_commits(self, backend: Backend) -> None:
        fs = backend.workspace().fs
        f = fs.open("new.txt", "xb")
        f.write(b"mine\n")
        backend.put("new.txt", b"theirs\n")  # created after the open, before the close
        with pytest.raises(FileExistsError):
            f.close()
        assert backend.get("new.txt") == b"theirs\n"
        with fs.open("fresh.txt", "xb") as g:
            g.write(b"ok\n")
        assert backend.get("fresh.txt") == b"ok\n"

    def test_copy_and_put_onto_a_file_never_read_are_refused(self, backend: Backend,
                                                             tmp_path: Path) -> None:
        # The policy's rule, through fsspec's copy and put: replacing a file needs a read of
        # it; a destination that does not exist is a create.
        backend.put("src.txt", b"source\n")
        backend.put("dst.txt", b"someone else's\n")
        fs = backend.workspace().fs
        local = tmp_path / "up.txt"
        local.write_bytes(b"uploaded\n")
        with pytest.raises(toolfs.FsError) as copied:
            fs.cp("src.txt", "dst.txt")
        with pytest.raises(toolfs.FsError) as put:
            fs.put(str(local), "dst.txt")
        assert copied.value.code == put.value.code == "not_observed"
        assert backend.get("dst.txt") == b"someone else's\n"
        fs.cp("src.txt", "new.txt")  # absent: a create
        assert backend.get("new.txt") == b"source\n"
        fs.cat_file("dst.txt")
        fs.cp("src.txt", "dst.txt")
        assert backend.get("dst.txt") == b"source\n"

    def test_a_recursive_delete_needs_every_file_read_and_deletes_nothing_otherwise(self,
            backend: Backend) -> None:
        backend.put("d/a.txt", b"a\n")
        backend.put("d/sub/b.txt", b"b\n")
        fs = backend.workspace().fs
        fs.cat_file("d/a.txt")
        with pytest.raises(toolfs.FsError) as refused:
            fs.rm("d", recursive=True)
        assert refused.value.code == "not_observed"
        assert refused.value.details["files"] == ["d/sub/b.txt"]
        assert backend.exists("d/a.txt") and backend.exists("d/sub/b.txt")
        fs.cat_file("d/sub/b.txt")
        fs.rm("d/", recursive=True)
        assert not backend.exists("d/a.txt") and not backend.exists("d/sub/b.txt")
        # The empty directories left go too, where the store has directories to remove;
        # a wrapped filesystem of unknown kind (generic) is not walked, and keeps them.
        left = backend.capabilities.removes_empty_dirs is False and backend.keeps_empty_dirs
        assert fs.exists("d") is left

    def test_a_recursive_delete_stops_at_a_file_changed_since_it_was_read(self,
            backend: Backend) -> None:
        backend.put("d/a.txt", b"a\n")
        backend.put("d/b.txt", b"b\n")
        fs = backend.workspace().fs
        fs.cat_file("d/a.txt")
        fs.cat_file("d/b.txt")
        backend.put("d/b.txt", b"changed\n")
        with pytest.raises(toolfs.FsError) as refused:
            fs.rm("d", recursive=True)
        assert refused.value.code == "stale"
        assert refused.value.details["deleted"] == ["d/a.txt"]
        assert backend.get("d/b.txt") == b"changed\n"

    def test_a_recursive_delete_never_takes_the_root_or_a_denied_file(
            self, backend: Backend) -> None:
        backend.put("d/.env", b"SECRET=1\n")
        backend.put("d/a.txt", b"a\n")
        fs = backend.workspace(deny=[".env"]).fs
        fs.cat_file("d/a.txt")
        for path in ("", ".", "d"):
            with pytest.raises(toolfs.FsError) as refused:
                fs.rm(path, recursive=True)
            assert refused.value.code == "denied"
        assert backend.exists("d/.env") and backend.exists("d/a.txt")

    def test_deleting_a_missing_file_is_not_found(self, backend: Backend) -> None:
        fs = backend.workspace().fs
        for call in (lambda: fs.rm_file("nope.txt"), lambda: fs.rm("nope", recursive=True),
                     lambda: fs.cp("nope.txt", "x.txt"), lambda: fs.mv("nope.txt", "x.txt")):
            with pytest.raises(FileNotFoundError) as missing:
                call()
            assert isinstance(missing.value, toolfs.FsError)
            assert missing.value.code == "not_found"
        with pytest.raises(toolfs.FsError):
            fs.cat_file("seen.txt")  # seen absent ...
        backend.put("seen.txt", b"created since\n")  # ... then created by someone else
        with pytest.raises(toolfs.FsError) as created:
            fs.rm_file("seen.txt")
        assert created.value.code == "stale"

    def test_a_recursive_move_is_unsupported(self, backend: Backend) -> None:
        # Not made of a recursive copy and a recursive delete: a file changed between the
        # two would be left in both places. Files move one by one (mv of each file).
        backend.put("d/a.txt", b"a\n")
        fs = backend.workspace().fs
        fs.cat_file("d/a.txt")
        with pytest.raises(toolfs.FsError) as refused:
            fs.mv("d", "e", recursive=True)
        assert refused.value.code == "unsupported"
        assert backend.get("d/a.txt") == b"a\n"

    def test_directories_copy_get_and_put_as_directories(self, backend: Backend,
                                                         tmp_path: Path) -> None:
        backend.put("d/sub/a.txt", b"a\n")
        fs = backend.workspace().fs
        fs.makedirs("made/deeper/", exist_ok=True)
        fs.cp("d/", "e/", recursive=True)
        assert backend.get("e/sub/a.txt") == b"a\n"
        fs.get("d", str(tmp_path / "down" / "deep"), recursive=True)
        assert (tmp_path / "down" / "deep" / "sub" / "a.txt").read_bytes() == b"a\n"
        fs.get_file("d/sub/a.txt", str(tmp_path / "new" / "parent" / "a.txt"))
        assert os.path.isfile(tmp_path / "new" / "parent" / "a.txt")
        (tmp_path / "up" / "x").mkdir(parents=True)
        (tmp_path / "up" / "x" / "b.txt").write_bytes(b"b\n")
        fs.put(str(tmp_path / "up"), "up", recursive=True)
        assert backend.get("up/x/b.txt") == b"b\n"

    def test_a_second_recursive_copy_into_the_made_directory_nests_the_source(
            self, backend: Backend, tmp_path: Path) -> None:
        """As fsspec's own memory and local filesystems do (``cp -r src target`` twice):
        the first copy makes ``target`` from ``src``; the second, into the ``target``
        that now exists, puts ``src`` inside it. ``src/`` copies the contents both times."""
        backend.put("src/file", b"f\n")
        fs = backend.workspace().fs
        down = tmp_path / "target"
        for _ in range(2):
            fs.get("src", str(down), recursive=True)
        assert sorted(str(p.relative_to(down)) for p in down.rglob("*")) == [
            "file", "src", "src/file"]
        fs.get("src/", str(tmp_path / "slash"), recursive=True)
        fs.get("src/", str(tmp_path / "slash"), recursive=True)
        assert sorted(p.name for p in (tmp_path / "slash").iterdir()) == ["file"]
        for _ in range(2):
            fs.cp("src", "copy", recursive=True)
        assert backend.get("copy/file") == backend.get("copy/src/file") == b"f\n"
        up = tmp_path / "up"
        up.mkdir()
        (up / "file").write_bytes(b"u\n")
        for _ in range(2):
            fs.put(str(up), "put", recursive=True)
        assert backend.get("put/file") == backend.get("put/up/file") == b"u\n"

    def test_get_file_streams_a_file_over_the_cap(self, backend: Backend, tmp_path: Path) -> None:
        data = bytes(range(256)) * 40  # 10 KiB, read whole only up to 4 KiB
        backend.put("big.bin", data)
        fs = backend.workspace(size_cap=4096, first_block=1024, block_size=1024).fs
        fs.get_file("big.bin", str(tmp_path / "down" / "big.bin"))
        assert (tmp_path / "down" / "big.bin").read_bytes() == data
        assert os.listdir(tmp_path / "down") == ["big.bin"]  # nothing left aside
        with pytest.raises(toolfs.FsError) as too_large:
            fs.cp("big.bin", "copy.bin")  # a copy is a whole-file write
        assert too_large.value.code == "too_large" and not backend.exists("copy.bin")
