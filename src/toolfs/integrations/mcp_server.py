"""The file tools (read, write, edit, glob, grep, ls) as an MCP server (official ``mcp`` SDK,
extra ``mcp``).

:class:`ToolfsMCP` wraps a workspace in a low-level :class:`mcp.server.lowlevel.Server`,
served by the SDK's own stdio and streamable-HTTP transports:

* the tools are listed with the pinned input schemas of :mod:`toolfs.schemas`, an output
  schema generated from the result models, and the :data:`~toolfs.schemas.ANNOTATIONS`;
* a call returns the model text as text content and :meth:`toolfs.ToolOutput.to_dict` as
  structured content; a tool error is a result with ``isError`` whose text starts with
  ``Error [code]``, never a protocol error;
* each MCP session is its own execution context (its own ledger of observed files): one
  per streamable-HTTP session, one for the whole stream on stdio; without a session (the
  2026-07-28 protocol, served natively) a context is (principal, the client's
  ``toolfs-context`` header or ``_meta["toolfs/context"]``, else the principal alone), see
  :mod:`toolfs.integrations._mcp_contexts`;
* over HTTP, a bearer token of at least 16 characters is required (scheme matched
  case-insensitively, token in constant time), and at most ``max_sessions`` (64) sessions
  are open at once;
* tools run on :class:`toolfs.AsyncWorkspace`, so a slow backend call in one session does
  not hold up the others;
* over stdio, a line that is not JSON (or not a JSON-RPC message) is answered with a
  JSON-RPC error, as over HTTP, and the requests in flight when the input ends are
  answered before the server exits (see docs/mcp.md).

Serve it with ``toolfs serve URL`` (stdio) or ``toolfs serve URL --transport http``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hmac
import json
import logging
import socket
import sys
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ValidationError
from pydantic.json_schema import models_json_schema

from toolfs.errors import missing_extra

try:  # every module of the `mcp` extra (anyio and starlette come with the SDK)
    import anyio
    import mcp.types as types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError
    from mcp.shared.message import SessionMessage
    from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
    from starlette.responses import JSONResponse
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
except ImportError as exc:
    raise missing_extra("mcp", "the toolfs MCP server (toolfs serve)", exc) from exc

from toolfs import __version__
from toolfs.errors import ErrorCode, FsError
from toolfs.integrations._mcp_contexts import ServerContexts, context_key, principal_name
from toolfs.redact import Redactor
from toolfs.render import ToolOutput
from toolfs.render.media import MediaView
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

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken, TokenVerifier
    from mcp.server.auth.settings import AuthSettings
    from starlette.middleware import Middleware


class CallerRoom(Protocol):
    """What a caller works on: its name and the tools it is offered
    (:class:`toolfs.server.rooms.Room`)."""

    @property
    def name(self) -> str: ...
    @property
    def tools(self) -> tuple[str, ...]: ...


class CallerRooms(Protocol):
    """A room per caller, and its contexts (:class:`toolfs.server.rooms.Rooms`, which
    this module never imports: the server package sits above it)."""

    def room(self, access: AccessToken | None) -> CallerRoom | None:
        """The room of the caller with ``access``, ``None`` for none."""

    def new_context(self, room: Any, access: AccessToken | None) -> AsyncWorkspace:
        """A new execution context in ``room`` for that caller."""

    async def execute(self, context: AsyncWorkspace, tool: str, arguments: Any) -> ToolOutput:
        """Run ``tool`` in ``context``."""


class HttpAuth(Protocol):
    """The SDK's auth settings and token verifier, and middleware to run after its
    authentication (:class:`toolfs.server.http.ResourceServer`)."""

    @property
    def settings(self) -> AuthSettings: ...
    @property
    def verifier(self) -> TokenVerifier: ...

    def middleware(self, path: str) -> list[Middleware]:
        """Middleware after the SDK's authentication (e.g. a 403 for no principal)."""

__all__ = ["BearerAuth", "SessionLimit", "ToolError", "ToolfsMCP", "check_token", "endpoint_url",
           "mcp_content", "mcp_tools", "output_schema"]

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
# A tool's other result shapes: read of an image or a PDF (toolfs.formats.media).
_OTHER_RESULT_MODELS: dict[str, tuple[type[BaseModel], ...]] = {"read": (MediaView,)}
_INSTRUCTIONS = ("File tools over one workspace: find files (glob, grep, ls), then read, "
                 "write and edit text files by paths relative to the workspace root.")


def mcp_content(output: ToolOutput, text: str | None = None) -> list[dict[str, Any]]:
    """A tool result's ``content`` in its wire form: the text, then each image of
    ``output.images`` as an ``ImageContent`` (base64 ``data`` and ``mimeType``).
    ``text`` replaces ``output.text`` (a masked error text)."""
    content: list[dict[str, Any]] = [
        {"type": "text", "text": output.text if text is None else text}]
    content += [{"type": "image", "data": image.base64(), "mimeType": image.mime_type}
                for image in output.images]
    return content


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
    results = (*_RESULT_MODELS[tool], *_OTHER_RESULT_MODELS.get(tool, ()))
    _, top = models_json_schema(
        [*((m, "serialization") for m in results), (ToolError, "serialization")],
        ref_template="#/$defs/{model}")
    refs = [{"$ref": f"#/$defs/{m.__name__}"} for m in results]
    result_ref: dict[str, Any] = refs[0] if len(refs) == 1 else {"anyOf": refs}
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
        contexts: the contexts of calls without a session (default: kept in this
            process); give one with a shared ledger to serve from several replicas.
        rooms: a room per principal, and the audit trail (:mod:`toolfs.server.rooms`):
            each caller gets its room's workspace and tools, and its contexts are per
            (room, principal, context key). Default: every caller works on ``workspace``.
    """

    def __init__(self, workspace: Workspace | AsyncWorkspace, *,
                 redact: Redactor | None = None, name: str = "toolfs",
                 tools: list[str] | tuple[str, ...] | None = None,
                 contexts: ServerContexts | None = None,
                 rooms: CallerRooms | None = None) -> None:
        self.workspace = (workspace if isinstance(workspace, AsyncWorkspace)
                          else AsyncWorkspace(workspace))
        self.contexts = contexts if contexts is not None else ServerContexts(self.workspace)
        self.redact = redact or Redactor()
        self.tools = mcp_tools(tools)
        self._enabled = frozenset(t.name for t in self.tools)
        self.rooms = rooms
        self._stream_context: AsyncWorkspace | None = None
        self._session_contexts: set[AsyncWorkspace] = set()
        self.server: Server[Any] = Server(
            name, version=__version__, instructions=_INSTRUCTIONS,
            on_list_tools=self._list_tools, on_call_tool=self._call_tool,
            get_tool_input_schema=_input_schema_of)
        self.server.add_request_handler("server/discover", types.RequestParams, self._discover)

    # -- handlers -----------------------------------------------------------------

    async def _list_tools(self, ctx: ServerRequestContext[Any],
                          params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        if self.rooms is not None:  # the caller's room's tools only
            offered = self._room(ctx).tools
            return types.ListToolsResult(tools=[t for t in self.tools if t.name in offered])
        return types.ListToolsResult(tools=self.tools)

    async def _call_tool(self, ctx: ServerRequestContext[Any],
                         params: types.CallToolRequestParams) -> types.CallToolResult:
        enabled = (self._enabled if self.rooms is None
                   else self._enabled.intersection(self._room(ctx).tools))
        if params.name not in enabled:
            # MCP reports an unknown tool as a protocol error; bad arguments are tool errors.
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name[:50]!r}")
        try:
            context = self._context(ctx)
        except FsError as err:  # a context key that is not one
            raise MCPError(types.INVALID_PARAMS, err.message) from None
        arguments = params.arguments or {}
        rooms = self.rooms
        output = await self.contexts.execute(context, (
            (lambda: context.execute(params.name, arguments)) if rooms is None
            else (lambda: rooms.execute(context, params.name, arguments))))
        return self._call_result(output)

    def _room(self, ctx: ServerRequestContext[Any]) -> CallerRoom:
        """The caller's room (the HTTP layer refused a token without one: 403)."""
        assert self.rooms is not None
        room = self.rooms.room(_access_token(ctx))
        if room is None:
            raise MCPError(types.INVALID_REQUEST, "no principal of this server matches the token")
        return room

    def _call_result(self, output: ToolOutput) -> types.CallToolResult:
        """``output`` as an MCP ``CallToolResult``, credentials masked in errors.

        Both parts hold no more than the workspace's output budget, and every string is
        valid Unicode (``ToolOutput`` escapes lone surrogates, e.g. of an undecodable file
        name, which would kill the transport's writer)."""
        text, structured = output.text, output.to_dict()
        if output.is_error:
            # Credentials are masked in error texts only: a result's content is the
            # file's bytes, and masking them there would corrupt the model's next edit.
            text, structured = self.redact.message(text), self.redact.data(structured)
        return types.CallToolResult.model_validate({
            "content": mcp_content(output, text), "structuredContent": structured,
            "isError": output.is_error})

    async def _discover(self, ctx: ServerRequestContext[Any],
                        params: types.RequestParams) -> types.DiscoverResult:
        # Both eras everywhere: without a session, a call's context is its principal and
        # the key the client names (toolfs.integrations._mcp_contexts).
        versions = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
        return types.DiscoverResult(
            supported_versions=list(versions), instructions=_INSTRUCTIONS,
            capabilities=self.server.get_capabilities(protocol_version=ctx.protocol_version))

    def _context(self, ctx: ServerRequestContext[Any]) -> AsyncWorkspace:
        """The execution context of this request: its MCP session's, the stream's, or
        the one its principal and context key name (:func:`context_key`)."""
        # The SDK keeps per-connection state and teardown on the Connection, which
        # ServerRequestContext does not expose yet (the SDK's own TODO L54).
        connection = ctx.session._connection
        if connection.session_id is not None:  # a streamable-HTTP session
            # Per (room, session): a session's token may map to another room later (its
            # groups changed), and never reaches the first room's observations then.
            room = None if self.rooms is None else self._room(ctx)
            key = _CONTEXT_KEY if room is None else f"{_CONTEXT_KEY}:{room.name}"
            context: AsyncWorkspace | None = connection.state.get(key)
            if context is None:
                context = self.contexts.open(
                    context_key(self._principal(ctx, room), session_id=connection.session_id),
                    make=self._maker(ctx, room))
                connection.state[key] = context
                self._session_contexts.add(context)
                connection.exit_stack.callback(self._end_session, context)
            return context
        if ctx.request is None:  # a stream (stdio, in process): exactly one client
            if self._stream_context is None:
                self._stream_context = (
                    self.workspace.new_context() if self.rooms is None
                    else self.rooms.new_context(self._room(ctx), None))
            return self._stream_context
        # No session (2026-07-28, or stateless HTTP): the principal and its key.
        room = None if self.rooms is None else self._room(ctx)
        return self.contexts.get(context_key(self._principal(ctx, room), ctx.request,
                                             meta=ctx.meta), make=self._maker(ctx, room))

    @staticmethod
    def _principal(ctx: ServerRequestContext[Any], room: CallerRoom | None) -> str:
        """Whose context: the token's principal, within its room (two people matched to
        one room by a group claim are still two principals)."""
        name = principal_name(ctx.request)
        return name if room is None else json.dumps([room.name, name])

    def _maker(self, ctx: ServerRequestContext[Any],
               room: CallerRoom | None) -> Callable[[], AsyncWorkspace] | None:
        """How a new context of this caller is made: in its room, with its audit
        identity (``None``: from the server's workspace)."""
        if self.rooms is None or room is None:
            return None
        rooms, access = self.rooms, _access_token(ctx)
        return lambda: rooms.new_context(room, access)

    def _end_session(self, context: AsyncWorkspace) -> None:
        """The session ended (closed, expired or dropped): release its context."""
        self._session_contexts.discard(context)
        context.close()

    @property
    def session_contexts(self) -> int:
        """How many HTTP sessions currently hold an execution context (a ledger)."""
        return len(self._session_contexts)

    # -- transports ---------------------------------------------------------------

    async def run_stdio(self, stdin: anyio.AsyncFile[str] | None = None,
                        stdout: anyio.AsyncFile[str] | None = None) -> None:
        """Serve one client over this process's stdin and stdout (or the text files
        given) until it disconnects."""
        from mcp.server.stdio import stdio_server

        try:
            async with stdio_server(stdin, stdout) as (read, write):
                try:
                    await self.run_stream(read, write)
                finally:
                    # While serving, fd 1 points at stderr (the transport's doing); what
                    # code printed meanwhile and Python still buffers goes there too, not
                    # onto the wire once the transport puts fd 1 back.
                    with contextlib.suppress(Exception):
                        sys.stdout.flush()
        finally:
            if self._stream_context is not None:
                self._stream_context.close()

    async def run_stream(self, read: Any, write: Any) -> None:
        """Serve one client over a transport's message streams (``read`` yields
        ``SessionMessage`` or the ``Exception`` of a line it could not read; ``write``
        takes ``SessionMessage``), with the stdio answers of :class:`_StreamAnswers`."""
        answers = _StreamAnswers(read, write)
        await self.server.run(answers, _NotedWrites(write, answers.answered),
                              self.server.create_initialization_options())

    def http_app(self, *, token: str | None = None, host: str = "127.0.0.1",
                 path: str = "/mcp", max_sessions: int = DEFAULT_MAX_SESSIONS,
                 auth: HttpAuth | None = None) -> ASGIApp:
        """The streamable-HTTP ASGI app, answering 401 to requests without ``token``.

        ``token`` must be at least :data:`MIN_TOKEN_LENGTH` characters (see
        :func:`check_token`). At most ``max_sessions`` MCP sessions are open at once
        (each holds a ledger and a content cache); past that, a request to open another
        is answered 503 with a JSON-RPC error saying so, until a session ends (the client
        closes it, or it is idle for 30 minutes).

        With ``auth`` (:func:`toolfs.server.http.resource_server`) instead of ``token``,
        the SDK's OAuth resource server checks every request (RFC 9728 metadata, 401 and
        403 answers), then ``auth.middleware`` (with principals, a token that matches
        none is answered 403: :class:`toolfs.server.http.PrincipalGate`).
        """
        if auth is None:
            check_token(token or "")
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, not {max_sessions}")
        if auth is None:
            app = self.server.streamable_http_app(streamable_http_path=path, host=host,
                                                  max_sessions=max_sessions)
            return BearerAuth(SessionLimit(app, max_sessions), token or "")
        if token is not None:
            raise ValueError("give token or auth, not both")
        app = self.server.streamable_http_app(
            streamable_http_path=path, host=host, max_sessions=max_sessions,
            auth=auth.settings, token_verifier=auth.verifier)
        # Innermost of the app's middleware, after the SDK's authentication (which sets
        # scope["user"]); Starlette builds the stack on the first request.
        app.user_middleware.extend(auth.middleware(path))
        return SessionLimit(app, max_sessions)

    def serve_http(self, *, token: str | None = None, host: str = "127.0.0.1",
                   port: int = DEFAULT_PORT, max_sessions: int = DEFAULT_MAX_SESSIONS,
                   ready: Callable[[str], None] | None = None,
                   auth: HttpAuth | None = None) -> None:
        """Serve streamable HTTP until interrupted; ``port=0`` picks a free port.

        ``ready`` receives the endpoint URL once the socket is listening. ``token``,
        ``auth`` and ``max_sessions`` are checked (see :meth:`http_app`) before anything
        is bound.
        """
        import uvicorn

        app = self.http_app(token=token, host=host, max_sessions=max_sessions, auth=auth)
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


_END_OF_INPUT_WAIT = 300.0
"""How long the end of a stdio client's input waits for the answers still owed: longer
than a tool call takes (its requests are bounded), short enough that a request the SDK
never answers cannot keep the server alive."""


class _StreamAnswers:
    """The read side of a stream transport (stdio), as the server loop reads it, with two
    answers the SDK's stdio transport leaves out:

    * a line it could not read (not JSON, e.g. a lone surrogate escape, or JSON that is
      no JSON-RPC message) comes as an ``Exception``, which the SDK only logs: the client
      would wait forever. It is answered here as JSON-RPC says and the HTTP transport
      does: ``-32700`` (parse error) or ``-32600`` (invalid request), id null.
    * at the end of input the SDK cancels the requests in flight and answers them
      "Connection closed", while a tool's worker thread may still complete a write: a
      client told the call failed would retry a change that landed. The end is held back
      here until every request read has been answered (or cancelled by the client), so
      each gets its real answer; at most :data:`_END_OF_INPUT_WAIT` seconds, after which
      the SDK answers what is left as before.
    """

    def __init__(self, read: Any, write: Any) -> None:
        self._read = read
        self._write = write
        self._pending: collections.Counter[str] = collections.Counter()
        """Requests read and not answered yet, by id as the SDK correlates them (``"7"``
        is ``7``)."""
        self._answered = anyio.Event()

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item (the SDK's streams propagate it)."""
        return getattr(self._read, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            try:
                item: SessionMessage | Exception = await self._read.receive()
            except anyio.EndOfStream:
                with anyio.move_on_after(_END_OF_INPUT_WAIT):
                    while self._pending:
                        await self._answered.wait()
                        self._answered = anyio.Event()
                raise
            if isinstance(item, Exception):
                await self._write.send(SessionMessage(_unreadable(item)))
                continue
            message = item.message
            if isinstance(message, types.JSONRPCRequest):
                self._pending[str(message.id)] += 1
            elif (isinstance(message, types.JSONRPCNotification)
                  and message.method == "notifications/cancelled"):
                # A cancelled request is never answered: stop waiting for it.
                cancelled = (message.params or {}).get("requestId")
                if isinstance(cancelled, int | str):
                    self._settle(cancelled)
            return item

    def answered(self, message: Any) -> None:
        """Note an answer written to the client."""
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) \
                and message.id is not None:
            self._settle(message.id)

    def _settle(self, request_id: int | str) -> None:
        key = str(request_id)
        if self._pending[key] > 0:
            self._pending[key] -= 1
            if self._pending[key] == 0:
                del self._pending[key]
            self._answered.set()

    async def aclose(self) -> None:
        await self._read.aclose()

    def __aiter__(self) -> _StreamAnswers:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _StreamAnswers:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()


class _NotedWrites:
    """The write side of a stream transport, telling ``answered`` each message written."""

    def __init__(self, write: Any, answered: Callable[[Any], None]) -> None:
        self._write = write
        self._answered = answered

    async def send(self, item: SessionMessage, /) -> None:
        await self._write.send(item)
        self._answered(item.message)

    async def aclose(self) -> None:
        await self._write.aclose()

    async def __aenter__(self) -> _NotedWrites:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()


def _unreadable(exc: Exception) -> types.JSONRPCError:
    """The JSON-RPC answer to a line the transport could not read as a message."""
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    if errors and errors[0]["type"] == "json_invalid":
        # pydantic's message gives the position, never the (maybe huge) line itself.
        error = types.ErrorData(code=types.PARSE_ERROR, message=f"Parse error: {errors[0]['msg']}")
    else:
        error = types.ErrorData(code=types.INVALID_REQUEST,
                                message="Invalid Request: not a JSON-RPC 2.0 message")
    return types.JSONRPCError(jsonrpc="2.0", id=None, error=error)


def _access_token(ctx: ServerRequestContext[Any]) -> AccessToken | None:
    """The token the SDK's authentication middleware verified for this request."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser

    # The request's own scope: the session's task was started by its first request, so
    # a context variable would still hold that request's token.
    user = getattr(ctx.request, "scope", {}).get("user") if ctx.request is not None else None
    return user.access_token if isinstance(user, AuthenticatedUser) else None


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
