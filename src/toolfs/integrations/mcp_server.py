"""The file tools (read, write, edit, glob, grep, ls) as an MCP server (official ``mcp`` SDK,
extra ``mcp``).

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
  not hold up the others;
* over stdio pipes, a :class:`_StdioLane` answers tool calls without the SDK's
  per-message dispatch, with the same answers (``tests/test_mcp_lane.py``).

Serve it with ``toolfs serve URL`` (stdio) or ``toolfs serve URL --transport http``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import json
import logging
import os
import select
import socket
import stat
import sys
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from pydantic_core import from_json, to_json

try:
    import mcp.types as types
    import mcp_types.methods as wire_methods
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.shared.dispatcher import as_request_id, coerce_request_id
    from mcp.shared.exceptions import MCPError
    from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
    from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
    from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
    from opentelemetry import trace
    from starlette.responses import JSONResponse
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
except ImportError as exc:
    raise ImportError("the toolfs MCP server needs the MCP SDK: pip install 'toolfs[mcp]'"
                      ) from exc

from toolfs import __version__
from toolfs.errors import ErrorCode
from toolfs.redact import Redactor
from toolfs.render import ToolOutput
from toolfs.results import (
    EditResult,
    GlobResult,
    GrepResult,
    ListResult,
    NotebookEditResult,
    NotebookReadResult,
    ReadResult,
    WriteResult,
)
from toolfs.schemas import ARGS_MODELS, input_schema, tool_definitions
from toolfs.workspace import AsyncWorkspace, Workspace

__all__ = ["BearerAuth", "SessionLimit", "ToolError", "ToolfsMCP", "check_token", "endpoint_url",
           "mcp_tools", "output_schema"]

logger = logging.getLogger(__name__)

DEFAULT_PORT = 8765
DEFAULT_MAX_SESSIONS = 64
"""Live streamable-HTTP sessions a server keeps at once; each holds a ledger and a cache."""
MIN_TOKEN_LENGTH = 16
_CONTEXT_KEY = "toolfs.context"
# The result models of each tool: read and edit of a notebook answer in its cells.
_RESULT_MODELS: dict[str, tuple[type[BaseModel], ...]] = {
    "read": (ReadResult, NotebookReadResult), "write": (WriteResult,),
    "edit": (EditResult, NotebookEditResult),
    "glob": (GlobResult,), "grep": (GrepResult,), "ls": (ListResult,),
    "notebook_edit": (NotebookEditResult,),
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
    schema = _generated_output_schema(tool)
    compact: dict[str, Any] = _compact(schema, schema.pop("$defs"))
    return compact


def _generated_output_schema(tool: str) -> dict[str, Any]:
    """:func:`output_schema` as generated, with ``$defs`` and ``$ref`` s."""
    _, top = models_json_schema(
        [*((m, "serialization") for m in _RESULT_MODELS[tool]),
         (ToolError, "serialization")],
        ref_template="#/$defs/{model}")
    refs = [{"$ref": f"#/$defs/{m.__name__}"} for m in _RESULT_MODELS[tool]]
    result_ref = refs[0] if len(refs) == 1 else {"anyOf": refs}
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


# Keywords that constrain only instances of one JSON type: ``{"type": T, ...these}`` or
# null accepts exactly what ``{"type": [T, "null"], ...these}`` accepts.
_TYPE_KEYWORDS: dict[str, frozenset[str]] = {
    "object": frozenset({"properties", "additionalProperties", "required",
                         "patternProperties", "propertyNames"}),
    "array": frozenset({"items", "prefixItems", "minItems", "maxItems"}),
    "string": frozenset({"minLength", "maxLength", "pattern"}),
    "integer": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}),
    "number": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}),
    "boolean": frozenset(),
}
_ANNOTATIONS = frozenset({"description", "default"})


def _compact(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with the same meaning in a shape that validates with fewer steps.

    A client checks every result against the output schema, and each schema node it
    enters costs it a validator object: ``$ref`` s to ``$defs`` are inlined (the result
    models are not recursive), ``anyOf: [{type: T, ...}, {type: null}]`` becomes
    ``type: [T, "null"]`` when the other keywords constrain only ``T`` instances, and
    ``title`` s (pydantic's restatement of each field name) are dropped."""
    if isinstance(node, list):
        return [_compact(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = _compact(defs[ref.removeprefix("#/$defs/")], defs)
        rest = {k: _compact(v, defs) for k, v in node.items() if k not in ("$ref", "title")}
        if set(rest) <= _ANNOTATIONS:  # a description beside the reference: same meaning
            return {**target, **rest}
        return {"allOf": [target], **rest}
    out = {k: _compact(v, defs) for k, v in node.items() if k != "title"}
    branches = out.get("anyOf")
    if isinstance(branches, list) and len(branches) == 2 and {"type": "null"} in branches:
        other = branches[1 - branches.index({"type": "null"})]
        kind = other.get("type")
        if (isinstance(kind, str) and kind in _TYPE_KEYWORDS
                and set(other) - {"type"} <= _TYPE_KEYWORDS[kind] | _ANNOTATIONS
                and not set(other) & set(out)):
            del out["anyOf"]
            out.update(other)
            out["type"] = [kind, "null"]
    return out


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
        self._lane_calls = 0
        """Calls a stdio lane answered without the SDK's dispatch (for tests)."""
        self._session_contexts: set[AsyncWorkspace] = set()
        self.server: Server[Any] = Server(
            name, version=__version__, instructions=_INSTRUCTIONS,
            on_list_tools=self._list_tools,
            # The SDK types the handler as returning a CallToolResult; it serialises any
            # handler result, and a dict is taken as the wire form (see _call_tool).
            on_call_tool=self._call_tool,  # type: ignore[arg-type]
            get_tool_input_schema=_input_schema_of)
        self.server.add_request_handler("server/discover", types.RequestParams, self._discover)
        # The SDK's default middleware (an OpenTelemetry span per message), as built.
        self._built_middleware = tuple(self.server.middleware)

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
        # The wire form directly: the SDK validates a handler's result for the wire either
        # way (its result sieve), so building a CallToolResult here only to dump it again
        # was a second pydantic round trip per call.
        return self._wire_result(output)

    def _wire_result(self, output: ToolOutput) -> dict[str, Any]:
        """``output`` as a ``CallToolResult`` in its wire form, credentials masked in errors."""
        # Both parts hold no more than the workspace's output budget, and every string is
        # valid Unicode (ToolOutput escapes lone surrogates, e.g. of an undecodable file
        # name, which would kill the transport's writer and the whole stdio session).
        text, structured = output.text, output.to_dict()
        if output.is_error:
            # Credentials are masked in error texts only: a result's content is the
            # file's bytes, and masking them there would corrupt the model's next edit.
            text, structured = self.redact.message(text), self.redact.data(structured)
        return {**_CALL_RESULT_DEFAULTS, "content": [{"type": "text", "text": text}],
                "structuredContent": structured, "isError": output.is_error}

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
            return self._stream()
        raise MCPError(types.INVALID_REQUEST,
                       "toolfs keeps what each agent has read per MCP session; open a session "
                       "(initialize handshake) instead of sending stateless requests")

    def _stream(self) -> AsyncWorkspace:
        """The execution context of the stream (stdio) this server serves."""
        if self._stream_context is None:
            self._stream_context = self.workspace.new_context()
        return self._stream_context

    def _serves_calls_as_built(self) -> bool:
        """Whether ``tools/call`` still runs exactly as this class set it up: its own
        handler, no cache hint, and no middleware but the SDK's default one (an
        OpenTelemetry span) with no tracer installed, so that it would record nothing."""
        entry = self.server.get_request_handler("tools/call")
        middleware = self.server.middleware
        return (entry is not None and entry.handler == self._call_tool
                and entry.params_type is types.CallToolRequestParams  # as _sdk_takes_call
                and "tools/call" not in self.server.cache_hints
                and len(middleware) == len(self._built_middleware)
                and all(m is b for m, b in zip(middleware, self._built_middleware,
                                               strict=True))
                and (not middleware or isinstance(trace.get_tracer_provider(),
                                                  trace.ProxyTracerProvider
                                                  | trace.NoOpTracerProvider)))

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
            async with _pipes() as pipes:
                if pipes is not None:
                    await self._serve_pipes(*pipes)
                    return
                async with stdio_server() as (read, write):
                    await self.server.run(read, write,
                                          self.server.create_initialization_options())
        finally:
            if self._stream_context is not None:
                self._stream_context.close()

    async def _serve_pipes(self, read_fd: int, write_fd: int) -> None:
        """Serve one client over the pipes ``read_fd`` and ``write_fd`` (made blocking,
        left open), through a :class:`_StdioLane`."""
        from mcp.server.stdio import stdio_server

        for fd in (read_fd, write_fd):
            os.set_blocking(fd, True)
        # The lane stands in for the SDK's anyio file wrappers: it has the async
        # iteration, write and flush that stdio_server uses of them.
        lane: Any = _StdioLane(self, read_fd, _Wire(write_fd))
        lane.start()
        try:
            async with stdio_server(lane, lane) as (read, write):
                await self.server.run(read, write,
                                      self.server.create_initialization_options())
        finally:
            lane.stop()

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


_SHUTDOWN_WRITE_TIMEOUT = 1.0
"""How long the end of serving waits for a write or read under way (the SDK's bound
for its last writes)."""


_LANE_THREADS = 32
"""The most calls one stdio client has running at once (``AsyncWorkspace``'s default)."""
_READ_SIZE = 1 << 16
"""Bytes a lane thread asks of the input pipe at a time (a pipe holds 64 KiB by default)."""
_EXCLUSIVE_WAKEUPS = hasattr(select, "epoll") and hasattr(select, "EPOLLEXCLUSIVE")
"""Whether idle lane threads can all watch the input and have the kernel wake just one of
them per line (Linux: an epoll set per thread, the pipe added with ``EPOLLEXCLUSIVE``).
Elsewhere one thread at a time watches, handing that on as it takes a line."""
_PLAIN_CALL_KEYS = frozenset({"name", "arguments"})


def _plain_call_versions() -> frozenset[str]:
    """Handshake-era protocol versions whose ``tools/call`` checks accept every plain
    call: ``params`` holding a string ``name`` and, if anything else, ``arguments`` as an
    object or null. The SDK's checks of such a call can only say yes (its params models
    have nothing more to require of them), so the lane spares them; every other call is
    checked. Probed here once against the installed SDK, so a version whose checks
    start asking more is checked again (tests/test_mcp_lane.py probes many calls)."""
    probes: tuple[dict[str, Any], ...] = (
        {"name": "read"}, {"name": "", "arguments": None},
        {"name": "édit", "arguments": {"a": [1, {"b": None}], "": "x"}})
    return frozenset(
        version for version in HANDSHAKE_PROTOCOL_VERSIONS
        if version not in MODERN_PROTOCOL_VERSIONS
        and all(_sdk_takes_call(version, params) for params in probes))


def _sdk_takes_call(version: str, params: dict[str, Any]) -> bool:
    """Whether the SDK takes these ``tools/call`` params at ``version`` to the handler:
    its two checks, the request's shape in that protocol revision, then the handler's
    params model (which knows fields a revision does not, such as ``task`` in
    2026-07-28, and refuses them when malformed)."""
    try:
        wire_methods.validate_client_request("tools/call", version, params)
        types.CallToolRequestParams.model_validate(params, by_name=False)
    except (ValueError, KeyError):  # ValidationError is a ValueError
        return False
    return True


_PLAIN_CALL_VERSIONS = _plain_call_versions()
RequestId = int | str
_Key = RequestId
"""A request id as the SDK correlates it (``coerce_request_id``: ``"7"`` is ``7``, as
in the TypeScript SDK), so a cancel names the call the SDK would cancel."""
_Job = Callable[..., None]
"""A lane call to run: ``_StdioLane._answer`` with its request bound; ``sent=`` may
name a callback for the moment its answer is written (or it turns out it has none)."""


def _wait_ready(fds: list[int], *, writable: bool = False) -> list[int]:
    """Wait until one of ``fds`` is readable (or ``writable``); the ones that are.

    ``poll`` where there is one: ``select`` cannot watch a descriptor numbered past its
    FD_SETSIZE (1024), which a process with many files open gives to new pipes."""
    if not hasattr(select, "poll"):
        ready = select.select([] if writable else fds, fds if writable else [], [])
        return ready[1] if writable else ready[0]
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLOUT if writable else select.POLLIN)
    return [fd for fd, _ in poller.poll()]


class _Wire:
    """The pipe to the client, written one whole message at a time from any thread.

    The lane's calls write their answers from the worker thread that ran them, so an
    answer costs no hop back to the event loop; the SDK's messages are written from a
    thread too (never blocking the loop on a full pipe, as the SDK's own transport).
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()
        self._broken = False

    def send(self, data: bytes) -> None:
        with self._lock:
            if self._broken:
                return
            view = memoryview(data)
            try:
                # A close() that could not wait any longer for this write leaves it
                # as it is: the descriptor may be another file's by the next piece.
                while view and not self._broken:
                    try:
                        view = view[os.write(self._fd, view):]
                    except BlockingIOError:  # a pipe the client made non-blocking: full
                        _wait_ready([self._fd], writable=True)
            except OSError as exc:  # the client closed its end: nobody reads any more
                self._broken = True
                logger.debug("the MCP client closed the wire: %s", exc)

    def close(self) -> None:
        """Write nothing more: once serving ends, the descriptor may be closed and its
        number reused for another file. A write under way (on a full pipe) is waited
        for as long as the SDK waits for its last writes."""
        acquired = self._lock.acquire(timeout=_SHUTDOWN_WRITE_TIMEOUT)
        self._broken = True
        if acquired:
            self._lock.release()


class _StdioLane:
    """The wire of one stdio client, between the pipes and the SDK's stdio transport.

    Lane threads read the client's lines themselves, one thread at a time (whichever
    holds the read lock; it hands the lock on as soon as it has a line), and a
    ``tools/call`` that the SDK would serve exactly as it is built here (see
    :meth:`ToolfsMCP._serves_calls_as_built`) is run and answered by the thread that read
    it: checked as the SDK checks it (:func:`_sdk_takes_call`), the same handler result,
    put through the SDK's own result sieve for the protocol version, written straight to
    the pipe. So a call costs no
    event-loop turn and no hop to a worker thread, and none of the SDK's per-message
    dispatch (a message model, a relay task, middleware, a second dump), which cost more
    per call than the reference server's whole answer. Every other line (initialize,
    tools/list, ping, a call of an unknown tool, malformed params, ...) is handed to the
    SDK's transport, which reads lines from the lane (``async for``) and writes messages
    to it (``write`` + ``flush``) on the event loop; so is the stream's first request,
    from which the SDK (and the lane) decide the protocol era. Calls run concurrently
    (up to :data:`_LANE_THREADS` at once, as many as ``AsyncWorkspace`` runs by default);
    a call the client cancels before its answer is written is never answered; at end of
    input the calls in flight finish and are answered before the SDK sees the end.
    """

    def __init__(self, owner: ToolfsMCP, read_fd: int, wire: _Wire) -> None:
        self._owner = owner
        self._context = owner._stream()
        self._fd = read_fd
        self._wire = wire
        self._loop = asyncio.get_running_loop()
        self._to_sdk: asyncio.Queue[str | None] = asyncio.Queue()
        self._buffer = bytearray()
        self._scanned = 0
        """Bytes at the start of ``_buffer`` known to hold no line end (a long line that
        comes in many reads is scanned once)."""
        self._read_lock = threading.Lock()
        """Held by the one lane thread that reads the pipe (and classifies what it read,
        in the order the client sent it)."""
        self._eof = False
        self._input_ended = False
        """The pipe said end of input (a last unterminated line may still be buffered)."""
        self._in_read = threading.Lock()
        """Held while a lane thread waits on or reads the input pipe (one watcher), or
        reads it (exclusive wakeups)."""
        # The rest is guarded by _lock: the lane threads and the event loop share it.
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._modern: bool | None = None
        """The protocol era: decided by the stream's first request, as the SDK decides it."""
        self._version: str | None = None
        """The handshake era's protocol version, once an ``initialize`` was answered."""
        self._initializing: list[object] = []
        """The ids of the ``initialize`` requests the SDK has not answered yet (or
        :data:`_UNMATCHED`)."""
        self._calls: set[_Key] = set()
        self._cancelled: set[_Key] = set()
        self._answering: set[_Key] = set()
        self._disowned: set[_Key] = set()
        """Lane calls whose id a later request to the SDK reused: their cancels are the
        SDK's (it files requests by id, the newest over the older)."""
        self._sdk_requests: dict[_Key, int] = {}
        """Requests handed to the SDK and not yet answered, by id: while the SDK may hold
        one under an id, a call of that id is its too (see :meth:`_hand_over`)."""
        self._threads = 0
        self._waiting = 0
        """Lane threads free to read the next line (waiting for input, or for their turn;
        with exclusive wakeups, every thread not running a call)."""
        self._polling = 0
        """Lane threads waiting for input (exclusive wakeups): the wake pipes stay open
        until none is left."""
        self._wake_r, self._wake_w = os.pipe()
        """Written when the input ends and when serving stops: wakes every lane thread
        that waits for input."""
        self._pipes_open = True
        self._exclusive = _EXCLUSIVE_WAKEUPS
        self._epolls: list[Any] = []
        """Idle threads' epoll sets, kept for the next idle thread (exclusive wakeups)."""
        self._more_r = self._more_w = -1
        self._more_posted = False
        self._drained = True
        """The last read took less than it asked for: the input held no more then."""
        if self._exclusive:
            # A byte here says "a line is buffered and nobody is taking it": the lines of
            # one read past the first, which no new input will announce.
            self._more_r, self._more_w = os.pipe()
            os.set_blocking(self._more_r, False)
            os.set_blocking(self._more_w, False)
            self._ready = select.poll()
            self._ready.register(self._fd, select.POLLIN)

    def start(self) -> None:
        with self._lock:
            self._spawn()

    def stop(self) -> None:
        """End serving: every lane thread still waiting for input goes (the SDK stopped
        first), and neither pipe is touched after this returns (the caller may close
        them, and their numbers may be reused), even by a call still running."""
        with self._lock:
            self._eof = True
            if self._pipes_open:
                with contextlib.suppress(OSError):
                    os.write(self._wake_w, b"x")
        if self._exclusive:
            # Once _in_read has been ours, no thread reads the input any more (each looks
            # at _eof under it first), even one that was still classifying a line when
            # the read lock below could not be had in time.
            if self._in_read.acquire(timeout=_SHUTDOWN_WRITE_TIMEOUT):
                self._in_read.release()
            # Once the read lock is ours, no thread reads the pipes any more (each looks
            # at _eof first); once no thread waits for input, the wake pipes can go.
            if self._read_lock.acquire(timeout=_SHUTDOWN_WRITE_TIMEOUT):
                try:
                    with self._lock:
                        self._settled.wait_for(lambda: self._polling == 0,
                                               timeout=_SHUTDOWN_WRITE_TIMEOUT)
                        if self._polling == 0:
                            self._close_pipes()
                finally:
                    self._read_lock.release()
        elif self._in_read.acquire(timeout=_SHUTDOWN_WRITE_TIMEOUT):  # woken: it is out
            try:  # and no reader enters again (it finds _eof first): the wake pipe goes
                with self._lock:
                    self._close_pipes()
            finally:
                self._in_read.release()
        self._wire.close()

    def _close_pipes(self) -> None:
        """Close the wake pipes and the idle epoll sets, once (with ``_lock`` held):
        closing a number twice could close another file that has taken it since."""
        if self._pipes_open:
            self._pipes_open = False
            for epoll in self._epolls:
                epoll.close()
            self._epolls.clear()
            for fd in (self._wake_r, self._wake_w, self._more_r, self._more_w):
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)

    def __del__(self) -> None:
        # Only when stop() could not (a reader did not leave in time): left to the end.
        if getattr(self, "_pipes_open", False):
            self._close_pipes()

    # -- the SDK's side: lines in, messages out -------------------------------------

    def __aiter__(self) -> _StdioLane:
        return self

    async def __anext__(self) -> str:
        line = await self._to_sdk.get()
        if line is None:
            raise StopAsyncIteration
        return line

    async def write(self, text: str) -> None:
        if self._sdk_requests:
            self._saw_sdk_answer(text)
        if self._initializing:
            self._saw_answer(text)
        await asyncio.to_thread(self._wire.send, text.encode("utf-8"))

    async def flush(self) -> None:
        pass  # write returns once the message is in the pipe

    def _hand_to_sdk(self, line: str | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody to tell
            self._loop.call_soon_threadsafe(self._to_sdk.put_nowait, line)

    # -- the lane threads -----------------------------------------------------------

    def _spawn(self) -> None:
        """Start one more lane thread (with ``_lock`` held, which the thread waits for
        before it does anything); ``RuntimeError`` if none can be started."""
        serve = self._serve_exclusive if self._exclusive else self._serve
        threading.Thread(target=serve, daemon=True,
                         name=f"toolfs_stdio_{self._threads + 1}").start()
        self._threads += 1
        if self._exclusive:
            self._waiting += 1  # free to read from now on: no other is started meanwhile

    def _serve(self) -> None:
        """A lane thread, one watcher at a time: take the read lock, read one line, hand
        the lock on, run it."""
        while True:
            with self._lock:
                self._waiting += 1
            with self._read_lock:
                with self._lock:
                    self._waiting -= 1
                if self._eof:
                    return
                line = self._next_line()
                if line is None:
                    self._end_of_input()
                    return
                job = self._job(line)
                if job is not None and not self._reader_stays(job):
                    continue  # queued: this thread reads on
            if job is not None:
                job()

    def _serve_exclusive(self) -> None:
        """A lane thread where every idle thread watches the input and the kernel wakes
        one per event: a thread that takes a line runs it without waking another (the
        others go on watching), so a call costs no hand-over between threads.

        The thread counts in ``_waiting`` (free to read) from its start until it takes a
        call, and again once the call is done; in ``_polling`` while it waits."""
        while True:
            with self._lock:
                if self._eof:
                    self._waiting -= 1
                    self._settled.notify_all()
                    # Past the end nobody waits for input again: if stop() could not
                    # wait for a thread that held the read lock, a thread that leaves
                    # while none waits or reads closes the wake pipes.
                    if self._polling == 0 and self._read_lock.acquire(blocking=False):
                        try:
                            self._close_pipes()
                        finally:
                            self._read_lock.release()
                    return
                self._polling += 1
                epoll = self._epolls.pop() if self._epolls else None
            try:
                epoll = self._wait_for_input(epoll)
            finally:
                with self._lock:
                    self._polling -= 1
                    if epoll is not None:
                        if self._pipes_open and not self._eof:
                            self._epolls.append(epoll)
                        else:
                            epoll.close()
                    self._settled.notify_all()
            job = self._take_line()
            if job is not None:
                self._run_call(job)

    def _run_call(self, job: _Job) -> None:
        """Run a call on this lane thread, which is free again from the moment its answer
        is written (a client waiting for it may send the next call at once: it must not
        find every thread busy and make the lane start one more)."""
        freed = False

        def free() -> None:
            nonlocal freed
            if not freed:
                freed = True
                with self._lock:
                    self._waiting += 1

        try:
            job(sent=free)
        finally:
            free()

    def _wait_for_input(self, epoll: Any) -> Any:
        """Wait until the input, the wake pipe or the "more" pipe is readable; the epoll
        set to keep (``None`` if none could be made: a plain ``poll`` then, which wakes
        every waiting thread but is still correct)."""
        if epoll is None:
            try:
                epoll = select.epoll()
                try:
                    epoll.register(self._fd, select.EPOLLIN | select.EPOLLEXCLUSIVE)
                    epoll.register(self._more_r, select.EPOLLIN | select.EPOLLEXCLUSIVE)
                    epoll.register(self._wake_r, select.EPOLLIN)
                except BaseException:
                    epoll.close()
                    raise
            except OSError as exc:  # out of descriptors, or an input epoll refuses
                logger.debug("an epoll set for the stdio lane failed: %s", exc)
                epoll = None
        try:
            if epoll is not None:
                epoll.poll()
            else:
                _wait_ready([self._fd, self._more_r, self._wake_r])
        except OSError as exc:  # as a failed read: the input is over
            logger.debug("waiting for the MCP client failed: %s", exc)
            self._input_ended = True
        return epoll

    def _take_line(self) -> _Job | None:
        """Under the read lock: the next line's call to run, if it is the lane's (lines
        for the SDK are handed over on the way); ``None`` when nothing is left to take
        now. Reads only what the pipe already holds, so the read lock is never held
        while waiting."""
        with self._read_lock:
            if self._eof:
                return None
            if self._more_posted:
                with contextlib.suppress(OSError):
                    os.read(self._more_r, 64)
                self._more_posted = False
            while True:
                if self._eof:
                    return None  # serving stopped while a line was classified: no more
                line = self._cut_line(self._input_ended)
                if line is None:
                    if self._input_ended:
                        break
                    if not self._read_ready():
                        return None
                    continue
                job = self._job(line)
                if job is None:
                    continue  # the SDK's: take the next line
                with self._lock:
                    self._waiting -= 1  # this thread is not free while it runs the call
                if not self._reader_stays(job):
                    with self._lock:
                        self._waiting += 1
                    continue  # queued: take the next line
                if (self._cut_line_at() >= 0 or not self._drained) \
                        and not self._more_posted:
                    # Another whole line is buffered, or the input may hold more than
                    # one read took (no new input will announce it): wake a thread.
                    self._more_posted = True
                    with contextlib.suppress(OSError):
                        os.write(self._more_w, b"x")
                return job
            self._eof = True
        self._end_of_input()
        return None

    def _read_ready(self) -> bool:
        """Append what the input holds now to the buffer (without waiting); whether
        anything came (the end of input counts: it is noted)."""
        if len(self._buffer) > _LINE_LIMIT:
            logger.error("a line from the MCP client is over %d bytes: closing", _LINE_LIMIT)
            self._buffer.clear()
            self._scanned = 0
            self._input_ended = True
            return True
        with self._in_read:  # stop() waits for it: the input is not read once it returns
            if self._eof or not self._ready.poll(0):
                return False
            try:
                chunk = os.read(self._fd, _READ_SIZE)
            except BlockingIOError:  # a pipe the client made non-blocking: no data after all
                return False
            except OSError as exc:
                logger.debug("reading from the MCP client failed: %s", exc)
                chunk = b""
        if not chunk:
            self._input_ended = True
        self._drained = len(chunk) < _READ_SIZE
        self._buffer += chunk
        return True

    def _end_of_input(self) -> None:
        """The input ended: answer what is in flight, then let the SDK see the end, and
        wake the threads that still wait."""
        self._eof = True
        with self._lock:
            while self._calls:
                self._settled.wait()
            if self._pipes_open:
                with contextlib.suppress(OSError):
                    os.write(self._wake_w, b"x")
        self._hand_to_sdk(None)

    def _job(self, line: bytes) -> _Job | None:
        """:meth:`_took`, a line the lane cannot classify going to the SDK."""
        try:
            return self._took(line)
        except Exception:  # a line the lane cannot classify: the SDK's to answer
            logger.exception("the stdio lane could not classify a line")
            self._hand_to_sdk(line.decode("utf-8", "replace"))
            return None

    def _reader_stays(self, job: _Job) -> bool:
        """Make sure a thread is free to read the next line while this one runs ``job``
        (with the read lock held): one is waiting, or one more is started; when every
        lane thread is busy (or no more can be started), ``job`` is queued on the
        workspace's workers instead, and ``False`` says this thread reads on."""
        with self._lock:
            if self._waiting > 0:
                return True
            if self._threads < _LANE_THREADS:
                try:
                    self._spawn()
                    return True
                except RuntimeError as exc:  # the process is out of threads: as if busy
                    logger.warning("the stdio lane could not start a thread: %s", exc)
            with contextlib.suppress(RuntimeError):  # loop closed: run it here
                self._loop.call_soon_threadsafe(self._queue, job)
                return False
            return True

    def _queue(self, job: _Job) -> None:
        """Run ``job`` on the workspace's workers (on the event loop)."""
        try:
            self._context.submit(job)
        except RuntimeError:  # closed: the job answers that itself, from here
            threading.Thread(target=job, daemon=True).start()

    def _cut_line_at(self) -> int:
        """Index of the last byte of the buffer's first whole line (``-1``: none yet).

        Lines end where the SDK's transport ends them: it reads the pipe as text with
        universal newlines, so ``\\n``, ``\\r\\n`` and a lone ``\\r`` each end one; a
        ``\\r`` that is the last byte read waits for the next byte."""
        buffer = self._buffer
        start = self._scanned
        end = buffer.find(b"\n", start)
        cr = buffer.find(b"\r", start, len(buffer) if end < 0 else end)
        if cr >= 0 and cr + 1 == len(buffer):
            end = -1  # a "\r\n" or a lone "\r": the next byte tells
        elif cr >= 0:
            end = cr + 1 if buffer[cr + 1] == 0x0A else cr
        if end < 0:
            self._scanned = len(buffer) if cr < 0 else cr
        return end

    def _cut_line(self, at_end: bool = False) -> bytes | None:
        """The buffer's first whole line, taken out of it; at the end of input, what is
        left counts as a last line."""
        end = self._cut_line_at()
        if end < 0:
            if not at_end or not self._buffer:
                return None
            end = len(self._buffer) - 1
        line = bytes(self._buffer[:end + 1])
        del self._buffer[:end + 1]
        self._scanned = 0
        return line

    def _next_line(self) -> bytes | None:
        """The next line from the pipe, waiting for it (``None`` at its end; a last
        unterminated line counts as a line)."""
        while True:
            line = self._cut_line()
            if line is not None:
                return line
            if len(self._buffer) > _LINE_LIMIT:
                logger.error("a line from the MCP client is over %d bytes: closing", _LINE_LIMIT)
                return None
            try:
                with self._in_read:
                    if self._eof:
                        return None  # stopped
                    ready = _wait_ready([self._fd, self._wake_r])
                    if self._wake_r in ready:
                        return None  # stopped
                    chunk = os.read(self._fd, _READ_SIZE)
            except BlockingIOError:  # a pipe the client made non-blocking: no data yet
                continue
            except OSError as exc:
                logger.debug("reading from the MCP client failed: %s", exc)
                chunk = b""
            if not chunk:
                return self._cut_line(at_end=True)
            self._buffer += chunk

    def _took(self, line: bytes) -> _Job | None:
        """The call to run for this line if the lane answers it; else the line went to
        the SDK (or was a cancellation the lane applied). Runs under the read lock, so
        lines are classified in the order the client sent them."""
        message = self._parsed(line)
        if message is None:
            call = None  # nor does the SDK read a request from it
        elif self._modern is None or message["method"] == "initialize":
            self._note_handshake(line)
            call = None  # the first request, and every initialize, are the SDK's
        elif message["method"] == "notifications/cancelled" and self._cancel(line):
            return None
        else:
            call = self._eligible(message)
        if message is None or call is None:
            if message is not None:
                self._hand_over(message, line)
            self._hand_to_sdk(line.decode("utf-8", "replace"))
            return None
        rid = cast(RequestId, message["id"])  # _eligible takes only an int or str id
        key = coerce_request_id(rid)
        with self._lock:  # several lane threads count
            self._calls.add(key)
            self._owner._lane_calls += 1
        return functools.partial(self._answer, key, rid, *call)

    @staticmethod
    def _parsed(line: bytes) -> dict[str, Any] | None:
        """The line's message, when it is a JSON object with a string method."""
        try:
            message = from_json(line)
        except ValueError:
            try:  # the SDK reads the pipe as UTF-8 with replacement characters
                message = from_json(line.decode("utf-8", "replace"))
            except ValueError:
                return None  # the SDK answers a parse error
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            return None
        return message

    def _note_handshake(self, line: bytes) -> None:
        """Note the era (from the stream's first request) and a pending ``initialize``,
        from the message as the SDK reads it (a line it does not take for a request
        decides nothing)."""
        request = self._as_the_sdk_reads(line)
        if not isinstance(request, types.JSONRPCRequest):
            return
        with self._lock:
            if request.method == "initialize":
                # Its answer is told by its id: while the SDK owes the answer to another
                # request of that id, which answer is the initialize's cannot be told
                # (taking the other's, the lane would answer calls while the SDK still
                # negotiates, and miss the version agreed): the SDK serves every call.
                key = coerce_request_id(request.id)
                self._initializing.append(
                    _UNMATCHED if key in self._sdk_requests else request.id)
            if self._modern is None:
                meta = (request.params or {}).get("_meta")
                self._modern = (request.method != "initialize" and isinstance(meta, dict)
                                and types.PROTOCOL_VERSION_META_KEY in meta)

    def _hand_over(self, message: dict[str, Any], line: bytes) -> None:
        """Before the SDK gets a request, note its id: the SDK files requests by id, the
        newest over the older, and forgets an id once its newest request is answered
        (or cancelled). So if it reuses the id of a lane call, from now on the cancels
        of that id are the SDK's; and until the SDK has answered it, a call of that id
        is left to the SDK too: taken by the lane, it would not displace the SDK's
        request, which a later cancel of the id would then stop."""
        if as_request_id(message.get("id")) is None:
            return  # no request of the SDK's (whose ids are integers or strings)
        request = self._as_the_sdk_reads(line)
        if not isinstance(request, types.JSONRPCRequest):
            return
        key = coerce_request_id(request.id)
        with self._lock:
            self._sdk_requests[key] = self._sdk_requests.get(key, 0) + 1
            if key in self._calls:
                self._disowned.add(key)

    def _saw_sdk_answer(self, text: str) -> None:
        """Note that the SDK answered a request (``text``: a message it writes)."""
        request_id = _answered_id(text)
        if request_id is None:
            return
        key = coerce_request_id(request_id)
        with self._lock:
            left = self._sdk_requests.get(key, 0) - 1
            if left > 0:
                self._sdk_requests[key] = left
            else:
                self._sdk_requests.pop(key, None)

    @staticmethod
    def _as_the_sdk_reads(line: bytes) -> types.JSONRPCMessage | None:
        """The message the SDK's stdio transport reads from ``line`` (``None``: none)."""
        try:
            message: types.JSONRPCMessage = types.jsonrpc_message_adapter.validate_json(
                line.decode("utf-8", "replace"), by_name=False)
        except ValueError:  # ValidationError is a ValueError
            return None
        return message

    def _eligible(self, message: dict[str, Any]) -> tuple[str, dict[str, Any], str] | None:
        """``(tool, arguments, protocol version)`` of a call the lane may answer, or
        ``None`` to leave it to the SDK (which also answers every malformed one)."""
        request_id, params = message.get("id"), message.get("params")
        if (message["method"] != "tools/call" or type(request_id) not in (int, str)
                or message.get("jsonrpc") != "2.0"
                or not message.keys() <= {"jsonrpc", "id", "method", "params"}
                or not isinstance(params, dict)
                # Any JSON value can stand where a name is due (an array cannot be hashed).
                or not isinstance(params.get("name"), str)
                or params["name"] not in self._owner._enabled
                or not self._owner._serves_calls_as_built()):
            return None
        with self._lock:
            key = coerce_request_id(cast(RequestId, request_id))
            busy = key in self._calls or key in self._sdk_requests
            modern, version = self._modern, self._version
            # While an initialize is unanswered the version may be about to change: the
            # SDK serves what comes meanwhile, at the version it then holds.
            busy = busy or bool(self._initializing)
        if busy:
            return None
        if modern:
            route = classify_inbound_request({"method": "tools/call", "params": params})
            if isinstance(route, InboundLadderRejection):
                return None
            version = route.protocol_version
        else:
            meta = params.get("_meta")
            if version is None or (isinstance(meta, dict)
                                   and types.PROTOCOL_VERSION_META_KEY in meta):
                return None  # not initialized, or an envelope the SDK refuses here
        arguments = params.get("arguments")
        plain = version in _PLAIN_CALL_VERSIONS and params.keys() <= _PLAIN_CALL_KEYS \
            and (arguments is None or type(arguments) is dict)
        if not plain and not _sdk_takes_call(version, params):
            return None  # the SDK refuses it
        return params["name"], arguments if arguments is not None else {}, version

    def _answer(self, key: _Key, request_id: RequestId, tool: str, arguments: dict[str, Any],
                version: str, sent: Callable[[], None] | None = None) -> None:
        """Run a call and write its answer (on the lane thread that read it, or on a
        workspace worker when every lane thread was busy); then ``sent()``, if given."""
        try:
            with self._lock:
                if key in self._cancelled:
                    return  # cancelled before it started (queued): never run, as the
                    # workers skip a call cancelled before they take it
            context = self._context
            try:
                output = context.run_here(context.sync.execute, tool, arguments)
            except Exception as exc:  # as AsyncWorkspace.execute answers it
                output = context.failed_output(exc)
            data = self._encode(request_id, output, version)
            with self._lock:
                if key in self._cancelled:
                    return  # the client cancelled it: never answered (as the SDK does)
                self._answering.add(key)
            self._wire.send(data)
            if sent is not None:
                sent()
        finally:
            with self._lock:
                self._calls.discard(key)
                self._cancelled.discard(key)
                self._answering.discard(key)
                self._disowned.discard(key)
                self._settled.notify_all()

    def _encode(self, request_id: RequestId, output: ToolOutput, version: str) -> bytes:
        try:
            answer: dict[str, Any] = {"result": self._result(output, version)}
        except Exception:  # a result the SDK's sieve refuses: as the SDK answers it
            logger.exception("a tool result does not fit the wire")
            answer = {"error": {"code": types.INTERNAL_ERROR,
                                "message": "Handler returned an invalid result"}}
        return to_json({"jsonrpc": "2.0", "id": request_id, **answer}) + b"\n"

    def _result(self, output: ToolOutput, version: str) -> dict[str, Any]:
        """The wire result the SDK would send for ``output`` at ``version``."""
        wire = self._owner._wire_result(output)
        keys = _sieved_keys(version)
        if keys is not None:
            result = {k: wire[k] for k in keys}
        else:
            result = wire_methods.serialize_server_result("tools/call", version, wire)
        if version in MODERN_PROTOCOL_VERSIONS:
            result.setdefault("resultType", "complete")
            result["_meta"] = {types.SERVER_INFO_META_KEY: self._owner.server.server_info_stamp}
        return result

    def _cancel(self, line: bytes) -> bool:
        """Cancel a call of the lane's that the client gave up on (else: the SDK's)."""
        if not self._calls and not self._sdk_requests:
            return False
        # What is a cancel, and of which call, is the SDK's to say (its message model,
        # and its reading of the id).
        note = self._as_the_sdk_reads(line)
        request_id = (cancelled_request_id_from_params(note.params)
                      if isinstance(note, types.JSONRPCNotification) else None)
        if request_id is None:
            return False
        key = coerce_request_id(request_id)
        with self._lock:
            if key not in self._calls or key in self._disowned:
                # The SDK's to apply: it stops its newest request of the id, if that is
                # not answered yet, and forgets the id (an older request of it that is
                # still running can no longer be cancelled): the id is free again.
                self._sdk_requests.pop(key, None)
                return False
            if key not in self._answering:  # else too late: the answer is on its way
                self._cancelled.add(key)
        return True

    def _saw_answer(self, text: str) -> None:
        """Note the protocol version an ``initialize`` answer agrees on."""
        try:
            message = json.loads(text)
        except ValueError:
            return
        request_id = message.get("id") if isinstance(message, dict) else None
        result = message.get("result") if isinstance(message, dict) else None
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        with self._lock:
            if request_id not in self._initializing:
                return
            self._initializing.remove(request_id)
            if not self._modern and version in HANDSHAKE_PROTOCOL_VERSIONS:
                self._version = version


_UNMATCHED = object()
"""An ``initialize`` whose answer the lane cannot tell from another's: never matched."""
_ANSWER_PREFIX = '{"jsonrpc":"2.0","id":'
_ANSWER_BODY = (',"result":', ',"error":')
_id_decoder = json.JSONDecoder()


def _answered_id(text: str) -> RequestId | None:
    """The id of the request ``text`` (a message the SDK writes) answers, if it is an
    answer. The SDK writes its members in model order, so the id is read from the
    front of the text, without parsing the (maybe long) rest; any other text is
    parsed whole."""
    if text.startswith(_ANSWER_PREFIX):
        try:
            request_id, end = _id_decoder.raw_decode(text, len(_ANSWER_PREFIX))
        except ValueError:
            return None
        if text.startswith(_ANSWER_BODY, end):
            return as_request_id(request_id)
    try:
        message = from_json(text)
    except ValueError:
        return None
    if not isinstance(message, dict) or not ("result" in message or "error" in message):
        return None
    return as_request_id(message.get("id"))


@functools.cache
def _sieved_keys(version: str) -> tuple[str, ...] | None:
    """The members of a toolfs call result that the SDK's result sieve keeps at
    ``version``, if it keeps them unchanged and drops the rest; else ``None``.

    The sieve validates a result against the version's schema and dumps it again, which
    for a read's lines costs more than picking the members. It is run once per version
    on a result of the shape :meth:`ToolfsMCP._wire_result` builds (text content, a
    nested dict with a list, a null and a bool as structured content), and trusted only
    if it changes nothing of it but which members it keeps.
    """
    probe: dict[str, Any] = {
        **_CALL_RESULT_DEFAULTS, "content": [{"type": "text", "text": "x\ty"}],
        "structuredContent": {"ok": True, "result": {"lines": ["a", ""], "n": 1, "cut": None,
                                                     "version": {"kind": "sha256"}}},
        "isError": False}
    try:
        sieved = wire_methods.serialize_server_result("tools/call", version, probe)
    except (ValueError, KeyError):
        return None
    kept = tuple(k for k in probe if k in sieved)
    return kept if sieved == {k: probe[k] for k in kept} else None


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    # Not a terminal: the event loop makes its descriptor non-blocking, and a terminal's
    # open file is shared with the shell.
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextlib.asynccontextmanager
async def _pipes() -> AsyncIterator[tuple[int, int] | None]:
    """Descriptors of stdin and stdout for a :class:`_StdioLane` when both are pipes (as
    an MCP client spawns a server).
    As the SDK does, fds 0 and 1 point at the null device and at stderr meanwhile, so
    stray output cannot corrupt the wire, and are restored after. ``None`` (the SDK's
    own transport) for anything else, and on Windows."""
    if sys.platform == "win32" or not (_is_pipe(0) and _is_pipe(1)):
        yield None
        return
    import fcntl  # POSIX only

    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        yield wire_in, wire_out
    finally:
        with contextlib.suppress(Exception):  # stray buffered output: to stderr still
            sys.stdout.flush()
        for fd, wire in ((0, wire_in), (1, wire_out)):
            with contextlib.suppress(OSError):
                os.dup2(wire, fd)
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
