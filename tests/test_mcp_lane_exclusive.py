"""The stdio lane's threads and the pipes around the end of serving, with each way the
lane threads wait for input (one watcher, or every idle thread with exclusive wakeups).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from typing import Any

import pytest

from tests.test_mcp_lane import Wire, _workspace
from toolfs.integrations import mcp_server
from toolfs.integrations.mcp_server import ToolfsMCP

pytestmark = pytest.mark.usefixtures("lane_wakeups")  # each test with each way of waiting


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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
