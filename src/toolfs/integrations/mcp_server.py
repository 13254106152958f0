"""``read``, ``write`` and ``edit`` as an MCP server (official ``mcp`` SDK, extra ``mcp``).

:class:`ToolfsMCP` wraps a workspace in a low-level :class:`mcp.server.lowlevel.Server`:

* the tools are listed with the pinned input schemas of :mod:`toolfs.schemas`, an output
  schema generated from the result models, and the :data:`~toolfs.schemas.ANNOTATIONS`;
* a call returns the model text as text content and :meth:`toolfs.ToolOutput.to_dict` as
  structured content; a tool error is a result with ``isError`` whose text starts with
  ``Error [code]``, never a protocol error;
* each MCP session is its own execution context (its own ledger of observed files): one
  per streamable-HTTP session, one for the whole stream on stdio;
* over HTTP, a bearer token of at least 16 characters is required (scheme matched
  case-insensitively, token in constant time), and at most ``max_sessions`` (64) sessions
  are open at once;
* tools run on :class:`toolfs.AsyncWorkspace`, so a slow backend call in one session does
  not hold up the others.

Serve it with ``toolfs serve URL`` (stdio) or ``toolfs serve URL --transport http``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import socket
import stat
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

try:
    import mcp.types as types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError
    from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
    from starlette.responses import JSONResponse
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
except ImportError as exc:
    raise ImportError("the toolfs MCP server needs the MCP SDK: pip install 'toolfs[mcp]'"
                      ) from exc

from toolfs import __version__
from toolfs.errors import ErrorCode
from toolfs.escaping import escape_undecodable, escape_undecodable_data
from toolfs.redact import Redactor
from toolfs.results import (
    EditResult,
    GlobResult,
    GrepResult,
    ListResult,
    ReadResult,
    WriteResult,
)
from toolfs.schemas import ARGS_MODELS, input_schema, tool_definitions
from toolfs.workspace import AsyncWorkspace, Workspace

__all__ = ["BearerAuth", "SessionLimit", "ToolError", "ToolfsMCP", "check_token", "endpoint_url",
           "mcp_tools", "output_schema"]

DEFAULT_PORT = 8765
DEFAULT_MAX_SESSIONS = 64
"""Live streamable-HTTP sessions a server keeps at once; each holds a ledger and a cache."""
MIN_TOKEN_LENGTH = 16
_CONTEXT_KEY = "toolfs.context"
_RESULT_MODELS: dict[str, type[BaseModel]] = {
    "read": ReadResult, "write": WriteResult, "edit": EditResult,
    "glob": GlobResult, "grep": GrepResult, "ls": ListResult,
}
# What a CallToolResult's wire form holds beyond content/structuredContent/isError (the
# SDK's defaults, e.g. resultType), taken from the model so a new SDK keeps them right.
_CALL_RESULT_DEFAULTS: dict[str, Any] = {
    k: v for k, v in types.CallToolResult(content=[], is_error=False).model_dump(
        by_alias=True, mode="json", exclude_none=True).items()
    if k not in ("content", "structuredContent", "isError")}
_INSTRUCTIONS = ("File tools over one workspace: find files (glob, grep, ls), then read, "
                 "write and edit text files by paths relative to the workspace root.")


class ToolError(BaseModel):
    """The ``error`` member of a failed call's structured content (``FsError.to_dict()``)."""

    code: ErrorCode
    message: str
    path: str | None
    details: dict[str, Any]


def output_schema(tool: str) -> dict[str, Any]:
    """The JSON Schema of ``tool``'s structured content: ``{ok: true, result}`` or
    ``{ok: false, error}``, generated from the result models."""
    _, top = models_json_schema(
        [(_RESULT_MODELS[tool], "serialization"), (ToolError, "serialization")],
        ref_template="#/$defs/{model}")
    result_ref = {"$ref": f"#/$defs/{_RESULT_MODELS[tool].__name__}"}
    defs = top["$defs"]
    for model, field in _LINE_ARRAYS:
        if model in defs:
            prop = defs[model]["properties"][field]
            # Clients check every result against this schema (the Python MCP client with
            # jsonschema, per item): for a read's lines that check cost 1.4 of its 1.5 ms
            # per 360-line result, more than the call itself. The items are always the
            # file's lines as strings; the description says so instead of a per-item
            # schema.
            if prop.pop("items", None) == {"type": "string"}:
                prop["description"] = _LINE_ARRAYS[model, field]
    return {
        "type": "object",
        # The branches exclude each other (ok is true or false): anyOf says the same as
        # oneOf and lets a validator stop at the branch that matches.
        "anyOf": [
            {"properties": {"ok": {"const": True}, "result": result_ref},
             "required": ["ok", "result"], "additionalProperties": False},
            {"properties": {"ok": {"const": False}, "error": {"$ref": "#/$defs/ToolError"}},
             "required": ["ok", "error"], "additionalProperties": False},
        ],
        "$defs": defs,
    }


_LINE_ARRAYS: dict[tuple[str, str], str] = {
    ("ReadResult", "lines"): "The returned lines, as strings without line terminators.",
    ("EditResult", "snippet"): "Lines of the new file around the first replacement, as "
                               "strings without line terminators.",
}


def _input_schema_of(tool: str) -> dict[str, Any] | None:
    return input_schema(tool) if tool in ARGS_MODELS else None


def mcp_tools(tools: list[str] | tuple[str, ...] | None = None) -> list[types.Tool]:
    """The tools (all six, or the subset ``tools`` names) as MCP ``Tool`` objects
    (:func:`toolfs.tool_definitions` plus an output schema)."""
    return [types.Tool.model_validate({**d, "outputSchema": output_schema(d["name"])})
            for d in tool_definitions("mcp", tools)]


class ToolfsMCP:
    """An MCP server for one workspace; every MCP session gets its own execution context.

    Args:
        workspace: the root to serve. Each session works on ``workspace.new_context()``,
            so sessions share files, never observations.
        redact: masks credentials in the error texts the server returns (never in
            file content, which must stay byte-exact).
        name: the server name announced to clients.
        tools: the tools to offer (default: all six); a call of another one is refused
            as an unknown tool.
    """

    def __init__(self, workspace: Workspace | AsyncWorkspace, *,
                 redact: Redactor | None = None, name: str = "toolfs",
                 tools: list[str] | tuple[str, ...] | None = None) -> None:
        self.workspace = (workspace if isinstance(workspace, AsyncWorkspace)
                          else AsyncWorkspace(workspace))
        self.redact = redact or Redactor()
        self.tools = mcp_tools(tools)
        self._enabled = frozenset(t.name for t in self.tools)
        self._stream_context: AsyncWorkspace | None = None
        self._session_contexts: set[AsyncWorkspace] = set()
        self.server: Server[Any] = Server(
            name, version=__version__, instructions=_INSTRUCTIONS,
            on_list_tools=self._list_tools,
            # The SDK types the handler as returning a CallToolResult; it serialises any
            # handler result, and a dict is taken as the wire form (see _call_tool).
            on_call_tool=self._call_tool,  # type: ignore[arg-type]
            get_tool_input_schema=_input_schema_of)
        self.server.add_request_handler("server/discover", types.RequestParams, self._discover)

    # -- handlers -----------------------------------------------------------------

    async def _list_tools(self, ctx: ServerRequestContext[Any],
                          params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tools)

    async def _call_tool(self, ctx: ServerRequestContext[Any],
                         params: types.CallToolRequestParams) -> dict[str, Any]:
        """A ``CallToolResult`` in its wire form (camelCase keys)."""
        if params.name not in self._enabled:
            # MCP reports an unknown tool as a protocol error; bad arguments are tool errors.
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name[:50]!r}")
        output = await self._context(ctx).execute(params.name, params.arguments or {})
        # Both parts hold no more than the workspace's output budget, and every string is
        # valid Unicode: a lone surrogate (an undecodable file name) would kill the
        # transport's writer, and with it the whole stdio session.
        text, structured = output.text, output.to_dict()
        if output.is_error:
            # Credentials are masked in error texts only: a result's content is the
            # file's bytes, and masking them there would corrupt the model's next edit.
            text, structured = self.redact.message(text), self.redact.data(structured)
        # The wire form directly: the SDK validates a handler's result for the wire either
        # way (its result sieve), so building a CallToolResult here only to dump it again
        # was a second pydantic round trip per call.
        result: dict[str, Any] = {
            **_CALL_RESULT_DEFAULTS,
            "content": [{"type": "text", "text": escape_undecodable(text)}],
            "structuredContent": escape_undecodable_data(structured),
            "isError": output.is_error}
        return result

    async def _discover(self, ctx: ServerRequestContext[Any],
                        params: types.RequestParams) -> types.DiscoverResult:
        # The 2026-07-28 protocol has no sessions over HTTP, and a ledger needs one:
        # advertising only handshake versions there makes clients open a session.
        # A stream (stdio) is one client either way, so both eras work on it.
        versions = HANDSHAKE_PROTOCOL_VERSIONS if ctx.request is not None else (
            *HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
        return types.DiscoverResult(
            supported_versions=list(versions), instructions=_INSTRUCTIONS,
            capabilities=self.server.get_capabilities(protocol_version=ctx.protocol_version))

    def _context(self, ctx: ServerRequestContext[Any]) -> AsyncWorkspace:
        """The execution context of the MCP session this request belongs to."""
        # The SDK keeps per-connection state and teardown on the Connection, which
        # ServerRequestContext does not expose yet (the SDK's own TODO L54).
        connection = ctx.session._connection
        if connection.session_id is not None:  # a streamable-HTTP session
            context: AsyncWorkspace | None = connection.state.get(_CONTEXT_KEY)
            if context is None:
                context = self.workspace.new_context()
                connection.state[_CONTEXT_KEY] = context
                self._session_contexts.add(context)
                connection.exit_stack.callback(self._end_session, context)
            return context
        if ctx.request is None:  # stdio: the process serves exactly one client
            if self._stream_context is None:
                self._stream_context = self.workspace.new_context()
            return self._stream_context
        raise MCPError(types.INVALID_REQUEST,
                       "toolfs keeps what each agent has read per MCP session; open a session "
                       "(initialize handshake) instead of sending stateless requests")

    def _end_session(self, context: AsyncWorkspace) -> None:
        """The session ended (closed, expired or dropped): release its context."""
        self._session_contexts.discard(context)
        context.close()

    @property
    def session_contexts(self) -> int:
        """How many HTTP sessions currently hold an execution context (a ledger)."""
        return len(self._session_contexts)

    # -- transports ---------------------------------------------------------------

    async def run_stdio(self) -> None:
        """Serve one client over this process's stdin and stdout until it disconnects."""
        from mcp.server.stdio import stdio_server

        try:
            async with _pipes() as pipes, stdio_server(*pipes) as (read, write):
                await self.server.run(read, write, self.server.create_initialization_options())
        finally:
            if self._stream_context is not None:
                self._stream_context.close()

    def http_app(self, *, token: str, host: str = "127.0.0.1", path: str = "/mcp",
                 max_sessions: int = DEFAULT_MAX_SESSIONS) -> ASGIApp:
        """The streamable-HTTP ASGI app, answering 401 to requests without ``token``.

        ``token`` must be at least :data:`MIN_TOKEN_LENGTH` characters (see
        :func:`check_token`). At most ``max_sessions`` MCP sessions are open at once
        (each holds a ledger and a content cache); past that, a request to open another
        is answered 503 with a JSON-RPC error saying so, until a session ends (the client
        closes it, or it is idle for 30 minutes).
        """
        check_token(token)
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, not {max_sessions}")
        app = self.server.streamable_http_app(streamable_http_path=path, host=host,
                                              max_sessions=max_sessions)
        return BearerAuth(SessionLimit(app, max_sessions), token)

    def serve_http(self, *, token: str, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                   max_sessions: int = DEFAULT_MAX_SESSIONS,
                   ready: Callable[[str], None] | None = None) -> None:
        """Serve streamable HTTP until interrupted; ``port=0`` picks a free port.

        ``ready`` receives the endpoint URL once the socket is listening. ``token`` and
        ``max_sessions`` are checked (see :meth:`http_app`) before anything is bound.
        """
        import uvicorn

        app = self.http_app(token=token, host=host, max_sessions=max_sessions)
        config = uvicorn.Config(app, log_config=None, log_level="warning", lifespan="on")
        # Bind here rather than in uvicorn, so the real port is known for port 0.
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server((host, port), family=family)
        try:
            if ready is not None:
                ready(endpoint_url(host, sock.getsockname()[1]))
            uvicorn.Server(config).run(sockets=[sock])
        finally:
            sock.close()

    def serve_stdio(self) -> None:
        """Serve one client over stdin and stdout until it disconnects (blocking)."""
        asyncio.run(self.run_stdio())


_LINE_LIMIT = 1 << 30
"""Longest JSON-RPC line read from a stdin pipe (a write of a file at the size cap,
JSON-escaped, fits many times over)."""


class _PipeLines:
    """Lines of a pipe, read by the event loop itself (no worker thread per line)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _PipeLines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", "replace")


class _PipeWriter:
    """Text written to a pipe by the event loop (``flush`` waits until it is taken)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    # Not a terminal: the event loop makes its descriptor non-blocking, and a terminal's
    # open file is shared with the shell.
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextlib.asynccontextmanager
async def _pipes() -> AsyncIterator[tuple[Any, Any]]:
    """``(stdin, stdout)`` for the SDK's ``stdio_server`` when both are pipes (as an MCP
    client spawns a server): served by the event loop, which spares the SDK's two worker-
    thread round trips per message. As the SDK does, fds 0 and 1 point at the null device
    and at stderr meanwhile, so stray output cannot corrupt the wire, and are restored
    after. ``(None, None)`` (the SDK's own transport) for anything else, and on Windows."""
    if sys.platform == "win32" or not (_is_pipe(0) and _is_pipe(1)):
        yield None, None
        return
    import fcntl  # POSIX only

    loop = asyncio.get_running_loop()
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    transports: list[asyncio.BaseTransport] = []
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        # The transports get descriptors of their own (they close them at EOF); wire_in
        # and wire_out stay open to put the wire back on 0 and 1.
        reader = asyncio.StreamReader(limit=_LINE_LIMIT)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader),
            os.fdopen(fcntl.fcntl(wire_in, fcntl.F_DUPFD_CLOEXEC, 3), "rb", buffering=0))
        transports.append(read_transport)
        write_transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin,
            os.fdopen(fcntl.fcntl(wire_out, fcntl.F_DUPFD_CLOEXEC, 3), "wb", buffering=0))
        transports.append(write_transport)
        writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
        yield _PipeLines(reader), _PipeWriter(writer)
    finally:
        for transport in transports:
            transport.close()
        with contextlib.suppress(Exception):  # stray buffered output: to stderr still
            sys.stdout.flush()
        for fd, wire in ((0, wire_in), (1, wire_out)):
            with contextlib.suppress(OSError):
                os.dup2(wire, fd)
                # The event loop made the wire's open file non-blocking; it is shared.
                os.set_blocking(fd, True)
            os.close(wire)


def endpoint_url(host: str, port: int, path: str = "/mcp") -> str:
    """``http://host:port/mcp``, bracketing IPv6 hosts."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{path}"


def check_token(token: str) -> None:
    """Refuse a bearer token that is too short to resist guessing, or that an HTTP header
    cannot carry; the message never quotes the token."""
    if not token:
        raise ValueError("the HTTP transport needs a bearer token")
    if len(token) < MIN_TOKEN_LENGTH:
        raise ValueError(f"the bearer token is {len(token)} characters; use at least "
                         f"{MIN_TOKEN_LENGTH} (e.g. openssl rand -hex 32)")
    if not (token.isascii() and token.isprintable()) or " " in token:
        raise ValueError("the bearer token must be printable ASCII without spaces")


class BearerAuth:
    """ASGI middleware: answer 401 unless ``Authorization: Bearer <token>`` is present.

    The scheme is matched case-insensitively (RFC 7235: ``bearer`` and ``BEARER`` too);
    the token is compared in constant time.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        check_token(token)
        self.app = app
        self._expected = token.encode()

    def _authorized(self, header: bytes) -> bool:
        scheme, _, credentials = header.partition(b" ")
        # Compare whatever was sent, so timing tells nothing about how close it came.
        token_ok = hmac.compare_digest(credentials.strip(b" "), self._expected)
        return token_ok and scheme.lower() == b"bearer"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
            if not self._authorized(given):
                response = JSONResponse(
                    {"error": "unauthorized",
                     "error_description": "send Authorization: Bearer <token>"},
                    status_code=401, headers={"WWW-Authenticate": 'Bearer realm="toolfs"'})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class SessionLimit:
    """ASGI middleware: say why a new MCP session is refused at the session limit.

    The SDK's session manager enforces ``max_sessions`` (answering 503 "Too many open
    sessions"); this replaces that answer's JSON-RPC error with one that names the limit
    and what frees a slot, and adds ``Retry-After``.
    """

    def __init__(self, app: ASGIApp, max_sessions: int, retry_after: int = 30) -> None:
        self.app = app
        self.max_sessions = max_sessions
        self.retry_after = retry_after

    def _refusal(self) -> bytes:
        message = (f"toolfs: this server already has {self.max_sessions} open MCP sessions, "
                   "its limit (each keeps a ledger of what its agent read, and a content "
                   "cache); close a session (HTTP DELETE) or wait for an idle one to expire, "
                   "then retry")
        return json.dumps({"jsonrpc": "2.0", "id": None, "error": {
            "code": types.INTERNAL_ERROR, "message": message,
            "data": {"reason": "too_many_sessions", "max_sessions": self.max_sessions}}},
        ).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        opens_session = (scope["type"] == "http" and scope["method"] == "POST"
                         and not any(k == b"mcp-session-id" for k, _ in scope["headers"]))
        if not opens_session:
            await self.app(scope, receive, send)
            return
        held: list[Message] = []

        async def answer(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 503:
                held.append(message)  # wait for the body to tell why
                return
            if not held:
                await send(message)
                return
            held.append(message)
            if message.get("more_body"):
                return
            body = b"".join(m.get("body", b"") for m in held[1:])
            start = held[0]
            if b"Too many open sessions" in body:
                body = self._refusal()
                headers = [(k, v) for k, v in start["headers"] if k != b"content-length"]
                start = {**start, "headers": [*headers,
                                              (b"content-length", str(len(body)).encode()),
                                              (b"retry-after", str(self.retry_after).encode())]}
            held.clear()
            await send(start)
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, answer)
