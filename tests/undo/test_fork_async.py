"""``AsyncWorkspace.fork``, ``commit`` and ``discard``: the sync fork's behaviour, on the
async workspace's worker threads."""

from __future__ import annotations

import asyncio
import uuid

import toolfs


def test_an_async_fork_commits_and_discards() -> None:
    async def scenario() -> None:
        ws = toolfs.AsyncWorkspace(f"memory://async-fork-{uuid.uuid4().hex[:8]}")
        try:
            await ws.write("a.txt", "one\n")
            fork = await ws.fork()
            await fork.edit("a.txt", "one", "two")
            assert (await ws.read("a.txt")).lines == ["one"]
            assert [c.kind for c in await fork.changes()] == ["updated"]
            assert (await fork.commit()).ok
            assert (await ws.read("a.txt")).lines == ["two"]
            other = await ws.fork()
            await other.write("b.txt", "b\n")
            await other.discard()
            out = await other.execute("read", {"file_path": "a.txt"})
            assert out.error is not None and out.error.code == "denied"
            assert (await ws.execute("read", {"file_path": "b.txt"})).error is not None
        finally:
            ws.close()

    asyncio.run(scenario())
