"""The MCP server, driven by the official MCP client over stdio and streamable HTTP."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import fsspec
import httpx2
import jsonschema
import pytest
import uvicorn
from fsspec.implementations.memory import MemoryFileSystem
from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import toolfs
from toolfs.backends.memory import MemoryStore
from toolfs.integrations.mcp_server import ToolfsMCP, endpoint_url, output_schema
from toolfs.redact import Redactor
from toolfs.schemas import ANNOTATIONS, tool_definitions

TOKEN = "test-token-5f2a"
SECRET = "S3CR3T-do-not-leak-9431"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "toolfs", "serve", *args]


def _text(result: Any) -> str:
    return str(result.content[0].text)


# -- stdio ---------------------------------------------------------------------------


def _stdio(*args: str, command: str | None = None) -> StdioServerParameters:
    argv = _serve_command(*args)
    if command is not None:
        argv = [command, *argv[3:]]
    # The SDK passes the child only a few variables; without PYTHONPATH it would import
    # the installed toolfs rather than the one under test.
    src = os.path.dirname(os.path.dirname(toolfs.__file__))
    return StdioServerParameters(command=argv[0], args=argv[1:],
                                 env={**get_default_environment(), "PYTHONPATH": src})


@pytest.mark.anyio
async def test_stdio_lists_the_pinned_tools(tmp_path: Path) -> None:
    async with Client(_stdio(str(tmp_path))) as client:
        tools = (await client.list_tools()).tools
    served = {t.name: t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools}
    expected = {d["name"]: {**d, "outputSchema": output_schema(d["name"])}
                for d in tool_definitions("mcp")}
    assert served == expected
    assert served["read"]["annotations"]["readOnlyHint"] is True
    assert served["write"]["annotations"]["readOnlyHint"] is False
    assert served["edit"]["annotations"] == ANNOTATIONS["edit"]
    assert served["edit"]["annotations"]["idempotentHint"] is False


@pytest.mark.anyio
async def test_stdio_read_edit_then_stale_edit(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("x = 1\ny = 2\n")
    async with Client(_stdio(str(tmp_path))) as client:
        read = await client.call_tool("read", {"file_path": "app.py"})
        assert not read.is_error
        assert _text(read) == "     1\tx = 1\n     2\ty = 2"
        assert read.structured_content["result"]["total_lines"] == 2

        edit = await client.call_tool(
            "edit", {"file_path": "app.py", "old_string": "x = 1", "new_string": "x = 10"})
        assert not edit.is_error, _text(edit)
        assert edit.structured_content["ok"] is True
        assert edit.structured_content["result"]["lines"] == [1]

        # A second context (another agent, outside this session) changes the file.
        other = toolfs.Workspace(str(tmp_path))
        other.read("app.py")
        other.edit("app.py", "y = 2", "y = 3")
        stale = await client.call_tool(
            "edit", {"file_path": "app.py", "old_string": "y = 2", "new_string": "y = 20"})
        assert stale.is_error
        assert _text(stale).startswith("Error [stale]")
        assert stale.structured_content["error"]["code"] == "stale"
        assert (tmp_path / "app.py").read_text() == "x = 10\ny = 3\n"

        await client.call_tool("read", {"file_path": "app.py"})
        retry = await client.call_tool(
            "edit", {"file_path": "app.py", "old_string": "y = 3", "new_string": "y = 30"})
        assert not retry.is_error
    assert (tmp_path / "app.py").read_text() == "x = 10\ny = 30\n"


@pytest.mark.anyio
async def test_stdio_errors_are_tool_results(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("hello\n")
    async with Client(_stdio(str(tmp_path), "--deny", "*.secret")) as client:
        unread = await client.call_tool("write", {"file_path": "notes.md", "content": "bye\n"})
        bad_args = await client.call_tool("read", {"path": "notes.md"})
        outside = await client.call_tool("read", {"file_path": "../etc/passwd"})
        denied = await client.call_tool("write", {"file_path": "a.secret", "content": "k"})
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("delete", {"file_path": "notes.md"})
    for result, code in [(unread, "not_observed"), (bad_args, "invalid_arguments"),
                         (outside, "outside_root"), (denied, "denied")]:
        assert result.is_error
        assert _text(result).startswith(f"Error [{code}]")
        assert result.structured_content == {"ok": False, "error": {
            **result.structured_content["error"], "code": code}}
        jsonschema.validate(result.structured_content, output_schema("read"))
    assert (tmp_path / "notes.md").read_text() == "hello\n"


@pytest.mark.anyio
async def test_stdio_read_only_and_root_and_handshake_era(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("a\n")
    params = _stdio(str(tmp_path), "--root", "sub", "--read-only")
    async with Client(params, mode="legacy") as client:
        read = await client.call_tool("read", {"file_path": "a.txt"})
        edit = await client.call_tool(
            "edit", {"file_path": "a.txt", "old_string": "a", "new_string": "b"})
    assert _text(read) == "     1\ta"
    assert _text(edit).startswith("Error [denied]")


@pytest.mark.anyio
async def test_toolfs_script_serves_memory_url() -> None:
    script = shutil.which("toolfs", path=os.path.dirname(sys.executable))
    assert script, "the toolfs console script is installed next to the interpreter"
    async with Client(_stdio("memory://toolfs-mcp-script", command=script)) as client:
        wrote = await client.call_tool("write", {"file_path": "a.txt", "content": "one\n"})
        read = await client.call_tool("read", {"file_path": "a.txt"})
    assert _text(wrote) == "Created a.txt (4 bytes)."
    assert read.structured_content["result"]["lines"] == ["one"]


# -- streamable HTTP -----------------------------------------------------------------


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """A real ``toolfs serve --transport http`` process on a free port."""
    env = {**os.environ, "TOOLFS_TOKEN": TOKEN}
    proc = subprocess.Popen(
        _serve_command("memory://toolfs-mcp-http", "--transport", "http", "--port", "0",
                       "-o", f"secret={SECRET}"),
        stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+/mcp)", line)
        assert match, line
        yield match.group(1)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
        assert SECRET not in line + err
        assert TOKEN not in line + err


@asynccontextmanager
async def _http(url: str, token: str | None = TOKEN, **kw: Any) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers) as http, \
            Client(streamable_http_client(url, http_client=http), **kw) as client:
        yield client


def test_http_refuses_requests_without_the_token(http_url: str) -> None:
    hello = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        response = httpx2.post(http_url, json=hello, headers=headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.anyio
async def test_http_client_without_token_cannot_connect(http_url: str) -> None:
    # The SDK reports the 401 as a failed connection (wrapped in exception groups).
    with pytest.raises(Exception):  # noqa: B017
        async with _http(http_url, token="wrong"):
            pass


@pytest.mark.anyio
async def test_http_sessions_are_separate_contexts(http_url: str) -> None:
    async with _http(http_url) as a, _http(http_url) as b:
        created = await a.call_tool("write", {"file_path": "shared.md", "content": "v1\n"})
        assert not created.is_error
        # b never read the file: its own ledger is empty, so it may not replace it.
        blind = await b.call_tool("write", {"file_path": "shared.md", "content": "v2\n"})
        assert _text(blind).startswith("Error [not_observed]")

        await b.call_tool("read", {"file_path": "shared.md"})
        edited = await b.call_tool(
            "edit", {"file_path": "shared.md", "old_string": "v1", "new_string": "v2"})
        assert not edited.is_error
        # a's observation is its own write of v1, so its edit is refused as stale.
        stale = await a.call_tool(
            "edit", {"file_path": "shared.md", "old_string": "v1", "new_string": "v3"})
        assert stale.is_error and stale.structured_content["error"]["code"] == "stale"
        reread = await a.call_tool("read", {"file_path": "shared.md"})
        assert reread.structured_content["result"]["lines"] == ["v2"]


@pytest.mark.anyio
async def test_http_tools_and_structured_content(http_url: str) -> None:
    async with _http(http_url) as client:
        assert client.session.protocol_version == "2025-11-25"
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["read"].annotations is not None
        assert tools["read"].annotations.read_only_hint is True
        wrote = await client.call_tool("write", {"file_path": "s/c.txt", "content": "c\n"})
    assert wrote.structured_content["ok"] is True
    result = wrote.structured_content["result"]
    assert result["action"] == "created" and result["size"] == 2
    jsonschema.validate(wrote.structured_content, tools["write"].output_schema)


@pytest.mark.anyio
async def test_http_stateless_requests_are_refused(http_url: str) -> None:
    # The 2026-07-28 protocol carries no session over HTTP; a ledger needs one.
    async with _http(http_url, mode="2026-07-28") as client:
        with pytest.raises(MCPError, match="per MCP session"):
            await client.call_tool("read", {"file_path": "x"})


# -- concurrency and credentials, in-process ----------------------------------------------


class _SlowStore(MemoryStore):
    """A memory store whose reads of ``slow.txt`` take a second."""

    def get(self, path: str, **kw: Any) -> Any:
        if path.endswith("slow.txt"):
            time.sleep(1.0)
        return super().get(path, **kw)


@contextmanager
def _uvicorn_thread(app: Any) -> Iterator[str]:
    sock = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        yield endpoint_url("127.0.0.1", sock.getsockname()[1])
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.mark.anyio
async def test_a_slow_backend_call_does_not_hold_up_another_session() -> None:
    fs = MemoryFileSystem()
    workspace = toolfs.Workspace(fs, root="/toolfs-mcp-slow", store=_SlowStore(fs))
    workspace.write("slow.txt", "slow\n")
    workspace.write("fast.txt", "fast\n")
    app = ToolfsMCP(workspace).http_app(token=TOKEN)
    done: dict[str, float] = {}

    async def call(client: Client, path: str, start: float) -> None:
        result = await client.call_tool("read", {"file_path": path})
        assert not result.is_error
        done[path] = time.monotonic() - start

    with _uvicorn_thread(app) as url:
        async with _http(url) as a, _http(url) as b:
            start = time.monotonic()
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, a, "slow.txt", start)
                await anyio.sleep(0.1)  # the slow read is in flight
                tg.start_soon(call, b, "fast.txt", start)
    assert done["fast.txt"] < 0.8 < done["slow.txt"], done


class _LeakyFileSystem(fsspec.AbstractFileSystem):  # type: ignore[misc]
    """A filesystem whose errors quote its credentials, as careless SDKs do."""

    protocol = "toolfsleaky"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.secret = options.get("secret")

    def cat_file(self, path: str, start: Any = None, end: Any = None, **kw: Any) -> bytes:
        raise PermissionError(f"access denied for key secret={self.secret}")

    def info(self, path: str, **kw: Any) -> dict[str, Any]:
        raise FileNotFoundError(path)


@pytest.mark.anyio
async def test_storage_option_credentials_never_reach_tool_output() -> None:
    fsspec.register_implementation("toolfsleaky", _LeakyFileSystem, clobber=True)
    options = {"secret": SECRET}
    workspace = toolfs.Workspace("toolfsleaky://bucket", options)
    # The workspace masks its own storage options in every error it returns...
    direct = workspace.execute("read", {"file_path": "a.txt"}).text
    assert SECRET not in direct and "***" in direct
    # ...and the server masks everything it sends, whatever the workspace did.
    server = ToolfsMCP(workspace, redact=Redactor.for_options(options))
    async with Client(server.server) as client:
        result = await client.call_tool("read", {"file_path": "a.txt"})
    assert result.is_error and _text(result).startswith("Error [backend_error]")
    assert "***" in _text(result)
    assert SECRET not in _text(result)
    assert SECRET not in json.dumps(result.structured_content)


@asynccontextmanager
async def _in_process(workspace: toolfs.Workspace) -> AsyncIterator[Client]:
    async with Client(ToolfsMCP(workspace).server) as client:
        yield client


@pytest.mark.anyio
async def test_in_process_stream_is_one_session() -> None:
    workspace = toolfs.Workspace("memory://toolfs-mcp-inproc")
    async with _in_process(workspace) as client:
        await client.call_tool("write", {"file_path": "a.txt", "content": "1\n"})
        again = await client.call_tool("write", {"file_path": "a.txt", "content": "2\n"})
    assert _text(again) == "Updated a.txt (2 bytes)."
    # The server works on its own context: the workspace it was given observed nothing.
    assert workspace.snapshot().observations == {}


@pytest.mark.anyio
async def test_a_credential_inside_a_file_is_masked_too() -> None:
    options = {"secret": SECRET}
    workspace = toolfs.Workspace("memory://toolfs-mcp-secretfile", options)
    workspace.write("env.txt", f"SECRET={SECRET}\n")
    async with Client(ToolfsMCP(workspace, redact=Redactor.for_options(options)).server) as c:
        read = await c.call_tool("read", {"file_path": "env.txt"})
    assert _text(read) == "     1\tSECRET=***"
    assert read.structured_content["result"]["lines"] == ["SECRET=***"]


@pytest.mark.anyio
@pytest.mark.skipif(importlib.util.find_spec("moto") is None
                    or importlib.util.find_spec("toolfs.backends.s3") is None,
                    reason="needs moto and the S3 adapter")
async def test_stdio_serves_a_bucket_configured_with_storage_options() -> None:
    from toolfs.testing.emulators import S3Emulator

    with S3Emulator() as s3:
        s3.create_bucket("toolfs-mcp")
        argv = ["s3://toolfs-mcp/project"]
        for key, value in s3.s3fs_storage_options().items():
            argv += ["-o", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
        async with Client(_stdio(*argv)) as client:
            wrote = await client.call_tool("write", {"file_path": "a.md", "content": "one\n"})
            assert not wrote.is_error, _text(wrote)
            assert wrote.structured_content["result"]["version"]["kind"] == "etag"
            s3.s3fs_filesystem().pipe("toolfs-mcp/project/a.md", b"two\n")  # behind its back
            stale = await client.call_tool(
                "edit", {"file_path": "a.md", "old_string": "one", "new_string": "1"})
            assert stale.structured_content["error"]["code"] == "stale"


# -- what reaches the client: valid Unicode, within the output budget ---------------------


@pytest.mark.anyio
async def test_stdio_survives_an_undecodable_file_name(tmp_path: Path) -> None:
    # A latin-1 name: os.listdir hands it over as "caf\udce9.txt" (a lone surrogate).
    os.close(os.open(os.fsencode(tmp_path) + b"/caf\xe9.txt", os.O_CREAT | os.O_WRONLY, 0o644))
    (tmp_path / "notes.md").write_text("hello\n")
    with anyio.fail_after(60):  # a dead server would leave the client waiting forever
        async with Client(_stdio(str(tmp_path))) as client:
            missing = await client.call_tool("read", {"file_path": "cafe.txt"})
            later = await client.call_tool("read", {"file_path": "notes.md"})
    assert missing.is_error
    assert "Did you mean: caf\\udce9.txt?" in _text(missing)
    assert missing.structured_content["error"]["details"]["did_you_mean"] == ["caf\\udce9.txt"]
    assert _text(later) == "     1\thello"


@pytest.mark.anyio
async def test_http_answers_a_call_that_meets_an_undecodable_name() -> None:
    fs = MemoryFileSystem()
    root = "/toolfs-mcp-surrogate"
    fs.pipe(f"{root}/caf\udce9.txt", b"")
    fs.pipe(f"{root}/notes.md", b"hello\n")
    app = ToolfsMCP(toolfs.Workspace(fs, root=root)).http_app(token=TOKEN)
    with _uvicorn_thread(app) as url, anyio.fail_after(60):
        async with _http(url) as client:
            missing = await client.call_tool("read", {"file_path": "cafe.txt"})
            later = await client.call_tool("read", {"file_path": "notes.md"})
    assert "Did you mean: caf\\udce9.txt?" in _text(missing)
    assert _text(later) == "     1\thello"


@pytest.mark.anyio
async def test_structured_content_stays_within_the_output_budget() -> None:
    workspace = toolfs.Workspace("memory://toolfs-mcp-budget", max_output_chars=20_000)
    workspace.write("one-line.txt", "z" * (2 * 1024 * 1024))
    workspace.write("wide.txt", "".join(f"{i:05d} " + "w" * 200 + "\n" for i in range(2000)))
    async with _in_process(workspace) as client:
        long = await client.call_tool("read", {"file_path": "one-line.txt"})
        wide = await client.call_tool("read", {"file_path": "wide.txt"})
    for result in (long, wide):
        assert not result.is_error
        assert len(_text(result)) <= 20_000
        assert len(json.dumps(result.structured_content)) <= 20_000
        jsonschema.validate(result.structured_content, output_schema("read"))
        # The structured lines are the lines of the text, cut alike.
        lines = result.structured_content["result"]["lines"]
        shown = _text(result).split("\n\n")[0].split("\n")
        assert [s.split("\t", 1)[1] for s in shown] == lines
        assert result.structured_content["result"]["truncated"] is True
    assert _text(wide).endswith(
        f"Use offset={len(wide.structured_content['result']['lines']) + 1} to continue.)")
