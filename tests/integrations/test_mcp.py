"""The MCP server, driven by the official MCP client over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
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
import hypothesis.strategies as st
import jsonschema
import pytest
import uvicorn
from fsspec.implementations.memory import MemoryFileSystem
from hypothesis import HealthCheck, given, settings
from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import toolfs
from tests.contract.test_arguments import ARGS, TOOLS, _sandbox, _tree
from toolfs.backends.memory import MemoryStore
from toolfs.integrations.mcp_server import ToolfsMCP, endpoint_url, mcp_tools, output_schema
from toolfs.redact import Redactor
from toolfs.schemas import ANNOTATIONS, tool_definitions

DISCOVERY = ("glob", "grep", "ls")


def _all_text(result: Any) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


TOKEN = "test-token-5f2a-77c1e0"


SECRET = "S3CR3T-do-not-leak-9431"


def _serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "toolfs", "serve", *args]


def _text(result: Any) -> str:
    return str(result.content[0].text)


def _stdio(*args: str, command: str | None = None) -> StdioServerParameters:
    argv = _serve_command(*args)
    if command is not None:
        argv = [command, *argv[3:]]
    # The SDK passes the child only a few variables; without PYTHONPATH it would import
    # the installed toolfs rather than the one under test.
    src = os.path.dirname(os.path.dirname(toolfs.__file__))
    return StdioServerParameters(command=argv[0], args=argv[1:],
                                 env={**get_default_environment(), "PYTHONPATH": src})


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


@asynccontextmanager
async def _in_process(workspace: toolfs.Workspace) -> AsyncIterator[Client]:
    async with Client(ToolfsMCP(workspace).server) as client:
        yield client


def _race_outcome(slow: Any, fast: Any, final: str, rows: int) -> None:
    """The invariant, whatever the interleaving."""
    for name, result in (("slow", slow), ("fast", fast)):
        if result.is_error:
            assert result.structured_content["error"]["code"] == "stale", (name, _text(result))
    assert not (slow.is_error and fast.is_error), "two edits in one session both lost"
    fast_kept = final.endswith("FAST\nEND\n")
    slow_kept = "tick" not in final and final.count("tock") == rows
    assert fast.is_error or fast_kept, (
        f"the fast edit answered {_text(fast)!r} but its change is gone")
    assert slow.is_error or slow_kept, (
        f"the slow edit answered {_text(slow)!r} but its change is gone")


def _stdio_of_this_toolfs(*args: str) -> StdioServerParameters:
    """``toolfs serve`` running the toolfs this test imported.

    The SDK starts servers with a minimal environment (no ``PYTHONPATH``), so a plain
    ``_stdio`` server imports whichever toolfs is installed, not the tree under test.
    """
    src = str(Path(toolfs.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)
    params = _stdio(*args)
    return StdioServerParameters(command=params.command, args=params.args,
                                 env={"PYTHONPATH": path})


_SLOW_ARGS = {"file_path": "big.txt", "old_string": "tick", "new_string": "tock",
              "replace_all": True}


_FAST_ARGS = {"file_path": "big.txt", "old_string": "END", "new_string": "FAST\nEND"}


def _big(rows: int) -> str:
    return "".join(f"row {i} tick\n" for i in range(rows)) + "END\n"


class _ParkingStore(MemoryStore):
    """A memory store whose first ``get`` after :meth:`arm` parks until released."""

    def __init__(self, fs: Any) -> None:
        super().__init__(fs)
        self.armed = False
        self.only: str | None = None
        self.parked, self.release = threading.Event(), threading.Event()

    def arm(self, only: str | None = None) -> None:
        """Park the next ``get`` (with ``only``: the next of a path ending in it, so a
        call sent at the same time that reads another file cannot take its place)."""
        self.only = only
        self.armed = True

    def get(self, path: str, **kw: Any) -> Any:
        blob = super().get(path, **kw)
        if self.armed and (self.only is None or path.endswith(self.only)):
            self.armed = False
            self.parked.set()
            assert self.release.wait(30), "never released"
        return blob


_PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def _initialize(url: str, **headers: str) -> httpx2.Response:
    """A raw ``initialize`` without a session id: the request that opens a session."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "toolfs-tests", "version": "1"}}}
    return httpx2.post(url, json=body, headers={
        "Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream",
        **headers})


@asynccontextmanager
async def _http_with(url: str, authorization: str) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"Authorization": authorization}) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        yield client


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(calls=st.lists(st.tuples(TOOLS, ARGS), min_size=1, max_size=4))
def test_mcp_server_survives_random_json(tmp_path_factory: Any, calls: list[Any]) -> None:
    from mcp import Client

    from toolfs.integrations.mcp_server import ToolfsMCP

    tmp = tmp_path_factory.mktemp("fuzz-mcp")
    root, outside = _sandbox(tmp)

    async def run() -> None:
        async with Client(ToolfsMCP(toolfs.Workspace(str(root))).server) as client:
            for tool, args in calls:
                try:
                    result = await client.call_tool(tool, args)
                except Exception as exc:  # only a protocol-level refusal may raise
                    assert tool not in ("read", "write", "edit") or not isinstance(
                        args, dict), f"{tool} {args!r}: {exc!r}"
                    continue
                text = "".join(getattr(c, "text", "") for c in result.content)
                assert "Traceback" not in text
                assert "do not touch" not in text, "read outside the root"
                if result.is_error:
                    assert text.startswith("Error ["), text

    asyncio.run(run())
    after = {k: v for k, v in _tree(tmp).items() if not k.startswith("root/")}
    assert after == outside, "something outside the root changed"


def test_the_mcp_server_lists_six_tools_with_read_only_hints() -> None:
    tools = {t.name: t for t in mcp_tools()}
    assert list(tools) == ["read", "write", "edit", "glob", "grep", "ls"]
    for name in (*DISCOVERY, "read"):
        assert tools[name].annotations is not None
        assert tools[name].annotations.read_only_hint is True
    for name in ("write", "edit"):
        assert tools[name].annotations is not None
        assert tools[name].annotations.read_only_hint is False


@pytest.mark.anyio
async def test_the_mcp_server_answers_discovery_calls() -> None:
    ws = toolfs.Workspace("memory://toolfs-disc-mcp")
    ws.write("src/app.py", "def main():\n    return 42\n")
    ws.write("README.md", "# hi\n")
    async with Client(ToolfsMCP(ws).server) as client:
        found = await client.call_tool("glob", {"pattern": "**/*.py"})
        hits = await client.call_tool("grep", {"pattern": "return \\d+",
                                               "output_mode": "content"})
        listing = await client.call_tool("ls", {})
    assert not found.is_error and _all_text(found).splitlines()[0] == "src/app.py"
    assert found.structured_content["result"]["paths"] == ["src/app.py"]
    assert "src/app.py:2:    return 42" in _all_text(hits)
    assert not listing.is_error and "src/" in _all_text(listing).splitlines()


@pytest.mark.anyio
async def test_the_mcp_server_offers_only_the_tools_asked_for() -> None:
    ws = toolfs.Workspace("memory://toolfs-disc-mcp-subset")
    server = ToolfsMCP(ws, tools=["read", "grep"])
    async with Client(server.server) as client:
        listed = await client.list_tools()
        assert [t.name for t in listed.tools] == ["read", "grep"]
        with pytest.raises(Exception, match="Unknown tool"):
            await client.call_tool("write", {"file_path": "a.txt", "content": "x"})
    assert not ws.fs.fs.exists("/toolfs-disc-mcp-subset/a.txt")


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
        assert "-y = 2\n+y = 3\n" in stale.structured_content["error"]["details"]["diff"]
        assert (tmp_path / "app.py").read_text() == "x = 10\ny = 3\n"

        await client.call_tool("read", {"file_path": "app.py"})
        retry = await client.call_tool(
            "edit", {"file_path": "app.py", "old_string": "y = 3", "new_string": "y = 30"})
        assert not retry.is_error
    assert (tmp_path / "app.py").read_text() == "x = 10\ny = 30\n"


@pytest.mark.anyio
async def test_stdio_on_stale_merge_merges_other_lines(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("".join(f"v{i} = {i}\n" for i in range(10)))
    async with Client(_stdio(str(tmp_path), "--on-stale", "merge")) as client:
        assert not (await client.call_tool("read", {"file_path": "app.py"})).is_error
        other = toolfs.Workspace(str(tmp_path))
        other.read("app.py")
        other.edit("app.py", "v1 = 1", "v1 = 100")
        merged = await client.call_tool(
            "edit", {"file_path": "app.py", "old_string": "v8 = 8", "new_string": "v8 = 80"})
        assert not merged.is_error, _text(merged)
        assert "Merged with a change made since you read it: line 2." in _text(merged)
        assert merged.structured_content["result"]["merged"] is True
    expected = "".join(f"v{i} = {i}\n" for i in range(10))
    assert (tmp_path / "app.py").read_text() == expected.replace("v1 = 1\n", "v1 = 100\n") \
        .replace("v8 = 8\n", "v8 = 80\n")


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
    # Handshake-era sessions (the client's "legacy" mode); without one, see
    # test_http_serves_the_2026_07_28_protocol.
    async with _http(http_url, mode="legacy") as a, _http(http_url, mode="legacy") as b:
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
        # Discovery offers every version: the client's choice, the newest, is served.
        assert client.session.protocol_version == "2026-07-28"
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["read"].annotations is not None
        assert tools["read"].annotations.read_only_hint is True
        wrote = await client.call_tool("write", {"file_path": "s/c.txt", "content": "c\n"})
    assert wrote.structured_content["ok"] is True
    result = wrote.structured_content["result"]
    assert result["action"] == "created" and result["size"] == 2
    jsonschema.validate(wrote.structured_content, tools["write"].output_schema)


@pytest.mark.anyio
async def test_http_serves_the_2026_07_28_protocol(http_url: str) -> None:
    # No session: the context is the principal and the key the client names
    # (tests/server/test_contexts.py); here one agent of the static token's principal.
    async with _http(http_url, mode="2026-07-28") as client:
        assert client.session.protocol_version == "2026-07-28"
        wrote = await client.call_tool("write", {"file_path": "modern.md", "content": "a\n"})
        edited = await client.call_tool(
            "edit", {"file_path": "modern.md", "old_string": "a", "new_string": "b"})
    assert not wrote.is_error and not edited.is_error


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
async def test_a_credential_inside_a_file_stays_byte_exact() -> None:
    # Masking is for error texts; content masked would be written back as "***".
    options = {"secret": SECRET, "token": "anon"}
    workspace = toolfs.Workspace("memory://toolfs-mcp-secretfile", options)
    workspace.write("env.txt", f"SECRET={SECRET}\nauth_mode = anonymous\n")
    async with Client(ToolfsMCP(workspace, redact=Redactor.for_options(options)).server) as c:
        read = await c.call_tool("read", {"file_path": "env.txt"})
        edit = await c.call_tool("edit", {"file_path": "env.txt", "old_string": f"={SECRET}",
                                          "new_string": "=rotated"})
        missing = await c.call_tool("read", {"file_path": f"{SECRET}.txt"})
    assert _text(read) == f"     1\tSECRET={SECRET}\n     2\tauth_mode = anonymous"
    assert read.structured_content["result"]["lines"] == [f"SECRET={SECRET}",
                                                          "auth_mode = anonymous"]
    assert not edit.is_error, _text(edit)
    assert workspace.read("env.txt").lines == ["SECRET=rotated", "auth_mode = anonymous"]
    assert missing.is_error and SECRET not in _text(missing) and "***" in _text(missing)
    assert SECRET not in json.dumps(missing.structured_content)


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


@pytest.mark.anyio
async def test_stdio_parallel_edits_in_one_session_lose_no_success(tmp_path: Path) -> None:
    # The slow edit takes about a second on this file, so the fast one, sent 0.2 s
    # later, commits while the slow one still holds the bytes it read: the race is
    # very likely, and the invariant below must hold under any interleaving.
    rows = 20_000
    (tmp_path / "big.txt").write_text(_big(rows))
    results: dict[str, Any] = {}
    async with Client(_stdio_of_this_toolfs(str(tmp_path))) as client:
        read = await client.call_tool("read", {"file_path": "big.txt", "limit": 1})
        assert not read.is_error, _text(read)

        async def call(name: str, args: dict[str, Any], delay: float) -> None:
            await anyio.sleep(delay)
            results[name] = await client.call_tool("edit", args)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "slow", _SLOW_ARGS, 0.0)
            tg.start_soon(call, "fast", _FAST_ARGS, 0.2)
    _race_outcome(results["slow"], results["fast"], (tmp_path / "big.txt").read_text(),
                  rows)


@pytest.mark.anyio
async def test_in_process_parallel_edits_in_one_session_are_forced_to_overlap() -> None:
    """The same race made certain: the slow edit parks right after reading its bytes
    until the fast edit of the same session has answered."""
    rows = 200
    fs = MemoryFileSystem()
    store = _ParkingStore(fs)
    # No content cache: the edit fetches its bytes from the store, where it parks.
    workspace = toolfs.Workspace(fs, root="/toolfs-mcp-race", store=store, cache_bytes=0)
    workspace.write("big.txt", _big(rows))
    results: dict[str, Any] = {}
    overlapped = False
    async with _in_process(workspace) as client:
        assert not (await client.call_tool("read", {"file_path": "big.txt"})).is_error

        async def slow() -> None:
            results["slow"] = await client.call_tool("edit", _SLOW_ARGS)

        async def fast() -> None:
            results["fast"] = await client.call_tool("edit", _FAST_ARGS)

        store.arm()
        async with anyio.create_task_group() as tg:
            tg.start_soon(slow)
            assert await anyio.to_thread.run_sync(store.parked.wait, 30)
            tg.start_soon(fast)
            # Bounded: a session that ran its calls one at a time would never answer.
            with anyio.move_on_after(3):
                while "fast" not in results:
                    await anyio.sleep(0.01)
            overlapped = "fast" in results
            store.release.set()
    final = fs.cat_file("/toolfs-mcp-race/big.txt").decode()
    _race_outcome(results["slow"], results["fast"], final, rows)
    if overlapped:
        assert not results["fast"].is_error, _text(results["fast"])
        assert results["slow"].is_error, (
            f"the slow edit was derived from the version before the fast edit and must "
            f"be stale, but answered {_text(results['slow'])!r}")
        assert final == _big(rows).replace("END\n", "FAST\nEND\n")


@pytest.mark.anyio
@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "BeArEr"])
async def test_http_bearer_scheme_is_case_insensitive(http_url: str, scheme: str) -> None:
    async with _http_with(http_url, f"{scheme} {TOKEN}") as client:
        wrote = await client.call_tool("write", {"file_path": f"{scheme}.txt", "content": "1"})
    assert not wrote.is_error


@pytest.mark.parametrize("authorization", [
    f"bearer {TOKEN[:-1]}", f"BEARER {TOKEN}x", f"Basic {TOKEN}", f"Bearer{TOKEN}", TOKEN,
    f"Bearer {TOKEN.upper()}", "bearer", "",
])
def test_http_refuses_wrong_tokens_whatever_the_scheme_case(http_url: str,
                                                           authorization: str) -> None:
    response = httpx2.post(http_url, json=_PING, headers={"Authorization": authorization})
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"


@pytest.mark.parametrize("token", ["", "short", "x" * 15, "sixteen chars ok", "tökén-long-enough"])
def test_http_app_refuses_weak_or_unsendable_tokens(token: str) -> None:
    server = ToolfsMCP(toolfs.Workspace("memory://toolfs-mcp-weak"))
    with pytest.raises(ValueError, match="bearer token") as info:
        server.http_app(token=token)
    if token:
        assert token not in str(info.value)
    with pytest.raises(ValueError, match="bearer token"):
        server.serve_http(token=token, port=0)  # refused before anything is bound


def test_http_app_accepts_a_sixteen_character_token() -> None:
    server = ToolfsMCP(toolfs.Workspace("memory://toolfs-mcp-16"))
    assert server.http_app(token="x" * 16) is not None
    with pytest.raises(ValueError, match="max_sessions"):
        server.http_app(token=TOKEN, max_sessions=0)


@pytest.mark.parametrize(("argv", "env", "says"), [
    (["--token", "short"], {}, "--token: the bearer token is 5 characters; use at least 16"),
    ([], {"TOOLFS_TOKEN": "tooshort-123"}, "TOOLFS_TOKEN: the bearer token is 12 characters"),
    (["--token", TOKEN, "--max-sessions", "0"], {}, "--max-sessions must be at least 1"),
])
def test_cli_refuses_weak_tokens_with_a_usage_line(
        argv: list[str], env: dict[str, str], says: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from toolfs.integrations.cli import main

    monkeypatch.delenv("TOOLFS_TOKEN", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    status = main(["serve", "memory://toolfs-mcp-cli", "--transport", "http", "--port", "0",
                   *argv])
    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("toolfs serve: error: "), err
    assert says in err
    assert "short" not in err and "tooshort-123" not in err


def test_cli_max_sessions_needs_the_http_transport(capsys: pytest.CaptureFixture[str]) -> None:
    from toolfs.integrations.cli import main

    assert main(["serve", "memory://toolfs-mcp-cli", "--max-sessions", "3"]) == 2
    assert "--max-sessions applies to --transport http only" in capsys.readouterr().err


@pytest.mark.anyio
async def test_http_session_limit_refuses_clearly_and_frees_closed_slots() -> None:
    server = ToolfsMCP(toolfs.Workspace("memory://toolfs-mcp-limit"))
    with _uvicorn_thread(server.http_app(token=TOKEN, max_sessions=2)) as url:
        async with _http(url, mode="legacy") as a:
            async with _http(url, mode="legacy") as b:
                for client in (a, b):
                    await client.call_tool("write", {"file_path": "x.txt", "content": "x"})
                assert server.session_contexts == 2
                refused = await anyio.to_thread.run_sync(_initialize, url)
                assert refused.status_code == 503
                assert refused.headers["retry-after"] == "30"
                error = refused.json()["error"]
                assert "already has 2 open MCP sessions, its limit" in error["message"]
                assert error["data"] == {"reason": "too_many_sessions", "max_sessions": 2}
                # An established session keeps working at the limit.
                assert not (await a.call_tool("read", {"file_path": "x.txt"})).is_error
                with pytest.raises(Exception):  # noqa: B017 - the SDK wraps the 503
                    async with _http(url, mode="legacy"):
                        pass
            # b closed its session (DELETE): its slot and its context are free again.
            deadline = time.monotonic() + 10
            while server.session_contexts > 1 and time.monotonic() < deadline:
                await anyio.sleep(0.05)
            assert server.session_contexts == 1
            async with _http(url, mode="legacy") as c:
                third = await c.call_tool("read", {"file_path": "x.txt"})
                assert not third.is_error
        deadline = time.monotonic() + 10
        while server.session_contexts and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        assert server.session_contexts == 0


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
