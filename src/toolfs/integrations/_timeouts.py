"""The model text for a tool call that outlived a framework's timeout (shared by the
adapters whose frameworks have one, so the text is the same in each)."""

from __future__ import annotations

from toolfs.errors import FsError, fs_error


def timed_out(tool: str, seconds: float) -> FsError:
    """``backend_error`` for ``tool`` not finishing within ``seconds``.

    The framework stops waiting, but the storage call it started cannot be taken back
    mid-way: it commits whole or not at all, possibly after this answer. So the model is
    told the change may still be stored and to read before changing the file again,
    not just that the call timed out (which invites a blind retry)."""
    return fs_error("backend_error", f"{tool} did not finish within {seconds:g} seconds; "
                    "it may still complete, so read the file before changing it again")
