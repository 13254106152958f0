"""A small real OAuth 2.1 authorization server for tests and benchmarks.

:class:`OAuthIssuer` serves, over HTTP on a free local port (uvicorn in a thread):

* RFC 8414 metadata (``/.well-known/oauth-authorization-server``, and the same document
  at ``/.well-known/openid-configuration``);
* a JWKS (``/jwks``) of RSA keys, rotatable (:meth:`OAuthIssuer.rotate_key`);
* RFC 7591 dynamic client registration (``/register``);
* the authorization-code grant with PKCE (S256 only; ``/authorize`` signs in
  :attr:`OAuthIssuer.login` without a page and redirects straight back with the code),
  the client-credentials grant and refresh tokens (``/token``), each access token a JWT
  whose ``aud`` is the RFC 8707 ``resource`` asked for, or an opaque token when
  :attr:`OAuthIssuer.opaque` is set;
* RFC 7662 introspection (``/introspect``).

:meth:`OAuthIssuer.mint` signs a token directly, with any claims (expired, for another
audience, another issuer...), for tests of what a resource server refuses.

Needs the ``server`` extra's PyJWT and ``cryptography`` (and starlette and uvicorn, which
the MCP SDK brings).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import socket
import threading
import time
import uuid
from collections import Counter
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlencode

import jwt
import uvicorn
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

__all__ = ["OAuthIssuer"]

_HOST = "127.0.0.1"


class _Key:
    def __init__(self) -> None:
        self.kid = uuid.uuid4().hex[:12]
        self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def jwk(self) -> dict[str, Any]:
        public: dict[str, Any] = RSAAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        return {**public, "kid": self.kid, "use": "sig", "alg": "RS256"}


class OAuthIssuer:
    """An authorization server on ``http://127.0.0.1:<port>`` (see the module docstring).

    Args:
        login: the user the authorization endpoint signs in (its ``sub``).
        groups: each user's (or client's) ``groups`` claim.
        ttl: access tokens' lifetime in seconds.
        opaque: issue opaque tokens (checked by introspection) instead of JWTs.
    """

    def __init__(self, *, login: str = "alice", groups: dict[str, list[str]] | None = None,
                 ttl: int = 3600, opaque: bool = False) -> None:
        self.login = login
        self.groups = dict(groups or {})
        self.ttl = ttl
        self.opaque = opaque
        self.keys = [_Key()]
        self.published: list[_Key] = list(self.keys)
        self.clients: dict[str, dict[str, Any]] = {}
        self._codes: dict[str, dict[str, Any]] = {}
        self._refresh: dict[str, dict[str, Any]] = {}
        self._opaque: dict[str, dict[str, Any]] = {}
        self.requests: Counter[str] = Counter()
        """Requests served, by path."""
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- lifecycle ----------------------------------------------------------------

    @property
    def url(self) -> str:
        """The issuer identifier (``iss``) and base URL."""
        return f"http://{_HOST}:{self.port}"

    def start(self) -> Self:
        sock = socket.create_server((_HOST, 0))
        self.port = sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(self.app(), log_config=None,
                                                     log_level="warning", lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        name="oauth-issuer", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the test OAuth issuer did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- tokens -------------------------------------------------------------------

    def rotate_key(self, *, publish: bool = True) -> str:
        """Sign with a new key from now on (the old ones stay published); returns its
        ``kid``. ``publish=False`` keeps it out of the JWKS until :meth:`publish`."""
        key = _Key()
        self.keys.append(key)
        if publish:
            self.published.append(key)
        return key.kid

    def publish(self) -> None:
        """Put every key in the JWKS."""
        self.published = list(self.keys)

    def jwks(self) -> dict[str, Any]:
        return {"keys": [k.jwk() for k in self.published]}

    def register_client(self, *, client_id: str | None = None, secret: str | None = None,
                        grant_types: tuple[str, ...] = ("client_credentials",),
                        redirect_uris: tuple[str, ...] = (), scope: str = "") -> dict[str, Any]:
        """Register a client ahead (as an operator would); returns its record."""
        client = {
            "client_id": client_id or f"client-{uuid.uuid4().hex[:8]}",
            "client_secret": secret if secret is not None else secrets.token_urlsafe(24),
            "grant_types": list(grant_types), "redirect_uris": list(redirect_uris),
            "token_endpoint_auth_method": "client_secret_basic", "scope": scope,
            "client_id_issued_at": int(time.time()),
        }
        self.clients[str(client["client_id"])] = client
        return client

    def claims(self, *, sub: str, aud: str | list[str] | None, client_id: str,
               scope: str = "", ttl: int | None = None) -> dict[str, Any]:
        """The claims of an access token this issuer would issue."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.url, "sub": sub, "client_id": client_id, "scope": scope,
            "iat": now, "nbf": now, "exp": now + (self.ttl if ttl is None else ttl),
            "jti": uuid.uuid4().hex}
        if aud is not None:
            claims["aud"] = aud
        if sub in self.groups:
            claims["groups"] = list(self.groups[sub])
        return claims

    def mint(self, claims: dict[str, Any] | None = None, *, kid: str | None = None,
             alg: str = "RS256", headers: dict[str, Any] | None = None,
             **claim_args: Any) -> str:
        """A JWT signed with the current key (or key ``kid``): ``claims`` as given, or
        :meth:`claims` of ``claim_args`` (``sub``, ``aud``, ``client_id``, ``scope``,
        ``ttl``; a negative ``ttl`` gives an expired token)."""
        if claims is None:
            claim_args.setdefault("client_id", "test-client")
            claims = self.claims(**claim_args)
        key = next((k for k in self.keys if k.kid == kid), self.keys[-1]) if kid else self.keys[-1]
        return jwt.encode(claims, key.private, algorithm=alg,
                          headers={"kid": key.kid, **(headers or {})})

    def mint_opaque(self, **claim_args: Any) -> str:
        """An opaque token that introspection describes with :meth:`claims`."""
        claim_args.setdefault("client_id", "test-client")
        token = secrets.token_urlsafe(32)
        self._opaque[token] = self.claims(**claim_args)
        return token

    def _issue(self, *, sub: str, client_id: str, scope: str, resource: str | None,
               refresh: bool) -> dict[str, Any]:
        if self.opaque:
            access = self.mint_opaque(sub=sub, aud=resource, client_id=client_id, scope=scope)
        else:
            access = self.mint(sub=sub, aud=resource, client_id=client_id, scope=scope)
        answer: dict[str, Any] = {"access_token": access, "token_type": "Bearer",
                                  "expires_in": self.ttl}
        if scope:
            answer["scope"] = scope
        if refresh:
            token = secrets.token_urlsafe(32)
            self._refresh[token] = {"sub": sub, "client_id": client_id, "scope": scope,
                                    "resource": resource}
            answer["refresh_token"] = token
        return answer

    # -- the HTTP app -------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        base = self.url
        return {
            "issuer": base, "authorization_endpoint": f"{base}/authorize",
            "token_endpoint": f"{base}/token", "registration_endpoint": f"{base}/register",
            "jwks_uri": f"{base}/jwks", "introspection_endpoint": f"{base}/introspect",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "client_credentials",
                                      "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic",
                                                      "client_secret_post", "none"],
            "authorization_response_iss_parameter_supported": True,
            "scopes_supported": ["files:read", "files:write"],
        }

    def app(self) -> Starlette:
        async def count(request: Request) -> None:
            self.requests[request.url.path] += 1

        async def metadata(request: Request) -> Response:
            await count(request)
            return JSONResponse(self.metadata())

        async def jwks(request: Request) -> Response:
            await count(request)
            return JSONResponse(self.jwks())

        async def register(request: Request) -> Response:
            await count(request)
            body = await request.json()
            method = body.get("token_endpoint_auth_method", "client_secret_basic")
            client = {**body, "client_id": f"dyn-{uuid.uuid4().hex[:10]}",
                      "client_id_issued_at": int(time.time()),
                      "token_endpoint_auth_method": method,
                      "grant_types": body.get("grant_types") or ["authorization_code",
                                                                 "refresh_token"]}
            if method != "none":
                client["client_secret"] = secrets.token_urlsafe(24)
                client["client_secret_expires_at"] = 0
            self.clients[client["client_id"]] = client
            return JSONResponse(client, status_code=201)

        async def authorize(request: Request) -> Response:
            await count(request)
            q = request.query_params
            client = self.clients.get(q.get("client_id", ""))
            redirect = q.get("redirect_uri", "")
            if client is None or redirect not in client.get("redirect_uris", []):
                return JSONResponse({"error": "invalid_request",
                                     "error_description": "unknown client or redirect_uri"},
                                    status_code=400)
            if q.get("response_type") != "code" or q.get("code_challenge_method") != "S256" \
                    or not q.get("code_challenge"):
                return _redirect(redirect, error="invalid_request", state=q.get("state"),
                                 iss=self.url)
            code = secrets.token_urlsafe(24)
            self._codes[code] = {
                "client_id": client["client_id"], "redirect_uri": redirect,
                "challenge": q["code_challenge"], "scope": q.get("scope", ""),
                "resource": q.get("resource"), "sub": q.get("login_hint") or self.login,
                "expires": time.time() + 120}
            return _redirect(redirect, code=code, state=q.get("state"), iss=self.url)

        async def token(request: Request) -> Response:
            await count(request)
            form = await request.form()
            data = {k: str(v) for k, v in form.items()}
            client = self._client_of(request, data)
            if client is None:
                return _error("invalid_client", 401)
            grant = data.get("grant_type")
            if grant not in client.get("grant_types", []):
                return _error("unauthorized_client")
            if grant == "authorization_code":
                code = self._codes.pop(data.get("code", ""), None)
                if (code is None or code["client_id"] != client["client_id"]
                        or code["expires"] < time.time()
                        or code["redirect_uri"] != data.get("redirect_uri")):
                    return _error("invalid_grant")
                verifier = data.get("code_verifier", "")
                challenge = base64.urlsafe_b64encode(
                    hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
                if not secrets.compare_digest(challenge, code["challenge"]):
                    return _error("invalid_grant")
                resource = data.get("resource") or code["resource"]
                return JSONResponse(self._issue(
                    sub=code["sub"], client_id=client["client_id"], scope=code["scope"],
                    resource=resource, refresh=True))
            if grant == "client_credentials":
                return JSONResponse(self._issue(
                    sub=client["client_id"], client_id=client["client_id"],
                    scope=data.get("scope", client.get("scope", "")),
                    resource=data.get("resource"), refresh=False))
            if grant == "refresh_token":
                held = self._refresh.get(data.get("refresh_token", ""))
                if held is None or held["client_id"] != client["client_id"]:
                    return _error("invalid_grant")
                return JSONResponse(self._issue(
                    sub=held["sub"], client_id=held["client_id"], scope=held["scope"],
                    resource=data.get("resource") or held["resource"], refresh=False))
            return _error("unsupported_grant_type")

        async def introspect(request: Request) -> Response:
            await count(request)
            form = await request.form()
            value = str(form.get("token", ""))
            claims = self._opaque.get(value)
            if claims is None:
                try:
                    claims = jwt.decode(value, options={"verify_signature": False})
                    header = jwt.get_unverified_header(value)
                    key = next(k for k in self.keys if k.kid == header.get("kid"))
                    claims = jwt.decode(value, key.private.public_key(), algorithms=["RS256"],
                                        options={"verify_aud": False})
                except Exception:
                    return JSONResponse({"active": False})
            if claims.get("exp", 0) <= time.time():
                return JSONResponse({"active": False})
            return JSONResponse({"active": True, "token_type": "Bearer", **claims})

        return Starlette(routes=[
            Route("/.well-known/oauth-authorization-server", metadata),
            Route("/.well-known/openid-configuration", metadata),
            Route("/jwks", jwks),
            Route("/register", register, methods=["POST"]),
            Route("/authorize", authorize),
            Route("/token", token, methods=["POST"]),
            Route("/introspect", introspect, methods=["POST"]),
        ])

    def _client_of(self, request: Request, data: dict[str, str]) -> dict[str, Any] | None:
        header = request.headers.get("authorization", "")
        client_id, secret = data.get("client_id"), data.get("client_secret")
        if header.lower().startswith("basic "):
            raw = base64.b64decode(header[6:]).decode()
            from urllib.parse import unquote

            user, _, password = raw.partition(":")
            client_id, secret = unquote(user), unquote(password)
        client = self.clients.get(client_id or "")
        if client is None:
            return None
        expected = client.get("client_secret")
        if expected is None:  # a public client: PKCE is its proof
            return client if client.get("token_endpoint_auth_method") == "none" else None
        return client if secret is not None and secrets.compare_digest(secret, expected) \
            else None


def _redirect(base: str, **params: str | None) -> Response:
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return RedirectResponse(f"{base}{'&' if '?' in base else '?'}{query}", status_code=302)


def _error(code: str, status: int = 400) -> Response:
    return JSONResponse({"error": code}, status_code=status)
