"""The deadline of a tool call (``Workspace(timeout=...)``) on every object store.

A store that stalls -- a frozen server (accepts, never answers), headers then a stalled
body, a byte every second -- answers each call within ``timeout`` + 2 s with
``backend_error`` saying what is unknown, sync, async and over MCP; a deadline during a
write leaves the file old or new and the ledger truthful (it forgets the file, so the
next update reads it again). Each store sits behind :class:`FaultProxy` with its
client's default retry and timeout settings: only the deadline bounds the call.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import toolfs
from tests.backend_fixtures import GCSBackend, S3Backend
from toolfs.testing.faults import FaultProxy

TIMEOUT = 1.0
SLACK = 2.0
OLD, NEW = b"old line one\nold line two\n", b"new line one\nnew line two\n"


def _behind(backend: Any, proxy: FaultProxy) -> Any:
    """``backend``'s client aimed at ``proxy``, with the client's own default timeouts
    and retries (nothing cut short: the deadline must do it)."""
    emulator = backend.emulator
    if isinstance(backend, S3Backend):
        import s3fs

        return s3fs.S3FileSystem(**{**emulator.s3fs_storage_options(),
                                    "endpoint_url": proxy.endpoint_url,
                                    "skip_instance_cache": True})
    if isinstance(backend, GCSBackend):
        return emulator.gcsfs_filesystem(endpoint_url=proxy.endpoint_url)
    conn = emulator.connection_string().replace(emulator.endpoint_url, proxy.endpoint_url)
    return emulator.adlfs_filesystem(connection_string=conn)


def _workspace(store: Any, fs: Any, **options: Any) -> toolfs.Workspace:
    """A workspace over ``fs`` whose client is warmed up first (its session made, the
    service model loaded: that alone can take a second here), so the request each test
    stalls surely goes out within the deadline; the store's condition probe made too,
    so that the stalled request is the test's own, not the probe's."""
    warm = toolfs.Workspace(fs, root=store.root, timeout=None)
    assert warm.execute("read", {"file_path": "a.txt"}).error is None
    warm.check_root()
    return toolfs.Workspace(fs, root=store.root, timeout=TIMEOUT, **options)


@pytest.fixture(params=["s3", "gcs", "azure"])
def store(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh root on one object store (S3 on moto, GCS on fake-gcs-server, Azure on
    Azurite), holding ``a.txt``."""
    backend = request.getfixturevalue(f"{request.param}_backend")
    backend.setup()
    backend.put("a.txt", OLD)
    try:
        yield backend
    finally:
        backend.teardown()


@pytest.fixture
def proxy(store: Any) -> Iterator[FaultProxy]:
    with FaultProxy(store.emulator.endpoint_url, timeout=10.0) as p:
        yield p


def _running_on_the_loop(fs: Any) -> list[str]:
    """The tasks still running on fsspec's loop (where the store's requests run),
    other than the one asking."""
    import fsspec.asyn

    async def running() -> list[str]:
        return [repr(t) for t in asyncio.all_tasks()
                if t is not asyncio.current_task() and not t.done()]

    tasks: list[str] = fsspec.asyn.sync(fs.loop, running)
    return tasks


def _write_method(store: Any) -> str:
    return "POST" if isinstance(store, GCSBackend) else "PUT"


def _timed(call: Callable[[], Any]) -> tuple[Any, float]:
    began = time.monotonic()
    out = call()
    return out, time.monotonic() - began


@pytest.mark.parametrize("stall", ["freeze", "stall_body", "trickle"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stalled_read_answers_by_the_deadline(store: Any, proxy: FaultProxy, stall: str,
                                                mode: str) -> None:
    fs = _behind(store, proxy)
    args = {"file_path": "a.txt"}
    ws = _workspace(store, fs)
    if mode == "sync":
        proxy.plan(stall, method="GET", path="a.txt", times=None)  # retries stall too
        out, took = _timed(lambda: ws.execute("read", args))
    else:
        aws = toolfs.AsyncWorkspace(ws)

        async def calls() -> tuple[Any, float]:
            proxy.plan(stall, method="GET", path="a.txt", times=None)
            began = time.monotonic()
            return await aws.execute("read", args), time.monotonic() - began

        try:
            out, took = asyncio.run(calls())
        finally:
            aws.close()
    print(f"{store.name} {stall} {mode}: answered in {took:.2f} s (timeout {TIMEOUT} s)")
    assert took < TIMEOUT + SLACK, out.text
    assert out.error is not None and out.error.code == "backend_error", out.text
    assert "nothing was changed" in out.text and "1-second timeout" in out.text, out.text
    assert proxy.injected()[stall] >= 1
    proxy.clear()  # the store answers again: the next call reads
    again = toolfs.Workspace(fs, root=store.root, timeout=TIMEOUT).execute("read", args)
    assert again.error is None and "old line one" in again.text, again.text


@pytest.mark.parametrize("stall", ["freeze_after_forward", "freeze"])
def test_a_write_cut_by_the_deadline_is_old_or_new_and_the_ledger_forgets(
        store: Any, proxy: FaultProxy, stall: str) -> None:
    """The write's request went out and no answer came: the change may still complete,
    so the answer says to read first, the file holds the old or the new bytes whole,
    and the context no longer trusts what it read (the next edit is refused until it
    reads again; then it stands on what is really there)."""
    ws = _workspace(store, _behind(store, proxy))
    key = f"{store.root}/a.txt"
    assert ws.execute("read", {"file_path": "a.txt"}).error is None
    assert ws.fs.ledger.get(key) is not None
    proxy.plan(stall, method=_write_method(store), times=None)
    out, took = _timed(lambda: ws.execute("write", {"file_path": "a.txt",
                                                    "content": NEW.decode()}))
    print(f"{store.name} write {stall}: answered in {took:.2f} s (timeout {TIMEOUT} s)")
    assert took < TIMEOUT + SLACK, out.text
    assert out.error is not None and out.error.code == "backend_error", out.text
    assert "the change may still complete; read the file before retrying" in out.text
    stored = store.get("a.txt")
    assert stored == (NEW if stall == "freeze_after_forward" else OLD)
    assert ws.fs.ledger.get(key) is None  # what it read no longer counts
    assert _running_on_the_loop(ws.fs.fs) == []  # nothing of the write runs on
    proxy.clear()
    edit = ws.execute("edit", {"file_path": "a.txt", "old_string": "line one",
                               "new_string": "line 1"})
    assert edit.error is not None and edit.error.code == "not_observed", edit.text
    assert store.get("a.txt") == stored
    assert ws.execute("read", {"file_path": "a.txt"}).error is None
    edit = ws.execute("edit", {"file_path": "a.txt", "old_string": "line one",
                               "new_string": "line 1"})
    assert edit.error is None, edit.text
    assert store.get("a.txt") == stored.replace(b"line one", b"line 1")


def test_a_delete_cut_by_the_deadline_leaves_the_ledger_truthful(
        store: Any, proxy: FaultProxy) -> None:
    """The DELETE went out and no answer came: the file may be gone or not, the
    answer says so, and the context forgets what it read."""
    ws = _workspace(store, _behind(store, proxy))
    key = f"{store.root}/a.txt"
    assert ws.execute("read", {"file_path": "a.txt"}).error is None
    proxy.plan("freeze_after_forward", method="DELETE", times=None)
    began = time.monotonic()
    with pytest.raises(toolfs.FsError) as caught:
        ws.run(lambda fs: fs.rm_file("a.txt"))
    took = time.monotonic() - began
    print(f"{store.name} delete freeze_after_forward: answered in {took:.2f} s "
          f"(timeout {TIMEOUT} s)")
    assert took < TIMEOUT + SLACK
    assert caught.value.code == "backend_error"
    assert "the change may still complete" in caught.value.message
    assert not store.exists("a.txt")  # it landed
    assert ws.fs.ledger.get(key) is None
    assert _running_on_the_loop(ws.fs.fs) == []


def test_a_deadline_before_the_write_was_sent_changed_nothing(store: Any,
                                                              proxy: FaultProxy) -> None:
    """A create first checks the name (a listing, a metadata request per parent): cut
    there, no write request went out, and the answer says nothing was changed."""
    ws = _workspace(store, _behind(store, proxy))
    proxy.plan("freeze", method="GET", times=None)
    out, took = _timed(lambda: ws.execute("write", {"file_path": "d/new.txt",
                                                    "content": "x\n"}))
    assert took < TIMEOUT + SLACK, out.text
    assert out.error is not None and out.error.code == "backend_error", out.text
    assert "nothing was changed" in out.text, out.text
    assert proxy.injected().get("freeze", 0) >= 1
    assert [i for i in proxy.injections if i.method in ("PUT", "POST")] == []
    assert not store.exists("d/new.txt")


def test_listing_tools_answer_by_the_deadline(store: Any, proxy: FaultProxy) -> None:
    """glob, grep and ls list pages and fetch files in parallel: a frozen store ends
    each by the deadline too."""
    ws = _workspace(store, _behind(store, proxy))
    proxy.plan("freeze", method="GET", times=None)
    for tool, args in (("ls", {}), ("glob", {"pattern": "**/*.txt"}),
                       ("grep", {"pattern": "line"})):
        out, took = _timed(lambda tool=tool, args=args: ws.execute(tool, args))
        assert took < TIMEOUT + SLACK, (tool, out.text)
        assert out.error is not None and out.error.code == "backend_error", (tool, out.text)


def test_grep_fetches_stall_and_end_by_the_deadline(store: Any, proxy: FaultProxy) -> None:
    """The listing answers, every file fetch stalls (get_many's parallel requests on
    fsspec's loop): the call still ends by the deadline."""
    for i in range(5):
        store.put(f"f{i}.txt", b"needle\n")
    ws = _workspace(store, _behind(store, proxy))
    proxy.plan("stall_body", method="GET", path=".txt", times=None)
    out, took = _timed(lambda: ws.execute("grep", {"pattern": "needle"}))
    assert took < TIMEOUT + SLACK, out.text
    assert out.error is not None and out.error.code == "backend_error", out.text


# -- the option itself (no store needed) -------------------------------------------------


def test_timeout_is_inherited_and_checked() -> None:
    ws = toolfs.Workspace("memory://deadline-option", timeout=2.5)
    assert ws.timeout == 2.5
    assert ws.new_context().timeout == 2.5
    assert ws.new_context(timeout=None).timeout is None
    assert toolfs.Workspace("memory://deadline-option").timeout == 30.0
    aws = toolfs.AsyncWorkspace("memory://deadline-option", timeout=4.0)
    try:
        assert aws.sync.timeout == 4.0 and aws.new_context().sync.timeout == 4.0
    finally:
        aws.close()
    for bad in (0, -1, float("nan"), float("inf"), "30", True):
        with pytest.raises(toolfs.FsError) as caught:
            toolfs.Workspace("memory://deadline-option", timeout=bad)
        assert caught.value.code == "invalid_arguments"


# -- over MCP: `toolfs serve --timeout` through the official client ---------------------


def test_over_mcp_a_frozen_store_answers_by_the_deadline(s3_backend: S3Backend) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, get_default_environment

    s3_backend.setup()
    s3_backend.put("a.txt", OLD)
    with FaultProxy(s3_backend.emulator.endpoint_url, timeout=10.0) as proxy:
        options = {**s3_backend.emulator.s3fs_storage_options(),
                   "endpoint_url": proxy.endpoint_url}
        argv = ["-m", "toolfs", "serve", f"s3://{s3_backend.root}", "--timeout", "1"]
        for key, value in options.items():
            argv += ["-o", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
        src = str(Path(toolfs.__file__).resolve().parents[1])
        path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)
        params = StdioServerParameters(command=sys.executable, args=argv,
                                       env={**get_default_environment(), "PYTHONPATH": path})

        async def session() -> tuple[Any, Any, float]:
            async with Client(params) as client:
                first = await client.call_tool("read", {"file_path": "a.txt"})
                proxy.plan("freeze", method="GET", path="a.txt", times=None)
                began = time.monotonic()
                frozen = await client.call_tool("read", {"file_path": "a.txt"})
                return first, frozen, time.monotonic() - began

        first, frozen, took = asyncio.run(session())
    print(f"s3 freeze over MCP: answered in {took:.2f} s (timeout {TIMEOUT} s)")
    assert not first.is_error, first.content[0].text
    assert frozen.is_error and took < TIMEOUT + SLACK, frozen.content[0].text
    assert "nothing was changed" in frozen.content[0].text


def test_calls_waiting_for_a_worker_end_by_their_deadline(s3_backend: S3Backend) -> None:
    """An AsyncWorkspace's call counts its time from when it was made, its wait for a
    free worker included: four calls on one worker behind a frozen store all answer
    within the one deadline, not one after the other."""
    s3_backend.setup()
    s3_backend.put("a.txt", OLD)
    with FaultProxy(s3_backend.emulator.endpoint_url, timeout=10.0) as proxy:
        aws = toolfs.AsyncWorkspace(_workspace(s3_backend, _behind(s3_backend, proxy)),
                                    max_workers=1)
        proxy.plan("freeze", method="GET", path="a.txt", times=None)

        async def calls() -> tuple[list[Any], float]:
            began = time.monotonic()
            outs = await asyncio.gather(*(aws.execute("read", {"file_path": "a.txt"})
                                          for _ in range(4)))
            return list(outs), time.monotonic() - began

        try:
            outs, took = asyncio.run(calls())
        finally:
            aws.close()
    print(f"s3 freeze, 4 calls on 1 worker: all answered in {took:.2f} s "
          f"(timeout {TIMEOUT} s)")
    assert took < TIMEOUT + SLACK
    assert all(o.error is not None and o.error.code == "backend_error" for o in outs)


@pytest.mark.parametrize("cut", ["staging", "commit"])
def test_a_block_list_write_cut_by_the_deadline_is_never_torn(azure_backend: Any,
                                                              cut: str) -> None:
    """Azure's one write of several requests (blocks staged, then one conditional
    commit): cut while staging, the blob is still the old one; cut after the commit
    went out, it is the new one whole. Never a mix."""
    from toolfs.testing.faults import ProxiedRequest

    store = azure_backend
    store.setup()
    store.put("a.txt", OLD)
    new = b"".join(b"new row %05d\n" % i for i in range(2000))  # ~26 KB: 7 blocks
    try:
        with FaultProxy(store.emulator.endpoint_url, timeout=10.0) as proxy:
            ws = _workspace(store, _behind(store, proxy))
            ws.fs.store.single_put_limit, ws.fs.store.block_size = 8 * 1024, 4 * 1024
            assert ws.execute("read", {"file_path": "a.txt"}).error is None
            comp = "comp=block" if cut == "staging" else "comp=blocklist"

            def hits(r: ProxiedRequest) -> bool:
                return f"{comp}&" in r.query + "&"

            proxy.plan("freeze" if cut == "staging" else "freeze_after_forward",
                       method="PUT", match=hits, times=None)
            out, took = _timed(lambda: ws.execute("write", {"file_path": "a.txt",
                                                            "content": new.decode()}))
            print(f"azure block-list write cut while {cut}: answered in {took:.2f} s "
                  f"(timeout {TIMEOUT} s)")
            assert took < TIMEOUT + SLACK, out.text
            assert out.error is not None and out.error.code == "backend_error", out.text
            assert store.get("a.txt") == (OLD if cut == "staging" else new)
            assert ws.fs.ledger.get(f"{store.root}/a.txt") is None
    finally:
        store.teardown()
