"""Paths that are missing, directories, or the root: not found and not a file on every
verb and backend."""

from __future__ import annotations

import functools
import os
import pathlib
import socket
import stat
import threading
from typing import Any

import pytest

import toolfs
from tests.backend_fixtures import Backend
from tests.contract.calls import exec_err, exec_ok, local_backend
from toolfs.integrations.anthropic import MemoryTool, TextEditor
from toolfs.integrations.deepagents import ToolfsBackend
from toolfs.integrations.openai import apply_patch, apply_patch_text


def _bounded(fn: Any, seconds: float = 20.0) -> Any:
    """Run ``fn`` in a thread; fail (rather than hang) if it blocks."""
    box: list[Any] = []
    t = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "the call blocked on a non-regular file"
    return box[0]


def _error_code(text: str) -> str:
    assert text.startswith("Error ["), text
    return text[len("Error ["):text.index("]")]


def test_an_object_named_like_the_root_is_not_reachable(s3_backend: Any) -> None:
    s3_backend.setup()
    s3_backend.fs.pipe_file(s3_backend.root, b"the prefix object\n")
    ws = s3_backend.workspace()
    exec_err(ws, "read", "not_a_file", file_path=".")
    exec_err(ws, "write", "not_a_file", file_path=".", content="x")
    s3_backend.fs.invalidate_cache()
    assert s3_backend.fs.cat_file(s3_backend.root) == b"the prefix object\n"


MISSING_BUCKET_CALLS: list[tuple[str, dict[str, object]]] = [
    ("read", {"file_path": "a.txt"}),
    ("write", {"file_path": "a.txt", "content": "x"}),
    ("edit", {"file_path": "a.txt", "old_string": "a", "new_string": "b"}),
    ("ls", {}),
    ("ls", {"path": "sub"}),
    ("glob", {"pattern": "**/*.txt"}),
    ("glob", {"pattern": "*.txt", "path": "sub"}),
    ("grep", {"pattern": "x"}),
    ("grep", {"pattern": "x", "path": "a.txt"}),
    ("grep", {"pattern": "x", "path": "sub", "output_mode": "content"}),
]


@pytest.mark.parametrize("which", ["s3", "gcs", "azure"])
def test_a_missing_bucket_is_one_error_for_every_tool(request: pytest.FixtureRequest,
                                                     which: str) -> None:
    """Every tool, on a root in a bucket (container) that does not exist or on the
    bucket itself: ``missing_bucket`` naming it, with advice that sends the model to the
    user rather than into a loop (never "create the file with write", never "retry"),
    an empty listing never; and ``check_root`` (what a server calls at start) alike."""
    b = request.getfixturevalue(f"{which}_backend")
    b.setup()
    noun = "container" if which == "azure" else "bucket"
    for root in ("no-such-bucket/prefix", "no-such-bucket"):
        ws = toolfs.Workspace(b.fs, root=root)
        for tool, args in MISSING_BUCKET_CALLS:
            out = exec_err(ws, tool, "missing_bucket", **args)
            assert out.error is not None
            assert out.error.details["bucket"] == "no-such-bucket", out.text
            assert f"the {noun} no-such-bucket does not exist" in out.text, out.text
            assert "tell the user" in out.text and "no tool call can create it" in out.text
            assert "write" not in out.text and "retrying" not in out.text.replace(
                "stop retrying", ""), out.text
            assert "scratch" not in out.text and "no-such-bucket/" not in out.text
        with pytest.raises(toolfs.FsError) as info:
            ws.check_root()
        assert info.value.code == "missing_bucket" and isinstance(info.value,
                                                                  FileNotFoundError)
        assert f"the {noun} no-such-bucket does not exist" in info.value.message


def test_fifos_and_sockets_are_not_files_and_never_block(tmp_path: pathlib.Path) -> None:
    b = local_backend(tmp_path)
    root = pathlib.Path(b.root)
    os.mkfifo(root / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "sock"))
    try:
        ws = b.workspace(policy=None)
        for name in ("pipe", "sock"):
            for tool, args in (("read", {}), ("write", {"content": "x"}),
                               ("edit", {"old_string": "a", "new_string": "b"})):
                out = _bounded(functools.partial(ws.execute, tool, {"file_path": name, **args}))
                assert out.error is not None and out.error.code == "not_a_file", out.text
        # the directory lock was never left held: a normal write next to them works
        out = _bounded(lambda: ws.execute("write", {"file_path": "ok.txt", "content": "x"}))
        assert out.error is None
        assert stat.S_ISFIFO(os.lstat(root / "pipe").st_mode)
    finally:
        sock.close()


class Paths:
    """Missing files, directories and the root named where a file is needed."""

    @pytest.mark.parametrize("path", ["a.txt/b.txt", "a.txt/deeper/b.txt"])
    def test_a_file_where_a_directory_is_needed_is_not_a_file(
            self, backend: Backend, path: str) -> None:
        backend.put("a.txt", b"file\n")
        ws = backend.workspace()
        for tool, args in (("write", {"content": "x"}), ("read", {}),
                           ("edit", {"old_string": "a", "new_string": "b"})):
            out = exec_err(ws, tool, "not_a_file", file_path=path, **args)
            assert "a.txt is a file" in out.text, out.text
            assert backend.capabilities.symlinks or "/" + backend.root not in out.text
        assert not backend.exists(path)
        assert backend.get("a.txt") == b"file\n"

    def test_a_directory_where_a_file_is_named_is_not_a_file(self, backend: Backend) -> None:
        backend.put("new/dir/file.py", b"x = 1\n")
        ws = backend.workspace()
        for name in ("new", "new/dir"):
            out = exec_err(ws, "write", "not_a_file", file_path=name, content="text")
            assert f"{name} is a directory" in out.text
            exec_err(ws, "read", "not_a_file", file_path=name)
        assert backend.get("new/dir/file.py") == b"x = 1\n"
        assert not backend.exists("new") or backend.fs.isdir(backend.key("new"))

    def test_the_root_is_never_a_file(self, backend: Backend) -> None:
        ws = backend.workspace()
        proto = backend.fs.protocol if isinstance(backend.fs.protocol, str) else (
            backend.fs.protocol[0])
        root_url = f"{proto}://{backend.root.lstrip('/')}" if not backend.root.startswith("/") \
            else f"{proto}://{backend.root}"
        names = [".", "./", "./.", backend.root if backend.root.startswith("/") else "."]
        if backend.name != "generic":
            names.append(root_url)
        for name in names:
            for tool, args in (("read", {}), ("write", {"content": "x"}),
                               ("edit", {"old_string": "a", "new_string": "b"})):
                out = ws.execute(tool, {"file_path": name, **args})
                assert out.error is not None and out.error.code in ("not_a_file",), (name, out.text)
        # ... and nothing became a file: the workspace still works.
        exec_ok(ws, "write", file_path="after.txt", content="fine\n")
        assert backend.get("after.txt") == b"fine\n"

    def test_a_directory_after_its_last_file_is_removed(self, backend: Backend) -> None:
        backend.put("d/only.txt", b"x\n")
        backend.put("keep.txt", b"k\n")
        ws = backend.workspace()
        ws.read("d/only.txt")
        ws.fs.rm_file("d/only.txt")
        names = [e.name for e in ws.ls().entries]
        if backend.keeps_empty_dirs:
            assert names == ["d", "keep.txt"]
            assert ws.ls("d").entries == []
        else:
            assert names == ["keep.txt"]
            out = ws.execute("ls", {"path": "d"})
            assert out.error is not None and out.error.code == "not_found", out.text
        # glob and grep see files only: the same answer everywhere
        assert ws.glob("**/*").paths == ["keep.txt"]


class SyncPaths:
    """A missing file and a trailing slash on every verb."""

    def test_a_missing_file_is_not_found_on_every_verb(self, sync_backend: Backend) -> None:
        ws = sync_backend.workspace()
        answers: dict[str, str] = {}
        for tool, args in [("read", {"file_path": "nope.txt"}),
                           ("edit", {"file_path": "nope.txt", "old_string": "a",
                                     "new_string": "b"}),
                           ("ls", {"path": "nope"})]:
            answers[f"execute {tool}"] = ws.execute(tool, args).text
        editor, memory = TextEditor(ws), MemoryTool(ws)
        for cmd in ({"command": "view", "path": "nope.txt"},
                    {"command": "str_replace", "path": "nope.txt", "old_str": "a", "new_str": "b"},
                    {"command": "insert", "path": "nope.txt", "insert_line": 0,
                     "insert_text": "x"}):
            answers[f"editor {cmd['command']}"] = editor.execute(cmd).text
        for cmd in ({"command": "view", "path": "/memories/nope.txt"},
                    {"command": "str_replace", "path": "/memories/nope.txt", "old_str": "a",
                     "new_str": "b"},
                    {"command": "insert", "path": "/memories/nope.txt", "insert_line": 0,
                     "insert_text": "x"},
                    {"command": "delete", "path": "/memories/nope.txt"},
                    {"command": "rename", "old_path": "/memories/nope.txt",
                     "new_path": "/memories/other.txt"}):
            answers[f"memory {cmd['command']}"] = memory.execute_input(cmd).text
        for op in ({"type": "delete_file", "path": "nope.txt"},
                   {"type": "update_file", "path": "nope.txt", "diff": "@@\n-a\n+b\n"}):
            answers[f"apply_patch {op['type']}"] = apply_patch(ws, op).text
        answers["apply_patch text delete"] = apply_patch_text(
            ws, "*** Begin Patch\n*** Delete File: nope.txt\n*** End Patch\n").text
        for verb, text in answers.items():
            assert _error_code(text) == "not_found", (verb, text)
            assert "before" not in text and "first" not in text.split("\n")[0], (verb, text)
        agent = ToolfsBackend(ws)
        refusals: dict[str, Any] = {
            "read": agent.read("/nope.txt").error, "edit": agent.edit("/nope.txt", "a", "b").error,
            "delete": agent.delete("/nope.txt").error, "ls": agent.ls("/nope").error,
            "download": agent.download_files(["/nope.txt"])[0].error}
        for verb, error in refusals.items():  # Deep Agents' own wording and codes
            assert error is not None and "not found" in error.replace("_", " "), (verb, error)

    def test_a_trailing_slash_names_the_directory_on_every_verb(
            self, sync_backend: Backend) -> None:
        sync_backend.put("dir/a.txt", b"hello\n")
        sync_backend.put("dir/sub/b.py", b"x = 1\n")
        ws = sync_backend.workspace()
        assert ws.execute("ls", {"path": "dir/"}).text.startswith("a.txt")
        assert ws.execute("glob", {"pattern": "*.txt", "path": "dir/"}).text == "dir/a.txt"
        assert ws.execute("grep", {"pattern": "hello", "path": "dir/"}).text == "dir/a.txt"
        for tool, args in [("read", {"file_path": "dir/"}),
                           ("write", {"file_path": "dir/", "content": "x"}),
                           ("edit", {"file_path": "dir/", "old_string": "a", "new_string": "b"})]:
            assert _error_code(ws.execute(tool, args).text) == "not_a_file", tool
        agent = ToolfsBackend(ws)
        assert [m["path"] for m in agent.glob("*.txt", path="/dir/").matches or []] == \
            ["/dir/a.txt"]
        assert sorted(m["path"] for m in agent.glob("**/*", path="/dir/").matches or []) == \
            ["/dir/a.txt", "/dir/sub/b.py"]
        assert "/dir/a.txt" in {e["path"] for e in agent.ls("/dir/").entries or []}
        assert [m["path"] for m in agent.grep("hello", path="/dir/").matches or []] == \
            ["/dir/a.txt"]
        assert TextEditor(ws).execute({"command": "view", "path": "dir/"}).text.startswith(
            "Here's the files and directories")
        memory = MemoryTool(ws)
        assert "dir/a.txt" in memory.execute_input({"command": "view",
                                                    "path": "/memories/dir/"}).text
        ws.read("dir/a.txt")
        ws.read("dir/sub/b.py")
        renamed = memory.execute_input({"command": "rename", "old_path": "/memories/dir/",
                                        "new_path": "/memories/moved/"})
        assert not renamed.is_error, renamed.text
        assert sync_backend.get("moved/sub/b.py") == b"x = 1\n"
        ws.read("moved/a.txt")
        ws.read("moved/sub/b.py")
        deleted = memory.execute_input({"command": "delete", "path": "/memories/moved/"})
        assert not deleted.is_error, deleted.text
        assert not sync_backend.exists("moved/a.txt")
        sync_backend.put("f.txt", b"file\n")
        ws.read("f.txt")
        not_a_dir = memory.execute_input({"command": "delete", "path": "/memories/f.txt/"})
        assert _error_code(not_a_dir.text) == "not_found" and sync_backend.exists("f.txt")
