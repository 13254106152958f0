"""Which calls of a toolfs server share an execution context (a ledger of observed files).

A context is identified by **(principal, context key)**:

* the principal is who the request is authenticated as (:func:`principal_name`: what an
  auth layer put on the request, else ``anonymous``);
* the context key is the MCP session where the protocol has one (handshake-era
  streamable HTTP); otherwise the client's ``toolfs-context`` request header, or
  ``_meta["toolfs/context"]`` of the call; otherwise the principal alone.

So one principal's agents are separate contexts as soon as each names itself, and two
principals never share one, whatever key they send. The 2026-07-28 protocol (no sessions)
is served natively this way.

:class:`ServerContexts` makes and keeps the contexts of one server: in process (each
keeps its own ledger; behind several replicas, route a principal to one of them), or
with a :class:`~toolfs.policy.shared_ledger.LedgerStore`, whose ledgers live in the object
store so that any replica serves any call of a context.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from toolfs.errors import FsError, fs_error
from toolfs.integrations._contexts import _forwarder
from toolfs.policy.shared_ledger import LedgerStore, SharedLedger
from toolfs.render import ToolOutput
from toolfs.workspace import AsyncWorkspace

__all__ = ["ANONYMOUS", "CONTEXT_HEADER", "CONTEXT_META", "MAX_KEY_CHARS", "PRINCIPAL_SCOPE_KEY",
           "ContextKey", "PrincipalResolver", "ServerContexts", "context_key", "principal_name"]

CONTEXT_HEADER = "toolfs-context"
"""The request header a client names its context with (one agent of a principal)."""
CONTEXT_META = "toolfs/context"
"""The ``_meta`` key of a call that does the same, for clients that cannot set headers."""
ANONYMOUS = "anonymous"
"""The principal of a request no auth layer named (the static ``--token`` mode)."""
PRINCIPAL_SCOPE_KEY = "toolfs.principal"
"""Where an auth layer puts the principal on the ASGI scope: a name (``str``) or an object
with a ``name`` attribute."""
MAX_KEY_CHARS = 200


KeyKind = Literal["session", "client", "principal", "stream"]

PrincipalResolver = Callable[[Any], str]
"""Maps a request (a Starlette ``Request``, or ``None`` on a stream) to a principal name."""


@dataclass(frozen=True)
class ContextKey:
    """One execution context of a server: a principal and what distinguishes its agents."""

    principal: str
    kind: KeyKind
    value: str

    @property
    def id(self) -> str:
        """A stable, path-safe id of this key (the context id on every replica, and the
        shared ledger's directory): a digest, so the key itself is never stored."""
        raw = json.dumps([self.principal, self.kind, self.value], ensure_ascii=False)
        return hashlib.sha256(raw.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def principal_name(request: Any | None) -> str:
    """The principal of ``request``: the auth layer's (``scope["toolfs.principal"]``, or
    the MCP SDK's authenticated user: ``iss``/``sub``/``client_id`` of its access token),
    else :data:`ANONYMOUS`."""
    scope: Mapping[str, Any] = getattr(request, "scope", None) or {}
    given = scope.get(PRINCIPAL_SCOPE_KEY)
    if isinstance(given, str) and given:
        return given
    name = getattr(given, "name", None)
    if isinstance(name, str) and name:
        return name
    token = getattr(scope.get("user"), "access_token", None)
    if token is not None:
        claims = getattr(token, "claims", None) or {}
        parts = (claims.get("iss"), getattr(token, "subject", None),
                 getattr(token, "client_id", None))
        return json.dumps([p if isinstance(p, str) else None for p in parts])
    return ANONYMOUS


def context_key(principal: str, request: Any | None = None, *, session_id: str | None = None,
                meta: Mapping[str, Any] | None = None) -> ContextKey:
    """The context of a request by ``principal``: its MCP session (``session_id``), else
    the ``toolfs-context`` header of ``request``, else ``meta["toolfs/context"]``, else
    the principal alone. A key that is not a string of 1 to :data:`MAX_KEY_CHARS`
    printable characters is refused (``invalid_arguments``), never silently shared."""
    if session_id is not None:
        return ContextKey(principal, "session", session_id)
    headers = getattr(request, "headers", None)
    named: Any = headers.get(CONTEXT_HEADER) if headers is not None else None
    source = f"the {CONTEXT_HEADER} header"
    if named is None:
        if meta is None or CONTEXT_META not in meta:
            return ContextKey(principal, "principal", "")
        named, source = meta[CONTEXT_META], f'_meta["{CONTEXT_META}"]'
    if not isinstance(named, str) or not 0 < len(named) <= MAX_KEY_CHARS \
            or not named.isprintable():
        raise fs_error("invalid_arguments",
                       f"{source} must be 1 to {MAX_KEY_CHARS} printable characters naming "
                       "one agent (e.g. a UUID)")
    return ContextKey(principal, "client", named)


class ServerContexts:
    """The execution contexts of one server, derived from ``workspace``.

    Each context sends its events to ``workspace``'s subscribers (an audit log sees every
    context's changes). With ``ledger``, a context's observations are kept in that store
    (:class:`~toolfs.policy.shared_ledger.SharedLedger`) under its :attr:`ContextKey.id`;
    without, in this process. :meth:`get` keeps at most ``limit`` contexts, least
    recently used dropped first: with a shared ledger nothing is lost by that (the next
    call finds the observations in the store); in process, a dropped context's agent
    must read again before it changes a file (refused ``not_observed``, never written
    blind). Each context caches at most ``cache_bytes`` of observed content.
    """

    def __init__(self, workspace: AsyncWorkspace, *, ledger: LedgerStore | None = None,
                 limit: int = 256, cache_bytes: int = 1024 * 1024) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        self.workspace = workspace
        self.ledger = ledger
        self.limit = limit
        self.cache_bytes = min(cache_bytes, workspace.sync.fs.ledger.cache_bytes)
        self._kept: OrderedDict[ContextKey, AsyncWorkspace] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: ContextKey, *,
            make: Callable[[], AsyncWorkspace] | None = None) -> AsyncWorkspace:
        """The context of ``key``, made on first use (by ``make``, see :meth:`open`) and
        kept (up to ``limit``)."""
        with self._lock:
            context = self._kept.get(key)
            if context is not None:
                self._kept.move_to_end(key)
                return context
            context = self.open(key, cache_bytes=self.cache_bytes, make=make)
            self._kept[key] = context
            while len(self._kept) > self.limit:
                self._kept.popitem(last=False)
            return context

    def open(self, key: ContextKey, *, cache_bytes: int | None = None,
             make: Callable[[], AsyncWorkspace] | None = None) -> AsyncWorkspace:
        """A new context for ``key`` that the caller owns (an MCP session's, closed with
        it), caching up to ``cache_bytes`` of content (default: the workspace's); not
        kept here. ``make`` builds it instead of this server's workspace (a principal's
        room, with its audit subscriber); its ledger is still the shared one, if any."""
        if make is not None:
            context = make()
            if cache_bytes is not None:  # the bound holds for contexts made elsewhere too
                ledger = context.sync.fs.ledger
                ledger.cache_bytes = min(cache_bytes, ledger.cache_bytes)
        else:
            overrides: dict[str, Any] = ({} if cache_bytes is None
                                         else {"cache_bytes": cache_bytes})
            context = self.workspace.new_context(
                context_id=key.id, subscribers=[_forwarder(self.workspace.sync)], **overrides)
        if self.ledger is not None:
            # The policy reads and writes observations through this attribute only.
            context.sync.fs.ledger = self.ledger.ledger(
                key.id, cache_bytes=context.sync.fs.ledger.cache_bytes)
        return context

    @staticmethod
    async def execute(context: AsyncWorkspace,
                      call: Callable[[], Awaitable[ToolOutput]]) -> ToolOutput:
        """``call()``, a tool call of ``context``. With a shared ledger that trusts this
        process's copies (sticky routing), a change refused ``stale`` on a copy that the
        store's entry has since replaced (the context was served by another replica
        meanwhile) is made once more on the store's entry: refused again if the file
        really changed since the context saw it, never let through otherwise. Parallel
        calls of one context share what :meth:`SharedLedger.begin` tracks: one of them
        may be made again for nothing (refused again) or not at all (a ``stale`` its
        agent answers by reading), as any refusal."""
        ledger = context.sync.fs.ledger
        if not isinstance(ledger, SharedLedger) or not ledger.trust_local:
            return await call()
        ledger.begin()
        output = await call()
        if output.error is None or output.error.code != "stale":
            return output
        try:
            again = await asyncio.to_thread(ledger.outdated)
        except FsError:
            return output  # the refusal stands; the ledger's failure shows next call
        return await call() if again else output

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)
