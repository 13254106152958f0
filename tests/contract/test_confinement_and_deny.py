"""Confinement and deny rules: no path leaves the root (dot-dot, symlinks, hard links,
prefix siblings, swapped parents), denied files are refused and never listed."""

from __future__ import annotations

import os
import pathlib
import shutil

import fsspec
import pytest

import toolfs
from tests.backend_fixtures import Backend, LocalBackend
from tests.contract.calls import err, exec_err, exec_ok, local_backend, ok
from toolfs.backends.local import LocalStore
from toolfs.errors import FsError
from toolfs.policy.events import FsEvent
from toolfs.policy.paths import Jail


def _answer(jail: Jail, rel: str) -> tuple[str, str, str] | str:
    """What ``jail.resolve`` gives: the target's paths, or the refusal's code."""
    try:
        t = jail.resolve(rel)
    except FsError as err:
        return err.code
    return t.backend_path, t.display, t.reached


def _fresh(jail: Jail) -> Jail:
    return Jail(jail.root, jail.protocols, resolve_symlinks=jail.resolve_symlinks)


def _moved_root(tmp_path: pathlib.Path) -> tuple[toolfs.Workspace, pathlib.Path,
                                                 pathlib.Path]:
    """A workspace whose root's parent is then swapped for a link to a look-alike tree."""
    parent = tmp_path / "parent"
    for base in (parent, tmp_path / "elsewhere"):
        (base / "root" / "d").mkdir(parents=True)
        (base / "root" / "f.txt").write_text("f\n")
        (base / "root" / "d" / "g.txt").write_text("g\n")
    ws = toolfs.Workspace(str(parent / "root"))
    for rel in ("f.txt", "d/g.txt"):
        ws.read(rel)
    parent.rename(tmp_path / "moved")
    os.symlink(tmp_path / "elsewhere", parent)  # the root's path now leads elsewhere
    return ws, tmp_path / "moved" / "root", tmp_path / "elsewhere" / "root"


# (path, why) -- every one must be refused with outside_root on every backend.
ATTACKS = [
    ("../escape.txt", "parent"),
    ("a/../../escape.txt", "parent in the middle"),
    ("a/..", "parent at the end"),
    ("..", "bare parent"),
    ("./../escape.txt", "dot then parent"),
    ("/etc/passwd", "absolute outside"),
    ("//etc/passwd", "double slash absolute"),
    ("a//b.txt", "empty segment"),
    ("a\\..\\..\\escape.txt", "backslashes"),
    ("..\\escape.txt", "backslash parent"),
    ("a\x00.txt", "NUL"),
    ("%2e%2e/escape.txt", "percent-encoded dots"),
    ("a%2f..%2f..%2fescape.txt", "percent-encoded slash"),
    ("\uff0e\uff0e/escape.txt", "fullwidth dots"),
    ("a\u2215..\u2215escape.txt", "division slash look-alike"),
    ("file:///etc/passwd", "file URL"),
    ("s3://other-bucket/x.txt", "other bucket URL"),
    ("gs://other-bucket/x.txt", "other bucket GCS URL"),
    ("az://other-container/x.txt", "other container Azure URL"),
    ("abfs://other@acct.dfs.core.windows.net/x.txt", "other container ABFS URL"),
    ("memory://elsewhere/x.txt", "other memory root"),
    ("http://example.invalid/x", "http URL"),
]


def _local(tmp_path: pathlib.Path) -> tuple[LocalBackend, pathlib.Path]:
    b = LocalBackend(str(tmp_path))
    b.setup()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    return b, outside


DENY = [".env", "*.pem", ".git/**"]


def _denied_tree(backend: Backend) -> toolfs.Workspace:
    backend.put(".env", b"SECRET=1\n")
    backend.put("id.pem", b"-----BEGIN\n")
    backend.put(".git/config", b"[core]\n")
    backend.put("src/app.py", b"print(1)\n")
    return backend.workspace(deny=DENY)


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


def test_deny_rules_follow_symlinks_to_the_file_reached(tmp_path: pathlib.Path) -> None:
    b = local_backend(tmp_path)
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
    out = exec_err(ws, "read", "denied", file_path="config/env.example")
    assert "hunter2" not in out.text
    exec_err(ws, "read", "denied", file_path="deep/up/.env")
    exec_err(ws, "write", "denied", file_path="gitdir/hooks/post-checkout", content="#!/bin/sh\n")
    exec_err(ws, "write", "denied", file_path="deep/up/gitdir/config", content="x")
    assert not (root / ".git" / "hooks" / "post-checkout").exists()
    # Events name the file actually reached.
    assert {e.path for e in events if e.type == "fs/denied"} >= {
        ".env", ".git/hooks/post-checkout"}
    # A symlink to an allowed file stays usable.
    (root / "real.txt").write_text("ok\n")
    (root / "alias.txt").symlink_to("real.txt")
    assert exec_ok(ws, "read", file_path="alias.txt").text.endswith("ok")


def test_deny_rules_fold_case_where_the_filesystem_does(tmp_path: pathlib.Path) -> None:
    b = local_backend(tmp_path)
    (pathlib.Path(b.root) / ".env").write_text("TOKEN=hunter2\n")
    store = LocalStore(b.fs, root=b.root)
    assert store.folds_case is False  # this volume is case-sensitive
    store.folds_case = True  # as on a default macOS or Windows volume
    ws = toolfs.Workspace(b.fs, root=b.root, deny=[".env", ".git/**"], store=store)
    for name in (".ENV", ".Env", ".GIT/config", ".git/CONFIG"):
        exec_err(ws, "write", "denied", file_path=name, content="x")
    sensitive = toolfs.Workspace(b.fs, root=b.root, deny=[".env"])
    exec_ok(sensitive, "write", file_path=".ENV", content="a different file here\n")


@pytest.mark.parametrize("via_link", [False, True], ids=["real root", "root via a link"])
def test_a_remembered_path_resolves_as_a_fresh_jail_does(tmp_path: pathlib.Path,
                                                        via_link: bool) -> None:
    real, _ = _tree(tmp_path)
    jail = Jail(str(tmp_path / "root-link" if via_link else real), ("file", "local"),
                resolve_symlinks=True)
    first = {rel: _answer(jail, rel) for rel in PATHS}
    again = {rel: _answer(jail, rel) for rel in PATHS}  # every one from the memory now
    assert again == first == {rel: _answer(_fresh(jail), rel) for rel in PATHS}


def test_a_remembered_path_that_became_a_link_is_followed_or_refused(
        tmp_path: pathlib.Path) -> None:
    real, outside = _tree(tmp_path)
    jail = Jail(str(real), ("file", "local"), resolve_symlinks=True)
    for rel in ("new.txt", "a/b/c.txt", "a/b/gone/x.txt"):
        assert _answer(jail, rel) == (str(real / rel), rel, rel)
    # The file becomes a link inside the root, the directory one to outside it.
    os.symlink(real / "f.txt", real / "new.txt")
    shutil.rmtree(real / "a" / "b")
    os.symlink(outside / "deep", real / "a" / "b")
    assert _answer(jail, "new.txt") == (str(real / "f.txt"), "new.txt", "f.txt")
    assert _answer(jail, "a/b/c.txt") == "outside_root"
    assert _answer(jail, "a/b/gone/x.txt") == "outside_root"
    for rel in ("new.txt", "a/b/c.txt", "a/b/gone/x.txt"):
        assert _answer(jail, rel) == _answer(_fresh(jail), rel)


def test_a_remembered_path_under_a_moved_root_is_refused(tmp_path: pathlib.Path) -> None:
    parent = tmp_path / "parent"
    (parent / "root").mkdir(parents=True)
    (parent / "root" / "f.txt").write_text("mine")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "root").mkdir(parents=True)
    jail = Jail(str(parent / "root"), ("file", "local"), resolve_symlinks=True)
    assert _answer(jail, "f.txt") == (str(parent / "root" / "f.txt"), "f.txt", "f.txt")
    parent.rename(tmp_path / "moved")
    os.symlink(elsewhere, parent)
    assert _answer(jail, "f.txt") == "outside_root"


def test_refused_paths_are_refused_every_time(tmp_path: pathlib.Path) -> None:
    """Refusals are never remembered as answers: the second call refuses again."""
    jail = Jail(str(tmp_path), ("file", "local"), resolve_symlinks=True)
    for bad in ("../x", "a//b", "a\\b", "%2e%2e/x", "\udce9.txt", "a\x00b", "/etc/passwd"):
        codes = {_answer(jail, bad) for _ in range(2)}
        assert len(codes) == 1 and codes <= {"outside_root", "invalid_arguments"}, bad


def test_the_memory_is_bounded(tmp_path: pathlib.Path) -> None:
    from toolfs.policy import paths

    jail = Jail(str(tmp_path), ("file", "local"), resolve_symlinks=True)
    for i in range(paths._CACHED_PATHS * 2 + 5):
        jail.resolve(f"f{i}.txt")
    jail.resolve("x" * (paths._CACHED_PATH_CHARS + 1))
    assert len(jail._confined) <= paths._CACHED_PATHS
    assert all(len(p) <= paths._CACHED_PATH_CHARS for p in jail._confined)
    # A path remembered on memory filesystems too (no links to ask about).
    mem = Jail("/proj", ("memory",))
    assert mem.resolve("a/./b.txt") is mem.resolve("a/./b.txt")
    assert mem.resolve("a/./b.txt").backend_path == "/proj/a/b.txt"


@pytest.mark.parametrize("rel", ["f.txt", "d/g.txt", "new.txt", "d/new.txt"])
def test_every_tool_refuses_a_root_whose_parent_became_a_link(tmp_path: pathlib.Path,
                                                            rel: str) -> None:
    ws, moved, elsewhere = _moved_root(tmp_path)
    before = {p: p.read_bytes() for p in elsewhere.rglob("*") if p.is_file()}
    calls = [("read", {"file_path": rel}),
             ("write", {"file_path": rel, "content": "x\n"}),
             ("edit", {"file_path": rel, "old_string": rel[-5], "new_string": "y"})]
    for tool, args in calls:
        out = ws.execute(tool, args)
        assert out.error is not None and out.error.code == "outside_root", (tool, out.text)
    assert {p: p.read_bytes() for p in elsewhere.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in elsewhere.rglob("*")) == sorted(
        p.name for p in moved.rglob("*"))  # no file left behind either


def test_a_re_created_root_keeps_working_for_every_tool(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    ws = toolfs.Workspace(str(root))
    ws.write("f.txt", "one\n")
    shutil.rmtree(root)
    root.mkdir()
    (root / "d").mkdir()
    with pytest.raises(FsError) as exc:  # read as "one", gone with the old root
        ws.write("f.txt", "two\n")
    assert exc.value.code == "stale"
    ws.write("f2.txt", "two\n")  # never seen: created in the new root
    ws.write("d/g.txt", "g\n")
    assert ws.read("f2.txt").lines == ["two"]
    ws.edit("f2.txt", "two", "three")
    ws.edit("d/g.txt", "g", "h")
    assert (root / "f2.txt").read_text() == "three\n"
    assert (root / "d" / "g.txt").read_text() == "h\n"
    assert sorted(os.listdir(root)) == ["d", "f2.txt"]


def test_a_store_for_another_root_does_not_check_this_one(tmp_path: pathlib.Path) -> None:
    """The policy leaves the root check to its store only when the store walks from
    this very root."""
    import fsspec

    from toolfs.backends.local import LocalStore
    from toolfs.policy.filesystem import PolicyFileSystem

    (tmp_path / "root").mkdir()
    local = fsspec.filesystem("file")
    own = PolicyFileSystem(local, str(tmp_path / "root"))
    other = PolicyFileSystem(local, str(tmp_path / "root"),
                             store=LocalStore(local, root=str(tmp_path)))
    assert own._root_checked and not other._root_checked


def test_a_missing_local_root_is_reported_once_and_clearly(tmp_path: object) -> None:
    with pytest.raises(FsError) as exc:
        toolfs.Workspace(f"{tmp_path}/does-not-exist")
    assert exc.value.code == "not_found" and "root" in exc.value.message


def test_sibling_prefix_root_is_outside(tmp_path: pathlib.Path) -> None:
    b = LocalBackend(str(tmp_path))
    b.setup()
    evil = tmp_path / "root-evil"
    evil.mkdir()
    (evil / "x.txt").write_text("secret\n")
    ws = b.workspace()
    for path in [str(evil / "x.txt"), f"file://{evil}/x.txt", "../root-evil/x.txt"]:
        out = ws.execute("read", {"file_path": path})
        assert out.error is not None and out.error.code == "outside_root", path


def test_absolute_path_inside_root_is_accepted(tmp_path: pathlib.Path) -> None:
    b = LocalBackend(str(tmp_path))
    b.setup()
    b.put("in.txt", b"hello\n")
    ws = b.workspace()
    out = ws.execute("read", {"file_path": os.path.join(b.root, "in.txt")})
    assert not out.is_error, out.text
    assert out.value is not None and out.value.path == "in.txt"


def test_symlinked_file_escape(tmp_path: pathlib.Path) -> None:
    b, outside = _local(tmp_path)
    os.symlink(outside / "secret.txt", os.path.join(b.root, "link.txt"))
    ws = b.workspace()
    for tool, extra in [("read", {}), ("write", {"content": "x"})]:
        out = ws.execute(tool, {"file_path": "link.txt", **extra})
        assert out.error is not None and out.error.code == "outside_root", out.text
    assert (outside / "secret.txt").read_text() == "secret\n"


def test_symlinked_parent_of_new_file_escape(tmp_path: pathlib.Path) -> None:
    b, outside = _local(tmp_path)
    os.symlink(outside, os.path.join(b.root, "dirlink"))
    out = b.workspace().execute("write", {"file_path": "dirlink/new.txt", "content": "x"})
    assert out.error is not None and out.error.code == "outside_root", out.text
    assert not (outside / "new.txt").exists()


def test_symlink_inside_root_is_followed(tmp_path: pathlib.Path) -> None:
    b, _ = _local(tmp_path)
    b.put("real.txt", b"inside\n")
    os.symlink(os.path.join(b.root, "real.txt"), os.path.join(b.root, "alias.txt"))
    ws = b.workspace()
    assert ws.read("alias.txt").lines == ["inside"]
    ws.edit("alias.txt", "inside", "still inside")
    assert b.get("real.txt") == b"still inside\n"


def test_symlink_swapped_in_after_the_check_cannot_redirect(tmp_path: pathlib.Path) -> None:
    """The local adapter walks the checked path with O_NOFOLLOW: a parent directory
    replaced by a symlink between the policy's check and the write is refused."""
    b, outside = _local(tmp_path)
    sub = pathlib.Path(b.root) / "sub"
    sub.mkdir()
    (sub / "f.txt").write_text("mine\n")
    ws = b.workspace()
    ws.read("sub/f.txt")
    target = ws.fs.resolve("sub/f.txt")  # the check has been made
    (sub / "f.txt").unlink()
    sub.rmdir()
    os.symlink(outside, sub)  # the swap
    (outside / "f.txt").write_text("mine\n")
    with pytest.raises(Exception) as exc:
        ws.fs.store.put(target.backend_path, b"pwned\n",
                        __import__("toolfs.backends", fromlist=["Overwrite"]).Overwrite())
    assert getattr(exc.value, "code", None) == "outside_root"
    assert (outside / "f.txt").read_text() == "mine\n"
    out = ws.execute("write", {"file_path": "sub/f.txt", "content": "pwned\n"})
    assert out.error is not None and out.error.code == "outside_root"
    assert (outside / "f.txt").read_text() == "mine\n"


def test_hardlink_write_replaces_the_link_not_the_outside_file(tmp_path: pathlib.Path) -> None:
    b, outside = _local(tmp_path)
    os.link(outside / "secret.txt", os.path.join(b.root, "hard.txt"))
    ws = b.workspace()
    ws.read("hard.txt")
    ws.write("hard.txt", "replaced\n")
    assert b.get("hard.txt") == b"replaced\n"
    assert (outside / "secret.txt").read_text() == "secret\n"


def test_a_symlink_to_the_root_is_not_a_file(tmp_path: pathlib.Path) -> None:
    """`self -> .` and `docs/up -> ..` stay inside the root and lead to the root itself,
    a directory: read, write and edit answer not_a_file, as for "." (they used to answer
    outside_root, "self is outside self"); a link to the root's parent still is
    outside_root, and nothing is written anywhere."""
    b, outside = _local(tmp_path)
    os.makedirs(os.path.join(b.root, "docs"))
    os.symlink(".", os.path.join(b.root, "self"))
    os.symlink("..", os.path.join(b.root, "docs", "up"))
    os.symlink("..", os.path.join(b.root, "parent"))
    before = sorted(os.listdir(b.root)), sorted(os.listdir(tmp_path))
    ws = b.workspace()
    calls = [("read", {}), ("write", {"content": "x"}),
             ("edit", {"old_string": "a", "new_string": "b"})]
    for path in (".", "self", "docs/up", "self/docs/up"):
        for tool, extra in calls:
            out = ws.execute(tool, {"file_path": path, **extra})
            assert out.error is not None and out.error.code == "not_a_file", (path, out.text)
    for path in ("self", "docs/up"):
        with pytest.raises(Exception) as exc:
            ws.fs.rm_file(path)
        assert getattr(exc.value, "code", None) == "not_a_file"
        assert ws.fs.resolve(path).reaches_root
    for path in ("parent", "docs/up/..", "self/parent"):
        for tool, extra in calls:
            out = ws.execute(tool, {"file_path": path, **extra})
            assert out.error is not None and out.error.code == "outside_root", (path, out.text)
    assert (sorted(os.listdir(b.root)), sorted(os.listdir(tmp_path))) == before
    assert (outside / "secret.txt").read_text() == "secret\n"


def test_remove_empty_dirs_never_follows_a_directory_swapped_for_a_symlink(
        tmp_path: pathlib.Path) -> None:
    """Directories are opened and removed relative to their walked parent's fd, with
    O_NOFOLLOW: a directory swapped for a symlink to outside the root between the
    listing and the rmdir (here: while its own subdirectories are looked at, and before
    it is opened) is left alone, and nothing outside the root is removed."""
    b, outside = _local(tmp_path)
    for d in ("p/c/d", "p/e/f"):
        os.makedirs(os.path.join(b.root, d))
    for d in ("victim/d", "victim2"):
        (outside / d).mkdir(parents=True)
    ws = b.workspace()
    root = ws.fs.jail.real_root
    store = ws.fs.store

    def keep(path: str) -> bool:
        rel = os.path.relpath(path, root)
        if rel == "p/c/d":  # p/c is open and listed: swap it for a link to outside
            os.rename(os.path.join(root, "p/c"), os.path.join(root, "p/c_old"))
            os.symlink(outside / "victim", os.path.join(root, "p/c"))
        if rel == "p/e":  # listed in p, not yet opened: swap it
            os.rename(os.path.join(root, "p/e"), os.path.join(root, "p/e_old"))
            os.symlink(outside / "victim2", os.path.join(root, "p/e"))
        return False

    removed = store.remove_empty_dirs(os.path.join(root, "p"), keep)
    assert (outside / "victim" / "d").is_dir() and (outside / "victim2").is_dir()
    assert os.path.islink(os.path.join(root, "p/c")) and os.path.islink(
        os.path.join(root, "p/e"))
    # What was walked before the swap, inside the root, may go; p holds the links.
    assert os.path.join(root, "p/c/d") in removed
    assert not os.path.exists(os.path.join(root, "p/c_old/d"))
    assert os.path.isdir(os.path.join(root, "p"))


def test_a_dirfilesystem_over_a_known_backend_gets_its_store(tmp_path: pathlib.Path) -> None:
    """A plain ``DirFileSystem`` (a path prefix) over the local disk is the local store,
    with its symlink confinement and deny rules on the file reached; over memory the
    memory store. A subclass (which may change more than paths) stays generic."""
    from fsspec.implementations.dirfs import DirFileSystem
    from fsspec.implementations.local import LocalFileSystem

    from tests.backend_fixtures import OpaqueDirFileSystem
    from toolfs.backends.local import LocalStore
    from toolfs.backends.memory import MemoryStore

    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "outside.txt").write_text("OUTSIDE\n")
    (root / ".env").write_text("SECRET=1\n")
    os.symlink(tmp_path / "outside.txt", root / "link.txt")
    os.symlink(".env", root / "env.example")
    for fs, sub in ((DirFileSystem(path=str(root), fs=LocalFileSystem()), ""),
                    (DirFileSystem(path=str(tmp_path), fs=LocalFileSystem()), "root"),
                    (DirFileSystem(path=str(tmp_path),
                                   fs=DirFileSystem(path="/", fs=LocalFileSystem())), "root")):
        ws = toolfs.Workspace(fs, root=sub, deny=[".env"])
        assert isinstance(ws.fs.store, LocalStore)
        for path, code in ((".env", "denied"), ("env.example", "denied"),
                           ("link.txt", "outside_root")):
            out = ws.execute("read", {"file_path": path})
            assert out.error is not None and out.error.code == code, (path, out.text)
        out = ws.execute("write", {"file_path": "link.txt", "content": "x\n"})
        assert out.error is not None and out.error.code == "outside_root", out.text
        assert ws.execute("write", {"file_path": "new.txt", "content": "n\n"}).error is None
        assert (root / "new.txt").read_text() == "n\n"
        (root / "new.txt").unlink()
    assert (tmp_path / "outside.txt").read_text() == "OUTSIDE\n"
    mem = fsspec.filesystem("memory")
    assert isinstance(toolfs.Workspace(DirFileSystem(path="/dirfs-test", fs=mem)).fs.store,
                      MemoryStore)
    opaque = toolfs.Workspace(OpaqueDirFileSystem(path="/dirfs-test", fs=mem))
    assert type(opaque.fs.store).__name__ == "GenericStore"


@pytest.mark.parametrize("sub", ["sub", "/sub", "./sub", "sub/", "/./sub/"])
def test_a_dirfilesystem_root_is_read_as_the_wrapper_reads_it(tmp_path: pathlib.Path,
                                                              sub: str) -> None:
    from fsspec.implementations.dirfs import DirFileSystem
    from fsspec.implementations.local import LocalFileSystem

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("a\n")
    ws = toolfs.Workspace(DirFileSystem(path=str(tmp_path), fs=LocalFileSystem()), root=sub)
    assert [e.name for e in ws.ls().entries] == ["a.txt"]
    assert ws.glob("*.txt").paths == ["a.txt"]
    assert ws.read("a.txt").lines == ["a"]


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


class ConfinementAndDeny:
    """No path leaves the root; denied paths are refused and never listed."""

    @pytest.mark.parametrize("path", ["../", "../x/", "a/../", "..//"])
    def test_dot_dot_with_a_trailing_slash_is_outside_root(
            self, backend: Backend, path: str) -> None:
        exec_err(backend.workspace(), "read", "outside_root", file_path=path)

    def test_a_lone_surrogate_path_is_invalid_on_every_backend(self, backend: Backend) -> None:
        ws = backend.workspace()
        for tool, args in (("read", {}), ("write", {"content": "x"}),
                           ("edit", {"old_string": "a", "new_string": "b"})):
            out = exec_err(ws, tool, "invalid_arguments", file_path="caf\udce9.txt", **args)
            out.text.encode("utf-8")
        with pytest.raises(toolfs.FsError) as info:
            ws.read("\ud800.txt")
        assert info.value.code == "invalid_arguments"

    def test_read_only_denies_every_write(self, backend: Backend) -> None:
        backend.put("ro.txt", b"x\n")
        ws = backend.workspace(read_only=True)
        ok(ws, "read", file_path="ro.txt")
        err(ws, "write", "denied", file_path="ro.txt", content="y\n")
        err(ws, "write", "denied", file_path="new.txt", content="y\n")
        err(ws, "edit", "denied", file_path="ro.txt", old_string="x", new_string="y")
        with pytest.raises(FsError) as exc:
            ws.fs.rm_file("ro.txt")
        assert exc.value.code == "denied"
        assert backend.get("ro.txt") == b"x\n"

    @pytest.mark.parametrize(("path", "denied"), [
        (".env", True), ("sub/.env", True), (".git/config", True), ("a/.git/HEAD", True),
        ("keys/id.pem", True), ("src/app.py", False), (".envrc", False), ("gitx/config", False),
    ])
    def test_deny_globs(self, backend: Backend, path: str, denied: bool) -> None:
        ws = backend.workspace(deny=[".env", ".git/**", "*.pem"])
        out = ws.execute("write", {"file_path": path, "content": "secret\n"})
        assert (out.error is not None and out.error.code == "denied") is denied, out.text
        if denied:
            err(ws, "read", "denied", file_path=path)

    @pytest.mark.parametrize(("path", "why"), ATTACKS, ids=[w for _, w in ATTACKS])
    def test_path_attacks_are_outside_root(self, backend: Backend, path: str, why: str) -> None:
        ws = backend.workspace()
        for tool, extra in [("read", {}), ("write", {"content": "pwned\n"}),
                            ("edit", {"old_string": "a", "new_string": "b"})]:
            out = ws.execute(tool, {"file_path": path, **extra})
            assert out.error is not None, (tool, path)
            assert out.error.code == "outside_root", (tool, path, out.text)

    def test_sibling_prefix_root_on_every_backend(self, backend: Backend) -> None:
        """``<root>-evil`` shares the root as a string prefix; every form of it is outside."""
        backend.put("in.txt", b"inside\n")
        ws = backend.workspace()
        protocols = ws.fs.jail.protocols
        sibling = f"{backend.root}-evil/x.txt"
        # (A bare "root-evil/x" is a relative path, i.e. inside the root, on object stores.)
        forms = [f"/{sibling.lstrip('/')}", f"{protocols[0]}://{sibling.lstrip('/')}"]
        for path in forms:
            for tool, extra in [("read", {}), ("write", {"content": "pwned\n"})]:
                out = ws.execute(tool, {"file_path": path, **extra})
                assert out.error is not None and out.error.code == "outside_root", (path, out.text)
        inside = f"{protocols[0]}://{backend.key('in.txt').lstrip('/')}"
        if backend.name != "generic":  # DirFileSystem has no URL form of its own
            out = ws.execute("read", {"file_path": inside})
            assert not out.is_error, (inside, out.text)

    def test_remove_empty_dirs_keeps_denied_directories_and_the_root(
            self, backend: Backend) -> None:
        """``PolicyFileSystem.remove_empty_dirs`` removes ordinary empty directories and
        leaves a denied one with everything in it; the root and a denied directory named
        directly are refused (denied), and a read-only workspace removes nothing. Where the
        store declares it removes no directories (object stores: none to remove), the
        refusals hold the same and nothing is removed."""
        for d in ("p/.git/refs/heads", "p/.git/objects/pack", "p/secrets/inner", "p/a/b"):
            backend.fs.makedirs(backend.key(d), exist_ok=True)
        # Where directories are not removed (object stores keep none without a file below
        # it), a marker file in each: the tree must come through whole.
        marked = not (backend.keeps_empty_dirs and backend.capabilities.removes_empty_dirs)
        if marked:
            for d in ("p/.git/refs/heads", "p/.git/objects/pack", "p/secrets/inner", "p/a/b"):
                backend.put(f"{d}/keep", b"")
        ws = backend.workspace(deny=[".git/**", "secrets/"])
        for path in (".", "p/.git", "p/secrets", "p/.git/refs"):
            with pytest.raises(Exception) as exc:
                ws.fs.remove_empty_dirs(path)
            assert getattr(exc.value, "code", None) == "denied", path
        with pytest.raises(Exception) as exc:
            backend.workspace(read_only=True).fs.remove_empty_dirs("p/a")
        assert getattr(exc.value, "code", None) == "denied"
        removed = ws.fs.remove_empty_dirs("p")
        if backend.capabilities.removes_empty_dirs and not marked:
            assert sorted(removed) == ["p/a", "p/a/b"]
        else:
            assert removed == []
        for d in ("p/.git/refs/heads", "p/.git/objects/pack", "p/secrets/inner"):
            assert backend.fs.isdir(backend.key(d)), d

    @pytest.mark.parametrize("method", ["exists", "isfile", "isdir", "modified", "ukey", "info"])
    @pytest.mark.parametrize("path", [".env", "id.pem", ".git/config"])
    def test_a_denied_path_named_is_refused(self, backend: Backend, method: str, path: str) -> None:
        fs = _denied_tree(backend).fs
        with pytest.raises(toolfs.FsError) as caught:
            getattr(fs, method)(path)
        assert caught.value.code == "denied"

    def test_listings_leave_denied_entries_out(self, backend: Backend) -> None:
        fs = _denied_tree(backend).fs
        assert fs.find("") == ["src/app.py"]
        names = {e.rstrip("/") for e in fs.ls("", detail=False)}
        assert names == {"src"}
        walked = [(root, sorted(dirs), sorted(files)) for root, dirs, files in fs.walk("")]
        assert walked == [(".", ["src"], []), ("src", [], ["app.py"])]
        assert fs.exists("src/app.py") and fs.isfile("src/app.py") and fs.isdir("src")

    def test_did_you_mean_never_names_a_denied_file(self, backend: Backend) -> None:
        ws = _denied_tree(backend)
        backend.put("notes.md", b"hi\n")
        for typo in (".envv", "id.pe", "id.pemm"):
            out = ws.execute("read", {"file_path": typo})
            assert out.error is not None and out.error.code == "not_found", out.text
            assert ".env" not in out.text.replace(typo, "") and "id.pem" not in out.text.replace(
                typo, ""), out.text
            assert "did_you_mean" not in out.error.details or all(
                n not in (".env", "id.pem") for n in out.error.details["did_you_mean"])
        if backend.capabilities.cheap_listing:  # where hints are given at all
            out = ws.execute("read", {"file_path": "notes.mdd"})
            assert out.error is not None and "notes.md" in out.error.details.get(
                "did_you_mean", []), out.text

    def test_a_missing_path_is_not_found_by_its_own_name(self, backend: Backend) -> None:
        # The wrapped filesystem's FileNotFoundError names the backend path (the root's
        # absolute path, the bucket): never let through.
        fs = _denied_tree(backend).fs
        for call in (fs.ls, fs.ukey, fs.info):
            with pytest.raises(toolfs.FsError) as caught:
                call("missing/x.txt")
            assert caught.value.code == "not_found", call
            assert caught.value.path == "missing/x.txt"
            assert backend.root not in caught.value.message if backend.root else True

    def test_a_directory_named_with_a_slash_is_that_directory(self, backend: Backend) -> None:
        fs = _denied_tree(backend).fs
        assert fs.exists("src/") and fs.isdir("src/") and not fs.isfile("src/")
        assert [e.rsplit("/", 1)[-1] for e in fs.ls("src/", detail=False)] == ["app.py"]
        assert fs.find("src/") == ["src/app.py"]
