"""The root is a jail: a table of path attacks, on every backend, plus local link escapes."""

from __future__ import annotations

import os
import pathlib

import fsspec
import pytest

import toolfs
from tests.backends import Backend, LocalBackend

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


@pytest.mark.parametrize(("path", "why"), ATTACKS, ids=[w for _, w in ATTACKS])
def test_path_attacks_are_outside_root(backend: Backend, path: str, why: str) -> None:
    ws = backend.workspace()
    for tool, extra in [("read", {}), ("write", {"content": "pwned\n"}),
                        ("edit", {"old_string": "a", "new_string": "b"})]:
        out = ws.execute(tool, {"file_path": path, **extra})
        assert out.error is not None, (tool, path)
        assert out.error.code == "outside_root", (tool, path, out.text)


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


def _local(tmp_path: pathlib.Path) -> tuple[LocalBackend, pathlib.Path]:
    b = LocalBackend(str(tmp_path))
    b.setup()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    return b, outside


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


def test_sibling_prefix_root_on_every_backend(backend: Backend) -> None:
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


# -- the root reached through a symlink inside it -----------------------------------------


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


# -- removing empty directories: never a denied one, never outside the root ---------------


def test_remove_empty_dirs_keeps_denied_directories_and_the_root(backend: Backend) -> None:
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

    from tests.backends import OpaqueDirFileSystem
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
