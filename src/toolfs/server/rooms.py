"""Rooms: the workspace, tools and audit identity each authenticated caller gets.

:class:`Rooms` is what :class:`toolfs.integrations.mcp_server.ToolfsMCP` asks, per
request, for the caller's room (from the SDK's :class:`~mcp.server.auth.provider.AccessToken`)
and, per (room, context key), for a new execution context:

* with a principals file, each principal's workspace is built once, at start, over the
  server's filesystem (its ``root`` under the server's root, its deny globs on top of the
  server's, read-only unless it has ``files:write``, its ``on_stale``), and reused by
  every context of that principal; a token no principal matches has no room (the HTTP
  layer answers 403 before any MCP message is read);
* without one, every caller shares the server's workspace (one room, ``"*"``);
* with an audit sink, every context gets an :class:`~toolfs.server.audit.AuditSubscriber`
  naming the caller's ``iss``, ``sub`` and ``client_id``.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcp.server.auth.provider import AccessToken

from toolfs.errors import FsError
from toolfs.policy.rules import OnStale
from toolfs.render import ToolOutput
from toolfs.server.audit import AuditSink, AuditSubscriber, Identity, calling_tool
from toolfs.server.principals import Principal, Principals
from toolfs.workspace import AsyncWorkspace, Workspace

__all__ = ["DEFAULT_ROOM", "Room", "Rooms", "WorkspaceFactory"]

DEFAULT_ROOM = "*"
_DISCOVERY = frozenset({"glob", "grep", "ls"})

WorkspaceFactory = Callable[[Principal], Workspace]
"""Builds a principal's workspace (see :meth:`Rooms.from_workspace`)."""


@dataclass(frozen=True)
class Room:
    """What one principal (or, without principals, every caller) works on."""

    name: str
    workspace: AsyncWorkspace
    tools: tuple[str, ...]
    """The tools offered, in the server's order."""
    root: str = ""
    """The room's root relative to the server's root (for audit paths)."""
    principal: Principal | None = field(default=None, compare=False)


class Rooms:
    """The rooms of a server.

    Args:
        default: the server's workspace (the room of every caller without principals,
            and the worker threads every room shares).
        tools: the tools the server offers.
        principals: the principals file, or ``None`` for one room.
        factory: builds a principal's :class:`Workspace` (required with ``principals``).
        audit: where audit lines go (``None``: no trail).
        audit_reads: record reads too.
    """

    def __init__(self, default: AsyncWorkspace, tools: tuple[str, ...], *,
                 principals: Principals | None = None, factory: WorkspaceFactory | None = None,
                 audit: AuditSink | None = None, audit_reads: bool = False) -> None:
        self.default = default
        self.tools = tools
        self.principals = principals
        self.audit = audit
        self.audit_reads = audit_reads
        self._rooms: dict[str, Room] = {}
        # Each context's audit subscriber, for the discovery calls the policy emits no
        # event for (weak: a context ends with its session).
        self._audit_of: weakref.WeakKeyDictionary[AsyncWorkspace, AuditSubscriber] = (
            weakref.WeakKeyDictionary())
        if principals is None:
            self._rooms[DEFAULT_ROOM] = Room(DEFAULT_ROOM, default, tools)
        else:
            if factory is None:
                raise ValueError("rooms per principal need a workspace factory")
            for p in principals.principals:
                try:
                    built = factory(p)
                except FsError as err:  # e.g. a local root that is not a directory
                    raise _naming(err, p.name, p.root) from err.__cause__
                ws = AsyncWorkspace(built, _pool=default._pool)
                self._rooms[p.name] = Room(p.name, ws, p.tools(tools), root=p.root, principal=p)

    @staticmethod
    def factory_of(url: Any, storage_options: dict[str, Any] | None = None, *,
                   root: str | None = None, deny: tuple[str, ...] = (), read_only: bool = False,
                   on_stale: OnStale = "refuse", **options: Any) -> WorkspaceFactory:
        """A :data:`WorkspaceFactory` over ``url`` (a URL or filesystem) and ``root``:
        each principal's root under it, its deny globs after ``deny``, read-only when
        ``read_only`` or the principal lacks ``files:write``, its ``on_stale`` or else
        ``on_stale``; ``options`` go to every :class:`Workspace`."""
        from toolfs.policy.rules import Policy

        # Only the end is trimmed: a filesystem's root may be an absolute local path.
        base = (root or "").rstrip("/")

        def build(p: Principal) -> Workspace:
            sub = f"{base}/{p.root}" if base and p.root else base or p.root
            return Workspace(url, storage_options, root=sub,
                             read_only=read_only or not p.writable,
                             deny=(*deny, *p.deny), policy=Policy(on_stale=p.on_stale or on_stale),
                             **options)

        return build

    def room(self, access: AccessToken | None) -> Room | None:
        """The room of the caller with ``access`` (``None``: an unauthenticated stream,
        which gets the default room only when there are no principals)."""
        if self.principals is None:
            return self._rooms[DEFAULT_ROOM]
        if access is None:
            return None
        p = self.principals.match(
            access.claims or {}, client_id=access.client_id or None, subject=access.subject,
            token_sha256=hashlib.sha256(access.token.encode()).hexdigest())
        return None if p is None else self._rooms[p.name]

    def check_roots(self) -> None:
        """Check every principal's root now (:meth:`Workspace.check_root`: a missing
        directory or bucket), raising :class:`~toolfs.errors.FsError` naming the
        principal; servers call it once at start."""
        for room in self._rooms.values():
            if room.principal is None:
                continue
            try:
                room.workspace.sync.check_root()
            except FsError as err:
                raise _naming(err, room.name, room.root) from err.__cause__

    def room_named(self, name: str) -> Room:
        return self._rooms[name]

    def new_context(self, room: Room, access: AccessToken | None) -> AsyncWorkspace:
        """A new execution context in ``room`` for the caller with ``access``."""
        if self.audit is None:
            return room.workspace.new_context()
        claims = (access.claims or {}) if access is not None else {}
        static = "toolfs/static" in claims
        iss = claims.get("iss")
        identity = Identity(
            None if room.name == DEFAULT_ROOM else room.name,
            iss=None if static or iss is None else str(iss),
            sub=None if access is None else access.subject,
            client_id=None if access is None or static else access.client_id or None,
            root=room.root)
        subscriber = AuditSubscriber(self.audit, identity, reads=self.audit_reads)
        context = room.workspace.new_context()
        context.sync.subscribe(subscriber)
        self._audit_of[context] = subscriber
        return context

    async def execute(self, context: AsyncWorkspace, tool: str, arguments: Any) -> ToolOutput:
        """``context.execute(tool, arguments)``, the tool named to the audit trail (and,
        with ``audit_reads``, a discovery call that answered recorded as ``searched``)."""
        def run() -> ToolOutput:
            with calling_tool(tool):
                return context.sync.execute(tool, arguments)
        try:
            output = await context.call(run)
        except Exception as exc:
            return context.failed_output(exc)
        if tool in _DISCOVERY and self.audit_reads and not output.is_error:
            subscriber = self._audit_of.get(context)
            if subscriber is not None:
                path = arguments.get("path") if isinstance(arguments, dict) else None
                subscriber.searched(tool, path if isinstance(path, str) else "",
                                    context.context_id)
        return output

    def close(self) -> None:
        """Close the audit sink (the rooms' workspaces share the default's threads)."""
        if self.audit is not None:
            self.audit.close()


def _naming(err: FsError, name: str, root: str) -> FsError:
    """``err`` with the principal whose root it is about named first."""
    err.message = f"principal {name!r} (root {root or '.'!r}): {err.message}"
    return err
