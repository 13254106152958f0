"""Contexts without sessions: (principal, context key), and the 2026-07-28 protocol served
natively over HTTP, driven by the official MCP client for that version."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, ClassVar

import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

import toolfs
from toolfs.errors import FsError
from toolfs.integrations._mcp_contexts import (
    ANONYMOUS,
    CONTEXT_HEADER,
    CONTEXT_META,
    PRINCIPAL_SCOPE_KEY,
    ContextKey,
    ServerContexts,
    context_key,
    principal_name,
)
from toolfs.integrations.mcp_server import ToolfsMCP, endpoint_url

TOKEN = "test-token-5f2a-77c1e0"
MODERN = "2026-07-28"


def _request(headers: dict[str, str] | None = None, **scope: Any) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    return Request({"type": "http", "method": "POST", "path": "/mcp", "headers": raw, **scope})


def _text(result: Any) -> str:
    return str(result.content[0].text)


def test_the_session_comes_first_then_the_header_then_meta_then_the_principal() -> None:
    named = _request({CONTEXT_HEADER: "agent-7"})
    assert context_key("alice", named, session_id="s1", meta={CONTEXT_META: "m"}) \
        == ContextKey("alice", "session", "s1")
    assert context_key("alice", named, meta={CONTEXT_META: "m"}) \
        == ContextKey("alice", "client", "agent-7")
    assert context_key("alice", _request(), meta={CONTEXT_META: "m"}) \
        == ContextKey("alice", "client", "m")
    assert context_key("alice", _request()) == ContextKey("alice", "principal", "")
    assert context_key("alice") == ContextKey("alice", "principal", "")


def test_two_principals_never_share_a_context_whatever_key_they_send() -> None:
    named = _request({CONTEXT_HEADER: "agent-7"})
    alice, bob = context_key("alice", named), context_key("bob", named)
    assert alice != bob and alice.id != bob.id
    # The id is a digest of the whole key: stable across processes, path-safe.
    assert alice.id == context_key("alice", _request({CONTEXT_HEADER: "agent-7"})).id
    assert len(alice.id) == 32 and alice.id.isalnum()
    # "a" + client "b|c" must not collide with "a|b" + client "c".
    assert ContextKey("a", "client", "b|c").id != ContextKey("a|b", "client", "c").id


@pytest.mark.parametrize("bad", ["", "x" * 201, "tab\there", 7, None])
def test_a_context_key_that_is_not_one_is_refused(bad: Any) -> None:
    with pytest.raises(FsError, match="printable") as in_meta:
        context_key("alice", _request(), meta={CONTEXT_META: bad})
    assert in_meta.value.code == "invalid_arguments"
    if isinstance(bad, str):
        with pytest.raises(FsError, match=CONTEXT_HEADER):
            context_key("alice", _request({CONTEXT_HEADER: bad}))


def test_the_principal_comes_from_the_auth_layer_or_is_anonymous() -> None:
    assert principal_name(None) == ANONYMOUS
    assert principal_name(_request()) == ANONYMOUS
    assert principal_name(_request(**{PRINCIPAL_SCOPE_KEY: "alice"})) == "alice"

    class Named:
        name = "bob"

    assert principal_name(_request(**{PRINCIPAL_SCOPE_KEY: Named()})) == "bob"

    class Token:
        claims: ClassVar[dict[str, str]] = {"iss": "https://id.example"}
        subject = "u-1"
        client_id = "cli"

    class User:
        access_token = Token()

    assert principal_name(_request(user=User())) == '["https://id.example", "u-1", "cli"]'


def test_kept_contexts_are_bounded_and_derived_from_the_workspace() -> None:
    ws = toolfs.AsyncWorkspace(toolfs.Workspace("memory://toolfs-ctx-bound"))
    contexts = ServerContexts(ws, limit=2)
    a, b, c = (ContextKey("p", "client", k) for k in "abc")
    first = contexts.get(a)
    assert contexts.get(a) is first and first.sync.context_id == a.id
    contexts.get(b)
    contexts.get(c)
    assert len(contexts) == 2 and contexts.get(a) is not first  # a was dropped, made anew


class _PrincipalFromToken:
    """What an auth layer does, reduced to a table: the bearer token names the principal
    (then the server's own static-token check is given its token)."""

    def __init__(self, app: ASGIApp, principals: dict[str, str]) -> None:
        self.app = app
        self.principals = principals

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"").decode()
            token = given.removeprefix("Bearer ")
            if token not in self.principals:
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
            headers = [(k, v) for k, v in scope["headers"] if k != b"authorization"]
            scope = {**scope, PRINCIPAL_SCOPE_KEY: self.principals[token],
                     "headers": [*headers, (b"authorization", f"Bearer {TOKEN}".encode())]}
        await self.app(scope, receive, send)


@contextmanager
def _serving(app: Any) -> Iterator[str]:
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


@asynccontextmanager
async def _modern(url: str, token: str = TOKEN, **headers: str) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}", **headers}) \
            as http, Client(streamable_http_client(url, http_client=http), mode=MODERN) as c:
        yield c


@pytest.fixture(scope="module")
def modern_url() -> Iterator[str]:
    ws = toolfs.Workspace("memory://toolfs-ctx-modern")
    with _serving(ToolfsMCP(ws).http_app(token=TOKEN)) as url:
        yield url


@pytest.mark.anyio
async def test_the_2026_07_28_protocol_is_served_natively(modern_url: str) -> None:
    async with _modern(modern_url) as client:
        assert client.session.protocol_version == MODERN
        wrote = await client.call_tool("write", {"file_path": "m/a.txt", "content": "one\n"})
        # No session: the principal alone is the context, so its own write counts as seen.
        edited = await client.call_tool(
            "edit", {"file_path": "m/a.txt", "old_string": "one", "new_string": "two"})
    assert not wrote.is_error and not edited.is_error, _text(edited)
    async with _modern(modern_url) as again:  # another connection, same principal
        read = await again.call_tool("read", {"file_path": "m/a.txt"})
    assert read.structured_content["result"]["lines"] == ["two"]


@pytest.mark.anyio
async def test_agents_naming_their_context_are_separate(modern_url: str) -> None:
    async with _modern(modern_url, **{CONTEXT_HEADER: "agent-a"}) as a, \
            _modern(modern_url, **{CONTEXT_HEADER: "agent-b"}) as b:
        await a.call_tool("write", {"file_path": "m/b.txt", "content": "v1\n"})
        blind = await b.call_tool("write", {"file_path": "m/b.txt", "content": "v2\n"})
        assert _text(blind).startswith("Error [not_observed]")
        await b.call_tool("read", {"file_path": "m/b.txt"})
        ok = await b.call_tool("edit", {"file_path": "m/b.txt", "old_string": "v1",
                                        "new_string": "v2"})
        assert not ok.is_error
        stale = await a.call_tool("edit", {"file_path": "m/b.txt", "old_string": "v1",
                                           "new_string": "v3"})
        assert stale.structured_content["error"]["code"] == "stale"
        # _meta names the same context as the header does.
        via_meta = await b.call_tool("edit", {"file_path": "m/b.txt", "old_string": "v2",
                                              "new_string": "v4"})
        assert not via_meta.is_error
    async with _modern(modern_url) as anonymous:
        same = await anonymous.call_tool(
            "edit", {"file_path": "m/b.txt", "old_string": "v4", "new_string": "v5"},
            meta={CONTEXT_META: "agent-b"})
        other = await anonymous.call_tool(
            "edit", {"file_path": "m/b.txt", "old_string": "v5", "new_string": "v6"},
            meta={CONTEXT_META: "agent-c"})
        assert not same.is_error, _text(same)
        assert _text(other).startswith("Error [not_observed]")
        with pytest.raises(MCPError, match="printable"):
            await anonymous.call_tool("read", {"file_path": "m/b.txt"},
                                      meta={CONTEXT_META: "x" * 300})


@pytest.mark.anyio
async def test_two_principals_with_the_same_key_are_separate_contexts() -> None:
    ws = toolfs.Workspace("memory://toolfs-ctx-principals")
    ws.write("shared.txt", "v1\n")
    alice_token, bob_token = "alice-token-0123456789", "bob-token-0123456789ab"
    principals = _PrincipalFromToken(ToolfsMCP(ws).http_app(token=TOKEN),
                                     {alice_token: "alice", bob_token: "bob"})
    with _serving(principals) as url:
        async with _modern(url, alice_token, **{CONTEXT_HEADER: "agent"}) as alice, \
                _modern(url, bob_token, **{CONTEXT_HEADER: "agent"}) as bob:
            await alice.call_tool("read", {"file_path": "shared.txt"})
            refused = await bob.call_tool(
                "edit", {"file_path": "shared.txt", "old_string": "v1", "new_string": "b"})
            landed = await alice.call_tool(
                "edit", {"file_path": "shared.txt", "old_string": "v1", "new_string": "a"})
    assert _text(refused).startswith("Error [not_observed]")
    assert not landed.is_error
