"""The per-call fast paths of write and edit agree with the general paths they shortcut.

* ``Jail.resolve`` remembers the checks on a path's string; what the filesystem says
  (symlinks, a moved root) is asked again on every call, so a remembered path that has
  since become a link, or whose root moved, resolves exactly as a fresh jail resolves it.
* ``Workspace.read/write/edit`` skip building the arguments model for arguments of
  exactly the accepted types; anything else is validated, with the schema's refusals.
"""

from __future__ import annotations

import os
import pathlib
import shutil
from typing import Any

import pytest

import toolfs
from tests.test_jail_links import PATHS, _tree
from toolfs import tools
from toolfs.errors import FsError
from toolfs.policy.paths import Jail
from toolfs.schemas import EditArgs, ReadArgs, WriteArgs
from toolfs.workspace import _validate


def _answer(jail: Jail, rel: str) -> tuple[str, str, str] | str:
    """What ``jail.resolve`` gives: the target's paths, or the refusal's code."""
    try:
        t = jail.resolve(rel)
    except FsError as err:
        return err.code
    return t.backend_path, t.display, t.reached


def _fresh(jail: Jail) -> Jail:
    return Jail(jail.root, jail.protocols, resolve_symlinks=jail.resolve_symlinks)


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


# -- typed methods: the arguments model is skipped only where it would change nothing --


class _Str(str):
    pass


BAD_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read", {"file_path": 3}),
    ("read", {"file_path": "f.txt", "offset": 0}),
    ("read", {"file_path": "f.txt", "offset": True}),
    ("read", {"file_path": "f.txt", "limit": -1}),
    ("read", {"file_path": "f.txt", "limit": 2.0}),
    ("write", {"file_path": None, "content": "x"}),
    ("write", {"file_path": "f.txt", "content": b"x"}),
    ("edit", {"file_path": "f.txt", "old_string": "", "new_string": "x"}),
    ("edit", {"file_path": "f.txt", "old_string": "a", "new_string": "a"}),
    ("edit", {"file_path": "f.txt", "old_string": "a", "new_string": "b",
              "replace_all": 1}),
    ("edit", {"file_path": "f.txt", "old_string": 1, "new_string": "b"}),
    ("edit", {"file_path": "f.txt", "old_string": "a", "new_string": None}),
]
MODELS = {"read": ReadArgs, "write": WriteArgs, "edit": EditArgs}


@pytest.mark.parametrize(("tool", "args"), BAD_CALLS)
def test_typed_methods_refuse_what_the_schema_refuses(tmp_path: pathlib.Path, tool: str,
                                                      args: dict[str, Any]) -> None:
    ws = toolfs.Workspace(str(tmp_path))
    ws.write("f.txt", "a\n")
    ws.read("f.txt")
    with pytest.raises(FsError) as typed:
        getattr(ws, tool)(**args)
    given = {k: v for k, v in args.items() if not (v is None and k in ("offset", "limit"))}
    with pytest.raises(FsError) as validated:
        _validate(MODELS[tool], given)
    assert typed.value.code == "invalid_arguments"
    assert typed.value.message == validated.value.message
    assert (tmp_path / "f.txt").read_text() == "a\n"


def test_typed_methods_match_the_validated_tools(tmp_path: pathlib.Path) -> None:
    """The same calls through the typed methods and through the tools with validated
    arguments, on two identical trees: the same results and the same bytes."""
    fast_root, slow_root = tmp_path / "fast", tmp_path / "slow"
    fast_root.mkdir()
    slow_root.mkdir()
    fast, slow = toolfs.Workspace(str(fast_root)), toolfs.Workspace(str(slow_root))
    text = "one\r\ntwo\r\nthree two\r\n"
    calls: list[tuple[str, dict[str, Any]]] = [
        ("write", {"file_path": "d/f.txt", "content": text}),
        ("read", {"file_path": "d/f.txt"}),
        ("read", {"file_path": "d/f.txt", "offset": 2, "limit": 1}),
        ("edit", {"file_path": "d/f.txt", "old_string": "one", "new_string": "1"}),
        ("edit", {"file_path": "./d/f.txt", "old_string": "two", "new_string": "2\n2",
                  "replace_all": True}),
        ("write", {"file_path": "d/f.txt", "content": "\ufeffbom\n"}),
        ("edit", {"file_path": "d/f.txt", "old_string": "bom", "new_string": "b"}),
    ]
    for tool, args in calls:
        a = getattr(fast, tool)(**args)
        b = getattr(tools, tool)(slow.fs, MODELS[tool].model_validate(args))
        assert a == b, (tool, args)
    assert (fast_root / "d" / "f.txt").read_bytes() == (slow_root / "d" / "f.txt").read_bytes()
    # A str subclass is not taken as it is, but the schema accepts it: the same answer.
    assert fast.read(_Str("d/f.txt")) == fast.read("d/f.txt")
    # Refusals of the tools themselves are the same too.
    for ws in (fast, slow):
        with pytest.raises(FsError) as exc:
            ws.edit("d/f.txt", "absent", "x")
        assert exc.value.code == "no_match"


# -- models built from trusted values (toolfs._trusted) -------------------------------


def _same_as_validated(model: Any) -> None:
    """``model`` equals, dumps and reports its set fields as the validated model made
    from the same given fields does."""
    cls = type(model)
    given = {k: getattr(model, k) for k in model.model_fields_set}
    validated = cls(**given)  # a time stamp (`at`) is a default, made anew here
    assert model.model_fields_set == validated.model_fields_set
    assert model.model_dump(exclude_unset=True) == validated.model_dump(exclude_unset=True)
    again = cls(**given) if "at" not in cls.model_fields else cls(**given, at=model.at)
    assert model == again
    assert model.model_dump() == again.model_dump()
    assert repr(model) == repr(again)
    assert cls.model_validate(model.model_dump()) == model
    if cls.model_config.get("frozen"):
        with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen-instance error
            setattr(model, next(iter(cls.model_fields)), None)


def test_trusted_models_are_the_validated_ones(tmp_path: pathlib.Path) -> None:
    from toolfs.versions import FileVersion

    ws = toolfs.Workspace(str(tmp_path))
    results = [ws.write("f.txt", "one\ntwo\n"), ws.read("f.txt"), ws.read("f.txt", 2, 1),
               ws.edit("f.txt", "one", "1"), ws.write("f.txt", "three\n")]
    for result in results:
        _same_as_validated(result)
        _same_as_validated(result.version)
    events = list(ws.audit.events)
    assert {e.type for e in events} == {"fs/read", "fs/write-intent", "fs/written"}
    for event in events:
        _same_as_validated(event)
    snap = ws.snapshot()
    for obs in snap.observations.values():
        _same_as_validated(obs)
    assert type(snap).model_validate_json(snap.model_dump_json()) == snap
    v = FileVersion.of_bytes(b"x")
    assert v == FileVersion(kind="sha256", value=v.value)
    assert hash(v) == hash(FileVersion(kind="sha256", value=v.value))
    assert v.model_fields_set == {"kind", "value"}


def test_events_with_values_the_schema_refuses_are_still_refused(
        tmp_path: pathlib.Path) -> None:
    """Only values made by toolfs skip validation: an operation name a caller made up
    is checked as before."""
    from pydantic import ValidationError

    ws = toolfs.Workspace(str(tmp_path))
    with pytest.raises(ValidationError):
        ws.fs.pipe_file("f.txt", b"x", operation="bogus")  # type: ignore[arg-type]
    assert not (tmp_path / "f.txt").exists()


# -- local reads: the regular file's fd stays O_NONBLOCK ------------------------------


def test_a_read_that_answers_eagain_is_read_again_blocking(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No POSIX filesystem answers EAGAIN to a regular file's read, so the local store
    keeps the O_NONBLOCK it opens files with (FIFOs must not block the open); one that
    did would get the same bytes through a blocking read, on read, edit and windowed
    read alike."""
    from toolfs.backends import local

    real = os.pread
    refused: list[int] = []

    def pread(fd: int, length: int, offset: int) -> bytes:
        if os.get_blocking(fd) is False:
            refused.append(fd)
            raise BlockingIOError(11, "Resource temporarily unavailable")
        return real(fd, length, offset)

    text = "".join(f"line {i}\n" for i in range(50))
    (tmp_path / "f.txt").write_text(text)
    ws = toolfs.Workspace(str(tmp_path), size_cap=64)  # over the cap: windowed reads too
    small = toolfs.Workspace(str(tmp_path))
    monkeypatch.setattr(local.os, "pread", pread)
    assert small.read("f.txt").lines == text.splitlines()
    small.edit("f.txt", "line 7\n", "line seven\n")
    assert (tmp_path / "f.txt").read_text() == text.replace("line 7\n", "line seven\n")
    assert ws.read("f.txt", offset=3, limit=2).lines == ["line 2", "line 3"]
    assert len(refused) >= 3  # each kind of read met the refusal once


# -- local temp names: serials from a random start -----------------------------------


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


# -- the local store checks the root itself on the calls that reach files through it -----


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


# -- the audit log keeps values, not models -------------------------------------------


def _calls(ws: toolfs.Workspace) -> None:
    """Reads, writes, edits and refusals, the same on every workspace given."""
    ws.write("a.txt", "one\ntwo\n")
    ws.read("a.txt")
    ws.edit("a.txt", "one", "1")
    ws.execute("write", {"file_path": "b.txt", "content": "x\n"})
    ws.execute("edit", {"file_path": "a.txt", "old_string": "nowhere", "new_string": "y"})
    ws.execute("write", {"file_path": "c\udcff.txt", "content": "x\n"})
    ws.write("ünïcödé/ファイル.txt", "x\n")
    ws.execute("read", {"file_path": ".env"})


def _what(event: toolfs.FsEvent) -> tuple[object, ...]:
    return (event.type, event.operation, event.path, event.version_before,
            event.version_after, event.reason)


def test_the_audit_log_keeps_the_events_its_subscribers_see(tmp_path: pathlib.Path) -> None:
    """A log that is a workspace's only subscriber keeps each event's values without an
    FsEvent being made; it gives the same events as when another subscriber (which gets
    FsEvent objects) is there too."""
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    (tmp_path / "one" / "b.txt").write_text("old\n")
    (tmp_path / "two" / "b.txt").write_text("old\n")
    alone = toolfs.Workspace(str(tmp_path / "one"), deny=[".env"])
    seen: list[toolfs.FsEvent] = []
    shared = toolfs.Workspace(str(tmp_path / "two"), deny=[".env"], subscribers=[seen.append])
    _calls(alone)
    _calls(shared)
    types = {e.type for e in seen}
    assert types == {"fs/read", "fs/write-intent", "fs/written", "fs/denied"}
    # The same values, `at` included; only what subscribers get carries write diffs.
    assert list(shared.audit.events) == [e.model_copy(update={"diff": None}) for e in seen]
    assert [_what(e) for e in alone.audit.events] == [_what(e) for e in seen]
    assert {e.context_id for e in alone.audit.events} == {alone.context_id}
    for event in alone.audit.events:
        assert type(event) is toolfs.FsEvent
        _same_as_validated(event)
    assert alone.audit.rows() == [
        {**row, "context": alone.context_id} for row in shared.audit.rows()]


def test_the_audit_events_are_a_read_only_sequence() -> None:
    log = toolfs.AuditLog(max_events=3)
    assert not log.events and len(log.events) == 0 and list(log.events) == []
    made = [toolfs.FsEvent(type="fs/read", context_id="c", operation="read", path=f"{i}")
            for i in range(5)]
    for event in made:
        log(event)
    assert len(log.events) == 3 and log.max_events == 3  # the oldest two dropped
    assert list(log.events) == made[2:]
    assert log.events[0] == made[2] and log.events[-1] == made[4]
    assert log.events[1:] == made[3:] and list(reversed(log.events)) == made[:1:-1]
    assert log.events.index(made[3]) == 1 and made[4] in log.events
    with pytest.raises(IndexError):
        log.events[3]
    with pytest.raises(TypeError):
        log.events[0] = made[0]  # type: ignore[index]
    log.clear()
    assert len(log.events) == 0 and log.rows() == []


def test_the_audit_events_can_be_read_while_parallel_calls_add_more() -> None:
    """Iterating the events takes a snapshot: writers in other threads never make it
    fail (a deque iterated while it grows raises)."""
    import threading
    import time

    ws = toolfs.Workspace("memory://audit-threads")
    stop = threading.Event()

    def writer(n: int) -> None:
        while not stop.is_set():
            ws.write(f"f{n}.txt", "x\n")

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 30
        while len(ws.audit.events) < 200 and time.monotonic() < deadline:
            time.sleep(0.001)
        first = len(ws.audit.events)
        for _ in range(20):
            events = list(ws.audit.events)
            rows = ws.audit.rows()
            assert all(type(e) is toolfs.FsEvent for e in events) and len(rows) >= len(events)
        last = len(ws.audit.events)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert 200 <= first < last  # the writers did add events while the log was read
