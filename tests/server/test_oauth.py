"""``toolfs serve`` as an OAuth 2.1 resource server: discovery, the official MCP client's
OAuth providers end to end, and the tokens it must refuse."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl

from tests.server.conftest import Served, bearer_client, free_port, uvicorn_thread
from toolfs.integrations.mcp_server import ToolfsMCP
from toolfs.server.auth import IntrospectionVerifier, JwksCache, JwtVerifier
from toolfs.server.http import resource_server
from toolfs.testing.oauth_issuer import OAuthIssuer
from toolfs.workspace import Workspace

_INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "toolfs-tests", "version": "1"}}}
_ACCEPT = {"Accept": "application/json, text/event-stream"}


def _post(url: str, token: str | None) -> httpx2.Response:
    headers = dict(_ACCEPT)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx2.post(url, json=_INIT, headers=headers)


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


class _Memory:
    """The OAuth client's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def test_protected_resource_metadata_names_the_issuer(served: Served) -> None:
    meta_url = served.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    meta = httpx2.get(meta_url).json()
    assert meta["resource"] == served.url
    assert meta["authorization_servers"] == [served.issuer.url]  # exact, no slash added


def test_no_token_is_401_with_the_metadata_url(served: Served) -> None:
    answer = _post(served.url, None)
    assert answer.status_code == 401
    header = answer.headers["www-authenticate"]
    assert header.startswith("Bearer ")
    assert ('resource_metadata="' + served.url.replace(
        "/mcp", "/.well-known/oauth-protected-resource/mcp") + '"') in header
    assert answer.json()["error"] == "invalid_token"


def _hs256(claims: dict[str, Any], secret: bytes, kid: str) -> str:
    """An HMAC token whose secret is the issuer's public key (algorithm confusion);
    PyJWT will not make one, so it is made here."""
    signing = f"{_b64({'alg': 'HS256', 'typ': 'JWT', 'kid': kid})}.{_b64(claims)}"
    mac = hmac.new(secret, signing.encode(), hashlib.sha256).digest()
    return f"{signing}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


def _refused_tokens(served: Served) -> dict[str, str]:
    iss = served.issuer
    good = served.token("alice")
    header, payload, signature = good.split(".")
    claims = jwt.decode(good, options={"verify_signature": False})
    public_pem = iss.keys[-1].private.public_key().public_bytes(
        encoding=Encoding.PEM, format=PublicFormat.SubjectPublicKeyInfo)
    other = OAuthIssuer()  # its keys only: never started
    return {
        "expired": served.token("alice", ttl=-120),
        "wrong audience": served.token("alice", aud="http://127.0.0.1:1/mcp"),
        "no audience": iss.mint(sub="alice", aud=None),
        "wrong issuer": iss.mint({**claims, "iss": "https://evil.example"}),
        "not yet valid": iss.mint({**claims, "nbf": int(time.time()) + 3600}),
        "no expiry": iss.mint({k: v for k, v in claims.items() if k != "exp"}),
        "unsigned (alg none)": f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{payload}.",
        "unsigned, kid kept": f"{_b64({'alg': 'none', 'kid': iss.keys[-1].kid})}.{payload}.",
        "tampered payload": f"{header}.{_b64({**claims, 'sub': 'bob'})}.{signature}",
        "tampered signature": f"{header}.{payload}.{signature[:-4]}AAAA",
        "HS256 keyed with the public key": _hs256(claims, public_pem, iss.keys[-1].kid),
        "another issuer's key, same kid": jwt.encode(
            claims, other.keys[-1].private, algorithm="RS256",
            headers={"kid": iss.keys[-1].kid}),
        "unknown kid": jwt.encode(claims, other.keys[-1].private, algorithm="RS256",
                                  headers={"kid": "made-up"}),
        "garbage": "not.a.jwt",
        "spaces": "a b",
    }


def test_bad_tokens_are_refused_with_401(served: Served) -> None:
    for why, token in _refused_tokens(served).items():
        answer = _post(served.url, token)
        assert answer.status_code == 401, why
        assert "resource_metadata=" in answer.headers["www-authenticate"], why
    assert _post(served.url, served.token("alice")).status_code == 200


def test_a_token_no_principal_matches_is_403_never_a_default_room(served: Served) -> None:
    answer = _post(served.url, served.token("mallory"))
    assert answer.status_code == 403
    assert answer.json()["error"] == "access_denied"
    assert 'error="access_denied"' in answer.headers["www-authenticate"]


@pytest.mark.anyio
async def test_the_sdk_client_signs_in_with_authorization_code_and_pkce(served: Served) -> None:
    """Discovery (RFC 9728, then RFC 8414), dynamic registration, the authorization code
    with PKCE and the RFC 8707 resource: all done by the SDK's OAuthClientProvider."""
    served.issuer.login = "alice"
    redirect_uri = "http://127.0.0.1:9/callback"
    seen: dict[str, str] = {}

    async def redirect_handler(url: str) -> None:
        query = parse_qs(urlsplit(url).query)
        seen["resource"] = query["resource"][0]
        seen["method"] = query["code_challenge_method"][0]
        async with httpx2.AsyncClient() as http:
            answer = await http.get(url)  # the issuer signs in its login, no page
        assert answer.status_code == 302
        back = parse_qs(urlsplit(answer.headers["location"]).query)
        seen.update({k: v[0] for k, v in back.items()})

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=seen["code"], state=seen["state"],
                                       iss=seen.get("iss"))

    storage = _Memory()
    provider = OAuthClientProvider(
        served.url,
        OAuthClientMetadata(redirect_uris=[AnyUrl(redirect_uri)], client_name="toolfs-tests",
                            grant_types=["authorization_code", "refresh_token"],
                            response_types=["code"], scope="files:read files:write"),
        storage, redirect_handler=redirect_handler, callback_handler=callback_handler)
    async with httpx2.AsyncClient(auth=provider) as http, \
            Client(streamable_http_client(served.url, http_client=http)) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("read", {"file_path": "notes.txt"})
    assert seen["resource"] == served.url and seen["method"] == "S256"
    assert "write" in tools and "alice" in result.content[0].text  # type: ignore[union-attr]
    assert storage.tokens is not None
    claims = jwt.decode(storage.tokens.access_token, options={"verify_signature": False})
    assert claims["aud"] == served.url and claims["sub"] == "alice"


@pytest.mark.anyio
async def test_the_sdk_client_credentials_provider_gets_the_robot_room(served: Served) -> None:
    client_info = served.issuer.register_client(client_id="robot-ci", scope="files:read")
    provider = ClientCredentialsOAuthProvider(
        served.url, _Memory(), client_id="robot-ci",
        client_secret=client_info["client_secret"], scope="files:read",
        issuer=served.issuer.url)
    async with httpx2.AsyncClient(auth=provider) as http, \
            Client(streamable_http_client(served.url, http_client=http)) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        listing = await client.call_tool("glob", {"pattern": "**/*.txt"})
    assert tools == {"read", "glob", "grep", "ls"}  # robot: files:read only
    text = listing.content[0].text  # type: ignore[union-attr]
    assert "notes.txt" in text and "secret" not in text  # alice's tree, read-only


@pytest.mark.anyio
async def test_required_scope_is_403_insufficient_scope(issuer: OAuthIssuer) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    auth = resource_server(resource=url, issuer=issuer.url, required_scopes=["files:read"])
    server = ToolfsMCP(Workspace("memory://toolfs-oauth-scope"))
    with uvicorn_thread(server.http_app(auth=auth), port):
        without = _post(url, issuer.mint(sub="alice", aud=url, scope="other"))
        assert without.status_code == 403
        assert 'error="insufficient_scope"' in without.headers["www-authenticate"]
        assert _post(url, issuer.mint(sub="alice", aud=url, scope="files:read")
                     ).status_code == 200


@pytest.mark.anyio
async def test_opaque_tokens_are_checked_by_introspection_and_cached(
        issuer: OAuthIssuer) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    auth = resource_server(resource=url, issuer=issuer.url,
                           introspection_url=f"{issuer.url}/introspect")
    verifier = auth.verifier
    assert isinstance(verifier, IntrospectionVerifier)
    server = ToolfsMCP(Workspace("memory://toolfs-oauth-opaque"))
    with uvicorn_thread(server.http_app(auth=auth), port):
        good = issuer.mint_opaque(sub="alice", aud=url)
        async with bearer_client(url, good) as client:
            for _ in range(3):
                await client.call_tool("ls", {})
        assert verifier.requests == 1  # one introspection, then the cache
        for token in (issuer.mint_opaque(sub="alice", aud="http://127.0.0.1:1/mcp"),
                      issuer.mint_opaque(sub="alice", aud=url, ttl=-5), "unknown-opaque"):
            assert _post(url, token).status_code == 401


@pytest.mark.anyio
async def test_keys_are_cached_and_refreshed_on_an_unknown_kid(issuer: OAuthIssuer) -> None:
    url = "http://127.0.0.1:1/mcp"
    verifier = JwtVerifier(issuer.url, url, jwks=JwksCache(None, issuer=issuer.url,
                                                           min_refresh_interval=60))
    await verifier.prepare()
    assert verifier.jwks.fetches == 1
    for _ in range(5):  # new tokens, same key: no fetch
        assert await verifier.verify_token(issuer.mint(sub="alice", aud=url)) is not None
    assert verifier.jwks.fetches == 1
    issuer.rotate_key()  # the issuer signs with a new key from now on
    rotated = issuer.mint(sub="alice", aud=url)
    assert await verifier.verify_token(rotated) is not None
    assert verifier.jwks.fetches == 2  # fetched again once, for the new kid
    issuer.rotate_key(publish=False)
    for _ in range(5):  # a kid the JWKS lacks, within the interval: no fetch at all
        assert await verifier.verify_token(issuer.mint(sub="alice", aud=url)) is None
    assert verifier.jwks.fetches == 2
    issuer.publish()
    verifier.jwks.min_refresh_interval = 0  # the interval has passed
    assert await verifier.verify_token(issuer.mint(sub="alice", aud=url)) is not None
    assert verifier.jwks.fetches == 3


@pytest.mark.anyio
async def test_a_verified_token_is_served_from_the_cache(issuer: OAuthIssuer) -> None:
    url = "http://127.0.0.1:1/mcp"
    verifier = JwtVerifier(issuer.url, url)
    token = issuer.mint(sub="alice", aud=url)
    first = await verifier.verify_token(token)
    assert first is not None and len(verifier.cache) == 1
    assert await verifier.verify_token(token) is first
    expired = issuer.mint(sub="alice", aud=url, ttl=-1)
    assert await verifier.verify_token(expired) is None and len(verifier.cache) == 1


@pytest.mark.parametrize("tokens", [["a", "b", "c"]])
def test_the_cache_is_bounded(tokens: list[str]) -> None:
    from mcp.server.auth.provider import AccessToken

    from toolfs.server.auth import TokenCache

    cache = TokenCache(max_entries=2)
    for t in tokens:
        cache.put(t, AccessToken(token=t, client_id="c", scopes=[],
                                 expires_at=int(time.time()) + 60))
    assert len(cache) == 2 and cache.get("a") is None and cache.get("c") is not None


@pytest.mark.anyio
async def test_an_explicit_jwks_url_needs_no_discovery(issuer: OAuthIssuer) -> None:
    url = "http://127.0.0.1:1/mcp"
    before = issuer.requests["/.well-known/oauth-authorization-server"]
    verifier = JwtVerifier(issuer.url, url, jwks_url=f"{issuer.url}/jwks")
    await verifier.prepare()
    assert await verifier.verify_token(issuer.mint(sub="alice", aud=url)) is not None
    assert issuer.requests["/.well-known/oauth-authorization-server"] == before
    wrong = JwtVerifier("https://other.example", url, jwks_url=f"{issuer.url}/jwks")
    assert await wrong.verify_token(issuer.mint(sub="alice", aud=url)) is None  # iss
