"""``toolfs serve`` over HTTP: calls per second and latency for 1 and 3 replicas behind
HAProxy, and what the shared ledger costs in requests, on loopback.

Setups, each ``toolfs serve s3://bucket/root --transport http`` process(es) on the moto
S3 emulator (one process, single-threaded: every replica's requests queue there), behind
Debian's ``haproxy`` (round-robin per request unless said, as in
tests/server/test_replicas.py):

* ``1 replica, in-process ledger``: the default, the baseline;
* ``1 replica, --ledger``: observations in the bucket (a hidden ``.toolfs-ledger``);
* ``3 replicas, --ledger``: any replica serves any call of a context;
* ``3 replicas, --ledger --sticky``: the balancer hashes ``toolfs-context`` (each
  context on one replica) and each replica answers from its own copy of the
  observations, the ledger serving the contexts of a replica that fails.

Workload: ``--agents`` agents at once (2026-07-28 protocol, each naming its context with
the ``toolfs-context`` header), each on its own ~4 KB file: read it whole, then edit one
line (a marker toggled), for ``--seconds`` per setup. The table gives calls per second
(all agents together), the median and 99th-percentile latency per call, and the CPU time
the replicas spent per call (Linux ``schedstat`` of the ``toolfs serve`` processes: what
a call costs a replica apart from waiting for a CPU, which dominates wall times on a
busy machine).

The second table counts the requests the emulator received for one read and one edit of
one agent through the three replicas (round-robin: the edit lands on another replica
than the read; sticky: on the same), split into the file's own and the ledger's.

Auth, each setup twice: the static bearer token (``--token``, compared in constant time),
and OAuth JWTs (``--auth-issuer``/``--resource``, the test issuer of
:mod:`toolfs.testing.oauth_issuer` in this process; each agent its own ``sub``, so its
own principal). A replica verifies a JWT's signature once and then serves it from its
token cache (bench_auth.py measures the verifier alone).

Usage: ``python benchmarks/bench_server.py [--tiny] [--seconds S] [--agents N]``
(``--tiny``: 1 s, three setups: 1 replica in process with the static token, 3 replicas
with the ledger and JWTs, 3 sticky replicas with the ledger and the static token).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from _common import machine_facts, markdown_table
from toolfs.integrations._mcp_contexts import CONTEXT_HEADER
from toolfs.testing.moto import S3Emulator
from toolfs.testing.oauth_issuer import OAuthIssuer
from toolfs.testing.replicas import Replicas, free_port, s3_serve_options

TOKEN = "bench-server-token-5c1d9e0f"
MODERN = "2026-07-28"
MARK_A, MARK_B = "MARKER_ALPHA_0001", "MARKER_OMEGA_0002"


@dataclass
class Run:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    cpu_ns: int = 0
    """CPU time of the replicas from the start of the clock to the last call's end."""


Bearer = Callable[[str], str]
"""The bearer token of an agent, by its name."""


def static_token(name: str) -> str:
    return TOKEN


@asynccontextmanager
async def agent(url: str, context: str,
                bearer: Bearer = static_token) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {bearer(context)}", CONTEXT_HEADER: context}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
            Client(streamable_http_client(url, http_client=http), mode=MODERN) as client:
        yield client


def content() -> str:
    body = "".join(f"line {i}: some text of a source file, about sixty chars\n"
                   for i in range(64))
    return f"{MARK_A}\n{body}"


async def work(url: str, name: str, seconds: float, run: Run, ready: asyncio.Barrier,
               clock: list[float], bearer: Bearer, cpu: Callable[[], int]) -> None:
    """One agent: made and its file written before the clock starts (``ready``), then
    read-and-edit cycles for ``seconds`` (at least one)."""
    path = f"bench/{name}.md"
    async with agent(url, name, bearer) as client:
        made = await client.call_tool("write", {"file_path": path, "content": content()})
        if made.is_error:
            raise SystemExit(f"setup write failed: {made.content[0]}")
        if await ready.wait() == 0:
            clock.append(time.perf_counter())
            run.cpu_ns = -cpu()
        await ready.wait()
        until = clock[0] + seconds
        marks = (MARK_A, MARK_B)
        while True:
            for tool, args in (("read", {"file_path": path}),
                               ("edit", {"file_path": path, "old_string": marks[0],
                                         "new_string": marks[1]})):
                start = time.perf_counter()
                out = await client.call_tool(tool, args)
                run.latencies.append(time.perf_counter() - start)
                run.errors += bool(out.is_error)
            marks = (marks[1], marks[0])
            if time.perf_counter() >= until:
                break
        await ready.wait()  # the last agent's last call: the CPU clock stops
        if await ready.wait() == 0:
            run.cpu_ns += cpu()


async def measure(url: str, agents: int, seconds: float, bearer: Bearer,
                  cpu: Callable[[], int]) -> tuple[Run, float]:
    """Warm every replica up (imports, connections), then the agents at once."""
    for _ in range(2):
        warm, started = asyncio.Barrier(3), list[float]()
        await asyncio.gather(*(work(url, f"warm-{uuid.uuid4().hex[:6]}", 0.0, Run(), warm,
                                    started, bearer, cpu) for _ in range(3)))
    run, clock = Run(), list[float]()
    ready = asyncio.Barrier(agents)
    await asyncio.gather(*(work(url, f"agent-{i}-{uuid.uuid4().hex[:6]}", seconds, run,
                                ready, clock, bearer, cpu) for i in range(agents)))
    return run, time.perf_counter() - clock[0]


def cpu_ns(cluster: Replicas) -> int:
    """Nanoseconds the replicas' processes have run on a CPU (0 where unknown)."""
    total = 0
    for serve in cluster.serves:
        if serve.process is None:
            continue
        try:
            with open(f"/proc/{serve.process.pid}/schedstat", encoding="ascii") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def requests_per_call(s3: S3Emulator, url: str, bucket: str,
                            bearer: Bearer) -> list[list[object]]:
    """Requests the emulator saw for one read and one edit through the balancer."""
    path = f"cost/{uuid.uuid4().hex[:8]}.md"
    ledger = f"/{bucket}/root/.toolfs-ledger/"
    rows: list[list[object]] = []
    async with agent(url, f"cost-{uuid.uuid4().hex[:6]}", bearer) as client:
        await client.call_tool("write", {"file_path": path, "content": content()})
        for tool, args in (("read", {"file_path": path}),
                           ("edit", {"file_path": path, "old_string": MARK_A,
                                     "new_string": MARK_B})):
            s3.clear_requests()
            out = await client.call_tool(tool, args)
            seen = s3.requests()
            on_ledger = [r for r in seen if r.path.startswith(ledger)]
            if out.is_error:
                raise SystemExit(f"{tool} failed: {out.content[0]}")
            rows.append([tool, len(seen) - len(on_ledger), len(on_ledger),
                         " ".join(r.method for r in on_ledger) or "-"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a smoke run: 1 s, three setups")
    parser.add_argument("--seconds", type=float, default=10.0, help="per setup (default 10)")
    parser.add_argument("--agents", type=int, default=4, help="agents at once (default 4)")
    args = parser.parse_args()
    seconds, agents = (1.0, 2) if args.tiny else (args.seconds, args.agents)

    rows: list[list[object]] = []
    cost: list[list[object]] = []
    with S3Emulator() as s3, OAuthIssuer() as issuer:
        bucket = f"bench-server-{uuid.uuid4().hex[:6]}"
        s3.create_bucket(bucket)
        options = s3_serve_options(s3.s3fs_storage_options())
        url = f"s3://{bucket}/root"
        setups = [(count, ledger, auth)
                  for auth in ("static token", "JWT")
                  for count, ledger in ((1, "in-process"), (1, "--ledger"), (3, "--ledger"),
                                        (3, "--ledger --sticky"))]
        if args.tiny:
            setups = [(1, "in-process", "static token"), (3, "--ledger", "JWT"),
                      (3, "--ledger --sticky", "static token")]
        for count, ledger, auth in setups:
            port = free_port()
            resource = f"http://127.0.0.1:{port}/mcp"
            extra = [] if ledger == "in-process" else ["--ledger", url]
            sticky = ledger.endswith("--sticky")
            if sticky:
                extra.append("--sticky")
            bearer: Bearer = static_token
            if auth == "JWT":
                extra += ["--auth-issuer", issuer.url, "--resource", resource]

                def bearer(name: str, resource: str = resource) -> str:
                    return issuer.mint(sub=name, aud=resource, client_id="bench")

            with Replicas(url, token=TOKEN, count=count, args=[*extra, *options], port=port,
                          balance=f"hdr({CONTEXT_HEADER})" if sticky else "roundrobin",
                          ) as cluster:
                run, elapsed = asyncio.run(measure(cluster.url, agents, seconds, bearer,
                                                   lambda c=cluster: cpu_ns(c)))
                if run.errors:
                    raise SystemExit(f"{run.errors} calls failed ({count}, {ledger}, {auth})")
                ms = [x * 1000 for x in run.latencies]
                rows.append([count, ledger, auth, agents, len(ms),
                             f"{len(ms) / elapsed:.1f}", f"{statistics.median(ms):.1f}",
                             f"{percentile(ms, 0.99):.1f}",
                             f"{run.cpu_ns / 1e6 / len(ms):.2f}" if run.cpu_ns > 0 else "n/a"])
                if count == 3 and not any(row[0] == ledger for row in cost):
                    cost += [[ledger, *row] for row in asyncio.run(
                        requests_per_call(s3, cluster.url, bucket, bearer))]
    print(f"## toolfs serve over HTTP, {agents} agents, {seconds:g} s per setup\n")
    print(markdown_table(["replicas", "ledger", "auth", "agents", "calls", "calls/s",
                          "p50 ms", "p99 ms", "CPU ms/call"], rows))
    print("\n## Requests per call at the S3 emulator (3 replicas)\n")
    print(markdown_table(["ledger", "call", "file requests", "ledger requests", "ledger"],
                         cost))
    print(f"\n{machine_facts()}")


if __name__ == "__main__":
    main()
