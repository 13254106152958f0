"""``AsyncWorkspace.checkpoint``, ``changes`` and ``rewind``: the same journal, awaited."""

from __future__ import annotations

import asyncio

import toolfs


def test_async_workspace_checkpoints_lists_and_rewinds() -> None:
    async def run() -> None:
        aws = toolfs.AsyncWorkspace("memory://undo-async")
        try:
            await aws.write("a.txt", "one\n")
            cp = await aws.checkpoint("one")
            await aws.edit("a.txt", "one", "two")
            changes = await aws.changes(since=cp)
            assert [(c.kind, c.path) for c in changes] == [("updated", "a.txt")]
            result = await aws.rewind("one")
            assert result.restored == ["a.txt"] and not result.refused
            assert aws.sync.fs.cat_file("a.txt") == b"one\n"
        finally:
            aws.close()

    asyncio.run(run())
