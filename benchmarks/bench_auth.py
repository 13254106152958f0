"""What token verification costs ``toolfs serve`` per call (issue 38).

Three tables:

1. The verifier alone (:mod:`toolfs.server.auth`), per token: a JWT seen before (the
   cache: one SHA-256 and a dict lookup), a new RS256 or ES256 JWT (signature and
   claims), and a static token known by its SHA-256, beside a bare ``hmac.compare_digest``
   of the static ``--token`` mode.
2. A whole MCP call (``ls`` over streamable HTTP, the official client, one session per
   server): the static ``--token`` mode against OAuth with JWTs (every call after the
   first served from the cache), in alternating rounds of 10 calls; calls per second and
   p50/p99 latency.
3. What the audit trail adds to an edit (one JSON line to a local file).

    python benchmarks/bench_auth.py [--tiny]
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm

import _common
from toolfs.server.auth import (
    JwksCache,
    JwtVerifier,
    StaticTokenVerifier,
    TokenCache,
    sha256_hex,
)
from toolfs.testing.oauth_issuer import OAuthIssuer

RESOURCE = "http://127.0.0.1:1/mcp"


def _verifier(issuer: OAuthIssuer, jwks: dict[str, Any]) -> JwtVerifier:
    async def fetch(url: str) -> dict[str, Any]:
        return jwks

    return JwtVerifier(issuer.url, RESOURCE, cache=TokenCache(),
                       jwks=JwksCache("http://jwks.invalid", fetch=fetch))


async def _per_token(n: int) -> list[list[str]]:
    issuer = OAuthIssuer()  # keys and tokens only: not started
    issuer.port = 1
    ec_key = ec.generate_private_key(ec.SECP256R1())
    ec_jwk = {**ECAlgorithm.to_jwk(ec_key.public_key(), as_dict=True), "kid": "ec",
              "alg": "ES256", "use": "sig"}
    jwks = {"keys": [*issuer.jwks()["keys"], ec_jwk]}
    rs = [issuer.mint(sub=f"u{i}", aud=RESOURCE) for i in range(n)]
    es = [jwt.encode(issuer.claims(sub=f"u{i}", aud=RESOURCE, client_id="c"), ec_key,
                     algorithm="ES256", headers={"kid": "ec"}) for i in range(n)]
    static = "static-token-0123456789abcdef"
    rows = []

    async def timed(label: str, verify: Any, tokens: list[str]) -> float:
        samples = []
        for token in tokens:
            t0 = time.perf_counter_ns()
            ok = await verify(token)
            samples.append(time.perf_counter_ns() - t0)
            assert ok is not None, label
        us = _common.median_us(samples)
        rows.append([label, _common.fmt_us(us)])
        return us

    cached = _verifier(issuer, jwks)
    await cached.verify_token(rs[0])
    hit = await timed("JWT seen before (cache hit)", cached.verify_token, [rs[0]] * n)
    fresh = _verifier(issuer, jwks)
    await fresh.prepare()
    await timed("new RS256 JWT (signature + claims)", fresh.verify_token, rs)
    await timed("new ES256 JWT (signature + claims)", fresh.verify_token, es)
    static_verifier = StaticTokenVerifier({sha256_hex(static): "p"})
    await timed("static token by SHA-256 (principals file)", static_verifier.verify_token,
                [static] * n)
    expected = static.encode()

    async def bare(token: str) -> bool:
        return hmac.compare_digest(token.encode(), expected)

    await timed("--token: compare_digest only (baseline)", bare, [static] * n)
    for row in rows:
        us = float(row[1].replace(",", ""))
        row.append(f"{us / hit:.1f}x")
    return rows


async def _calls(n: int) -> list[list[str]]:
    import contextlib
    import socket
    import threading

    import httpx2
    import uvicorn
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from toolfs.integrations.mcp_server import ToolfsMCP
    from toolfs.server.http import resource_server
    from toolfs.workspace import Workspace

    modes = ("--token (static)", "OAuth JWT (cached)")
    samples: dict[str, list[int]] = {m: [] for m in modes}
    elapsed: dict[str, float] = dict.fromkeys(modes, 0.0)
    servers = []
    with OAuthIssuer() as issuer:
        async with contextlib.AsyncExitStack() as stack:
            clients = {}
            for i, mode in enumerate(modes):
                sock = socket.create_server(("127.0.0.1", 0))
                url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
                ws = Workspace(f"memory://bench-auth-{i}")
                ws.write("a.txt", "a\n")
                server = ToolfsMCP(ws)
                if mode.startswith("OAuth"):
                    app = server.http_app(auth=resource_server(resource=url, issuer=issuer.url))
                    token = issuer.mint(sub="bench", aud=url)
                else:
                    token = "static-token-0123456789abcdef"
                    app = server.http_app(token=token)
                uv = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="on",
                                                   log_level="warning"))
                thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
                thread.start()
                servers.append((uv, thread, sock))
                while not uv.started:
                    await asyncio.sleep(0.01)
                http = await stack.enter_async_context(
                    httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}))
                clients[mode] = await stack.enter_async_context(
                    Client(streamable_http_client(url, http_client=http)))
                for _ in range(5):  # warm up
                    await clients[mode].call_tool("ls", {})
            # Rounds alternate between the modes, so load on the machine falls on both.
            batch = 10
            for _ in range(max(1, n // batch)):
                for mode in modes:
                    start = time.perf_counter()
                    for _ in range(batch):
                        t0 = time.perf_counter_ns()
                        await clients[mode].call_tool("ls", {})
                        samples[mode].append(time.perf_counter_ns() - t0)
                    elapsed[mode] += time.perf_counter() - start
    for uv, thread, sock in servers:
        uv.should_exit = True
        thread.join(10)
        sock.close()
    rows = []
    for mode in modes:
        got = samples[mode]
        q = statistics.quantiles(got, n=100)
        rows.append([mode, f"{len(got) / elapsed[mode]:,.0f}",
                     f"{statistics.median(got) / 1e6:.2f}", f"{q[98] / 1e6:.2f}"])
    return rows


def _audited_edits(n: int) -> list[list[str]]:
    """An edit of a 2,000-line file in memory, without and with the audit trail (a
    subscriber writing one line to a local file), alternating."""
    import os
    import tempfile

    import toolfs
    from toolfs.server.audit import AuditSubscriber, FileSink, Identity

    body = "".join(f"line {i} of a file with some text in it\n" for i in range(2000))
    folder = tempfile.mkdtemp(prefix="bench-auth-")
    sink = FileSink(os.path.join(folder, "audit.jsonl"))
    plain = toolfs.Workspace("memory://bench-auth-plain")
    audited = toolfs.Workspace("memory://bench-auth-audited")
    audited.subscribe(AuditSubscriber(sink, Identity("bench", sub="bench")))
    samples: dict[str, list[int]] = {"no audit": [], "--audit FILE": []}
    for ws in (plain, audited):
        ws.write("f.txt", body)
    for i in range(n):
        for label, ws in (("no audit", plain), ("--audit FILE", audited)):
            t0 = time.perf_counter_ns()
            ws.edit("f.txt", f"line {i} of", f"LINE {i} of")
            samples[label].append(time.perf_counter_ns() - t0)
    sink.close()
    base = _common.median_us(samples["no audit"])
    return [[label, _common.fmt_us(_common.median_us(got)),
             f"{_common.median_us(got) / base:.2f}x"] for label, got in samples.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a quick run (tests)")
    args = parser.parse_args()
    n_tokens, n_calls = (20, 10) if args.tiny else (2000, 500)
    print(f"Token verification per call ({n_tokens} tokens each; median)\n")
    print(_common.markdown_table(["token", "median µs", "vs cache hit"],
                                 asyncio.run(_per_token(n_tokens))))
    print(f"\nA whole MCP call: ls over streamable HTTP, one session, {n_calls} calls\n")
    print(_common.markdown_table(["auth", "calls/s", "p50 ms", "p99 ms"],
                                 asyncio.run(_calls(n_calls))))
    print(f"\nAn edit of a 2,000-line file (memory://), {n_calls} each, alternating\n")
    print(_common.markdown_table(["audit", "median µs", "vs no audit"],
                                 _audited_edits(n_calls)))


if __name__ == "__main__":
    main()
