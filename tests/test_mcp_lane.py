"""The stdio lane: ``tools/call`` answered without the SDK's dispatch, exactly as the SDK
would answer it.

A raw JSON-RPC client speaks to a :class:`ToolfsMCP` served in this process over two
real pipes (the shape ``toolfs serve`` has under an MCP client). The same script runs
once with the lane and once with it switched off by a pass-through middleware (the
server then answers every call through the SDK), and every answer must be identical.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import gc
import json
import os
import threading
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import fsspec.asyn
import pytest
from fsspec.implementations.memory import MemoryFileSystem

import toolfs
from tests.test_mcp import _ParkingStore
from toolfs.backends.memory import MemoryStore
from toolfs.integrations.mcp_server import ToolfsMCP

LEGACY = "2025-06-18"
MODERN = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}


pytestmark = pytest.mark.usefixtures("lane_wakeups")  # each test with each way of waiting


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Wire:
    """A raw JSON-RPC client on the other ends of the server's pipes."""

    def __init__(self, server: ToolfsMCP, modern: bool) -> None:
        self.server = server
        self.modern = modern
        self.next_id = 100
        self.early: list[dict[str, Any]] = []
        self.closed = False

    async def start(self) -> None:
        self._c2s_r, self._c2s_w = os.pipe()
        s2c_r, self._s2c_w = os.pipe()
        self._transports: list[asyncio.BaseTransport] = []
        self._serving = asyncio.get_running_loop().create_task(
            self.server._serve_pipes(self._c2s_r, self._s2c_w))
        self._answers = asyncio.StreamReader(limit=1 << 26)
        transport, _ = await asyncio.get_running_loop().connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(self._answers),
            os.fdopen(s2c_r, "rb", buffering=0))
        self._transports.append(transport)

    def send(self, message: dict[str, Any]) -> None:
        os.write(self._c2s_w, json.dumps(message).encode() + b"\n")

    async def receive(self, timeout: float = 10) -> dict[str, Any]:
        line = await asyncio.wait_for(self._answers.readline(), timeout)
        assert line, "the server closed the wire"
        answer: dict[str, Any] = json.loads(line)
        return answer

    async def request(self, method: str, params: dict[str, Any] | None = None,
                      request_id: int | str | None = None) -> dict[str, Any]:
        if request_id is None:
            self.next_id += 1
            request_id = self.next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        while True:
            answer = await self.receive()
            if answer.get("id") == request_id:
                return answer
            self.early.append(answer)

    def params(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` with the per-request envelope on a modern stream."""
        return {**params, "_meta": ENVELOPE} if self.modern else params

    async def call(self, name: str, arguments: Any, **extra: Any) -> dict[str, Any]:
        return await self.request("tools/call", self.params({"name": name,
                                                             "arguments": arguments, **extra}))

    async def open(self) -> None:
        """The stream's first request, which decides its protocol era."""
        if self.modern:
            answer = await self.request("server/discover", {"_meta": ENVELOPE})
            assert "result" in answer, answer
            return
        answer = await self.request("initialize", {
            "protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}})
        assert answer["result"]["protocolVersion"] == LEGACY
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def close(self) -> list[dict[str, Any]]:
        """End the input; every answer the server still sends, until it is done."""
        self.closed = True
        os.close(self._c2s_w)
        await asyncio.wait_for(self._serving, 10)
        os.close(self._s2c_w)  # the server is done writing: the client reads to the end
        os.close(self._c2s_r)
        rest = []
        while line := await asyncio.wait_for(self._answers.readline(), 10):
            rest.append(json.loads(line))
        for transport in self._transports:
            transport.close()
        return rest


@asynccontextmanager
async def wire(workspace: toolfs.Workspace, *, modern: bool, lane: bool = True,
               opened: bool = True) -> AsyncIterator[Wire]:
    server = ToolfsMCP(workspace)
    if not lane:
        async def pass_through(ctx: Any, call_next: Any) -> Any:
            return await call_next(ctx)
        server.server.middleware.append(pass_through)
    client = Wire(server, modern)
    await client.start()
    try:
        if opened:
            await client.open()
        yield client
    finally:
        if not client.closed:  # the test failed midway: still end the session
            with contextlib.suppress(Exception):
                await client.close()


def open_descriptors() -> int:
    """This process's open descriptors, once earlier tests' garbage is gone: collected,
    and the closes its finalizers hand to fsspec's event loop done (an s3fs or gcsfs
    client closes its sockets there, on the loop's next turn), so that none of them
    closes while a test counts its own."""
    gc.collect()
    loop = fsspec.asyn.get_loop()
    for _ in range(2):
        fsspec.asyn.sync(loop, asyncio.sleep, 0)
    return len(os.listdir("/proc/self/fd"))


def _workspace(root: str, store: MemoryStore | None = None) -> toolfs.Workspace:
    # MemoryFileSystem instances share one store: each workspace gets a root of its own.
    fs = MemoryFileSystem()
    workspace = toolfs.Workspace(fs, root=f"{root}-{uuid.uuid4().hex[:8]}",
                                 store=store or MemoryStore(fs), cache_bytes=0)
    workspace.write("a.txt", "alpha\nbeta\n")
    workspace.write("b.txt", "token=AKIAABCDEFGHIJKLMNOP\n")
    workspace.write("sub/c.py", "x = 1\n" * 40)
    return workspace


async def _script(client: Wire) -> list[dict[str, Any]]:
    calls: list[tuple[str, Any]] = [
        ("read", {"file_path": "a.txt"}),
        ("read", {"file_path": "a.txt", "offset": None, "limit": None}),  # strict nulls
        ("read", {"file_path": "missing.txt"}),
        ("read", {"path": "a.txt"}),  # invalid arguments: a tool error
        ("edit", {"file_path": "b.txt", "old_string": "token", "new_string": "t"}),
        ("write", {"file_path": "new.md", "content": "héllo ✓ 字\n"}),
        ("edit", {"file_path": "a.txt", "old_string": "beta", "new_string": "gamma"}),
        ("read", {"file_path": "sub/c.py", "offset": 3, "limit": 2}),
        ("glob", {"pattern": "**/*"}),
        ("grep", {"pattern": "x =", "output_mode": "content"}),
        ("ls", {}),
        ("read", {"file_path": "../outside"}),
        ("delete", {"file_path": "a.txt"}),  # an unknown tool: the SDK's protocol error
        ("read", ["a.txt"]),  # arguments that are not an object: the SDK's error
    ]
    answers = [await client.call(name, arguments) for name, arguments in calls]
    answers.append(await client.request("ping", client.params({})))
    # Calls that are not plain (params beyond name and arguments, or arguments neither
    # an object nor null) go through the SDK's check of the request on the lane too.
    unplain: list[dict[str, Any]] = [
        {"name": "read", "arguments": "a.txt"},
        {"name": "read", "arguments": {"file_path": "a.txt"}, "task": 5},
        {"name": "read", "arguments": {"file_path": "a.txt"}, "task": {"ttl": 1000}},
        {"name": "read", "arguments": None},
        {"name": "read"},
        # Fields of the handler's params model that one revision leaves out: the SDK
        # refuses them malformed (task in 2026-07-28, inputResponses before it).
        {"name": "read", "arguments": {"file_path": "a.txt"}, "inputResponses": 3},
        {"name": "read", "arguments": {"file_path": "a.txt"}, "requestState": 4},
        {"name": "read", "arguments": {"file_path": "a.txt"}, "requestState": "s"},
    ]
    if not client.modern:
        unplain += [{"name": "read", "arguments": {"file_path": "a.txt"}, "_meta": "x"},
                    {"name": "read", "arguments": {"file_path": "a.txt"},
                     "_meta": {"progressToken": 7}}]
    for params in unplain:
        answers.append(await client.request("tools/call", client.params(params)))
    return answers


def _normalised(answers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Request ids are the same in both runs; nothing else may differ.
    return [json.loads(json.dumps(a, sort_keys=True)) for a in answers]


@pytest.mark.anyio
@pytest.mark.parametrize("modern", [False, True], ids=["handshake-era", "modern-era"])
async def test_the_lane_answers_every_call_as_the_sdk_does(modern: bool) -> None:
    results, lane_calls = {}, {}
    for lane in (True, False):
        workspace = _workspace(f"/lane-{modern}-{lane}")
        async with wire(workspace, modern=modern, lane=lane) as client:
            results[lane] = _normalised(await _script(client))
            assert await client.close() == []
            lane_calls[lane] = client.server._lane_calls
    assert results[True] == results[False]
    # The 12 calls of known tools with object arguments take the lane, and of the calls
    # that are not plain exactly those the SDK takes to the handler (the others are the
    # SDK's to refuse), and only when nothing but the SDK's own OpenTelemetry
    # middleware is installed.
    not_plain = results[False][15:]
    assert 0 < sum("result" in a for a in not_plain) < len(not_plain)
    assert lane_calls == {True: 12 + sum("result" in a for a in not_plain), False: 0}
    by_tool = results[True]
    assert "     1\talpha" in by_tool[0]["result"]["content"][0]["text"]
    assert by_tool[3]["result"]["isError"] is True  # invalid_arguments is a tool error
    assert by_tool[12]["error"]["code"] == -32602  # unknown tool
    assert "error" in by_tool[13]


def test_the_sdk_accepts_every_plain_call_the_lane_does_not_check() -> None:
    """The lane spares the SDK's check of a handshake-era call whose params are a string
    name and arguments that are an object or null: that check must accept all of them."""
    import random

    from toolfs.integrations.mcp_server import _PLAIN_CALL_VERSIONS, _sdk_takes_call

    assert _PLAIN_CALL_VERSIONS  # the installed SDK's handshake-era versions qualify
    rng = random.Random(7)
    leaves: list[Any] = [None, True, 0, -1.5, "", "é\u0000", "x" * 300, [], {}]

    def value(depth: int) -> Any:
        if depth > 2 or rng.random() < 0.4:
            return rng.choice(leaves)
        if rng.random() < 0.5:
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        return {rng.choice(["", "a", "_meta", "task", "name", "😀"]): value(depth + 1)
                for _ in range(rng.randrange(4))}

    for version in sorted(_PLAIN_CALL_VERSIONS):
        for _ in range(300):
            params: dict[str, Any] = {"name": rng.choice(["read", "", "x" * 80, "编辑"])}
            if rng.random() < 0.8:
                arguments = value(1)
                params["arguments"] = arguments if isinstance(arguments, dict) \
                    else rng.choice([None, {}])
            assert _sdk_takes_call(version, params), (version, params)


@pytest.mark.anyio
async def test_before_initialize_a_call_is_the_sdks_to_refuse() -> None:
    answers = {}
    for lane in (True, False):
        async with wire(_workspace(f"/lane-early-{lane}"), modern=False, lane=lane,
                        opened=False) as client:
            first = await client.call("read", {"file_path": "a.txt"})
            # A handshake-era request: the era is decided, initialize not done yet.
            await client.open()
            answers[lane] = (first, await client.call("read", {"file_path": "a.txt"}))
            await client.close()
    assert _normalised(list(answers[True])) == _normalised(list(answers[False]))


@pytest.mark.anyio
async def test_a_modern_envelope_on_a_handshake_stream_is_refused_by_the_sdk() -> None:
    async with wire(_workspace("/lane-mixed"), modern=False) as client:
        answer = await client.request("tools/call", {
            "name": "read", "arguments": {"file_path": "a.txt"}, "_meta": ENVELOPE})
        assert answer["error"]["code"] == -32600, answer
        assert client.server._lane_calls == 0
        await client.close()


async def _park(client: Wire, store: _ParkingStore, request_id: int | str, tool: str,
                arguments: dict[str, Any]) -> None:
    """Send a call that parks in ``store`` and wait until it has."""
    store.arm()
    client.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                 "params": client.params({"name": tool, "arguments": arguments})})
    await _parked(store)


async def _parked(store: _ParkingStore) -> None:
    assert await asyncio.to_thread(store.parked.wait, 10), "the call never reached the store"


@pytest.mark.anyio
@pytest.mark.parametrize("modern", [False, True], ids=["handshake-era", "modern-era"])
async def test_lane_calls_overlap(modern: bool) -> None:
    fs = MemoryFileSystem()
    store = _ParkingStore(fs)
    async with wire(_workspace("/lane-overlap", store), modern=modern) as client:
        await _park(client, store, "slow", "read", {"file_path": "a.txt"})
        fast = await client.call("read", {"file_path": "sub/c.py"})
        assert fast["result"]["isError"] is False
        await _release_slow(client, store)
        await client.close()


def _write_reads(client: Wire, reads: list[tuple[str, dict[str, Any]]]) -> None:
    """Send ``read`` calls (id, arguments) in one write."""
    os.write(client._c2s_w, b"".join(
        json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                    "params": {"name": "read", "arguments": arguments}}).encode() + b"\n"
        for request_id, arguments in reads))


async def _release_slow(client: Wire, store: _ParkingStore) -> None:
    """Let the parked call ``slow`` go on: it is answered too."""
    store.release.set()
    slow = await client.receive()
    assert slow["id"] == "slow" and slow["result"]["isError"] is False


@pytest.mark.anyio
async def test_calls_sent_in_one_write_overlap() -> None:
    """The second line of a read waits for no new input and for no end of the first
    call: another lane thread takes it while the first call is parked."""
    fs = MemoryFileSystem()
    store = _ParkingStore(fs)
    async with wire(_workspace("/lane-one-write", store), modern=False) as client:
        store.arm(only="/a.txt")  # not the other calls' file
        _write_reads(client, [("slow", {"file_path": "a.txt"}),
                              ("fast", {"file_path": "sub/c.py"})])
        await _parked(store)
        fast = await client.receive()
        assert fast["id"] == "fast" and fast["result"]["isError"] is False
        await _release_slow(client, store)
        await client.close()


@pytest.mark.anyio
@pytest.mark.skipif(not hasattr(fcntl, "F_SETPIPE_SZ"), reason="sets a pipe's size (Linux)")
async def test_calls_past_one_read_of_the_input_overlap_too() -> None:
    """When the input holds more than one read of it takes (a pipe made larger, or a
    socket), the calls in the rest are taken while the first one runs."""
    fs = MemoryFileSystem()
    store = _ParkingStore(fs)
    async with wire(_workspace("/lane-big-read", store), modern=False) as client:
        fcntl.fcntl(client._c2s_w, fcntl.F_SETPIPE_SZ, 1 << 20)
        store.arm(only="/a.txt")  # not the other calls' file
        _write_reads(client, [("slow", {"file_path": "a.txt"}),
                              ("padded", {"file_path": "a.txt", "padding": "x" * 150_000}),
                              ("fast", {"file_path": "sub/c.py"})])
        await _parked(store)
        answers = {a["id"]: a for a in [await client.receive(), await client.receive()]}
        assert set(answers) == {"padded", "fast"}
        assert answers["fast"]["result"]["isError"] is False
        assert answers["padded"]["result"]["isError"] is True  # an unknown argument
        await _release_slow(client, store)
        await client.close()


@pytest.mark.anyio
async def test_calls_one_after_another_keep_the_lane_threads_few() -> None:
    """A thread runs the call it read while another waits for the next line: a client
    that waits for each answer keeps two lane threads busy, never one per call (up to
    the 32 the lane may start). One more starts each time a call comes in before the
    thread that answered the last one is free again: rare, but not here, where the
    client shares the server's interpreter, nor on a loaded machine (4 were seen with
    three copies of this file running on two cores)."""
    before = set(threading.enumerate())
    async with wire(_workspace("/lane-threads"), modern=False) as client:
        for _ in range(200):
            answer = await client.call("read", {"file_path": "a.txt"})
            assert answer["result"]["isError"] is False
        lane = [t for t in set(threading.enumerate()) - before
                if t.name.startswith("toolfs_stdio_")]
        assert 1 <= len(lane) <= 8, lane
        await client.close()


@pytest.mark.anyio
async def test_a_long_line_in_many_reads_is_one_call() -> None:
    """A line far longer than one read of the pipe, sent in pieces, is read as one."""
    content = "".join(f"line {i} " + "x" * 90 + "\n" for i in range(6000))  # ~600 KB
    async with wire(_workspace("/lane-long-line"), modern=False) as client:
        message = {"jsonrpc": "2.0", "id": "long", "method": "tools/call",
                   "params": {"name": "write",
                              "arguments": {"file_path": "long.txt", "content": content}}}
        data = json.dumps(message).encode() + b"\n"
        for start in range(0, len(data), 50_000):
            os.write(client._c2s_w, data[start:start + 50_000])
            await asyncio.sleep(0.005)
        answer = await client.receive()
        assert answer["id"] == "long" and answer["result"]["isError"] is False, answer
        read = await client.call("read", {"file_path": "long.txt", "offset": 6000})
        assert read["result"]["structuredContent"]["result"]["lines"] == [
            "line 5999 " + "x" * 90]
        await client.close()


@pytest.mark.anyio
async def test_a_cancelled_lane_call_is_never_answered() -> None:
    fs = MemoryFileSystem()
    store = _ParkingStore(fs)
    async with wire(_workspace("/lane-cancel", store), modern=False) as client:
        await _park(client, store, 7, "read", {"file_path": "a.txt"})
        client.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 7, "reason": "user"}})
        # "7" names the same request for the SDK (it coerces ids): a second cancel of it.
        client.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": "7"}})
        # Lines are read in order: once the ping is answered, both cancels were seen.
        assert "result" in await client.request("ping")
        store.release.set()
        after = await client.call("read", {"file_path": "a.txt"})
        assert after["result"]["isError"] is False
        rest = await client.close()
    assert [a for a in [*client.early, *rest] if a.get("id") == 7] == []


@pytest.mark.anyio
async def test_calls_in_flight_at_end_of_input_are_answered() -> None:
    fs = MemoryFileSystem()
    store = _ParkingStore(fs)
    async with wire(_workspace("/lane-eof", store), modern=True) as client:
        await _park(client, store, 9, "edit",
                    {"file_path": "a.txt", "old_string": "beta", "new_string": "B"})
        threading.Timer(0.2, store.release.set).start()
        rest = await client.close()
    assert [a["id"] for a in rest] == [9]
    # Not observed in this stream's context: the edit is refused, and says so.
    assert rest[0]["result"]["isError"] is True
    assert rest[0]["result"]["structuredContent"]["error"]["code"] == "not_observed"


@pytest.mark.anyio
async def test_a_call_the_closed_workers_cannot_take_is_answered_as_the_sdk_does() -> None:
    answers = {}
    for lane in (True, False):
        async with wire(_workspace(f"/lane-closed-{lane}"), modern=False, lane=lane) as client:
            client.server.workspace.close()  # the worker threads every context shares
            answers[lane] = await client.call("read", {"file_path": "a.txt"})
            await client.close()
    assert _normalised([answers[True]]) == _normalised([answers[False]])
    assert answers[True]["result"]["structuredContent"]["error"]["code"] == "backend_error"


@pytest.mark.anyio
async def test_with_a_tracer_installed_every_call_is_the_sdks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK's OpenTelemetry middleware records a span per call once a tracer is set:
    # the lane then leaves every call to it.
    from toolfs.integrations import mcp_server

    monkeypatch.setattr(mcp_server.trace, "get_tracer_provider", lambda: object())
    async with wire(_workspace("/lane-traced"), modern=True) as client:
        answer = await client.call("read", {"file_path": "a.txt"})
        assert answer["result"]["isError"] is False
        assert client.server._lane_calls == 0
        await client.close()


@pytest.mark.anyio
async def test_with_every_lane_thread_busy_calls_queue_and_reading_goes_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from toolfs.integrations import mcp_server

    monkeypatch.setattr(mcp_server, "_LANE_THREADS", 1)
    fs = MemoryFileSystem()
    store = _ParkingStore(fs)
    async with wire(_workspace("/lane-busy", store), modern=False) as client:
        await _park(client, store, "slow", "read", {"file_path": "a.txt"})
        # The one lane thread read the slow call and queued it; it still reads.
        assert "result" in await client.request("ping")
        fast = await client.call("read", {"file_path": "sub/c.py"})
        assert fast["result"]["isError"] is False
        store.release.set()
        slow = await client.receive()
        assert slow["id"] == "slow" and slow["result"]["isError"] is False
        await client.close()
        assert client.server._lane_calls == 2


@pytest.mark.anyio
async def test_while_an_initialize_is_unanswered_calls_are_the_sdks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The answer to a second initialize is held until the lane has judged the call sent
    # right after it: the version may be about to change, so the lane must leave it.
    from toolfs.integrations import mcp_server

    lane_class = mcp_server._StdioLane
    saw, eligible = lane_class._saw_answer, lane_class._eligible
    judged, verdicts, armed = threading.Event(), [], [False]

    def held_saw(self: Any, text: str) -> None:
        if armed[0] and '"protocolVersion"' in text:
            judged.wait(5)
        saw(self, text)

    def noted_eligible(self: Any, message: dict[str, Any]) -> Any:
        verdict = eligible(self, message)
        if armed[0] and message.get("method") == "tools/call":
            verdicts.append(verdict)
            judged.set()
        return verdict

    monkeypatch.setattr(lane_class, "_saw_answer", held_saw)
    monkeypatch.setattr(lane_class, "_eligible", noted_eligible)
    async with wire(_workspace("/lane-reinit"), modern=False) as client:
        armed[0] = True
        client.send({"jsonrpc": "2.0", "id": 500, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}})
        answer = await client.call("read", {"file_path": "a.txt"})
        assert "result" in answer, answer
        rest = await client.close()
    assert verdicts == [None]
    assert client.server._lane_calls == 0
    assert [a["id"] for a in [*client.early, *rest]] == [500]


@pytest.mark.anyio
async def test_a_queued_call_cancelled_before_it_starts_never_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from toolfs.integrations import mcp_server

    monkeypatch.setattr(mcp_server, "_LANE_THREADS", 1)
    held: list[Any] = []
    monkeypatch.setattr(mcp_server._StdioLane, "_queue", lambda self, job: held.append(job))
    executed: list[str] = []
    workspace = _workspace("/lane-queued-cancel")
    workspace.subscribe(lambda event: executed.append(event.operation))
    async with wire(workspace, modern=False) as client:
        client.send({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {
            "name": "write", "arguments": {"file_path": "q.txt", "content": "q\n"}}})
        client.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 8}})
        assert "result" in await client.request("ping")  # both lines were read
        assert len(held) == 1
        await asyncio.to_thread(held[0])  # the worker takes it only now
        rest = await client.close()
    assert executed == []
    assert [a for a in [*client.early, *rest] if a.get("id") == 8] == []
    assert not workspace.fs.exists("q.txt")
