"""``AsyncWorkspace``'s worker threads: calls overlap, failures come back as raised,
a call cancelled before it started never runs, and close() refuses new calls."""

from __future__ import annotations

import asyncio
import threading

import pytest

import toolfs
from toolfs.errors import FsError


def test_parallel_calls_overlap_and_errors_come_back() -> None:
    async def main() -> None:
        ws = toolfs.AsyncWorkspace("memory://workers-overlap", max_workers=4)
        barrier = threading.Barrier(3, timeout=10)  # all three must be running at once
        try:
            assert await asyncio.gather(*(ws.call(barrier.wait) for _ in range(3)))
            with pytest.raises(FsError) as exc:
                await ws.read("missing.txt")
            assert exc.value.code == "not_found"
            with pytest.raises(ZeroDivisionError):
                await ws.call(lambda: 1 / 0)
        finally:
            ws.close()

    asyncio.run(main())


def test_a_call_cancelled_before_it_started_never_runs() -> None:
    async def main() -> None:
        ws = toolfs.AsyncWorkspace("memory://workers-cancel", max_workers=1)
        started, release = threading.Event(), threading.Event()
        ran: list[str] = []
        try:
            first = asyncio.ensure_future(ws.call(lambda: (started.set(), release.wait(10))))
            assert await asyncio.to_thread(started.wait, 10)
            second = asyncio.ensure_future(ws.call(ran.append, "second"))
            await asyncio.sleep(0)  # submitted, queued behind the first
            second.cancel()
            release.set()
            await first
            assert await ws.call(ran.append, "third") is None
            assert ran == ["third"]
            assert second.cancelled()
        finally:
            ws.close()
        with pytest.raises(RuntimeError):
            await ws.call(int)

    asyncio.run(main())
