"""MCP over stdio pipes, as a client that spawns ``toolfs serve`` sees it.

The SDK's stdio transport serves the stream; what must hold on the wire: a message longer
than asyncio's default 64 KiB line limit gets through; output printed by code inside the
server goes to stderr, never onto the JSON-RPC wire; a line that is no message is answered
with a JSON-RPC error (never left unanswered); calls in flight when the input ends get
their real answers, a cancelled call none, a call the closed workspace cannot run a tool
error; and a served stream leaves no descriptor open.
The raw-wire tests serve ``ToolfsMCP.run_stdio`` in this process over two real pipes.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
import textwrap
import threading
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from fsspec.implementations.memory import MemoryFileSystem
from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment

import toolfs
from tests.integrations.test_mcp import _ParkingStore
from toolfs.integrations.mcp_server import ToolfsMCP

HANDSHAKE = "2025-06-18"
MODERN = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}

SERVER = textwrap.dedent("""
    import sys
    import toolfs
    from toolfs.integrations.mcp_server import ToolfsMCP

    def chatty(event):
        print("stray output from a subscriber:", event.type)  # must not reach the wire

    ws = toolfs.Workspace(sys.argv[1], subscribers=[chatty])
    ToolfsMCP(ws).serve_stdio()
    print("after the session", flush=True)  # fds 0 and 1 are back in place
""")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_long_messages_and_stray_output_over_pipes(tmp_path: Path) -> None:
    src = os.path.dirname(os.path.dirname(toolfs.__file__))
    log = tmp_path / "stderr.txt"
    root = tmp_path / "root"
    root.mkdir()
    params = StdioServerParameters(
        command=sys.executable, args=["-c", SERVER, str(root)],
        env={**get_default_environment(), "PYTHONPATH": src})
    content = "".join(f"{i:07d} a line of a long file\n" for i in range(40_000))  # ~1.2 MB
    with log.open("w") as errlog:
        from mcp.client.stdio import stdio_client
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            wrote = await client.call_tool("write", {"file_path": "big.txt",
                                                     "content": content})
            assert not wrote.is_error, wrote.content
            read = await client.call_tool("read", {"file_path": "big.txt", "offset": 39_999})
            assert not read.is_error
            assert read.structured_content["result"]["lines"] == [
                "0039998 a line of a long file", "0039999 a line of a long file"]
            edit = await client.call_tool("edit", {"file_path": "big.txt",
                                                   "old_string": "0000007 a line",
                                                   "new_string": "0000007 A LINE"})
            assert not edit.is_error, edit.content
    assert (root / "big.txt").read_text() == content.replace("0000007 a line",
                                                             "0000007 A LINE")
    err = log.read_text()
    assert "stray output from a subscriber: fs/written" in err


class Wire:
    """A raw JSON-RPC client on the other ends of two pipes that ``run_stdio`` serves."""

    def __init__(self, server: ToolfsMCP) -> None:
        self.server = server
        self.next_id = 100
        self.early: list[dict[str, Any]] = []
        self.workspace: toolfs.Workspace | None = None

    async def __aenter__(self) -> Wire:
        c2s_r, self._c2s_w = os.pipe()
        s2c_r, s2c_w = os.pipe()

        def text(fd: int, mode: str) -> anyio.AsyncFile[str]:
            return anyio.wrap_file(io.TextIOWrapper(open(fd, mode), encoding="utf-8",
                                                    errors="replace"))

        self._files = (text(c2s_r, "rb"), text(s2c_w, "wb"))
        self._serving = asyncio.get_running_loop().create_task(
            self.server.run_stdio(*self._files))
        self._answers = asyncio.StreamReader(limit=1 << 26)
        self._transport, _ = await asyncio.get_running_loop().connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(self._answers), os.fdopen(s2c_r, "rb", 0))
        self._input_open = True
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._input_open:  # the test failed midway: still end the session
            await self.close()

    def send_line(self, line: str | bytes) -> None:
        os.write(self._c2s_w, line.encode() if isinstance(line, str) else line)

    def send(self, message: dict[str, Any]) -> None:
        self.send_line(json.dumps(message) + "\n")

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

    async def initialize(self) -> None:
        answer = await self.request("initialize", {
            "protocolVersion": HANDSHAKE, "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}})
        assert answer["result"]["protocolVersion"] == HANDSHAKE
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def call(self, name: str, arguments: Any, **ids: Any) -> dict[str, Any]:
        return await self.request("tools/call", {"name": name, "arguments": arguments}, **ids)

    async def close(self) -> list[dict[str, Any]]:
        """End the input; every answer the server still sends, until it is done."""
        self._input_open = False
        os.close(self._c2s_w)
        await asyncio.wait_for(self._serving, 10)
        for file in self._files:
            await file.aclose()  # the server is done: the client reads to the end
        rest = []
        while line := await asyncio.wait_for(self._answers.readline(), 10):
            rest.append(json.loads(line))
        self._transport.close()
        return rest


@asynccontextmanager
async def wire(store: _ParkingStore | None = None) -> AsyncIterator[Wire]:
    fs = MemoryFileSystem()
    # MemoryFileSystem instances share one store: each workspace gets a root of its own.
    workspace = toolfs.Workspace(fs, root=f"/mcp-stdio-{uuid.uuid4().hex[:8]}",
                                 store=store or _ParkingStore(fs), cache_bytes=0)
    workspace.write("a.txt", "alpha\nbeta\n")
    async with Wire(ToolfsMCP(workspace)) as client:
        client.workspace = workspace
        yield client


async def _parked(store: _ParkingStore) -> None:
    assert await asyncio.to_thread(store.parked.wait, 10), "the call never reached the store"


@pytest.mark.anyio
async def test_a_line_that_is_no_message_gets_a_jsonrpc_error_and_the_stream_goes_on() -> None:
    lone_surrogate = ('{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": '
                      '{"name": "read", "arguments": {"file_path": "\\ud800.txt"}}}\n')
    async with wire() as client:
        await client.initialize()
        for line in (lone_surrogate, "not json\n", '{"jsonrpc": "2.0", "id": 4, "meth\n'):
            client.send_line(line)
            answer = await client.receive()
            assert answer["id"] is None
            assert answer["error"]["code"] == -32700, answer
            assert answer["error"]["message"].startswith("Parse error")
        for line in ('{"jsonrpc": "2.0", "id": 5}\n', "[1, 2]\n", '"tools/call"\n'):
            client.send_line(line)
            answer = await client.receive()
            assert (answer["id"], answer["error"]["code"]) == (None, -32600), answer
        # Bytes that are not UTF-8 are read as replacement characters, as the SDK reads them.
        client.send_line(b'{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": '
                         b'{"name": "read", "arguments": {"file_path": "\xff.txt"}}}\n')
        answer = await client.receive()
        assert answer["id"] == 6
        assert answer["result"]["structuredContent"]["error"]["code"] == "not_found"
        # A CRLF line end, and a string id: answered by that id.
        client.send_line('{"jsonrpc": "2.0", "id": "r1", "method": "tools/call", "params": '
                         '{"name": "read", "arguments": {"file_path": "a.txt"}}}\r\n')
        answer = await client.receive()
        assert answer["id"] == "r1"
        assert answer["result"]["structuredContent"]["result"]["lines"] == ["alpha", "beta"]
        assert await client.close() == []
    assert client.early == []


@pytest.mark.anyio
async def test_a_call_before_initialize_is_refused_and_the_modern_era_is_served() -> None:
    async with wire() as client:
        early = await client.call("read", {"file_path": "a.txt"})
        assert early["error"]["code"] == -32602, early
        await client.close()
    # A stream whose first request carries the 2026-07-28 envelope needs no handshake.
    async with wire() as client:
        discovered = await client.request("server/discover", {"_meta": ENVELOPE})
        assert MODERN in discovered["result"]["supportedVersions"]
        answer = await client.request("tools/call", {
            "name": "read", "arguments": {"file_path": "a.txt"}, "_meta": ENVELOPE})
        assert answer["result"]["structuredContent"]["result"]["lines"] == ["alpha", "beta"]
        await client.close()


@pytest.mark.anyio
async def test_calls_in_flight_at_end_of_input_get_their_real_answers() -> None:
    store = _ParkingStore(MemoryFileSystem())
    async with wire(store) as client:
        await client.initialize()
        assert (await client.call("read", {"file_path": "a.txt"}))["result"]["isError"] is False
        store.arm()
        client.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
            "name": "edit", "arguments": {"file_path": "a.txt", "old_string": "beta",
                                          "new_string": "gamma"}}})
        await _parked(store)
        # The input ends while the edit is parked in the store; it lands, and says so.
        threading.Timer(0.2, store.release.set).start()
        rest = await client.close()
    assert [a["id"] for a in rest] == [9]
    assert rest[0]["result"]["isError"] is False, rest
    assert client.workspace is not None
    assert client.workspace.fs.cat_file("a.txt") == b"alpha\ngamma\n"


@pytest.mark.anyio
async def test_a_cancelled_call_is_never_answered_nor_waited_for_at_the_end() -> None:
    store = _ParkingStore(MemoryFileSystem())
    fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    async with wire(store) as client:
        await client.initialize()
        store.arm()
        client.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "read", "arguments": {"file_path": "a.txt"}}})
        await _parked(store)
        # "7" names the same request for the SDK (it correlates ids so): a second cancel.
        for request_id in (7, "7"):
            client.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                         "params": {"requestId": request_id, "reason": "user"}})
        assert "result" in await client.request("ping")  # lines are read in order
        rest = await client.close()  # the end is not held for the cancelled call
        store.release.set()
    assert [a for a in [*client.early, *rest] if a.get("id") == 7] == []
    if fds is not None:
        assert len(os.listdir("/proc/self/fd")) == fds


@pytest.mark.anyio
async def test_a_call_the_closed_workspace_cannot_run_is_answered_as_a_tool_error() -> None:
    async with wire() as client:
        await client.initialize()
        client.server.workspace.close()  # the worker threads every context shares
        answer = await client.call("read", {"file_path": "a.txt"})
        assert answer["result"]["isError"] is True
        assert answer["result"]["structuredContent"]["error"]["code"] == "backend_error"
        await client.close()
