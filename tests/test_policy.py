"""The observed-file / stale-version policy, on every backend."""

from __future__ import annotations

import fsspec
import pytest

import toolfs
from tests.backends import Backend
from tests.test_contract import err, ok
from toolfs import FsError, PolicyFileSystem, Veto


def test_update_requires_prior_observation(backend: Backend) -> None:
    backend.put("f.txt", b"v1\n")
    ws = backend.workspace()
    out = err(ws, "write", "not_observed", file_path="f.txt", content="v2\n")
    assert "read" in out.text.lower()
    err(ws, "edit", "not_observed", file_path="f.txt", old_string="v1", new_string="v2")
    assert backend.get("f.txt") == b"v1\n"
    ok(ws, "read", file_path="f.txt")
    ok(ws, "write", file_path="f.txt", content="v2\n")
    assert backend.get("f.txt") == b"v2\n"


def test_create_needs_no_observation(backend: Backend) -> None:
    ws = backend.workspace()
    ok(ws, "write", file_path="fresh.txt", content="hi\n")
    ok(ws, "edit", file_path="fresh.txt", old_string="hi", new_string="ho")
    assert backend.get("fresh.txt") == b"ho\n"


def test_edit_of_missing_file_is_not_found(backend: Backend) -> None:
    err(backend.workspace(), "edit", "not_found", file_path="nope.txt", old_string="a",
        new_string="b")


def test_stale_after_outside_change(backend: Backend) -> None:
    backend.put("s.txt", b"one\n")
    ws, other = backend.workspace(), backend.workspace()
    ok(ws, "read", file_path="s.txt")
    ok(other, "read", file_path="s.txt")
    backend.put("s.txt", b"two\n")
    out = err(ws, "edit", "stale", file_path="s.txt", old_string="one", new_string="1")
    assert "-one\n+two\n" in out.text and "no need to read the file again" in out.text
    err(other, "write", "stale", file_path="s.txt", content="three\n")
    assert backend.get("s.txt") == b"two\n"
    ok(ws, "edit", file_path="s.txt", old_string="two", new_string="2")  # no read between
    assert backend.get("s.txt") == b"2\n"


def test_same_size_change_is_stale(backend: Backend) -> None:
    backend.put("t.txt", b"aaaa\n")
    ws = backend.workspace()
    ws.read("t.txt")
    backend.put("t.txt", b"bbbb\n")  # same size, same second
    err(ws, "write", "stale", file_path="t.txt", content="cccc\n")


def test_identical_rewrite_or_touch_is_not_stale(backend: Backend) -> None:
    backend.put("i.txt", b"same\n")
    ws = backend.workspace()
    ws.read("i.txt")
    backend.touch("i.txt")
    out = ws.execute("edit", {"file_path": "i.txt", "old_string": "same", "new_string": "new"})
    if backend.capabilities.digest_versions:  # memory, local, generic, S3 (MD5 ETags)
        assert not out.is_error, out.text
    else:  # documented: a GCS generation moves on every upload, even of identical bytes
        assert out.error is not None and out.error.code == "stale"


def test_deleted_since_read_is_stale(backend: Backend) -> None:
    backend.put("gone.txt", b"x\n")
    ws = backend.workspace()
    ws.read("gone.txt")
    backend.remove("gone.txt")
    err(ws, "write", "stale", file_path="gone.txt", content="y\n")
    assert not backend.exists("gone.txt")


def test_created_since_seen_absent_is_stale(backend: Backend) -> None:
    ws = backend.workspace()
    err(ws, "read", "not_found", file_path="late.txt")
    backend.put("late.txt", b"theirs\n")
    err(ws, "write", "stale", file_path="late.txt", content="mine\n")
    assert backend.get("late.txt") == b"theirs\n"


def test_own_writes_refresh_the_observation(backend: Backend) -> None:
    ws = backend.workspace()
    ws.write("chain.txt", "a\n")
    for old, new in [("a", "b"), ("b", "c"), ("c", "d")]:
        ok(ws, "edit", file_path="chain.txt", old_string=old, new_string=new)
    ok(ws, "write", file_path="chain.txt", content="e\n")
    assert backend.get("chain.txt") == b"e\n"


def test_windowed_read_counts_as_observation(backend: Backend) -> None:
    backend.put("w.txt", b"".join(b"line %d\n" % i for i in range(100)))
    ws = backend.workspace()
    ok(ws, "read", file_path="w.txt", offset=50, limit=1)
    ok(ws, "edit", file_path="w.txt", old_string="line 3\n", new_string="LINE 3\n")
    assert b"LINE 3\n" in backend.get("w.txt")


def test_two_contexts_guard_each_other(backend: Backend) -> None:
    backend.put("shared.txt", b"base\n")
    a, b = backend.workspace(), backend.workspace()
    a.read("shared.txt")
    b.read("shared.txt")
    ok(a, "edit", file_path="shared.txt", old_string="base", new_string="from a")
    err(b, "edit", "stale", file_path="shared.txt", old_string="base", new_string="from b")
    b.read("shared.txt")
    ok(b, "edit", file_path="shared.txt", old_string="from a", new_string="from a and b")
    assert backend.get("shared.txt") == b"from a and b\n"


def test_create_race_second_creator_is_refused(backend: Backend) -> None:
    a, b = backend.workspace(), backend.workspace()
    ok(a, "write", file_path="race.txt", content="a\n")
    out = err(b, "write", "not_observed", file_path="race.txt", content="b\n")
    assert "exists" in out.text
    assert backend.get("race.txt") == b"a\n"


def test_ledger_snapshot_restore(backend: Backend) -> None:
    backend.put("r.txt", b"one\n")
    ws = backend.workspace()
    ws.read("r.txt")
    snap = toolfs.LedgerSnapshot.model_validate_json(ws.snapshot().model_dump_json())
    fresh = backend.workspace()
    err(fresh, "edit", "not_observed", file_path="r.txt", old_string="one", new_string="1")
    fresh.restore(snap)
    ok(fresh, "edit", file_path="r.txt", old_string="one", new_string="1")
    # A restored stale observation is still stale.
    again = backend.workspace()
    again.restore(snap)
    err(again, "edit", "stale", file_path="r.txt", old_string="1", new_string="uno")


def test_policy_off_writes_unconditionally(backend: Backend) -> None:
    backend.put("p.txt", b"one\n")
    ws = backend.workspace(policy=None)
    out = ok(ws, "write", file_path="p.txt", content="two\n")
    assert isinstance(out.value, toolfs.WriteResult) and out.value.action == "updated"
    ok(ws, "edit", file_path="p.txt", old_string="two", new_string="three")
    assert backend.get("p.txt") == b"three\n"
    out = ok(ws, "write", file_path="q.txt", content="new\n")
    assert isinstance(out.value, toolfs.WriteResult) and out.value.action == "created"


def test_read_only_denies_every_write(backend: Backend) -> None:
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
def test_deny_globs(backend: Backend, path: str, denied: bool) -> None:
    ws = backend.workspace(deny=[".env", ".git/**", "*.pem"])
    out = ws.execute("write", {"file_path": path, "content": "secret\n"})
    assert (out.error is not None and out.error.code == "denied") is denied, out.text
    if denied:
        err(ws, "read", "denied", file_path=path)


def test_write_intent_veto(backend: Backend) -> None:
    ws = backend.workspace()

    def no_migrations(event: toolfs.FsEvent) -> None:
        if event.type == "fs/write-intent" and event.path.startswith("migrations/"):
            raise Veto("migrations are frozen")

    ws.subscribe(no_migrations)
    out = err(ws, "write", "denied", file_path="migrations/001.sql", content="drop\n")
    assert "migrations are frozen" in out.text
    assert not backend.exists("migrations/001.sql")
    ok(ws, "write", file_path="ok.sql", content="select 1\n")


def test_events_carry_context_path_and_versions(backend: Backend) -> None:
    backend.put("ev.txt", b"a\n")
    ws = backend.workspace(context_id="agent-1")
    seen: list[toolfs.FsEvent] = []
    ws.subscribe(seen.append)
    r = ws.read("ev.txt")
    e = ws.edit("ev.txt", "a", "b")
    other = backend.workspace()
    other.read("ev.txt")
    other.write("ev.txt", "c\n")
    ws.execute("edit", {"file_path": "ev.txt", "old_string": "b", "new_string": "d"})
    assert [x.type for x in seen] == [
        "fs/read", "fs/write-intent", "fs/written", "fs/write-intent", "fs/denied"]
    assert {x.context_id for x in seen} == {"agent-1"}
    assert {x.path for x in seen} == {"ev.txt"}
    assert seen[0].version_after == r.version
    assert seen[2].version_before == r.version and seen[2].version_after == e.version
    assert seen[4].reason is not None and seen[4].reason.startswith("stale")


def test_audit_log_records_all_contexts_events(backend: Backend) -> None:
    ws = backend.workspace()
    ws.write("log.txt", "x\n")
    rows = ws.audit.rows()
    assert [r["type"] for r in rows] == ["fs/write-intent", "fs/written"]
    from toolfs.display import markdown  # the notebook view lives above the core

    assert "| type |" in markdown(ws.audit)


# -- the wrapper filesystem itself --------------------------------------------------------


def test_policy_fs_is_never_cached_between_contexts() -> None:
    mem = fsspec.filesystem("memory")
    a = PolicyFileSystem(mem, "/cache-test")
    b = PolicyFileSystem(mem, "/cache-test")
    assert a is not b
    assert a.ledger is not b.ledger
    assert PolicyFileSystem.cachable is False


def test_notebook_style_file_api_is_guarded(backend: Backend) -> None:
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


def test_every_mutating_method_is_guarded_or_denied(backend: Backend, tmp_path: object) -> None:
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
    ]
    for call in unobserved:
        with pytest.raises(FsError) as exc:
            call()
        assert exc.value.code == "not_observed"
        assert backend.get("m.txt") == b"data\n"
    for name, call in [("rm recursive", lambda: fs.rm("m.txt", recursive=True)),
                       ("rmdir", lambda: fs.rmdir("dir")),
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


def test_read_only_methods_are_confined(backend: Backend) -> None:
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


def test_audit_log_is_bounded() -> None:
    log = toolfs.AuditLog(max_events=3)
    ws = toolfs.Workspace("memory://audit-bound", subscribers=[log])
    for i in range(5):
        ws.write(f"f{i}.txt", "x\n")
    assert len(log.events) == 3
    assert [e.path for e in log.events] == ["f3.txt", "f4.txt", "f4.txt"]
    assert len(ws.audit.events) == 10  # the workspace's own log keeps up to 10,000


def test_a_missing_local_root_is_reported_once_and_clearly(tmp_path: object) -> None:
    with pytest.raises(FsError) as exc:
        toolfs.Workspace(f"{tmp_path}/does-not-exist")
    assert exc.value.code == "not_found" and "root" in exc.value.message
