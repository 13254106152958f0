"""``toolfs serve`` with OAuth, principals and audit: what the command line asks for, built.

:func:`setup` is the :data:`toolfs.integrations.cli.ServerSetup` the ``toolfs`` entry point
(``toolfs.__main__``) hands to the command line: it reads the principals file, opens the
audit sink, builds each principal's workspace and the resource server (fetching the
issuer's keys, so a wrong issuer is said at start). A mistake is a
:class:`~toolfs.integrations.cli.UsageError` (one line, exit 2).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from toolfs.integrations.cli import INTROSPECTION_SECRET_ENV, UsageError
from toolfs.schemas import tool_definitions
from toolfs.server.audit import open_audit
from toolfs.server.auth import AuthConfigError, sha256_hex
from toolfs.server.http import ResourceServer, resource_server
from toolfs.server.principals import PrincipalsError, load_principals
from toolfs.server.rooms import Rooms
from toolfs.workspace import AsyncWorkspace, Workspace

__all__ = ["setup"]


def setup(args: argparse.Namespace, workspace: Workspace, options: dict[str, Any],
          token: str | None) -> tuple[Rooms | None, ResourceServer | None]:
    """The rooms (principals, audit) and the resource server of ``toolfs serve``, or
    ``None`` for what is not asked for (see the module docstring)."""

    principals = None
    if args.principals is not None:
        try:
            principals = load_principals(args.principals, groups_claim=args.groups_claim)
        except PrincipalsError as exc:
            raise UsageError(f"--principals {exc}") from None
        by_claims = [p.name for p in principals.principals if p.match.token_sha256 is None]
        if by_claims and args.auth_issuer is None:
            raise UsageError(f"--principals: principal {by_claims[0]!r} is matched by token "
                             "claims, which needs --auth-issuer")
    auth = None
    if args.transport == "http" and (args.auth_issuer is not None or principals is not None):
        hashes = principals.static_hashes() if principals is not None else {}
        scopes = principals.scopes() if principals is not None else {}
        if token is not None and principals is None:  # --token beside OAuth: one room
            hashes = {sha256_hex(token): "*"}
            scopes = {"*": ("files:read",) if args.read_only else ("files:read",
                                                                    "files:write")}
        try:
            auth = resource_server(
                resource=args.resource, issuer=args.auth_issuer, jwks_url=args.jwks_url,
                introspection_url=args.introspection_url, audience=args.audience,
                required_scopes=tuple(args.required_scope), static_hashes=hashes,
                static_scopes=scopes,
                introspection_client_id=args.introspection_client_id,
                introspection_client_secret=os.environ.get(INTROSPECTION_SECRET_ENV))
            asyncio.run(auth.prepare())  # a wrong issuer or JWKS URL is said now
        except AuthConfigError as exc:
            raise UsageError(str(exc)) from None
    if principals is None and args.audit is None:
        return None, auth

    sink = None
    if args.audit is not None:
        same_store = args.audit.partition("://")[0] == args.url.partition("://")[0]
        sink = open_audit(args.audit, options if same_store else None)
    factory = None if principals is None else Rooms.factory_of(
        args.url, options or None, root=args.root, deny=tuple(args.deny),
        read_only=args.read_only, on_stale=args.on_stale,
        trust_conditions=args.trust_conditions, timeout=args.timeout)
    tools = args.tools or tuple(t["name"] for t in _default_tools())
    try:
        rooms = Rooms(AsyncWorkspace(workspace), tools, principals=principals,
                      factory=factory, audit=sink, audit_reads=args.audit_reads)
        rooms.check_roots()  # a principal's missing directory or bucket is said now
    except Exception:
        if sink is not None:
            sink.close()
        raise
    if auth is not None:
        auth.rooms = rooms  # its gate answers 403 to a token of no principal
    return rooms, auth


def _default_tools() -> list[dict[str, Any]]:
    return tool_definitions("mcp", None)
