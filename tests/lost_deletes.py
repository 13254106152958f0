"""Shared by the lost-DELETE fault tests (test_faults.py: S3 and GCS; test_azure.py):
a delete whose first attempt landed and whose response was lost, done directly or as
the second half of a move through a model-facing tool."""

from __future__ import annotations

from typing import Any

import pytest

import toolfs
from toolfs.render import ToolOutput

DELETE_LOST = ["reset_after_forward", "500_after_forward"]
"""Faults after which the DELETE has landed and its client never learnt it."""
MOVES = ["rm_file", "apply_patch-move", "memory-rename"]
MOVED_OLD, MOVED_NEW = b"alpha\nbeta\n", b"ALPHA\nbeta\n"
"""The source's bytes, and what ``apply_patch-move`` makes of them."""


def gone_from_ledger(ws: toolfs.Workspace, rel: str) -> bool:
    """This context no longer holds a version of ``rel`` (it recorded the delete)."""
    obs = ws.fs.ledger.get(ws.fs.resolve(rel).backend_path)
    return obs is not None and obs.version is None


def delete_or_move(ws: toolfs.Workspace, how: str, src: str, dest: str) -> ToolOutput | None:
    """Delete ``src`` (``rm_file``) or move it to ``dest`` through a model-facing tool:
    openai's apply_patch (update_file with move_to: the diff, then the move) or the
    anthropic memory tool's rename (the root is ``/memories``). Returns the tool output."""
    from toolfs.integrations.anthropic import MemoryTool
    from toolfs.integrations.openai import apply_patch

    if how == "rm_file":
        ws.fs.rm_file(src)
        return None
    if how == "apply_patch-move":
        return apply_patch(ws, {"type": "update_file", "path": src, "move_to": dest,
                                "diff": "@@\n-alpha\n+ALPHA\n"})
    mem = MemoryTool(ws)
    return mem.execute_input({"command": "rename", "old_path": f"/memories/{src}",
                              "new_path": f"/memories/{dest}"})


def moved_bytes(how: str) -> bytes:
    """What the destination holds after :func:`delete_or_move` of ``MOVED_OLD``."""
    return MOVED_NEW if how == "apply_patch-move" else MOVED_OLD


def failure_code(ws: toolfs.Workspace, how: str, src: str, dest: str) -> str:
    """The error code of a delete or move that must fail: ``rm_file`` raises it, the
    adapters' tools answer it."""
    if how == "rm_file":
        with pytest.raises(toolfs.FsError) as caught:
            delete_or_move(ws, how, src, dest)
        return caught.value.code
    out = delete_or_move(ws, how, src, dest)
    assert out is not None and out.error is not None, out and out.text
    return out.error.code


def unverifiable_delete(ws: toolfs.Workspace, proxy: Any, how: str, check: str) -> None:
    """Lose the response of the delete of ``a.txt`` (``rm_file``, or the delete of a
    move to ``b.txt``) and fail every ``check`` request (the store's look at whether the
    object is gone) after it: the outcome is unknown, so ``backend_error``, never
    ``stale``. What is left stored is the caller's to check."""
    proxy.plan("reset_after_forward", method="DELETE")
    # Only the checks after the faulted DELETE (a look before it must pass).
    proxy.plan("500_before_forward", method=check, times=None,
               match=lambda r: any(i.method == "DELETE" for i in proxy.injections))
    code = failure_code(ws, how, "a.txt", "b.txt")
    assert proxy.wait_idle()
    assert code == "backend_error"
    assert proxy.injected()["500_before_forward"] >= 1
