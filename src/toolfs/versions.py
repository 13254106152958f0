"""File versions: opaque, comparable tokens that come from the backend.

A :class:`FileVersion` names one exact state of a file's bytes. Two versions are equal
exactly when they name the same state, so "stale" is simply ``observed != current``.

Kinds:

========== ==================================================================
``sha256``  content digest (memory, local, generic fallback); identical bytes give
            the same version, so ``touch`` or a no-op rewrite never makes a file stale
``stat``    (inode, size, mtime_ns) of a local or generic file larger than the
            whole-file cap, whose digest would cost a full scan; such files can only
            be read in windows, never rewritten by the tools
``etag``    S3 or Azure Blob ETag as returned (quoted), plus ``VersionId`` on versioned
            buckets (the version id where Azure blob versioning is on)
``generation`` GCS object generation
========== ==================================================================
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict

VersionKind = Literal["sha256", "stat", "etag", "generation"]


class FileVersion(BaseModel):
    """One exact state of a file, as named by its backend."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: VersionKind
    value: str
    version_id: str | None = None
    """S3 ``VersionId`` on versioned buckets (Azure: the blob's version id);
    informational, not compared."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FileVersion):
            return NotImplemented
        return self.kind == other.kind and self.value == other.value

    def __hash__(self) -> int:
        return hash((self.kind, self.value))

    def __str__(self) -> str:
        return f"{self.kind}:{self.value}"

    @property
    def short(self) -> str:
        """A short form for humans (not unique)."""
        return f"{self.kind}:{self.value.strip(chr(34))[:12]}"

    @classmethod
    def of_bytes(cls, data: bytes) -> FileVersion:
        """The content-digest version of ``data``."""
        return cls(kind="sha256", value=hashlib.sha256(data).hexdigest())
