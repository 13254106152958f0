"""The HTTP side of ``toolfs serve`` with OAuth or principals: the SDK's auth settings and
token verifier, and the 403 for a token that matches no principal.

:func:`resource_server` assembles :class:`ResourceServer` (the SDK's
:class:`~mcp.server.auth.settings.AuthSettings` and a token verifier from
:mod:`toolfs.server.auth`), which
:meth:`toolfs.integrations.mcp_server.ToolfsMCP.http_app` hands to the SDK's
``Server.streamable_http_app(auth=..., token_verifier=...)``: the SDK then serves the
RFC 9728 metadata, answers 401 with ``WWW-Authenticate: Bearer error="invalid_token",
..., resource_metadata="..."`` and 403 ``insufficient_scope`` for ``--required-scope``.
:class:`PrincipalGate` sits right after the SDK's authentication middleware and answers
403 ``access_denied`` to an authenticated token that no principal matches.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.auth.settings import AuthSettings
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Receive, Scope, Send

from toolfs.server.auth import (
    AuthConfigError,
    ChainVerifier,
    IntrospectionVerifier,
    JwtVerifier,
    StaticTokenVerifier,
)
from toolfs.server.rooms import Rooms

__all__ = ["PrincipalGate", "ResourceServer", "resource_server"]


@dataclass
class ResourceServer:
    """The SDK's auth settings and the token verifier of one server, and the rooms whose
    principals a token must match (``None``: any valid token)."""

    settings: AuthSettings
    verifier: TokenVerifier
    rooms: Rooms | None = None

    def middleware(self, path: str) -> list[Middleware]:
        """ASGI middleware to run after the SDK's authentication: the
        :class:`PrincipalGate` when there are principals."""
        if self.rooms is None or self.rooms.principals is None:
            return []
        return [Middleware(PrincipalGate, rooms=self.rooms, path=path,
                           resource_metadata_url=self.resource_metadata_url)]

    @property
    def resource_metadata_url(self) -> str | None:
        """Where the RFC 9728 metadata is served (``None`` without ``--resource``)."""
        url = self.settings.resource_server_url
        return None if url is None else str(build_resource_metadata_url(url))

    async def prepare(self) -> None:
        """Fetch what the verifiers need ahead (the JWKS), so a misconfiguration is said
        at start; raises :class:`~toolfs.server.auth.AuthConfigError`."""
        prepare = getattr(self.verifier, "prepare", None)
        if prepare is not None:
            await prepare()


def resource_server(*, resource: str | None, issuer: str | None = None,
                    jwks_url: str | None = None, introspection_url: str | None = None,
                    audience: str | None = None, required_scopes: Sequence[str] = (),
                    static_hashes: dict[str, str] | None = None,
                    static_scopes: Mapping[str, Sequence[str]] | None = None,
                    introspection_client_id: str | None = None,
                    introspection_client_secret: str | None = None,
                    rooms: Rooms | None = None) -> ResourceServer:
    """Settings and verifier for OAuth (``issuer`` and ``resource``; JWTs against the
    JWKS, or opaque tokens through ``introspection_url``) and/or static tokens known by
    their SHA-256 (``static_hashes``: ``{hex: principal name}``, each carrying
    ``static_scopes[name]``); with ``rooms`` of
    principals, a valid token that matches none is answered 403."""
    verifiers: list[TokenVerifier] = []
    if static_hashes:
        verifiers.append(StaticTokenVerifier(static_hashes, resource, scopes=static_scopes))
    if issuer is not None:
        if resource is None:
            raise AuthConfigError("--auth-issuer needs --resource (this server's URL, the "
                                  "audience its tokens are issued for)")
        if jwks_url is not None and introspection_url is not None:
            raise AuthConfigError("give --jwks-url or --introspection-url, not both")
        if introspection_url is not None:
            verifiers.append(IntrospectionVerifier(
                issuer, resource, introspection_url, audience=audience,
                client_id=introspection_client_id,
                client_secret=introspection_client_secret))
        else:
            verifiers.append(JwtVerifier(issuer, resource, jwks_url=jwks_url,
                                         audience=audience))
    elif jwks_url is not None or introspection_url is not None:
        raise AuthConfigError("--jwks-url and --introspection-url need --auth-issuer")
    if not verifiers:
        raise AuthConfigError("no way to check tokens: give --auth-issuer, or principals "
                              "matched by token_sha256")
    with warnings.catch_warnings():
        # validate_token_resource is given; the SDK warns only when it is left unset.
        warnings.simplefilter("ignore")
        # Strings, not AnyHttpUrl: the settings model keeps a path-less URL as given (no
        # trailing slash), and an issuer is compared as an exact string (RFC 8414).
        settings = AuthSettings.model_validate({
            # Without an issuer there is no OAuth metadata to serve: the SDK still wants
            # a URL here, which is then never shown.
            "issuer_url": issuer or resource or "http://127.0.0.1",
            "resource_server_url": resource if issuer is not None else None,
            "required_scopes": list(required_scopes) or None,
            "validate_token_resource": issuer is not None and resource is not None})
    verifier = verifiers[0] if len(verifiers) == 1 else ChainVerifier(verifiers)
    return ResourceServer(settings, verifier, rooms)


class PrincipalGate:
    """ASGI middleware after the SDK's authentication: a request to the MCP endpoint
    whose token matches no principal is answered 403 ``access_denied`` (never a default
    room). Unauthenticated requests pass on to the SDK, which answers them 401."""

    def __init__(self, app: ASGIApp, *, rooms: Rooms, path: str = "/mcp",
                 resource_metadata_url: str | None = None) -> None:
        self.app = app
        self.rooms = rooms
        self.path = path.rstrip("/") or "/"
        self.resource_metadata_url = resource_metadata_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user") if scope["type"] == "http" else None
        on_endpoint = scope.get("path", "").rstrip("/") == self.path
        if (on_endpoint and isinstance(user, AuthenticatedUser)
                and self.rooms.room(user.access_token) is None):
            await self._refuse(send)
            return
        await self.app(scope, receive, send)

    async def _refuse(self, send: Send) -> None:
        description = ("no principal of this server matches the token (sub, client_id, "
                       "groups or static token); ask the operator to add one")
        # Not insufficient_scope: a client would re-authorize for more scopes, which
        # cannot help.
        parts = ['error="access_denied"', f'error_description="{description}"']
        if self.resource_metadata_url:
            parts.append(f'resource_metadata="{self.resource_metadata_url}"')
        body = json.dumps({"error": "access_denied", "error_description": description}).encode()
        headers: list[tuple[bytes, bytes]] = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", f"Bearer {', '.join(parts)}".encode())]
        await send({"type": "http.response.start", "status": 403, "headers": headers})
        await send({"type": "http.response.body", "body": body})
