"""Writing: creates, updates after an observation, versions and names, on every backend."""

from __future__ import annotations

import os
import pathlib

import pytest

import toolfs
from tests.backend_fixtures import Backend
from tests.contract.calls import err, exec_err, exec_ok, local_backend, ok
from toolfs.backends.local import temp_prefix


@pytest.mark.parametrize("length", [231, 240, 255])
def test_long_legal_names_can_be_written_on_local(tmp_path: pathlib.Path, length: int) -> None:
    b = local_backend(tmp_path)
    name = "n" * (length - 3) + ".py"
    ws = b.workspace()
    exec_ok(ws, "write", file_path=name, content="one\n")
    exec_ok(ws, "read", file_path=name)
    exec_ok(ws, "edit", file_path=name, old_string="one", new_string="two")
    assert b.get(name) == b"two\n"
    assert os.listdir(b.root) == [name]
    assert len(temp_prefix(name)) + 12 <= 255


def test_a_read_only_file_is_refused_not_replaced(tmp_path: pathlib.Path) -> None:
    b = local_backend(tmp_path)
    b.put("ro.txt", b"keep\n")
    path = os.path.join(b.root, "ro.txt")
    os.chmod(path, 0o444)
    inode = os.stat(path).st_ino
    ws = b.workspace()
    exec_ok(ws, "read", file_path="ro.txt")
    exec_err(ws, "edit", "denied", file_path="ro.txt", old_string="keep", new_string="lost")
    exec_err(ws, "write", "denied", file_path="ro.txt", content="lost\n")
    assert b.get("ro.txt") == b"keep\n" and os.stat(path).st_ino == inode


class Writing:
    """Writes: create, update after an observation, versions."""

    def test_write_creates_then_updates_after_observation(self, backend: Backend) -> None:
        ws = backend.workspace()
        out = ok(ws, "write", file_path="new/deep/f.txt", content="one\n")
        assert isinstance(out.value, toolfs.WriteResult) and out.value.action == "created"
        assert "Created new/deep/f.txt" in out.text
        assert backend.get("new/deep/f.txt") == b"one\n"
        out = ok(ws, "write", file_path="new/deep/f.txt", content="two\n")
        assert isinstance(out.value, toolfs.WriteResult) and out.value.action == "updated"
        assert backend.get("new/deep/f.txt") == b"two\n"

    def test_write_result_version_matches_next_read(self, backend: Backend) -> None:
        ws = backend.workspace()
        w = ws.write("v.txt", "hello\n")
        r = backend.workspace().read("v.txt")
        assert w.version == r.version

    def test_write_unicode_roundtrip(self, backend: Backend) -> None:
        ws = backend.workspace()
        text = "漢字 😀 e\u0301\nzweite Zeile"
        ws.write("u.txt", text)
        assert backend.get("u.txt") == text.encode()

    def test_trailing_dot_names_follow_the_capability(self, backend: Backend) -> None:
        """Stored as named where the backend can; refused, never altered, where the service
        would drop the dot (Azure: ``notes.`` would be ``notes``)."""
        backend.put("notes", b"the other file\n")
        ws = backend.workspace()
        for name in ("notes.", "d./x.txt"):
            if backend.capabilities.trailing_dot_names:
                ok(ws, "write", file_path=name, content="dotted\n")
                assert backend.get(name) == b"dotted\n"
            else:
                out = err(ws, "write", "invalid_arguments", file_path=name, content="dotted\n")
                assert "trailing dots" in out.text
                err(ws, "read", "invalid_arguments", file_path=name)
        assert backend.get("notes") == b"the other file\n"
