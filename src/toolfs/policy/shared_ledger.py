"""A ledger kept in an object store, so that several server processes share observations.

The in-process :class:`~toolfs.policy.ledger.Ledger` lives in the process that served a
context's calls: behind a load balancer, a read served by one replica and an edit served
by another would be refused ``not_observed``. :class:`SharedLedger` keeps each
observation in the store instead, one small object per (context, path)::

    <prefix>/<context id>/<sha256 of the file's backend path>

holding ``{"key", "version", "size", "at"}`` as JSON: a version and a size, never file
content. Any replica then answers any call of a context:

* a read records what it saw: one ``PUT`` of the entry (1 request added per read);
* a change looks up what its context saw, then records the version it stored: one
  ``GET`` before and one ``PUT`` after (2 added per edit or write; see docs/server.md
  for why, and the numbers measured at the S3 emulator);
* a decision taken on the entry's current value (the policy's "record only if this
  context still saw ``expected``", after a ``stale`` refusal whose whole diff was shown)
  is a conditional write: ``Update`` on the entry's version, so that of two replicas
  serving one context at once, the one that decided on an outdated entry does not win;
* a record is otherwise a fact ("this context saw version V") and replaces the entry, as
  the in-process ledger's does: of two parallel calls of one context the later record
  stands, which at worst makes a later change ``stale``, never lets one land on bytes
  the context did not see (the file's own conditional write decides that).

With sticky routing (the balancer sends each context to one replica, the ledger serving
when one fails over), ``trust_local`` spares the ``GET``: a replica answers from its own
copy of the observations it recorded or fetched, and a change then adds one request, as
a read does. A copy can be outdated only if the context was served elsewhere meanwhile;
a change refused ``stale`` on such a copy is found out (:meth:`SharedLedger.outdated`,
one ``GET``) and made again on the store's entry (:meth:`ServerContexts.execute
<toolfs.integrations._mcp_contexts.ServerContexts.execute>`), never let through on a version its
context did not see.

The bytes of observed versions stay in a per-process cache (valid on every replica: bytes
are keyed by the version they are), so an edit right after a read on the same replica
needs no second download. Ledger entries are never file content, credentials or tokens.

The ledger may be under a reserved prefix of the served bucket (``toolfs serve`` then
hides and refuses it as a deny rule) or in another bucket.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from typing import Any

from toolfs.backends import Overwrite, Update, conditions, store_for
from toolfs.backends.base import Store
from toolfs.errors import FsError, fs_error
from toolfs.policy.ledger import Ledger, Observation
from toolfs.versions import FileVersion

__all__ = ["DEFAULT_PREFIX", "LedgerStore", "SharedLedger", "entry_name", "open_ledger_store"]

DEFAULT_PREFIX = ".toolfs-ledger"
"""The directory a ledger takes inside the served bucket when ``--ledger`` names the
bucket or root itself (``s3://bucket``): hidden from the tools and refused to them."""


def entry_name(key: str) -> str:
    """The object name of ``key``'s entry within a context's directory: a digest, so any
    path (long, odd characters, reserved names) maps to a short literal key."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:40]


class LedgerStore:
    """Where shared ledgers keep their entries: a conditional store and a directory.

    One per server process; every context's :class:`SharedLedger` writes below
    ``prefix``. ``requests`` counts the requests ledgers made (for the benchmark and
    docs; the emulator's own request log is what the tests check)."""

    def __init__(self, store: Store, prefix: str, *, trust_local: bool = False) -> None:
        self.store = store
        self.prefix = prefix.rstrip("/")
        self.trust_local = trust_local
        """Ledgers answer from their process's copy first (sticky routing)."""
        self.requests = 0
        self._count_lock = threading.Lock()

    def counted(self) -> None:
        with self._count_lock:
            self.requests += 1

    def ledger(self, context_id: str, *, cache_bytes: int = 32 * 1024 * 1024) -> SharedLedger:
        """The shared ledger of ``context_id`` (a digest or other path-safe id)."""
        return SharedLedger(context_id, self, cache_bytes=cache_bytes,
                            trust_local=self.trust_local)

    def verify(self) -> None:
        """Raise ``unsupported`` unless the store honours conditional writes (probed once
        per process and bucket, as for the files themselves)."""
        conditions.verify(self.store, self.prefix)


def open_ledger_store(url: str, storage_options: dict[str, Any] | None = None, *,
                      trust_local: bool = False) -> LedgerStore:
    """The :class:`LedgerStore` at fsspec ``url`` (``s3://bucket/prefix``: the directory
    its entries go below), opened with ``storage_options``. Conditional writes are
    verified here, so a store that ignores them fails at start, not at the first call.
    ``trust_local``: see :attr:`LedgerStore.trust_local` (sticky routing)."""
    from fsspec.core import url_to_fs

    try:
        fs, path = url_to_fs(url, **(storage_options or {}))
    except Exception as exc:  # an unknown protocol, a missing driver, a bad option
        raise fs_error("invalid_arguments", f"--ledger {url}: {exc}") from exc
    path = str(path).rstrip("/")
    store = store_for(fs, root=path)
    ledger_store = LedgerStore(store, path, trust_local=trust_local)
    ledger_store.verify()
    return ledger_store


class SharedLedger(Ledger):
    """One context's observations, each kept as an object of a :class:`LedgerStore`.

    The methods the policy calls keep their in-process meaning (see the module
    docstring); ``snapshot``/``restore`` and ``len`` see what this process holds."""

    def __init__(self, context_id: str, where: LedgerStore, *,
                 cache_bytes: int = 32 * 1024 * 1024, trust_local: bool = False) -> None:
        super().__init__(context_id, cache_bytes=cache_bytes)
        self.where = where
        self.trust_local = trust_local
        self._dir = f"{where.prefix}/{context_id}"
        # Since begin(): the copies served from this process, and what fetches found.
        self._served: dict[str, Observation | None] = {}
        self._found: dict[str, Observation | None] = {}

    def entry_path(self, key: str) -> str:
        """The ledger object of ``key`` (a file's backend path)."""
        return f"{self._dir}/{entry_name(key)}"

    # -- the store --------------------------------------------------------------------

    def _fetch(self, key: str) -> tuple[Observation | None, FileVersion | None]:
        """The entry of ``key`` now, and the entry object's version (``None, None``:
        no entry); what this process holds is brought up to date."""
        self.where.counted()
        try:
            blob = self.where.store.get(self.entry_path(key))
        except FsError as err:
            if err.code != "not_found":
                raise _failed(err, "read") from err
            with self._lock:
                self._obs.pop(key, None)
                if self.trust_local:
                    self._found[key] = None
            return None, None
        obs = _decode(blob.data)
        with self._lock:
            if obs is None:
                self._obs.pop(key, None)
            else:
                self._obs[key] = obs
            if self.trust_local:
                self._found[key] = obs
        return obs, blob.version

    def _write(self, key: str, obs: Observation | None, expected: FileVersion | None) -> None:
        """Store ``key``'s entry: on condition that it is still at ``expected`` (the
        store's ``Update``, one request), or unconditionally (``None``). The latter is
        the filesystem's own single ``PUT``: the store's unconditional write first
        checks that no "directory" has the name (two more requests on S3), which an
        entry name, a digest below the ledger's own prefix, never is."""
        self.where.counted()
        path, data = self.entry_path(key), _encode(key, obs)
        if expected is not None:
            self.where.store.put(path, data, Update(expected))
            return
        fs = self.where.store.fs
        try:
            try:
                fs.pipe_file(path, data)
            except FileNotFoundError:  # a directory tree (local disk): make the parents
                fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
                fs.pipe_file(path, data)
        except Exception as exc:  # the filesystem's own error: said in the model's terms
            raise fs_error("backend_error", f"{path}: {exc}") from exc

    # -- the Ledger interface -----------------------------------------------------------

    def _local(self, key: str) -> tuple[bool, Observation | None]:
        """This process's copy of ``key``'s entry, when trusted and held."""
        if not self.trust_local:
            return False, None
        with self._lock:
            if key not in self._obs:
                return False, None
            obs = self._obs[key]
            self._served.setdefault(key, obs)
            return True, obs

    def get(self, key: str) -> Observation | None:
        held, obs = self._local(key)
        return obs if held else self._fetch(key)[0]

    def observed(self, key: str) -> tuple[Observation | None, bytes | None]:
        held, obs = self._local(key)
        if not held:
            obs, _ = self._fetch(key)
        if obs is None or obs.version is None:
            return obs, None
        return obs, self.content(key, obs.version)

    def record(self, key: str, version: FileVersion | None, *, size: int | None = None,
               content: bytes | None = None) -> None:
        obs = self._observation(version, size)
        with self._lock:
            self._keep(key, obs, content)
        try:
            self._write(key, obs, None)
        except FsError as err:
            raise _failed(err, "write") from err

    def record_if(self, key: str, expected: FileVersion | None, version: FileVersion | None,
                  *, size: int | None = None, content: bytes | None = None) -> bool:
        current, entry_version = self._fetch(key)
        if current is None or entry_version is None or current.version != expected:
            return False
        obs = self._observation(version, size)
        try:
            # Conditional: another replica serving this context may have recorded a
            # newer observation since the fetch; then that one stands.
            self._write(key, obs, entry_version)
        except FsError as err:
            if err.code == "stale":
                return False
            raise _failed(err, "write") from err
        with self._lock:
            self._keep(key, obs, content)
        return True

    def begin(self) -> None:
        """Start a call: :meth:`outdated` looks at the copies served from now on."""
        with self._lock:
            self._served.clear()
            self._found.clear()

    def outdated(self) -> bool:
        """Whether a copy this process served since :meth:`begin` differs from the
        store's entry (one ``GET`` per copy no fetch of the call saw already); the
        store's entries replace the copies."""
        with self._lock:
            served, found = dict(self._served), dict(self._found)
        stale = False
        for key, used in served.items():
            now = found[key] if key in found else self._fetch(key)[0]
            if (now is None) != (used is None) or (
                    now is not None and used is not None and now.version != used.version):
                stale = True
        return stale

    def forget(self, key: str) -> None:
        super().forget(key)
        self.where.counted()
        try:
            self.where.store.delete(self.entry_path(key), Overwrite())
        except FsError as err:
            if err.code != "not_found":
                raise _failed(err, "write") from err


def _encode(key: str, obs: Observation | None) -> bytes:
    version = obs.version if obs is not None else None
    return json.dumps({
        "key": key,
        "version": None if version is None else {
            "kind": version.kind, "value": version.value, "version_id": version.version_id},
        "size": obs.size if obs is not None else None,
        "at": obs.at if obs is not None else time.time(),
    }, separators=(",", ":")).encode()


def _decode(data: bytes) -> Observation | None:
    """An entry's observation; an entry that does not parse counts as none (the context
    must read the file again), never as a version it did not see."""
    try:
        raw = json.loads(data)
        version = raw["version"]
        return Observation(version=None if version is None else FileVersion(**version),
                           size=raw.get("size"), at=float(raw.get("at", 0.0)))
    except (ValueError, KeyError, TypeError):
        return None


def _failed(err: FsError, what: str) -> FsError:
    """A ledger request that failed, said as such (the entry is not the user's file)."""
    out = fs_error("backend_error",
                   f"the shared ledger could not {what} an observation: {err.message}",
                   details={"ledger": True, "code": err.code})
    out.__cause__ = err.__cause__
    return out
