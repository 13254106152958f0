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
``etag``    S3 ETag as returned (quoted), plus ``VersionId`` on versioned buckets
``generation`` GCS object generation
========== ==================================================================

A digest version names its algorithm, and a version is always checked with the
algorithm it names (:meth:`FileVersion.matches`, ``of_bytes(data, like=...)``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict

VersionKind = Literal["sha256", "stat", "etag", "generation"]
DIGEST_KINDS: frozenset[str] = frozenset({"sha256"})
"""Version kinds that are content digests (checkable from the bytes alone)."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_DIGESTS: dict[str, Callable[[bytes], str]] = {"sha256": _sha256}


def digest_kind(size: int) -> Literal["sha256"]:
    """The digest this process gives a new content of ``size`` bytes."""
    return "sha256"


class FileVersion(BaseModel):
    """One exact state of a file, as named by its backend."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: VersionKind
    value: str
    version_id: str | None = None
    """S3 ``VersionId`` on versioned buckets; informational, not compared."""

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
    def of_bytes(cls, data: bytes, like: FileVersion | None = None) -> FileVersion:
        """The content-digest version of ``data``: in the algorithm ``like`` names when it
        is a digest version (to compare with it), else in :func:`digest_kind`'s."""
        kind = like.kind if like is not None and like.kind in DIGEST_KINDS else \
            digest_kind(len(data))
        return cls(kind=kind, value=_DIGESTS[kind](data))

    def matches(self, data: bytes) -> bool:
        """Whether ``data`` has this digest version (hashed with the algorithm it names;
        ``False`` for a version that is not a digest)."""
        digest = _DIGESTS.get(self.kind)
        return digest is not None and digest(data) == self.value
