"""The stdio lane under hostile and odd input: every answer is the one the SDK sends.

The reference is the SDK's own stdio transport (``stdio_server`` over text files on the
same pipes, as ``run_stdio`` serves a non-pipe stdin), so the lane's line framing is
checked too, not only its answers. Each test runs one script against the lane and
against the reference and compares what the client sees.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from io import TextIOWrapper
from typing import Any

import anyio
import pytest
from fsspec.implementations.memory import MemoryFileSystem

import toolfs
from tests.test_mcp import _ParkingStore
from tests.test_mcp_lane import ENVELOPE, LEGACY, Wire, _parked, _workspace, open_descriptors
from toolfs.integrations.mcp_server import ToolfsMCP

pytestmark = pytest.mark.usefixtures("lane_wakeups")  # each test with each way of waiting


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _lane_classifies_every_line(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """No line makes the lane's own classification fail (it would hand the line to the
    SDK, and log it, rather than lose it)."""
    yield
    records = [*caplog.get_records("setup"), *caplog.get_records("call")]
    assert not [r for r in records if "could not classify" in r.getMessage()]


async def _sdk_serve(server: ToolfsMCP, read_fd: int, write_fd: int) -> None:
    """``server`` on the SDK's own stdio transport over the two pipes (the reference)."""
    from mcp.server.stdio import stdio_server

    reader = TextIOWrapper(os.fdopen(read_fd, "rb", closefd=False), encoding="utf-8",
                           errors="replace")
    writer = TextIOWrapper(os.fdopen(write_fd, "wb", closefd=False), encoding="utf-8")
    async with stdio_server(anyio.wrap_file(reader), anyio.wrap_file(writer)) as (read, write):
        await server.server.run(read, write, server.server.create_initialization_options())


class Raw(Wire):
    """:class:`Wire` that can send raw bytes, on the lane or on the SDK's transport."""

    def __init__(self, server: ToolfsMCP, modern: bool, lane: bool) -> None:
        super().__init__(server, modern)
        self.lane = lane
        self.store: _ParkingStore | None = None

    async def start(self) -> None:
        if self.lane:
            await super().start()
            return
        # Wire.start with the reference transport in place of the lane.
        self._c2s_r, self._c2s_w = os.pipe()
        s2c_r, self._s2c_w = os.pipe()
        self._transports = []
        loop = asyncio.get_running_loop()
        self._serving = loop.create_task(_sdk_serve(self.server, self._c2s_r, self._s2c_w))
        self._answers = asyncio.StreamReader(limit=1 << 26)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(self._answers),
            os.fdopen(s2c_r, "rb", buffering=0))
        self._transports.append(transport)

    def send_raw(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._c2s_w, view):]

    async def answer_to(self, request_id: Any) -> dict[str, Any]:
        """The answer to ``request_id`` (answers to others are kept in ``early``)."""
        def ours(answer: dict[str, Any]) -> bool:
            rid = answer.get("id")
            return rid == request_id and type(rid) is type(request_id)

        for answer in self.early:
            if ours(answer):
                self.early.remove(answer)
                return answer
        while not ours(answer := await self.receive()):
            self.early.append(answer)
        return answer


async def _sync(client: Raw) -> None:
    """Every line sent so far has been read: a ping sent now is answered."""
    client.next_id += 1
    sync_id = f"sync-{client.next_id}"
    client.send({"jsonrpc": "2.0", "id": sync_id, "method": "ping",
                 **({"params": {"_meta": ENVELOPE}} if client.modern else {})})
    await client.answer_to(sync_id)


@asynccontextmanager
async def raw(workspace: toolfs.Workspace, *, modern: bool, lane: bool, opened: bool = True,
              tools: list[str] | None = None) -> AsyncIterator[Raw]:
    client = Raw(ToolfsMCP(workspace, tools=tools), modern, lane)
    await client.start()
    if opened:
        await client.open()
    yield client


Script = Callable[[Raw], Awaitable[list[dict[str, Any]]]]


def _canonical(answers: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(a, sort_keys=True) for a in answers)


async def _both(name: str, script: Script, *, modern: bool, opened: bool = True,
                tools: list[str] | None = None, parking: bool = False) -> dict[bool, list[str]]:
    """What the client sees (its answers, then everything after the end of input) on
    the lane and on the reference. With ``parking``, ``client.store`` is a store whose
    first get after ``arm()`` parks until released."""
    seen = {}
    for lane in (True, False):
        store = _ParkingStore(MemoryFileSystem()) if parking else None
        async with raw(_workspace(f"/{name}-{lane}", store), modern=modern, lane=lane,
                       opened=opened, tools=tools) as client:
            client.store = store
            answers = await script(client)
            rest = await client.close()
            seen[lane] = _canonical([*answers, *client.early, *rest])
    return seen


ERAS = pytest.mark.parametrize("modern", [False, True], ids=["handshake-era", "modern-era"])


def _call(client: Raw, request_id: Any, name: Any = "read",
          arguments: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": client.params({"name": name, "arguments": (
                {"file_path": "a.txt"} if arguments is None else arguments)})}


# -- malformed lines ------------------------------------------------------------------

# Values a hash set cannot hold, where the lane looks a request up by id or tool name.
_UNHASHABLE = [
    ("id-array", lambda c: {"jsonrpc": "2.0", "id": [1], "method": "ping"}),
    ("id-object", lambda c: _call(c, {"a": 1})),
    ("name-array", lambda c: _call(c, 1, name=["read"])),
    ("name-object", lambda c: _call(c, 2, name={"read": 1})),
]


@pytest.mark.anyio
@ERAS
@pytest.mark.parametrize("shape", [s for s, _ in _UNHASHABLE])
async def test_an_id_or_tool_name_of_any_json_type_is_answered_as_the_sdk_does(
        modern: bool, shape: str) -> None:
    line = dict(_UNHASHABLE)[shape]

    async def script(client: Raw) -> list[dict[str, Any]]:
        client.send(line(client))
        await _sync(client)
        # The lane still reads: a later call is answered.
        return [await client.call("read", {"file_path": "a.txt"})]

    seen = await _both(f"unhashable-{shape}", script, modern=modern)
    assert seen[True] == seen[False]


# -- the stream's first request -------------------------------------------------------


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


# A first line the SDK reads differently from how it looks: an initialize with a byte
# that is not UTF-8 (the SDK reads it with a replacement character: a request), and
# enveloped calls that the SDK does not take for requests at all (wrong jsonrpc, an id
# that is neither an integer nor a string).
_OPENINGS: dict[str, Callable[[Raw], bytes]] = {
    "initialize-not-utf8": lambda c: json.dumps({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "1"}}}).encode().replace(
        b'"raw"', b'"r\xffw"') + b"\n",
    "jsonrpc-1.0": lambda c: _line({**_call(c, 9), "jsonrpc": "1.0"}),
    "id-float": lambda c: _line(_call(c, 1.5)),
    "id-bool": lambda c: _line(_call(c, True)),
}


@pytest.mark.anyio
@pytest.mark.parametrize("opening", list(_OPENINGS))
async def test_the_era_is_decided_by_the_first_line_the_sdk_takes_for_a_request(
        opening: str) -> None:
    async def script(client: Raw) -> list[dict[str, Any]]:
        client.modern = True  # the calls below carry the modern envelope
        client.send_raw(_OPENINGS[opening](client))
        if opening == "initialize-not-utf8":
            answers = [await client.answer_to(0)]
            client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        else:
            client.modern = False
            await client.open()
            client.modern = True
            answers = []
        # A handshake-era stream: the SDK refuses every enveloped request.
        answers += [await client.call("read", {"file_path": "a.txt"}) for _ in range(2)]
        client.modern = False
        answers.append(await client.call("read", {"file_path": "a.txt"}))
        return answers

    seen = await _both(f"opening-{opening}", script, modern=False, opened=False)
    assert seen[True] == seen[False]


# -- line framing ---------------------------------------------------------------------

# The SDK reads the pipe as text with universal newlines: "\r\n", "\n" and a lone "\r"
# each end a line.
_FRAMINGS: dict[str, tuple[list[bytes], list[int]]] = {
    # name: (the bytes sent, in pieces; the ids the SDK answers)
    "lone-cr-ends-a-line": ([b"{A}\r{B}\n"], [1, 2]),
    "cr-inside-a-message": ([b'{"jsonrpc": "2.0",\r"id": 1, "method": "ping"}\n'], []),
    "crlf": ([b"{A}\r\n{B}\r\n"], [1, 2]),
    "crlf-split-between-writes": ([b"{A}\r", b"\n{B}\n"], [1, 2]),
    "blank-lines": ([b"\n\r\n\r  \n{A}\n\n"], [1]),
}


@pytest.mark.anyio
@ERAS
@pytest.mark.parametrize("framing", list(_FRAMINGS))
async def test_lines_end_where_the_sdk_ends_them(modern: bool, framing: str) -> None:
    pieces, answered = _FRAMINGS[framing]

    async def script(client: Raw) -> list[dict[str, Any]]:
        for piece in pieces:
            for name, request_id in ((b"{A}", 1), (b"{B}", 2)):
                piece = piece.replace(name, json.dumps(_call(client, request_id)).encode())
            client.send_raw(piece)
            await asyncio.sleep(0.05)  # the next piece comes in a later read
        await _sync(client)
        return [await client.answer_to(request_id) for request_id in answered]

    seen = await _both(f"framing-{framing}", script, modern=modern)
    assert seen[True] == seen[False]


# -- cancellation ---------------------------------------------------------------------

_CANCELLED = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
# name: (the call's id, the cancel notification, whether the SDK takes it for this call)
_CANCELS: dict[str, tuple[Any, dict[str, Any], bool]] = {
    # The SDK correlates ids as the TypeScript SDK does: "7" and 7 are one id.
    "int-call-string-cancel": (7, {**_CANCELLED, "params": {"requestId": "7"}}, True),
    "string-call-int-cancel": ("7", {**_CANCELLED, "params": {"requestId": 7}}, True),
    "padded-string": (7, {**_CANCELLED, "params": {"requestId": " 7"}}, True),
    "leading-zero-call": ("07", {**_CANCELLED, "params": {"requestId": 7}}, True),
    "string-ids": ("x", {**_CANCELLED, "params": {"requestId": "x"}}, True),
    # ... but a bool is not an id, nor a float.
    "bool-cancel": (1, {**_CANCELLED, "params": {"requestId": True}}, False),
    "float-cancel": (7, {**_CANCELLED, "params": {"requestId": 7.0}}, False),
    # The SDK's model decides what is a notification: not one on the wrong protocol,
    # one even with an "id" that no request can have.
    "jsonrpc-1.0": (7, {**_CANCELLED, "jsonrpc": "1.0", "params": {"requestId": 7}}, False),
    "null-id": (7, {**_CANCELLED, "id": None, "params": {"requestId": 7}}, True),
    "float-id": (7, {**_CANCELLED, "id": 7.5, "params": {"requestId": 7}}, True),
    "array-id": (7, {**_CANCELLED, "id": [7], "params": {"requestId": 7}}, True),
}


@pytest.mark.anyio
@ERAS
@pytest.mark.parametrize("case", list(_CANCELS))
async def test_a_cancel_reaches_the_call_the_sdk_would_cancel(modern: bool, case: str) -> None:
    call_id, cancel, cancels = _CANCELS[case]

    async def script(client: Raw) -> list[dict[str, Any]]:
        assert client.store is not None
        client.store.arm()
        client.send(_call(client, call_id))
        await _parked(client.store)
        client.send(cancel)
        await _sync(client)  # the cancel was read
        client.store.release.set()
        answers = [] if cancels else [await client.answer_to(call_id)]
        return [*answers, await client.call("read", {"file_path": "a.txt"})]

    seen = await _both(f"cancel-{case}", script, modern=modern, parking=True)
    assert seen[True] == seen[False]


@pytest.mark.anyio
@ERAS
@pytest.mark.parametrize("duplicate", ["ping", "call", "string-id-call"])
async def test_a_request_reusing_a_lane_calls_id_takes_its_cancels_as_in_the_sdk(
        modern: bool, duplicate: str) -> None:
    # The SDK files in-flight requests by id, the newest over the older: once another
    # request with the id came (and went), a cancel of that id stops nothing.
    async def script(client: Raw) -> list[dict[str, Any]]:
        assert client.store is not None
        client.store.arm()
        client.send(_call(client, 7))
        await _parked(client.store)
        again = {"ping": {"jsonrpc": "2.0", "id": 7, "method": "ping",
                          "params": client.params({})},
                 "call": _call(client, 7, "ls", {}),
                 "string-id-call": _call(client, "7", "ls", {})}[duplicate]
        client.send(again)
        answers = [await client.answer_to(again["id"])]
        client.send({**_CANCELLED, "params": {"requestId": 7}})
        await _sync(client)
        client.store.release.set()
        return [*answers, await client.answer_to(7)]

    seen = await _both(f"duplicate-{duplicate}", script, modern=modern, parking=True)
    assert seen[True] == seen[False]


# -- the SDK stopping first -----------------------------------------------------------


@pytest.mark.anyio
async def test_a_lane_call_that_ends_after_the_serving_stopped_writes_nowhere(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    # run_stdio closes the wire's descriptors once serving stops (cancelled: the SDK
    # stops first); a call still running then must not write its answer to whatever
    # file has since been opened under that descriptor's number.
    from toolfs.integrations import mcp_server

    answered = threading.Event()
    answer = mcp_server._StdioLane._answer

    def noted(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            answer(self, *args, **kwargs)
        finally:
            answered.set()

    monkeypatch.setattr(mcp_server._StdioLane, "_answer", noted)
    store = _ParkingStore(MemoryFileSystem())
    client = Raw(ToolfsMCP(_workspace("/stopped", store)), False, lane=True)
    await client.start()
    await client.open()
    store.arm()
    client.send(_call(client, 7))
    await _parked(store)
    client._serving.cancel()
    # Cancelled, the SDK's task groups end with CancelledError or, racing, with a
    # BrokenResourceError group from its own relay: either way serving has stopped.
    with pytest.raises(BaseException):  # noqa: B017
        await client._serving
    victim = tmp_path / "victim.txt"
    opened = os.open(victim, os.O_WRONLY | os.O_CREAT)
    os.close(client._s2c_w)
    fd = os.dup2(opened, client._s2c_w)  # another file under the wire's old number
    os.close(opened)
    try:
        store.release.set()
        assert await asyncio.to_thread(answered.wait, 10)
    finally:
        os.close(fd)
        os.close(client._c2s_w)
        os.close(client._c2s_r)
        for transport in client._transports:
            transport.close()
    assert victim.read_bytes() == b""


# -- what held (kept as guards) -------------------------------------------------------


@pytest.mark.anyio
@ERAS
async def test_a_disabled_tool_is_refused_as_the_sdk_refuses_it(modern: bool) -> None:
    async def script(client: Raw) -> list[dict[str, Any]]:
        return [await client.call("write", {"file_path": "n.txt", "content": "x"}),
                await client.call("read", {"file_path": "a.txt"})]

    seen = await _both("disabled", script, modern=modern, tools=["read"])
    assert seen[True] == seen[False]


@pytest.mark.anyio
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")
async def test_a_served_session_leaves_no_descriptor_open() -> None:
    before = open_descriptors()
    for modern in (False, True):
        async with raw(_workspace("/fds"), modern=modern, lane=True) as client:
            await client.call("read", {"file_path": "a.txt"})
            assert await client.close() == []
    assert len(os.listdir("/proc/self/fd")) == before


@pytest.mark.anyio
@ERAS
async def test_undecodable_names_and_credentials_are_answered_as_the_sdk_does(
        modern: bool, tmp_path: Any) -> None:
    from toolfs.redact import Redactor

    secret = "S3CR3T-do-not-leak-9431"
    (tmp_path / "ok.txt").write_text("x\n")
    (tmp_path / os.fsdecode(b"bad\xff.txt")).write_bytes(b"x\n")
    seen = {}
    for lane in (True, False):
        server = ToolfsMCP(toolfs.Workspace(str(tmp_path)), redact=Redactor(secrets=[secret]))
        client = Raw(server, modern, lane)
        await client.start()
        await client.open()
        answers = [await client.call(name, arguments) for name, arguments in [
            ("read", {"file_path": f"{secret}.txt"}), ("ls", {}), ("glob", {"pattern": "*"}),
            ("grep", {"pattern": "x", "output_mode": "files_with_matches"})]]
        seen[lane] = _canonical([*answers, *client.early, *await client.close()])
        assert (server._lane_calls == 4) is lane
    assert seen[True] == seen[False]
    assert secret not in "".join(seen[True])
    assert "bad" in "".join(seen[True])
