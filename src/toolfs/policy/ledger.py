"""The ledger: what one execution context has observed, and a bounded content cache."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from pydantic import BaseModel, ConfigDict, Field

from toolfs._trusted import trusted
from toolfs.versions import FileVersion


class Observation(BaseModel):
    """One context's last sight of one file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: FileVersion | None
    """The version seen; ``None`` means the file was seen to be absent."""
    size: int | None = None
    at: float = Field(default_factory=time.time)


_OBS_SET = frozenset({"version", "size"})


class LedgerSnapshot(BaseModel):
    """A serialisable copy of a ledger, so a restarted agent keeps what it observed."""

    model_config = ConfigDict(extra="forbid")

    context_id: str
    observations: dict[str, Observation]


class Ledger:
    """Observations of one context, keyed by backend path; thread-safe.

    It also keeps the bytes of recently observed versions (up to ``cache_bytes``, least
    recently used dropped first) so that an edit right after a full read needs no
    second download: the bytes are valid exactly for the version they were read at.
    """

    def __init__(self, context_id: str, *, cache_bytes: int = 32 * 1024 * 1024) -> None:
        self.context_id = context_id
        self.cache_bytes = cache_bytes
        self._obs: dict[str, Observation] = {}
        self._cache: OrderedDict[str, tuple[FileVersion, bytes]] = OrderedDict()
        self._cached_total = 0
        self._refused: set[str] = set()
        self._lock = threading.Lock()

    def get(self, key: str) -> Observation | None:
        with self._lock:
            return self._obs.get(key)

    def held(self, key: str) -> Observation | None:
        """What this process holds of ``key``'s observation, never asking a store (a
        shared ledger's :meth:`get` may): for hints such as a size."""
        with self._lock:
            return self._obs.get(key)

    def record(self, key: str, version: FileVersion | None, *, size: int | None = None,
               content: bytes | None = None) -> None:
        """Remember that ``key`` is at ``version`` (None: absent), with its bytes if known."""
        obs = self._observation(version, size)
        with self._lock:
            self._keep(key, obs, content)

    def record_if(self, key: str, expected: FileVersion | None, version: FileVersion | None,
                  *, size: int | None = None, content: bytes | None = None) -> bool:
        """:meth:`record` only if ``key`` is still observed at ``expected`` (``None``:
        seen absent), so that a parallel call that recorded a newer version is never
        undone; whether it recorded."""
        obs = self._observation(version, size)
        with self._lock:
            current = self._obs.get(key)
            if current is None or current.version != expected:
                return False
            self._keep(key, obs, content)
            return True

    @staticmethod
    def _observation(version: FileVersion | None, size: int | None) -> Observation:
        if (size is None or type(size) is int) and (
                version is None or type(version) is FileVersion):
            # The values a store or the policy made: no validation (toolfs._trusted).
            return trusted(Observation, _OBS_SET, {"version": version, "size": size,
                                                   "at": time.time()})
        return Observation(version=version, size=size)

    def _keep(self, key: str, obs: Observation, content: bytes | None) -> None:
        """Store ``obs`` and its bytes (the lock held)."""
        self._obs[key] = obs
        self._refused.discard(key)  # a read or a write since: no longer just refused
        old = self._cache.pop(key, None)  # _drop, written out
        if old is not None:
            self._cached_total -= len(old[1])
        version = obs.version
        if content is not None and version is not None and len(content) <= self.cache_bytes:
            self._cache[key] = (version, content)
            self._cached_total += len(content)
            while self._cached_total > self.cache_bytes:
                self._drop(next(iter(self._cache)))

    def note_refused_write(self, key: str) -> None:
        """A write of ``key`` was just refused (``stale``, ``not_observed``): until this
        context reads or writes it again, :meth:`write_refused` says so."""
        with self._lock:
            self._refused.add(key)

    def write_refused(self, key: str) -> bool:
        """Whether the last thing this context did with ``key`` was a refused write."""
        with self._lock:
            return key in self._refused

    def forget(self, key: str) -> None:
        """Forget what was observed of ``key`` (a change whose outcome is unknown: the
        next update must read the file again rather than trust a version)."""
        with self._lock:
            self._obs.pop(key, None)
            self._drop(key)

    def observed(self, key: str) -> tuple[Observation | None, bytes | None]:
        """The observation of ``key`` and the cached bytes of its version, if held (one
        lock round trip for what :meth:`get` and :meth:`content` answer together)."""
        with self._lock:
            obs = self._obs.get(key)
            if obs is None or obs.version is None:
                return obs, None
            hit = self._cache.get(key)
            if hit is None or (hit[0] is not obs.version and hit[0] != obs.version):
                return obs, None
            self._cache.move_to_end(key)
            return obs, hit[1]

    def content(self, key: str, version: FileVersion) -> bytes | None:
        """The cached bytes of ``key`` at ``version``, if still held."""
        with self._lock:
            hit = self._cache.get(key)
            if hit is None or hit[0] != version:
                return None
            self._cache.move_to_end(key)
            return hit[1]

    def _drop(self, key: str) -> None:
        old = self._cache.pop(key, None)
        if old is not None:
            self._cached_total -= len(old[1])

    def snapshot(self) -> LedgerSnapshot:
        with self._lock:
            return LedgerSnapshot(context_id=self.context_id, observations=dict(self._obs))

    def restore(self, snapshot: LedgerSnapshot) -> None:
        """Replace the observations with a snapshot's (the content cache starts empty)."""
        with self._lock:
            self._obs = dict(snapshot.observations)
            self._cache.clear()
            self._cached_total = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._obs)
