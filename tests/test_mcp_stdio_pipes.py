"""``toolfs serve`` over stdio pipes: served by the stdio lane, the wire kept clean.

When stdin and stdout are pipes (as an MCP client spawns a server) the server's lane
threads read and write them instead of the SDK's transport (see ``_StdioLane``). What must
hold, as with the SDK's own transport: a message longer than asyncio's default 64 KiB line limit
gets through; output printed by code inside the server (a subscriber here) goes to
stderr, never onto the JSON-RPC wire; and the session ends cleanly when the client
closes.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment

import toolfs

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
