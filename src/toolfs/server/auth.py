"""Bearer-token verification for ``toolfs serve``: the MCP SDK's OAuth 2.1 resource server.

Every verifier here is a :class:`mcp.server.auth.provider.TokenVerifier`; the SDK's own
``BearerAuthBackend`` and ``RequireAuthMiddleware`` (wired by
``Server.streamable_http_app(auth=..., token_verifier=...)``) answer 401 with
``WWW-Authenticate: Bearer ... resource_metadata=...`` and 403 ``insufficient_scope``, and
serve the RFC 9728 protected-resource metadata.

* :class:`JwtVerifier`: JWT access tokens checked against the issuer's JWKS with PyJWT
  (signature, ``iss``, ``aud`` = this server per RFC 8707, ``exp``, ``nbf``); only the
  asymmetric algorithms of :data:`ASYMMETRIC_ALGORITHMS`, never ``none`` or HMAC. Keys are
  cached and fetched again when a token names an unknown ``kid`` (at most once per
  ``min_refresh_interval``).
* :class:`IntrospectionVerifier`: opaque tokens through RFC 7662 introspection.
* :class:`StaticTokenVerifier`: static bearer tokens known by their SHA-256 only.
* :class:`ChainVerifier`: the first of several that accepts.

Verified tokens are cached (:class:`TokenCache`, keyed by the token's SHA-256, until the
token's ``exp``, bounded): a call with a token seen before costs one SHA-256 and one dict
lookup, not a signature check or a round trip (benchmarks/bench_auth.py measures both).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import jwt
from mcp.server.auth.provider import AccessToken, TokenVerifier

__all__ = ["ASYMMETRIC_ALGORITHMS", "AuthConfigError", "ChainVerifier", "IntrospectionVerifier",
           "JwksCache", "JwtVerifier", "StaticTokenVerifier", "TokenCache", "discover_jwks_url",
           "sha256_hex", "static_token"]

logger = logging.getLogger(__name__)

ASYMMETRIC_ALGORITHMS: tuple[str, ...] = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
"""The signature algorithms a JWT access token may use: public-key ones only. ``none``
and the HMAC family (whose "key" would be the issuer's public key: algorithm confusion)
are refused before any key is looked at."""
_KTY_OF = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}
DEFAULT_LEEWAY = 30.0
"""Seconds of clock skew allowed on ``nbf`` (``exp`` is strict: the SDK's check is)."""
DEFAULT_CACHE_SIZE = 10_000
HTTP_TIMEOUT = 10.0

JsonFetch = Callable[[str], Awaitable[dict[str, Any]]]
"""Fetch a URL and decode its JSON object (raises on a failure)."""


class AuthConfigError(ValueError):
    """The issuer, its metadata or its keys cannot be used (said at start)."""


def sha256_hex(token: str) -> str:
    """The lowercase hex SHA-256 of ``token`` (UTF-8): how static tokens are stored."""
    return hashlib.sha256(token.encode()).hexdigest()


async def _http_get_json(url: str) -> dict[str, Any]:
    import httpx2

    async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT, follow_redirects=False) as client:
        response = await client.get(url, headers={"Accept": "application/json"})
    if response.status_code != 200:
        raise AuthConfigError(f"GET {url} answered HTTP {response.status_code}")
    data = response.json()
    if not isinstance(data, dict):
        raise AuthConfigError(f"GET {url} did not answer a JSON object")
    return data


def _same_url(a: str, b: str) -> bool:
    """URLs equal up to a trailing slash and the case of scheme and host."""
    def norm(u: str) -> str:
        p = urlsplit(u)
        return urlunsplit((p.scheme.lower(), p.netloc.lower(), p.path.rstrip("/"), p.query,
                           p.fragment))
    return norm(a) == norm(b)


def _well_known(issuer: str, suffix: str) -> str:
    """RFC 8414 section 3.1: the well-known segment goes between host and path."""
    p = urlsplit(issuer)
    path = p.path.rstrip("/")
    return urlunsplit((p.scheme, p.netloc, f"/.well-known/{suffix}{path}", "", ""))


async def discover_jwks_url(issuer: str, fetch: JsonFetch = _http_get_json) -> str:
    """The ``jwks_uri`` of ``issuer``'s metadata: RFC 8414 first, then OpenID Connect
    discovery (``{issuer}/.well-known/openid-configuration``). The metadata's ``issuer``
    must be ``issuer``."""
    candidates = [_well_known(issuer, "oauth-authorization-server"),
                  issuer.rstrip("/") + "/.well-known/openid-configuration"]
    failures = []
    for url in candidates:
        try:
            meta = await fetch(url)
        except Exception as exc:
            failures.append(f"{url}: {exc}")
            continue
        if meta.get("issuer") != issuer:
            raise AuthConfigError(f"{url} names issuer {meta.get('issuer')!r}, not {issuer!r}")
        jwks = meta.get("jwks_uri")
        if not isinstance(jwks, str):
            raise AuthConfigError(f"{url} has no jwks_uri; pass --jwks-url or "
                                  "--introspection-url")
        return jwks
    raise AuthConfigError(f"cannot read the metadata of issuer {issuer}: {'; '.join(failures)}")


class TokenCache:
    """Verified tokens by SHA-256, each until its ``expires_at``; the least recently used
    goes first past ``max_entries``. Only the event loop touches it (no lock)."""

    def __init__(self, max_entries: int = DEFAULT_CACHE_SIZE,
                 clock: Callable[[], float] = time.time) -> None:
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[str, tuple[AccessToken, float | None]] = OrderedDict()

    def get(self, token: str) -> AccessToken | None:
        key = sha256_hex(token)
        found = self._entries.get(key)
        if found is None:
            return None
        access, until = found
        if until is not None and until <= self._clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return access

    def put(self, token: str, access: AccessToken, until: float | None = None) -> None:
        """Keep ``access`` until ``until`` (default: its ``expires_at``)."""
        key = sha256_hex(token)
        self._entries[key] = (access, until if until is not None else access.expires_at)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class JwksCache:
    """An issuer's signing keys (JWKS), fetched once and again when a token names a key
    id not in the set, at most once per ``min_refresh_interval`` seconds (so a flood of
    made-up ``kid`` s costs the issuer one request per interval), and after ``max_age``."""

    def __init__(self, url: str | None, *, issuer: str | None = None,
                 min_refresh_interval: float = 30.0, max_age: float = 3600.0,
                 fetch: JsonFetch = _http_get_json,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if url is None and issuer is None:
            raise AuthConfigError("a JWKS needs its URL or the issuer to discover it from")
        self.url = url
        self.issuer = issuer
        self.min_refresh_interval = min_refresh_interval
        self.max_age = max_age
        self._fetch = fetch
        self._clock = clock
        self._keys: dict[str | None, dict[str, Any]] = {}
        self._fetched_at: float | None = None
        self._unknown_kid_at: float | None = None
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        self.fetches = 0
        """How many times the JWKS was fetched (for tests and benchmarks)."""

    def _the_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    async def refresh(self) -> None:
        """Fetch the key set now (raises :class:`AuthConfigError` when it is unusable)."""
        if self.url is None:
            assert self.issuer is not None
            self.url = await discover_jwks_url(self.issuer, self._fetch)
        data = await self._fetch(self.url)
        self.fetches += 1
        self._fetched_at = self._clock()
        keys: dict[str | None, dict[str, Any]] = {}
        for jwk in data.get("keys", []) if isinstance(data.get("keys"), list) else []:
            # Signing keys of a public-key type only: a symmetric ("oct") key in a JWKS
            # would let anyone who reads the JWKS sign.
            if not isinstance(jwk, dict) or jwk.get("kty") not in ("RSA", "EC", "OKP"):
                continue
            if jwk.get("use", "sig") != "sig":
                continue
            if "d" in jwk:  # a private key published by mistake: never used
                continue
            keys[jwk.get("kid") if isinstance(jwk.get("kid"), str) else None] = jwk
        if not keys:
            raise AuthConfigError(f"the JWKS at {self.url} has no public signing key")
        self._keys = keys

    async def key(self, kid: str | None) -> dict[str, Any] | None:
        """The JWK named ``kid`` (or the only key, for a token without ``kid``)."""
        found = self._lookup(kid)
        stale = self._fetched_at is None or self._clock() - self._fetched_at > self.max_age
        if found is not None and not stale:
            return found
        async with self._the_lock():
            found = self._lookup(kid)
            stale = self._fetched_at is None or self._clock() - self._fetched_at > self.max_age
            # An unknown kid refreshes at most once per interval: made-up kids cannot
            # make the server hammer the issuer. The fetch at start does not count, so a
            # key rotated in just after it is found at once.
            limited = (self._unknown_kid_at is not None
                       and self._clock() - self._unknown_kid_at < self.min_refresh_interval)
            if stale or (found is None and not limited):
                if found is None:
                    self._unknown_kid_at = self._clock()
                try:
                    await self.refresh()
                except Exception as exc:
                    # Keep the keys held: the issuer being down must not turn every
                    # token away; a wrong kid is still refused.
                    logger.warning("cannot refresh the JWKS at %s: %s", self.url, exc)
                    self._fetched_at = self._clock()
                found = self._lookup(kid)
        return found

    def _lookup(self, kid: str | None) -> dict[str, Any] | None:
        if kid is None:
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        return self._keys.get(kid)


def _scopes_of(claims: dict[str, Any]) -> list[str]:
    scope = claims.get("scope", claims.get("scp"))
    if isinstance(scope, str):
        return scope.split()
    if isinstance(scope, list):
        return [s for s in scope if isinstance(s, str)]
    return []


def _b64json(segment: str) -> dict[str, Any]:
    raw = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


def _access_token(token: str, claims: dict[str, Any], resource: str) -> AccessToken:
    exp = claims.get("exp")
    sub = claims.get("sub")
    # OAuth's client_id claim (RFC 9068); Entra and Okta name the client azp / cid.
    client = claims.get("client_id") or claims.get("azp") or claims.get("cid") or ""
    return AccessToken(
        token=token, client_id=str(client), scopes=_scopes_of(claims),
        expires_at=int(exp) if isinstance(exp, int | float) else None,
        resource=resource, subject=str(sub) if sub is not None else None, claims=claims)


class JwtVerifier(TokenVerifier):
    """Verify JWT access tokens against ``issuer``'s JWKS.

    Args:
        issuer: the exact ``iss`` the tokens must carry.
        resource: this server's URL; the ``resource`` of every accepted token.
        jwks_url: where the keys are; default: discovered from the issuer's metadata.
        audience: the ``aud`` the tokens must contain (default: ``resource``, RFC 8707;
            some providers put an API identifier there instead).
        algorithms: allowed signature algorithms, a subset of
            :data:`ASYMMETRIC_ALGORITHMS`.
    """

    def __init__(self, issuer: str, resource: str, *, jwks_url: str | None = None,
                 audience: str | None = None,
                 algorithms: Sequence[str] = ASYMMETRIC_ALGORITHMS,
                 leeway: float = DEFAULT_LEEWAY, cache: TokenCache | None = None,
                 jwks: JwksCache | None = None) -> None:
        bad = [a for a in algorithms if a not in ASYMMETRIC_ALGORITHMS]
        if bad:
            raise AuthConfigError(f"algorithm {bad[0]!r} is not allowed; use public-key ones: "
                                  f"{', '.join(ASYMMETRIC_ALGORITHMS)}")
        self.issuer = issuer
        self.resource = resource
        self.audience = audience or resource
        self.algorithms = tuple(algorithms)
        self.leeway = leeway
        self.cache = cache if cache is not None else TokenCache()
        self.jwks = jwks if jwks is not None else JwksCache(jwks_url, issuer=issuer)

    async def prepare(self) -> None:
        """Fetch the keys now, so a wrong issuer or JWKS URL is said at start."""
        await self.jwks.refresh()

    async def verify_token(self, token: str) -> AccessToken | None:
        cached = self.cache.get(token)
        if cached is not None:
            return cached
        try:
            access = await self._verify(token)
        except (jwt.PyJWTError, ValueError, KeyError, TypeError) as exc:
            # The reason is logged, never the token.
            logger.info("bearer token refused: %s: %s", type(exc).__name__, exc)
            return None
        if access is not None:
            self.cache.put(token, access)
        return access

    async def _verify(self, token: str) -> AccessToken | None:
        parts = token.split(".")
        if len(parts) != 3:
            return None
        header = _b64json(parts[0])
        alg = header.get("alg")
        if alg not in self.algorithms:
            logger.info("bearer token refused: algorithm %r is not allowed", alg)
            return None
        kid = header.get("kid")
        jwk = await self.jwks.key(kid if isinstance(kid, str) else None)
        if jwk is None:
            logger.info("bearer token refused: no key %r in the issuer's JWKS", kid)
            return None
        if _KTY_OF.get(str(alg)[:2]) != jwk.get("kty"):
            return None
        # The key is bound to one algorithm (PyJWK): the JWK's own, or the header's when
        # the JWK names none and its type fits.
        key = jwt.PyJWK(jwk, algorithm=None if "alg" in jwk else str(alg))
        # exp strictly (the SDK refuses an expired token in any case), nbf with leeway
        # for an issuer whose clock runs ahead.
        claims: dict[str, Any] = jwt.decode(
            token, key, algorithms=list(self.algorithms), audience=self.audience,
            issuer=self.issuer,
            options={"require": ["exp", "iss", "aud"], "verify_signature": True,
                     "verify_nbf": False})
        nbf = claims.get("nbf")
        if nbf is not None and (not isinstance(nbf, int | float)
                                or nbf > time.time() + self.leeway):
            logger.info("bearer token refused: not valid before %r", nbf)
            return None
        return _access_token(token, claims, self.resource)


class IntrospectionVerifier(TokenVerifier):
    """Verify opaque tokens with the issuer's RFC 7662 introspection endpoint.

    An active answer must name ``issuer`` (when it names one) and contain ``audience``
    (default ``resource``) in ``aud``; accepted answers are cached until the token's
    ``exp`` (at most ``max_cache_seconds`` when it has none), bounded in number.
    Refusals are not cached. The server authenticates with HTTP Basic ``client_id`` /
    ``client_secret`` when given.
    """

    def __init__(self, issuer: str, resource: str, url: str, *, audience: str | None = None,
                 client_id: str | None = None, client_secret: str | None = None,
                 max_cache_seconds: float = 300.0, cache: TokenCache | None = None) -> None:
        self.issuer = issuer
        self.resource = resource
        self.url = url
        self.audience = audience or resource
        self.client_id = client_id
        self.client_secret = client_secret
        self.max_cache_seconds = max_cache_seconds
        self.cache = cache if cache is not None else TokenCache()
        self.requests = 0
        """Introspection requests sent (for tests and benchmarks)."""

    async def prepare(self) -> None:
        """Nothing to fetch ahead: the endpoint is asked per new token."""

    async def verify_token(self, token: str) -> AccessToken | None:
        cached = self.cache.get(token)
        if cached is not None:
            return cached
        try:
            answer = await self._introspect(token)
        except Exception as exc:
            logger.warning("token introspection at %s failed: %s", self.url, exc)
            return None
        access = self._check(token, answer)
        if access is not None:
            # Kept no longer than max_cache_seconds: how late a revocation is noticed.
            until = time.time() + self.max_cache_seconds
            if access.expires_at is not None:
                until = min(until, access.expires_at)
            self.cache.put(token, access, until)
        return access

    async def _introspect(self, token: str) -> dict[str, Any]:
        import httpx2

        self.requests += 1
        async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT) as client:
            form = {"token": token, "token_type_hint": "access_token"}
            headers = {"Accept": "application/json"}
            if self.client_id:
                response = await client.post(
                    self.url, data=form, headers=headers,
                    auth=httpx2.BasicAuth(self.client_id, self.client_secret or ""))
            else:
                response = await client.post(self.url, data=form, headers=headers)
        if response.status_code != 200:
            raise AuthConfigError(f"HTTP {response.status_code}")
        data = response.json()
        if not isinstance(data, dict):
            raise AuthConfigError("the answer is not a JSON object")
        return data

    def _check(self, token: str, answer: dict[str, Any]) -> AccessToken | None:
        if answer.get("active") is not True:
            return None
        if "iss" in answer and answer["iss"] != self.issuer:
            logger.info("introspected token refused: issuer %r", answer.get("iss"))
            return None
        aud = answer.get("aud")
        auds = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if not any(isinstance(a, str) and (a == self.audience or _same_url(a, self.audience))
                   for a in auds):
            logger.info("introspected token refused: audience %r", aud)
            return None
        now = time.time()
        exp = answer.get("exp")
        if isinstance(exp, int | float) and exp <= now:
            return None
        nbf = answer.get("nbf")
        if isinstance(nbf, int | float) and nbf > now + DEFAULT_LEEWAY:
            return None
        claims = dict(answer)
        claims.setdefault("iss", self.issuer)
        return _access_token(token, claims, self.resource)


def static_token(name: str, scopes: Iterable[str] = ()) -> AccessToken:
    """The :class:`AccessToken` of a static token of principal ``name`` (no issuer)."""
    return AccessToken(token="", client_id=name, scopes=list(scopes), subject=None,
                       claims={"toolfs/static": name})


class StaticTokenVerifier(TokenVerifier):
    """Static bearer tokens, known only by their SHA-256 (``{hex: principal name}``).

    The given token is hashed, and the hash compared with every known one in constant
    time, so neither the file nor the timing gives a token away. A static token carries
    ``scopes[name]`` as its scopes (a principal's ``files:read`` / ``files:write``), which
    ``--required-scope`` checks as it checks an OAuth token's."""

    def __init__(self, hashes: dict[str, str], resource: str | None = None, *,
                 scopes: Mapping[str, Sequence[str]] | None = None) -> None:
        self._hashes = [(bytes.fromhex(h), name) for h, name in hashes.items()]
        self.resource = resource
        self._scopes = dict(scopes or {})
        self._known: dict[bytes, AccessToken] = {}

    async def prepare(self) -> None:
        """Nothing to fetch."""

    async def verify_token(self, token: str) -> AccessToken | None:
        digest = hashlib.sha256(token.encode()).digest()
        found: str | None = None
        for known, name in self._hashes:
            if hmac.compare_digest(digest, known):
                found = name
        if found is None:
            return None
        access = self._known.get(digest)
        if access is None:  # made once per token: later calls cost the hash and compares
            access = static_token(found, self._scopes.get(found, ())).model_copy(
                update={"token": token, "resource": self.resource})
            self._known[digest] = access
        return access


class ChainVerifier(TokenVerifier):
    """The answer of the first verifier that accepts the token."""

    def __init__(self, verifiers: Sequence[TokenVerifier]) -> None:
        self.verifiers = list(verifiers)

    async def prepare(self) -> None:
        for v in self.verifiers:
            prepare = getattr(v, "prepare", None)
            if prepare is not None:
                await prepare()

    async def verify_token(self, token: str) -> AccessToken | None:
        for v in self.verifiers:
            access = await v.verify_token(token)
            if access is not None:
                return access
        return None
