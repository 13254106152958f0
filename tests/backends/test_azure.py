"""Azure Blob specifics, against Azurite through adlfs: the conditional block-list path
for large writes, names the service would alter, directory markers, URL forms, error
translation, recognising our own write, and the emulator itself."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import toolfs
from tests.backend_fixtures import AzureBackend
from tests.lost_deletes import (
    DELETE_LOST,
    MOVED_OLD,
    MOVES,
    delete_or_move,
    gone_from_ledger,
    moved_bytes,
    unverifiable_delete,
)
from toolfs.backends.azure import AzureBlobStore
from toolfs.backends.base import Create
from toolfs.testing.azurite import AzuriteEmulator


@pytest.fixture
def az(azure_backend: AzureBackend) -> Any:
    azure_backend.setup()
    yield azure_backend
    azure_backend.teardown()


def traffic(b: AzureBackend, call: Any) -> list[Any]:
    b.emulator.clear_requests()
    call()
    return b.emulator.requests()


def is_write(r: Any) -> bool:
    """A request that changes a blob's committed content (Put Blob, Put Block List)."""
    comp = r.params.get("comp", [""])[0]
    return r.method == "PUT" and comp in ("", "blocklist")


def conditioned(r: Any) -> bool:
    return bool(r.headers.get("if-match") or r.headers.get("if-none-match"))


def run(store: AzureBlobStore, coro: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, store.fs.loop).result()


# -- writes larger than one Put Blob ---------------------------------------------------


def test_large_write_is_a_conditional_block_list_commit(az: AzureBackend) -> None:
    ws = az.workspace()
    store: AzureBlobStore = ws.fs.store
    store.single_put_limit, store.block_size = 64 * 1024, 16 * 1024
    text = "".join(f"{i:06d} a line of a large file\n" for i in range(4000))  # ~120 KB
    assert len(text) > store.single_put_limit

    reqs = traffic(az, lambda: ws.write("big.txt", text))
    blocks = [r for r in reqs if r.params.get("comp") == ["block"]]
    (commit,) = [r for r in reqs if is_write(r)]
    assert len(blocks) == -(-len(text) // store.block_size) == 8
    assert commit.params["comp"] == ["blocklist"] and commit.headers["if-none-match"] == "*"
    assert az.get("big.txt") == text.encode()

    read = ws.read("big.txt", limit=1)
    reqs = traffic(az, lambda: ws.edit("big.txt", "000001 a line", "000001 A LINE"))
    (commit,) = [r for r in reqs if is_write(r)]
    assert commit.params["comp"] == ["blocklist"]
    assert commit.headers["if-match"] == read.version.value
    assert az.get("big.txt") == text.replace("000001 a line", "000001 A LINE").encode()

    # Someone else changes it: the commit is refused and the blob keeps their bytes.
    theirs = b"someone else's content\n"
    az.put("big.txt", theirs)
    out = ws.execute("edit", {"file_path": "big.txt", "old_string": "000002 a line",
                              "new_string": "2"})
    assert out.error is not None and out.error.code == "stale", out.text
    assert az.get("big.txt") == theirs
    # The committed blob carries its Content-MD5, so a retried commit knows itself.
    ws.read("big.txt")
    ws.write("big.txt", text)
    own = run(store, store._own_write(*store._split(az.key("big.txt")), text.encode()))
    assert own is not None and own == ws.read("big.txt", limit=1).version


def test_no_write_is_ever_unconditional_through_the_policy(az: AzureBackend) -> None:
    """Every request that changes committed content carries If-Match or If-None-Match,
    small or large, create, update or delete."""
    ws = az.workspace()
    store: AzureBlobStore = ws.fs.store
    store.single_put_limit, store.block_size = 8 * 1024, 4 * 1024

    def session() -> None:
        ws.write("small.txt", "one\n")
        ws.write("large.txt", "x" * 20000 + "\n")
        ws.edit("small.txt", "one", "two")
        ws.edit("large.txt", "x\n", "y\n")
        ws.write("large.txt", "z" * 30000 + "\n")
        ws.read("small.txt")
        ws.fs.rm_file("small.txt")

    reqs = traffic(az, session)
    changes = [r for r in reqs if is_write(r) or r.method == "DELETE"]
    assert len(changes) == 6, [(r.method, r.query) for r in changes]
    assert all(conditioned(r) for r in changes), [(r.method, r.headers) for r in changes]
    (delete,) = [r for r in changes if r.method == "DELETE"]
    assert delete.headers["if-match"].startswith('"0x')


# -- names the service would change -----------------------------------------------------


@pytest.mark.parametrize("name", ["notes.", "dir./x.txt", "a/b../c.txt"])
def test_trailing_dot_names_are_refused(az: AzureBackend, name: str) -> None:
    ws = az.workspace()
    for tool, args in (("write", {"content": "x\n"}), ("read", {}),
                       ("edit", {"old_string": "a", "new_string": "b"})):
        out = ws.execute(tool, {"file_path": name, **args})
        assert out.error is not None and out.error.code == "invalid_arguments", out.text
        assert "trailing dots" in out.text
    assert az.fs.find(az.root) == []


def test_names_with_url_characters_stay_literal(az: AzureBackend) -> None:
    ws = az.workspace()
    # "?versionId=" (adlfs looks for "?versionid=" only) is a name, as on the service.
    names = ["a?versionId=1.txt", "b#c.txt", "sp ace.txt", "caf\u00e9.txt", "p%41.txt",
             "semi;colon=1&x.txt"]
    for i, name in enumerate(names):
        ws.write(name, f"{i}\n")
    listed = sorted(p.rsplit("/", 1)[-1] for p in az.emulator.adlfs_filesystem().find(
        az.root))
    assert listed == sorted(names)
    for i, name in enumerate(names):
        assert ws.read(name).lines == [str(i)]
    assert sorted(ws.glob("*").paths) == sorted(names)
    # adlfs's split_path reads "?versionid=" as a version selector (and reorders a query
    # and a fragment), so adlfs's own calls on such a path would reach another blob:
    # refused, as on S3 and GCS (tests/test_version_suffixes.py).
    for name in ["a?versionid=1.txt", "q?x#y.txt"]:
        out = ws.execute("write", {"file_path": name, "content": "x\n"})
        assert out.error is not None and out.error.code == "invalid_arguments", out.text


# -- directories ------------------------------------------------------------------------


def test_folder_marker_blobs_are_directories(az: AzureBackend) -> None:
    """ADLS Gen2 folders (and adlfs's markers) are blobs with folder metadata."""
    from azure.storage.blob import BlobServiceClient

    with BlobServiceClient.from_connection_string(
            az.emulator.connection_string(direct=True)) as service:
        cc = service.get_container_client(az.bucket)
        cc.upload_blob("ws/folder", b"", metadata={"hdi_isfolder": "true"})
        cc.upload_blob("ws/folder/x.txt", b"inside\n")
        cc.upload_blob("ws/empty", b"", metadata={"hdi_isfolder": "true"})
        cc.upload_blob("ws/adlfs", b"", metadata={"is_directory": "true"})
    ws = az.workspace()
    assert ws.glob("**/*").paths == ["folder/x.txt"]
    entries = [(e.name, e.kind) for e in ws.ls().entries]
    assert sorted(entries) == [("adlfs", "dir"), ("empty", "dir"), ("folder", "dir")]
    out = ws.execute("read", {"file_path": "empty"})
    assert out.error is not None and out.error.code == "not_a_file", out.text


# -- URL forms, credentials, containers ----------------------------------------------------


@pytest.mark.parametrize("scheme", ["az", "abfs"])
def test_workspace_from_a_url(az: AzureBackend, scheme: str) -> None:
    options = az.emulator.adlfs_storage_options()
    ws = toolfs.Workspace(f"{scheme}://{az.bucket}/ws", storage_options=options)
    assert isinstance(ws.fs.store, AzureBlobStore)
    ws.write("u.txt", "via url\n")
    assert az.get("u.txt") == b"via url\n"
    ws.fs.store.check_root()
    other = toolfs.Workspace(f"{scheme}://{az.bucket}/ws", storage_options=options)
    assert other.read("u.txt").lines == ["via url"]


def test_the_adls_url_form_names_the_container(az: AzureBackend) -> None:
    url = f"abfs://{az.bucket}@devstoreaccount1.dfs.core.windows.net/ws"
    ws = toolfs.Workspace(url, storage_options=az.emulator.adlfs_storage_options())
    ws.write("adls.txt", "x\n")
    assert az.get("adls.txt") == b"x\n"


def test_wrong_credentials_are_denied_and_never_shown(az: AzureBackend) -> None:
    bad_key = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo="
    conn = az.emulator.connection_string().replace(az.emulator.account_key, bad_key)
    ws = toolfs.Workspace(f"az://{az.bucket}/ws", storage_options={"connection_string": conn})
    for tool, args in (("read", {}), ("write", {"content": "x\n"})):
        out = ws.execute(tool, {"file_path": "a.txt", **args})
        assert out.error is not None and out.error.code == "denied", out.text
        assert bad_key not in out.text
    assert not az.exists("a.txt")


def test_missing_container_is_missing_bucket_naming_it(az: AzureBackend) -> None:
    ws = toolfs.Workspace(az.fs, root="no-such-container/ws")
    with pytest.raises(toolfs.FsError) as exc:
        ws.fs.store.check_root()
    assert exc.value.code == "missing_bucket" and exc.value.details["container"] == (
        "no-such-container")
    out = ws.execute("write", {"file_path": "a.txt", "content": "x"})
    assert out.error is not None and out.error.code == "missing_bucket"
    assert "container no-such-container does not exist" in out.text


# -- a retried write meets its own first attempt ---------------------------------------------


def test_a_resent_create_recognises_its_own_write(az: AzureBackend,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import toolfs.backends.azure as azure_module

    store: AzureBlobStore = az.workspace().fs.store
    key = az.key("resent.txt")
    data = b"exactly these bytes\n"
    first = store.put(key, data, Create())  # the attempt whose response was "lost"
    # As if aiohttp might have resent the request: a 409 is checked against the blob.
    monkeypatch.setattr(azure_module, "_hidden_resends_off", lambda service: False)
    got: list[Any] = []
    reqs = traffic(az, lambda: got.append(store.put(key, data, Create())))
    assert got == [first]
    assert [(r.method, r.status) for r in reqs][-2:] == [("PUT", 409), ("HEAD", 200)]
    with pytest.raises(toolfs.FsError) as exc:  # different bytes: someone else's
        store.put(key, b"other bytes\n", Create())
    assert exc.value.code == "stale"
    # With aiohttp's resend off (the normal case), a refused create is stale at once.
    monkeypatch.undo()
    with pytest.raises(toolfs.FsError) as exc:
        reqs = traffic(az, lambda: store.put(key, data, Create()))
    assert exc.value.code == "stale"
    assert "HEAD" not in [r.method for r in az.emulator.requests()]


# -- the emulator --------------------------------------------------------------------------


def test_azurite_counts_requests_and_gives_fresh_containers(
        azure_emulator: AzuriteEmulator) -> None:
    assert azure_emulator.endpoint_url.startswith("http://127.0.0.1:")
    first, second = azure_emulator.new_container(), azure_emulator.new_container()
    assert first != second
    azure_emulator.clear_requests()
    assert azure_emulator.request_count() == 0  # housekeeping is not logged
    fs = azure_emulator.adlfs_filesystem()
    fs.pipe_file(f"{first}/dir/a.txt", b"hello")
    (put,) = [r for r in azure_emulator.requests() if r.method == "PUT"]
    assert put.path == f"/devstoreaccount1/{first}/dir/a.txt" and put.status == 201
    assert "authorization" not in put.headers
    assert not fs.exists(f"{second}/dir/a.txt")
    azure_emulator.delete_container(first)
    azure_emulator.delete_container(second)
    azure_emulator.delete_container(second)  # nothing left: no error


def test_stop_kills_azurite() -> None:
    emulator = AzuriteEmulator().start()
    process = emulator._process
    assert emulator.running and process is not None
    emulator.stop()
    emulator.stop()  # idempotent
    assert not emulator.running and process.poll() is not None
    with pytest.raises(RuntimeError):
        _ = emulator.endpoint_url


def test_a_connection_string_is_a_credential(az: AzureBackend) -> None:
    """adlfs's ``connection_string`` holds the account key: it is masked like a key."""
    from toolfs.redact import Redactor, is_credential_name

    options = az.emulator.adlfs_storage_options()
    assert is_credential_name("connection_string")
    masked = Redactor.for_options(options)(f"failed with {options['connection_string']}")
    assert az.emulator.account_key not in masked and "***" in masked
    ws = toolfs.Workspace(f"az://{az.bucket}/ws", storage_options=options)
    assert az.emulator.account_key not in repr(ws)


def test_azurite_says_why_it_cannot_run(monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Any) -> None:
    from toolfs.testing import azurite

    assert azurite.azurite_unavailable() is None  # the suite itself runs it here
    monkeypatch.setenv("TOOLFS_AZURITE_CACHE", str(tmp_path))  # nothing cached there
    monkeypatch.setattr(azurite.shutil, "which", lambda tool: None)
    reason = azurite.azurite_unavailable()
    assert reason is not None and "node and npm are not on PATH" in reason
    with pytest.raises(RuntimeError, match=r"Node\.js"):
        azurite.ensure_azurite()
    monkeypatch.setenv("TOOLFS_AZURITE", str(tmp_path / "nothing-here"))
    assert "does not exist" in (azurite.azurite_unavailable() or "")


def test_racing_large_writes_lose_no_update(az: AzureBackend) -> None:
    """Block-list writes from two contexts at once: each round, exactly the reported
    successes are in the final bytes; the loser is stale (its condition, or its staged
    blocks, discarded by the winner's commit)."""
    import concurrent.futures

    base = az.workspace()
    store: AzureBlobStore = base.fs.store
    body = "".join(f"{i:05d} shared line\n" for i in range(2000))  # ~40 KB
    base.write("race.txt", body)
    for rnd in range(3):
        contexts = [base.new_context() for _ in range(3)]
        for ws in contexts:
            ws.fs.store.single_put_limit, ws.fs.store.block_size = 16 * 1024, 8 * 1024
            ws.read("race.txt", limit=1)

        def edit(i: int, contexts: list[Any] = contexts, rnd: int = rnd) -> Any:
            return contexts[i].execute("edit", {
                "file_path": "race.txt", "old_string": "00000 shared line",
                "new_string": f"00000 round {rnd} by {i}"})

        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            outs = list(pool.map(edit, range(3)))
        won = [i for i, out in enumerate(outs) if not out.is_error]
        assert all(out.error.code == "stale" for out in outs if out.is_error), [
            o.text for o in outs]
        assert len(won) == 1, [o.text for o in outs]
        final = az.get("race.txt").decode()
        assert final.startswith(f"00000 round {rnd} by {won[0]}\n")
        assert final.endswith("01999 shared line\n")
        base.read("race.txt", limit=1)
        base.write("race.txt", body)
    assert store.single_put_limit is None  # the base context kept the default


# -- network faults: Azurite behind toolfs.testing.faults.FaultProxy ---------------------------


def _behind_faults(az: AzureBackend, proxy: Any) -> Any:
    """An adlfs filesystem whose requests pass through ``proxy``, with the SDK's retry
    back-off (15 s and more by default) cut to nothing."""
    conn = az.emulator.connection_string().replace(az.emulator.endpoint_url,
                                                   proxy.endpoint_url)
    fs = az.emulator.adlfs_filesystem(connection_string=conn)
    for policy in fs.service_client._pipeline._impl_policies:
        if hasattr(policy, "initial_backoff"):
            policy.initial_backoff, policy.increment_base = 0, 0
            policy.random_jitter_range = 0
    return fs


@pytest.mark.parametrize("fault", ["reset_after_forward", "500_after_forward",
                                   "reset_before_forward", "500_before_forward",
                                   "truncate_after_forward"])
def test_a_write_whose_response_is_lost_is_reported_truly(az: AzureBackend,
                                                          fault: Any) -> None:
    """The SDK resends; a resent create meets its own 409 (update: 412) and recognises
    its own bytes, so every call ends as the success it was, with those bytes."""
    from toolfs.testing.faults import FaultProxy

    with FaultProxy(az.emulator.endpoint_url, timeout=5.0) as proxy:
        ws = toolfs.Workspace(_behind_faults(az, proxy), root=az.root)
        ws.check_root()  # the condition probe, before any fault is planned
        proxy.plan(fault, method="PUT")
        az.emulator.clear_requests()
        out = ws.execute("write", {"file_path": "f.txt", "content": "one\n"})
        assert not out.is_error, out.text
        assert az.get("f.txt") == b"one\n"
        seen = [(r.method, r.status) for r in az.emulator.requests()
                if r.method in ("PUT", "HEAD")]
        if fault in ("reset_after_forward", "500_after_forward"):  # landed, answer lost
            assert seen[:3] == [("PUT", 201), ("PUT", 409), ("HEAD", 200)], seen
        ws.read("f.txt")
        proxy.plan(fault, method="PUT")
        out = ws.execute("edit", {"file_path": "f.txt", "old_string": "one",
                                  "new_string": "two"})
        assert not out.is_error, out.text
        assert az.get("f.txt") == b"two\n"
        proxy.plan(fault, method="GET")
        out = ws.execute("read", {"file_path": "f.txt"})
        assert not out.is_error and "two" in out.text, out.text
        assert proxy.injected() == {fault: 3}
        assert proxy.wait_idle()


@pytest.mark.parametrize("fault", DELETE_LOST)
@pytest.mark.parametrize("how", MOVES)
def test_a_delete_whose_response_is_lost_is_reported_truly(az: AzureBackend, how: str,
                                                           fault: Any) -> None:
    """The SDK resends the Delete Blob whose response was lost; the resend meets the
    blob gone (404) and a Get Blob Properties confirms it: success, the ledger says
    absent, and a move keeps its copy (the file is at the destination only)."""
    from toolfs.testing.faults import FaultProxy

    with FaultProxy(az.emulator.endpoint_url, timeout=5.0) as proxy:
        az.put("a.txt", MOVED_OLD)
        ws = toolfs.Workspace(_behind_faults(az, proxy), root=az.root)
        ws.check_root()  # the condition probe, before any fault is planned
        assert ws.execute("read", {"file_path": "a.txt"}).error is None
        az.emulator.clear_requests()
        proxy.plan(fault, method="DELETE")
        out = delete_or_move(ws, how, "a.txt", "b.txt")
        assert proxy.wait_idle()
        seen = [(r.method, r.status) for r in az.emulator.requests()
                if r.method in ("DELETE", "HEAD")]
        assert out is None or out.error is None, out.text
        assert proxy.injected() == {fault: 1}
        assert not az.exists("a.txt")
        if how == "rm_file":
            assert not az.exists("b.txt")
        else:
            assert az.get("b.txt") == moved_bytes(how)
        assert gone_from_ledger(ws, "a.txt")
        # The first landed; the resend met the blob gone (Azurite: 412, Azure: 404 or
        # 412 for an If-Match on a missing blob); a HEAD confirmed it.
        assert seen[-3] == ("DELETE", 202) and seen[-1] == ("HEAD", 404), seen
        assert seen[-2] in (("DELETE", 404), ("DELETE", 412)), seen


@pytest.mark.parametrize("how", MOVES)
def test_a_lost_delete_that_cannot_be_checked_is_a_backend_error(az: AzureBackend,
                                                                 how: str) -> None:
    """The check after the refused resend fails too: the outcome is unknown, so
    backend_error, never stale; a move keeps its copy."""
    from toolfs.testing.faults import FaultProxy

    with FaultProxy(az.emulator.endpoint_url, timeout=5.0) as proxy:
        az.put("a.txt", MOVED_OLD)
        fs = _behind_faults(az, proxy)
        for policy in fs.service_client._pipeline._impl_policies:
            if hasattr(policy, "total_retries"):
                policy.total_retries = 1  # a persistent 500 gives up at once
        ws = toolfs.Workspace(fs, root=az.root)
        ws.check_root()  # the condition probe, before any fault is planned
        assert ws.execute("read", {"file_path": "a.txt"}).error is None
        unverifiable_delete(ws, proxy, how, "HEAD")
        assert not az.exists("a.txt")
        if how != "rm_file":
            assert az.get("b.txt") == moved_bytes(how)
