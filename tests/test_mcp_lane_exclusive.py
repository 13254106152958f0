"""The stdio lane's threads and the pipes around the end of serving, with each way the
lane threads wait for input (one watcher, or every idle thread with exclusive wakeups).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import gc
import json
import os
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fsspec.implementations.memory import MemoryFileSystem

from tests.test_mcp_lane import Wire, _workspace, open_descriptors
from toolfs.integrations import mcp_server
from toolfs.integrations.mcp_server import ToolfsMCP

pytestmark = pytest.mark.usefixtures("lane_wakeups")  # each test with each way of waiting


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextlib.asynccontextmanager
async def _wire_at(server: ToolfsMCP) -> AsyncIterator[Wire]:
    """An opened handshake-era :class:`Wire` on ``server``, closed at the end if the
    test did not close it."""
    client = Wire(server, False)
    await client.start()
    try:
        await client.open()
        yield client
    finally:
        if not client.closed:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 2)


def _lane_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("toolfs_stdio_")]


@pytest.mark.anyio
async def test_a_line_classified_while_serving_stops_reads_no_input_after(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # stop() gives up waiting for a lane thread after a bound (made short here); a
    # thread still classifying a line then must not read the input afterwards: its
    # descriptor is the caller's to close, and its number may be another file's.
    monkeypatch.setattr(mcp_server, "_SHUTDOWN_WRITE_TIMEOUT", 0.05)
    took = mcp_server._StdioLane._took
    classifying, release = threading.Event(), threading.Event()

    def held_took(self: Any, line: bytes) -> Any:
        if b'"held"' in line:
            classifying.set()
            release.wait(10)
        return took(self, line)

    monkeypatch.setattr(mcp_server._StdioLane, "_took", held_took)
    before = set(threading.enumerate())
    descriptors = open_descriptors()  # no earlier test's lane closes its pipes meanwhile
    client = Wire(ToolfsMCP(_workspace("/stop-classifying")), False)
    await client.start()
    await client.open()
    client.send({"jsonrpc": "2.0", "id": "held", "method": "ping"})
    assert await asyncio.to_thread(classifying.wait, 10)
    client._serving.cancel()
    with pytest.raises(BaseException):  # noqa: B017 (cancelled, as the SDK's groups end)
        await client._serving
    # Serving has stopped: another pipe, with a call in it, under the input's number.
    other_r, other_w = os.pipe()
    call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "read", "arguments": {"file_path": "a.txt"}}})
    os.write(other_w, call.encode() + b"\n")
    os.dup2(other_r, client._c2s_r)
    try:
        release.set()
        for thread in set(_lane_threads()) - before:
            await asyncio.to_thread(thread.join, 10)
            assert not thread.is_alive()
        os.set_blocking(client._c2s_r, False)
        assert os.read(client._c2s_r, 1 << 16) == call.encode() + b"\n"
    finally:
        release.set()
        for fd in (other_r, other_w, client._c2s_w, client._c2s_r, client._s2c_w):
            os.close(fd)
        for transport in client._transports:
            transport.close()
    # The lane's own pipes went with its last thread (stop could not close them).
    await asyncio.sleep(0)  # the transports' descriptors close on the next loop turn
    assert len(os.listdir("/proc/self/fd")) == descriptors


@pytest.fixture
def _low_descriptors_taken() -> Any:
    """Every descriptor number below 1024 in use, so the pipes opened next (the client's
    and the lane's) get numbers that ``select`` cannot watch (its FD_SETSIZE)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        if hard != resource.RLIM_INFINITY and hard < 1200:
            pytest.skip("needs 1200 descriptors")
        resource.setrlimit(resource.RLIMIT_NOFILE, (1200, hard))
    gc.collect()  # a lane an earlier test left to its __del__ frees no number meanwhile
    null = os.open(os.devnull, os.O_RDONLY)
    taken = [null]
    try:
        while taken[-1] < 1024:
            taken.append(os.dup(null))
        os.close(taken.pop())  # the first number past 1024 stays free
        yield
    finally:
        for fd in taken:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.anyio
@pytest.mark.usefixtures("_low_descriptors_taken")
async def test_pipes_numbered_past_what_select_can_watch_are_served(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A process with many files open (the case where an epoll set cannot be made,
    # too): the lane still waits for its input, whatever the numbers of its pipes.
    import select

    def no_epoll() -> Any:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(select, "epoll", no_epoll)
    async with _wire_at(ToolfsMCP(_workspace("/high-fds"))) as client:
        assert client._c2s_r >= 1024
        for _ in range(3):
            answer = await client.call("read", {"file_path": "a.txt"})
            assert answer["result"]["isError"] is False
        assert await client.close() == []


@pytest.mark.anyio
@pytest.mark.skipif(not hasattr(fcntl, "F_SETPIPE_SZ"), reason="sets a pipe's size (Linux)")
@pytest.mark.usefixtures("_low_descriptors_taken")
async def test_an_answer_to_a_full_non_blocking_pipe_numbered_past_select_is_written(
        ) -> None:
    # The client made its end of the answers non-blocking and the pipe is small: the
    # answer is written in pieces, waiting for room between them, whatever its number.
    workspace = _workspace("/high-fds-write")
    workspace.write("big.txt", "".join(f"l{i:05d} " + "y" * 150 + "\n" for i in range(3000)))
    async with _wire_at(ToolfsMCP(workspace)) as client:
        assert client._s2c_w >= 1024
        fcntl.fcntl(client._s2c_w, fcntl.F_SETPIPE_SZ, 4096)
        os.set_blocking(client._s2c_w, False)
        answer = await client.call("read", {"file_path": "big.txt"})
        assert answer["result"]["isError"] is False
        assert len(json.dumps(answer)) > 16 * 4096
        assert await client.close() == []


@pytest.mark.anyio
async def test_an_answer_waiting_for_room_when_serving_stops_writes_nowhere_after(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    # The client made its end of the answers non-blocking, then stopped reading: a big
    # answer waits for room in the full pipe. Serving stops (the wait for that write is
    # bounded, made short here); when room comes, the rest of the answer must not go to
    # the file that has taken the wire's descriptor number since.
    monkeypatch.setattr(mcp_server, "_SHUTDOWN_WRITE_TIMEOUT", 0.05)
    waiting_for_room = threading.Event()
    wait_ready = mcp_server._wait_ready

    def noted_wait(fds: list[int], *, writable: bool = False) -> list[int]:
        if writable:
            waiting_for_room.set()
        return wait_ready(fds, writable=writable)

    monkeypatch.setattr(mcp_server, "_wait_ready", noted_wait)
    workspace = _workspace("/stop-writing")
    workspace.write("big.txt", "".join(f"l{i:05d} " + "y" * 150 + "\n" for i in range(3000)))
    before = set(threading.enumerate())
    client = Wire(ToolfsMCP(workspace), False)
    await client.start()
    await client.open()
    os.set_blocking(client._s2c_w, False)
    client._transports[0].pause_reading()  # type: ignore[attr-defined]
    client.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                 "params": {"name": "read", "arguments": {"file_path": "big.txt"}}})
    assert await asyncio.to_thread(waiting_for_room.wait, 10)
    client._serving.cancel()
    with pytest.raises(BaseException):  # noqa: B017 (cancelled, as the SDK's groups end)
        await client._serving
    victim = tmp_path / "victim.txt"
    opened = os.open(victim, os.O_WRONLY | os.O_CREAT)
    os.dup2(opened, client._s2c_w)  # another file under the wire's old number
    os.close(opened)
    try:
        client._transports[0].resume_reading()  # type: ignore[attr-defined]
        for thread in set(_lane_threads()) - before:
            await asyncio.to_thread(thread.join, 10)
            assert not thread.is_alive()
    finally:
        for fd in (client._c2s_w, client._c2s_r, client._s2c_w):
            os.close(fd)
        for transport in client._transports:
            transport.close()
    assert victim.read_bytes() == b""


class _NoMoreLaneThreads(threading.Thread):
    """A thread that cannot be started when it would be a lane thread (a process at its
    limit of threads: ``start`` raises ``RuntimeError``)."""

    def start(self) -> None:
        if self.name.startswith("toolfs_stdio_"):
            raise RuntimeError("can't start new thread")
        super().start()


@pytest.mark.anyio
async def test_when_no_lane_thread_can_be_started_calls_queue_and_reading_goes_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.test_mcp import _ParkingStore
    from tests.test_mcp_lane import _parked

    store = _ParkingStore(MemoryFileSystem())
    async with _wire_at(ToolfsMCP(_workspace("/no-threads", store))) as client:
        monkeypatch.setattr(threading, "Thread", _NoMoreLaneThreads)
        store.arm()
        client.send({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
                     "params": {"name": "read", "arguments": {"file_path": "a.txt"}}})
        await _parked(store)
        fast = await client.call("read", {"file_path": "sub/c.py"})
        assert fast["result"]["isError"] is False
        store.release.set()
        slow = await client.receive()
        assert slow["id"] == "slow" and slow["result"]["isError"] is False
        assert await client.close() == []
