"""The hardening classes of issue 9 that live in the core: path conflicts, the root as a
file, escapes through symlinks and case, event hooks, execute's argument door, credential
masking, non-regular files and local write details. Contract tests run on every backend.
"""

from __future__ import annotations

import functools
import os
import pathlib
import socket
import stat
import threading
import traceback
from typing import Any

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

import toolfs
from tests.backends import Backend, LocalBackend
from toolfs.backends.local import LocalStore, temp_prefix
from toolfs.policy.events import FsEvent, Veto


def err(ws: Any, tool: str, code: str, **args: object) -> toolfs.ToolOutput:
    out = ws.execute(tool, args)
    assert out.error is not None, out.text
    assert out.error.code == code, out.text
    return out


def ok(ws: Any, tool: str, **args: object) -> toolfs.ToolOutput:
    out = ws.execute(tool, args)
    assert out.error is None, out.text
    return out


# -- item 13: one answer for path conflicts on every backend ---------------------------


@pytest.mark.parametrize("path", ["a.txt/b.txt", "a.txt/deeper/b.txt"])
def test_a_file_where_a_directory_is_needed_is_not_a_file(backend: Backend, path: str) -> None:
    backend.put("a.txt", b"file\n")
    ws = backend.workspace()
    for tool, args in (("write", {"content": "x"}), ("read", {}),
                       ("edit", {"old_string": "a", "new_string": "b"})):
        out = err(ws, tool, "not_a_file", file_path=path, **args)
        assert "a.txt is a file" in out.text, out.text
        assert backend.capabilities.symlinks or "/" + backend.root not in out.text
    assert not backend.exists(path)
    assert backend.get("a.txt") == b"file\n"


def test_a_directory_where_a_file_is_named_is_not_a_file(backend: Backend) -> None:
    backend.put("new/dir/file.py", b"x = 1\n")
    ws = backend.workspace()
    for name in ("new", "new/dir"):
        out = err(ws, "write", "not_a_file", file_path=name, content="text")
        assert f"{name} is a directory" in out.text
        err(ws, "read", "not_a_file", file_path=name)
    assert backend.get("new/dir/file.py") == b"x = 1\n"
    assert not backend.exists("new") or backend.fs.isdir(backend.key("new"))


# -- item 6: the root is never a file --------------------------------------------------


def test_the_root_is_never_a_file(backend: Backend) -> None:
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
    ok(ws, "write", file_path="after.txt", content="fine\n")
    assert backend.get("after.txt") == b"fine\n"


def test_an_object_named_like_the_root_is_not_reachable(s3_backend: Any) -> None:
    s3_backend.setup()
    s3_backend.fs.pipe_file(s3_backend.root, b"the prefix object\n")
    ws = s3_backend.workspace()
    err(ws, "read", "not_a_file", file_path=".")
    err(ws, "write", "not_a_file", file_path=".", content="x")
    s3_backend.fs.invalidate_cache()
    assert s3_backend.fs.cat_file(s3_backend.root) == b"the prefix object\n"


# -- item 13: a missing bucket ---------------------------------------------------------


@pytest.mark.parametrize("which", ["s3", "gcs", "azure"])
def test_a_missing_bucket_is_not_found_naming_it(request: pytest.FixtureRequest,
                                                 which: str) -> None:
    b = request.getfixturevalue(f"{which}_backend")
    b.setup()
    ws = toolfs.Workspace(b.fs, root="no-such-bucket/prefix")
    for tool, args in (("read", {}), ("write", {"content": "x"})):
        out = err(ws, tool, "not_found", file_path="a.txt", **args)
        noun = "container" if which == "azure" else "bucket"
        assert f"{noun} no-such-bucket does not exist" in out.text
        assert "retrying" not in out.text
    with pytest.raises(toolfs.FsError) as info:
        ws.fs.store.check_root()
    assert info.value.code == "not_found" and "no-such-bucket" in info.value.message


# -- item 16: small wrong texts of the jail ---------------------------------------------


@pytest.mark.parametrize("path", ["../", "../x/", "a/../", "..//"])
def test_dot_dot_with_a_trailing_slash_is_outside_root(backend: Backend, path: str) -> None:
    err(backend.workspace(), "read", "outside_root", file_path=path)


def test_a_lone_surrogate_path_is_invalid_on_every_backend(backend: Backend) -> None:
    ws = backend.workspace()
    for tool, args in (("read", {}), ("write", {"content": "x"}),
                       ("edit", {"old_string": "a", "new_string": "b"})):
        out = err(ws, tool, "invalid_arguments", file_path="caf\udce9.txt", **args)
        out.text.encode("utf-8")
    with pytest.raises(toolfs.FsError) as info:
        ws.read("\ud800.txt")
    assert info.value.code == "invalid_arguments"


# -- item 15: execute's door -------------------------------------------------------------


def test_execute_argument_door(backend: Backend) -> None:
    ws = backend.workspace()
    out = err(ws, "read", "invalid_arguments", model="x", file_path="a.txt")
    assert "unknown argument 'model'" in out.text
    assert "Value error" not in out.text and "arguments: arguments" not in out.text
    out = err(ws, "edit", "invalid_arguments", file_path="a.txt", old_string="s",
              new_string="s")
    assert "old_string and new_string must differ" in out.text
    assert "Value error" not in out.text
    assert ws.execute("read", {1: "x"}).error.code == "invalid_arguments"  # type: ignore[dict-item, union-attr]
    out = ws.execute("write", '{"file_path": "j.txt", "content": "from json\\n"}')
    assert out.error is None, out.text
    assert backend.get("j.txt") == b"from json\n"
    for bad in ('["file_path"]', "{oops", '"text"'):
        assert ws.execute("read", bad).error.code == "invalid_arguments"  # type: ignore[union-attr]
    out = err(ws, "write", "invalid_arguments", file_path="m.txt")
    assert "missing required argument 'content'" in out.text


# -- item 14: what the tool reports matches what happened on storage ---------------------


def test_a_raising_written_subscriber_does_not_turn_a_commit_into_an_error(
        backend: Backend) -> None:
    ws = backend.workspace()

    def broken(event: FsEvent) -> None:
        if event.type in ("fs/written", "fs/denied"):
            raise RuntimeError("audit sink down")

    ws.subscribe(broken)
    out = ok(ws, "write", file_path="w.txt", content="one\n")
    assert out.text.startswith("Created")
    assert backend.get("w.txt") == b"one\n"
    ok(ws, "edit", file_path="w.txt", old_string="one", new_string="two")
    assert backend.get("w.txt") == b"two\n"
    other = ws.new_context()
    err(other, "write", "not_observed", file_path="w.txt", content="three\n")


@pytest.mark.parametrize("raised", [Veto("no reading"), RuntimeError("hook bug")])
def test_a_refused_read_records_no_observation(backend: Backend, raised: Exception) -> None:
    backend.put("r.txt", b"secret\n")
    ws = backend.workspace()

    def hook(event: FsEvent) -> None:
        if event.type == "fs/read":
            raise raised

    ws.subscribe(hook)
    out = err(ws, "read", "denied", file_path="r.txt")
    assert "secret" not in out.text
    with pytest.raises(toolfs.FsError) as info:
        ws.read("r.txt")
    assert info.value.code == "denied"
    ws.fs.subscribers.remove(hook)
    err(ws, "edit", "not_observed", file_path="r.txt", old_string="secret", new_string="x")
    assert backend.get("r.txt") == b"secret\n"


def test_a_failing_write_intent_hook_refuses_the_write(backend: Backend) -> None:
    ws = backend.workspace()

    def hook(event: FsEvent) -> None:
        if event.type == "fs/write-intent":
            raise ConnectionError("approval service down")

    ws.subscribe(hook)
    out = err(ws, "write", "denied", file_path="h.txt", content="x")
    assert "subscriber failed" in out.text
    assert not backend.exists("h.txt")


# -- item 5: deny rules on the file reached ----------------------------------------------


def _local(tmp_path: pathlib.Path) -> LocalBackend:
    b = LocalBackend(str(tmp_path))
    b.setup()
    return b


def test_deny_rules_follow_symlinks_to_the_file_reached(tmp_path: pathlib.Path) -> None:
    b = _local(tmp_path)
    root = pathlib.Path(b.root)
    (root / ".env").write_text("TOKEN=hunter2\n")
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / "config").mkdir()
    (root / "config" / "env.example").symlink_to("../.env")
    (root / "gitdir").symlink_to(".git")
    (root / "deep").mkdir()
    (root / "deep" / "up").symlink_to("..")
    events: list[FsEvent] = []
    ws = b.workspace(deny=[".env", ".git/**"], subscribers=[events.append])
    out = err(ws, "read", "denied", file_path="config/env.example")
    assert "hunter2" not in out.text
    err(ws, "read", "denied", file_path="deep/up/.env")
    err(ws, "write", "denied", file_path="gitdir/hooks/post-checkout", content="#!/bin/sh\n")
    err(ws, "write", "denied", file_path="deep/up/gitdir/config", content="x")
    assert not (root / ".git" / "hooks" / "post-checkout").exists()
    # Events name the file actually reached.
    assert {e.path for e in events if e.type == "fs/denied"} >= {
        ".env", ".git/hooks/post-checkout"}
    # A symlink to an allowed file stays usable.
    (root / "real.txt").write_text("ok\n")
    (root / "alias.txt").symlink_to("real.txt")
    assert ok(ws, "read", file_path="alias.txt").text.endswith("ok")


def test_deny_rules_fold_case_where_the_filesystem_does(tmp_path: pathlib.Path) -> None:
    b = _local(tmp_path)
    (pathlib.Path(b.root) / ".env").write_text("TOKEN=hunter2\n")
    store = LocalStore(b.fs, root=b.root)
    assert store.folds_case is False  # this volume is case-sensitive
    store.folds_case = True  # as on a default macOS or Windows volume
    ws = toolfs.Workspace(b.fs, root=b.root, deny=[".env", ".git/**"], store=store)
    for name in (".ENV", ".Env", ".GIT/config", ".git/CONFIG"):
        err(ws, "write", "denied", file_path=name, content="x")
    sensitive = toolfs.Workspace(b.fs, root=b.root, deny=[".env"])
    ok(sensitive, "write", file_path=".ENV", content="a different file here\n")


# -- item 8: non-regular files never block -------------------------------------------------


def _bounded(fn: Any, seconds: float = 20.0) -> Any:
    """Run ``fn`` in a thread; fail (rather than hang) if it blocks."""
    box: list[Any] = []
    t = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "the call blocked on a non-regular file"
    return box[0]


def test_fifos_and_sockets_are_not_files_and_never_block(tmp_path: pathlib.Path) -> None:
    b = _local(tmp_path)
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


# -- item 16: local write details ------------------------------------------------------------


@pytest.mark.parametrize("length", [231, 240, 255])
def test_long_legal_names_can_be_written_on_local(tmp_path: pathlib.Path, length: int) -> None:
    b = _local(tmp_path)
    name = "n" * (length - 3) + ".py"
    ws = b.workspace()
    ok(ws, "write", file_path=name, content="one\n")
    ok(ws, "read", file_path=name)
    ok(ws, "edit", file_path=name, old_string="one", new_string="two")
    assert b.get(name) == b"two\n"
    assert os.listdir(b.root) == [name]
    assert len(temp_prefix(name)) + 12 <= 255


def test_a_read_only_file_is_refused_not_replaced(tmp_path: pathlib.Path) -> None:
    b = _local(tmp_path)
    b.put("ro.txt", b"keep\n")
    path = os.path.join(b.root, "ro.txt")
    os.chmod(path, 0o444)
    inode = os.stat(path).st_ino
    ws = b.workspace()
    ok(ws, "read", file_path="ro.txt")
    err(ws, "edit", "denied", file_path="ro.txt", old_string="keep", new_string="lost")
    err(ws, "write", "denied", file_path="ro.txt", content="lost\n")
    assert b.get("ro.txt") == b"keep\n" and os.stat(path).st_ino == inode


def test_a_write_over_the_cap_says_to_write_less(backend: Backend) -> None:
    ws = backend.workspace(size_cap=1000)
    out = err(ws, "write", "too_large", file_path="big.txt", content="x" * 2000)
    assert "write less" in out.text.lower()
    assert "offset" not in out.error.message  # type: ignore[union-attr]


# -- item 4: a writer that does not take the lock ------------------------------------------


def test_an_in_place_change_during_the_temp_write_is_stale_not_lost(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = _local(tmp_path)
    b.put("f.txt", b"original\n")
    ws = b.workspace()
    ws.read("f.txt")
    target = os.path.join(b.root, "f.txt")
    real_fsync = os.fsync
    fired: list[int] = []

    def fsync_then_other_program_writes(fd: int) -> None:
        real_fsync(fd)
        if not fired:  # after our temp file is written: another program, no lock
            fired.append(fd)
            with open(target, "r+") as other:
                other.write("OTHER!!!\n")

    monkeypatch.setattr(os, "fsync", fsync_then_other_program_writes)
    out = ws.execute("edit", {"file_path": "f.txt", "old_string": "original",
                              "new_string": "mine"})
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert fired
    assert out.error is not None and out.error.code == "stale", out.text
    assert b.get("f.txt") == b"OTHER!!!\n"
    assert os.listdir(b.root) == ["f.txt"]


# -- item 16: did-you-mean is bounded and case-insensitive ------------------------------------


def test_did_you_mean_is_case_insensitive(backend: Backend) -> None:
    backend.put("README.md", b"# hi\n")
    out = err(backend.workspace(), "read", "not_found", file_path="readme.md")
    if backend.capabilities.cheap_listing:
        assert "README.md" in out.text
        assert out.error.details["did_you_mean"][0] == "README.md"  # type: ignore[union-attr]


def test_did_you_mean_in_a_huge_directory_is_bounded(tmp_path: pathlib.Path) -> None:
    b = _local(tmp_path)
    root = pathlib.Path(b.root)
    for i in range(5000):
        (root / f"file_{i:05d}.txt").touch()
    (root / "Target.TXT").touch()
    ws = b.workspace()
    calls: list[int] = []
    import difflib
    real = difflib.get_close_matches

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(len(args[1]))
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(difflib, "get_close_matches", counting)
        out = err(ws, "read", "not_found", file_path="target.txt")
    assert "Target.TXT" in out.text  # the case-insensitive match is still offered
    assert not calls  # no fuzzy comparison against 5,000 names


def test_undecodable_names_in_hints_and_events_are_escaped(tmp_path: pathlib.Path) -> None:
    b = _local(tmp_path)
    fd = os.open(os.path.join(os.fsencode(b.root), b"caf\xe9.txt"), os.O_CREAT | os.O_WRONLY)
    os.close(fd)
    events: list[FsEvent] = []
    ws = b.workspace(subscribers=[events.append])
    out = err(ws, "read", "not_found", file_path="cafe.txt")
    out.text.encode("utf-8")
    assert "caf\\udce9.txt" in out.text
    for e in events:
        e.model_dump_json()


# -- item 3 and 7: credentials masked in errors only, never in content ------------------


SECRET = "hunter2-s3cr3t-value"


def test_a_secret_in_file_content_is_never_masked() -> None:
    ws = toolfs.Workspace(f"memory://redact-{os.getpid()}",
                          storage_options={"password": SECRET, "token": "anon"})
    content = f"MINIO_ROOT_PASSWORD={SECRET}\nauth_mode = anonymous\n"
    ok(ws, "write", file_path="env.txt", content=content)
    out = ok(ws, "read", file_path="env.txt")
    assert SECRET in out.text and "anonymous" in out.text
    assert out.value.lines == content.splitlines()  # type: ignore[union-attr]
    ok(ws, "edit", file_path="env.txt", old_string=f"={SECRET}", new_string="=rotated")
    assert ws.read("env.txt").lines[0] == "MINIO_ROOT_PASSWORD=rotated"
    # ... while an error message holding it is masked.
    out = err(ws, "read", "not_found", file_path=f"{SECRET}.txt")
    assert SECRET not in out.text and "***" in out.text
    assert SECRET not in str(out.error.to_dict())  # type: ignore[union-attr]


class _LeakyFileSystem(MemoryFileSystem):  # type: ignore[misc]
    """A client library that puts its credential into its exception text."""

    protocol = "leakyfs"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        token = kwargs.get("token", "")
        try:
            raise OSError(f"GET https://auth.example/tokeninfo?access_token={token} failed")
        except OSError as inner:
            raise ConnectionError(f"cannot authenticate with {token}") from inner


def test_no_secret_leaves_in_any_exception_or_its_causes() -> None:
    fsspec.register_implementation("leakyfs", _LeakyFileSystem, clobber=True)
    with pytest.raises(toolfs.FsError) as info:
        toolfs.Workspace("leakyfs://bkt/x", storage_options={"token": SECRET})
    text = "".join(traceback.format_exception(info.value))
    assert info.value.code == "backend_error"
    assert SECRET not in text
    assert "ConnectionError" in text and "***" in text
