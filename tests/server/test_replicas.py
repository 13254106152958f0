"""Three ``toolfs serve`` processes sharing a ``--ledger`` on S3 (moto), behind Debian's
HAProxy, round-robin: any replica serves any call of a context.

HAProxy missing fails these tests with the install line (never a skip): .ci/run installs
it. The agents speak the 2026-07-28 protocol (no sessions, which live in one process),
each naming its context with the ``toolfs-context`` header.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from toolfs.integrations._mcp_contexts import CONTEXT_HEADER
from toolfs.testing.moto import S3Emulator
from toolfs.testing.replicas import REPLICA_HEADER, Replicas, s3_serve_options

TOKEN = "replica-token-3f9b-0c1d2e"
MODERN = "2026-07-28"
END = "END"


@pytest.fixture(scope="module")
def replicas(s3_emulator: S3Emulator) -> Iterator[Replicas]:
    bucket = f"replicas-{uuid.uuid4().hex[:8]}"
    s3_emulator.create_bucket(bucket)
    options = s3_serve_options(s3_emulator.s3fs_storage_options())
    # The ledger in the served bucket itself: a hidden .toolfs-ledger directory.
    with Replicas(f"s3://{bucket}/work", token=TOKEN, count=3,
                  args=["--ledger", f"s3://{bucket}/work", *options]) as started:
        yield started


@asynccontextmanager
async def _agent(url: str, context: str,
                 served: list[str] | None = None) -> AsyncIterator[Client]:
    async def note(response: Any) -> None:
        if served is not None:
            served.append(response.headers.get(REPLICA_HEADER, ""))

    headers = {"Authorization": f"Bearer {TOKEN}", CONTEXT_HEADER: context}
    async with httpx2.AsyncClient(headers=headers, event_hooks={"response": [note]},
                                  timeout=60) as http, \
            Client(streamable_http_client(url, http_client=http), mode=MODERN) as client:
        yield client


def _text(result: Any) -> str:
    return str(result.content[0].text)


def _code(result: Any) -> str | None:
    if not result.is_error:
        return None
    return str(result.structured_content["error"]["code"])


@pytest.mark.anyio
async def test_read_on_one_replica_and_edit_on_another_lands(replicas: Replicas) -> None:
    one, two, three = (s.url for s in replicas.serves)
    async with _agent(one, "writer") as writer:
        made = await writer.call_tool("write", {"file_path": "a/notes.md",
                                                "content": "alpha\nbeta\n"})
        assert not made.is_error, _text(made)
    async with _agent(one, "agent-1") as via_one, _agent(two, "agent-1") as via_two:
        read = await via_one.call_tool("read", {"file_path": "a/notes.md"})
        assert not read.is_error, _text(read)
        edited = await via_two.call_tool(
            "edit", {"file_path": "a/notes.md", "old_string": "beta", "new_string": "gamma"})
        assert not edited.is_error, _text(edited)
        # Its own edit counts as seen on every replica, as in one process.
        again = await via_one.call_tool(
            "edit", {"file_path": "a/notes.md", "old_string": "gamma", "new_string": "delta"})
        assert not again.is_error, _text(again)
    # Another context never read it: refused on any replica (the ledger is per context).
    async with _agent(three, "agent-2") as stranger:
        blind = await stranger.call_tool(
            "edit", {"file_path": "a/notes.md", "old_string": "delta", "new_string": "x"})
        final = await stranger.call_tool("read", {"file_path": "a/notes.md"})
    assert _code(blind) == "not_observed"
    assert final.structured_content["result"]["lines"] == ["alpha", "delta"]
    # The ledger's directory is neither listed nor readable through the tools.
    async with _agent(replicas.url, "agent-3") as looker:
        listed = await looker.call_tool("glob", {"pattern": "**"})
        peek = await looker.call_tool("read", {"file_path": ".toolfs-ledger"})
    assert ".toolfs-ledger" not in _text(listed) and "a/notes.md" in _text(listed)
    assert _code(peek) == "denied"


@dataclass
class _Tally:
    landed: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    """The code of every refused edit."""
    transport_errors: list[str] = field(default_factory=list)
    served: list[str] = field(default_factory=list)


async def _race(url: str, agent: int, rounds: int, path: str, tally: _Tally,
                gate: asyncio.Event | None = None, after_gate: int = 0) -> None:
    """One agent: ``rounds`` appended lines, each a read then an edit, again after a
    refusal; a call that fails in transport (its replica died) is made again through a
    new connection, as an agent would."""
    done = 0
    while done < rounds:
        try:
            async with _agent(url, f"racer-{agent}", tally.served) as client:
                while done < rounds:
                    if gate is not None and done == rounds - after_gate:
                        await gate.wait()  # the rest of the rounds after the kill
                    tag = f"agent{agent}-round{done}-{uuid.uuid4().hex[:6]}"
                    read = await client.call_tool("read", {"file_path": path})
                    assert not read.is_error, _text(read)
                    edit = await client.call_tool("edit", {
                        "file_path": path, "old_string": END, "new_string": f"{tag}\n{END}"})
                    if edit.is_error:
                        tally.refusals.append(_code(edit) or "?")
                        continue
                    tally.landed.append(tag)
                    done += 1
        except Exception as exc:  # a transport failure (its replica died), counted
            tally.transport_errors.append(type(exc).__name__)
            await asyncio.sleep(0.2)


async def _lines(url: str, path: str) -> list[str]:
    async with _agent(url, "checker") as checker:
        read = await checker.call_tool("read", {"file_path": path})
    return list(read.structured_content["result"]["lines"])


@pytest.mark.anyio
async def test_eight_agents_race_on_one_file_across_replicas(replicas: Replicas) -> None:
    path = "race/log.md"
    async with _agent(replicas.url, "setup") as setup:
        await setup.call_tool("write", {"file_path": path, "content": f"{END}\n"})
    tally = _Tally()
    await asyncio.gather(*(_race(replicas.url, i, 3, path, tally) for i in range(8)))
    lines = await _lines(replicas.url, path)
    # 0 lost updates: every edit acknowledged is in the file, once, and nothing else is.
    assert sorted(lines[:-1]) == sorted(tally.landed) and lines[-1] == END
    assert len(tally.landed) == 24
    # Every refusal is `stale` (never not_observed: each agent read first, whichever
    # replica served the read).
    assert tally.refusals and set(tally.refusals) == {"stale"}
    assert not tally.transport_errors
    # Round-robin: every replica served calls.
    assert {s.name for s in replicas.serves} <= set(tally.served)


@pytest.mark.anyio
async def test_a_replica_killed_mid_run_and_the_agents_go_on(replicas: Replicas) -> None:
    path = "race/kill.md"
    async with _agent(replicas.url, "setup") as setup:
        await setup.call_tool("write", {"file_path": path, "content": f"{END}\n"})
    tally = _Tally()
    killed = asyncio.Event()
    agents = [asyncio.create_task(_race(replicas.url, i, 6, path, tally, killed, 3))
              for i in range(4)]
    while len(tally.landed) < 8:  # mid-run: some rounds done, agents still going
        await asyncio.sleep(0.05)
    victim = replicas.serves[2]
    victim.kill()
    calls_before = len(tally.served)
    killed.set()
    await asyncio.wait_for(asyncio.gather(*agents), timeout=240)
    lines = await _lines(replicas.url, path)
    # Every acknowledged edit is in the file; an edit whose answer was lost with the
    # replica may have landed too (its agent could not know): at most one per failure.
    assert len(tally.landed) == 24 and lines[-1] == END
    assert set(tally.landed) <= set(lines)
    assert len(lines) - 1 - len(tally.landed) <= len(tally.transport_errors)
    assert set(tally.refusals) <= {"stale"}
    # At most the calls in flight on the killed replica failed (one per agent); every
    # call after the kill was answered by the two others. An answer the replica sent
    # just before it died may be counted just after (at most one per agent, in flight).
    assert len(tally.transport_errors) <= 4
    after = tally.served[calls_before:]
    assert len(after) >= 12 and victim.name not in after[len(agents):]


@pytest.fixture(scope="module")
def sticky_replicas(s3_emulator: S3Emulator) -> Iterator[Replicas]:
    bucket = f"sticky-{uuid.uuid4().hex[:8]}"
    s3_emulator.create_bucket(bucket)
    options = s3_serve_options(s3_emulator.s3fs_storage_options())
    with Replicas(f"s3://{bucket}/work", token=TOKEN, count=3, balance=f"hdr({CONTEXT_HEADER})",
                  args=["--ledger", f"s3://{bucket}/work", "--sticky", *options]) as started:
        yield started


@pytest.mark.anyio
async def test_sticky_replicas_race_and_fail_over(sticky_replicas: Replicas) -> None:
    """Sticky routing by context with `--ledger --sticky`: eight agents race on one file
    (each served by one replica, from its own copy of the observations), then the
    replica of some of them is killed and their contexts go on from the ledger."""
    url, path = sticky_replicas.url, "race/sticky.md"
    async with _agent(url, "setup") as setup:
        await setup.call_tool("write", {"file_path": path, "content": f"{END}\n"})
    tally = _Tally()
    await asyncio.gather(*(_race(url, i, 3, path, tally) for i in range(8)))
    assert set(tally.refusals) <= {"stale"} and not tally.transport_errors
    served = {name for name in tally.served if name}
    assert len(served) >= 2  # eight contexts hashed over the replicas
    # Kill the replica that served racer 0: its contexts move, the ledger has them.
    async with _agent(url, "racer-0", tally.served) as probe:
        await probe.call_tool("ls", {})
    victim = next(s for s in sticky_replicas.serves if s.name == tally.served[-1])
    victim.kill()
    before = len(tally.landed)
    await asyncio.wait_for(asyncio.gather(*(_race(url, i, 3, path, tally)
                                            for i in range(8))), timeout=240)
    lines = await _lines(url, path)
    assert len(tally.landed) == before + 24 and lines[-1] == END
    assert set(tally.landed) <= set(lines)
    assert len(lines) - 1 - len(tally.landed) <= len(tally.transport_errors)
    assert set(tally.refusals) <= {"stale"}
