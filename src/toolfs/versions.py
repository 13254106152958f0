"""File versions: opaque, comparable tokens that come from the backend.

A :class:`FileVersion` names one exact state of a file's bytes. Two versions are equal
exactly when they name the same state, so "stale" is simply ``observed != current``.

Kinds:

========== ==================================================================
``sha256``  content digest (memory, local, generic fallback); identical bytes give
            the same version, so ``touch`` or a no-op rewrite never makes a file stale
``blake3``  the same, for contents of :data:`BLAKE3_MIN_BYTES` or more when the
            ``blake3`` package is installed (extra ``fast``): 3-5x faster than SHA-256
            there, as collision-resistant (256-bit)
``stat``    (inode, size, mtime_ns) of a local or generic file larger than the
            whole-file cap, whose digest would cost a full scan; such files can only
            be read in windows, never rewritten by the tools
``etag``    S3 or Azure Blob ETag as returned (quoted), plus ``VersionId`` on versioned
            buckets (the version id where Azure blob versioning is on)
``generation`` GCS object generation
========== ==================================================================

A digest version names its algorithm, and a version is always checked with the
algorithm it names (:meth:`FileVersion.matches`, ``of_bytes(data, like=...)``), so
versions stay comparable between processes and machines whichever of them has
``blake3``: one that has it checks ``sha256`` versions with SHA-256. One that lacks it
never makes a ``blake3`` version, and refuses to check one made elsewhere (``unsupported``,
naming the ``fast`` extra) rather than guess.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from toolfs._trusted import trusted
from toolfs.errors import fs_error

_blake3: Callable[[bytes], Any] | None
try:  # the optional speed-up (extra ``fast``); SHA-256 alone is always enough
    from blake3 import blake3 as _blake3_hasher

    _blake3 = _blake3_hasher
except ImportError:  # pragma: no cover - depends on the environment
    _blake3 = None

VersionKind = Literal["sha256", "blake3", "stat", "etag", "generation"]
DIGEST_KINDS: frozenset[str] = frozenset({"sha256", "blake3"})
"""Version kinds that are content digests (checkable from the bytes alone)."""
BLAKE3_MIN_BYTES = 64 * 1024
"""Contents at least this long get a ``blake3`` version when ``blake3`` is installed.
Below it SHA-256 (with the SHA extensions of current CPUs) is as fast or faster, and
small files keep the ``sha256`` versions they always had."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _blake3_hex(data: bytes) -> str:
    if _blake3 is None:
        # Only a version made by a process that had blake3 gets here (this one never
        # makes one): it cannot be checked, and guessing either way could lose a change.
        raise fs_error(
            "unsupported",
            "This file's version is a BLAKE3 digest, made by a process that has the "
            "`blake3` package; this process does not have it, so it cannot check that "
            "version. Install it (pip install 'toolfs[fast]') or read the file again here.",
            details={"version_kind": "blake3", "needs": "blake3"})
    return str(_blake3(data).hexdigest())


_DIGESTS: dict[str, Callable[[bytes], str]] = {"sha256": _sha256, "blake3": _blake3_hex}


_KIND_VALUE = frozenset({"kind", "value"})


def stat_version(inode: int, size: int, mtime_ns: int) -> FileVersion:
    """The ``stat`` version of a local or generic file over the whole-file cap (built from
    ints, nothing to validate: a listing read makes one per file)."""
    return trusted(FileVersion, _KIND_VALUE, {"kind": "stat",
                                              "value": f"{inode}-{size}-{mtime_ns}",
                                              "version_id": None})


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
    def of_bytes(cls, data: bytes, like: FileVersion | None = None) -> FileVersion:
        """The content-digest version of ``data``: in the algorithm ``like`` names when it
        is a digest version (to compare with it), else BLAKE3 from ``BLAKE3_MIN_BYTES`` bytes
        when the package is installed and SHA-256 below."""
        if like is not None and like.kind in DIGEST_KINDS:
            kind = like.kind
        else:
            kind = "blake3" if _blake3 is not None and len(data) >= BLAKE3_MIN_BYTES \
                else "sha256"
        value = hashlib.sha256(data).hexdigest() if kind == "sha256" else \
            _DIGESTS[kind](data)
        if cls is not FileVersion:  # a subclass may validate more
            return cls(kind=kind, value=value)
        # Both values made here: no validation (see toolfs._trusted).
        return trusted(cls, _KIND_VALUE, {"kind": kind, "value": value,
                                          "version_id": None})

    def matches(self, data: bytes) -> bool:
        """Whether ``data`` has this digest version (hashed with the algorithm it names;
        ``False`` for a version that is not a digest)."""
        digest = _DIGESTS.get(self.kind)
        return digest is not None and digest(data) == self.value
