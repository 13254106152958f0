"""One small fixture class per backend, with capability flags instead of ad-hoc skips.

Each class knows how to make a fresh root, open workspaces (contexts) over it, and
change files behind toolfs's back (the "other program" in stale tests).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any, ClassVar

import fsspec
from fsspec.implementations.dirfs import DirFileSystem

import toolfs
from toolfs.backends import Capabilities, store_for


class Backend:
    """A backend under test: a fresh root per test and a raw view of it."""

    name: ClassVar[str]
    version_kind: ClassVar[str] = "sha256"
    keeps_empty_dirs: ClassVar[bool] = True
    """A directory outlives its last file (a real directory, a pseudo-directory, a folder
    entry); on object stores with flat names the prefix goes with its last object."""

    def __init__(self) -> None:
        self.fs: Any = None
        self.root = ""

    def setup(self) -> None:
        raise NotImplementedError

    def teardown(self) -> None:
        pass

    @property
    def capabilities(self) -> Capabilities:
        """What the adapter declares; the suite checks the behaviour matches it."""
        return store_for(self.fs, root=self.root or None).capabilities

    use_async: bool = False
    """Drive the tools through ``AsyncWorkspace`` (set by the ``backend`` fixture)."""

    def workspace(self, **options: Any) -> toolfs.Workspace:
        ws = toolfs.Workspace(self.fs, root=self.root, **options)
        return AsyncBridge(ws) if self.use_async else ws  # type: ignore[return-value]

    def key(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    def put(self, rel: str, data: bytes) -> None:
        """Write behind toolfs's back."""
        key = self.key(rel)
        parent = key.rsplit("/", 1)[0]
        if parent:
            self.fs.makedirs(parent, exist_ok=True)
        self.fs.pipe_file(key, data)

    def get(self, rel: str) -> bytes:
        return bytes(self.fs.cat_file(self.key(rel)))

    def exists(self, rel: str) -> bool:
        return bool(self.fs.exists(self.key(rel)))

    def remove(self, rel: str) -> None:
        self.fs.rm_file(self.key(rel))

    def touch(self, rel: str) -> None:
        """Rewrite identical bytes (what ``touch`` or a no-op formatter does)."""
        self.put(rel, self.get(rel))


class AsyncBridge:
    """Looks like a ``Workspace`` to the tests, but every tool call goes through the
    coroutines of an :class:`toolfs.AsyncWorkspace` on a running event loop."""

    def __init__(self, ws: toolfs.Workspace) -> None:
        self._aws = toolfs.AsyncWorkspace(ws)
        self._sync = ws

    def _run(self, coro: Any) -> Any:
        return asyncio.run(coro)

    def read(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self._aws.read(*args, **kwargs))

    def write(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self._aws.write(*args, **kwargs))

    def edit(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self._aws.edit(*args, **kwargs))

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self._aws.execute(*args, **kwargs))

    def glob(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self._aws.glob(*args, **kwargs))

    def grep(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self._aws.grep(*args, **kwargs))

    def ls(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self._aws.ls(*args, **kwargs))

    def notebook_edit(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self._aws.notebook_edit(*args, **kwargs))

    def new_context(self, **overrides: Any) -> AsyncBridge:
        return AsyncBridge(self._sync.new_context(**overrides))

    def __getattr__(self, name: str) -> Any:  # fs, audit, snapshot, restore, subscribe, ...
        return getattr(self._sync, name)


class MemoryBackend(Backend):
    name = "memory"

    def setup(self) -> None:
        self.fs = fsspec.filesystem("memory")
        self.root = f"/toolfs-test-{uuid.uuid4().hex[:10]}"

    def teardown(self) -> None:
        if self.fs.exists(self.root):
            self.fs.rm(self.root, recursive=True)


class LocalBackend(Backend):
    name = "local"

    def __init__(self, tmp: str) -> None:
        super().__init__()
        self.tmp = tmp

    def setup(self) -> None:
        self.fs = fsspec.filesystem("file")
        self.root = os.path.join(self.tmp, "root")
        os.makedirs(self.root, exist_ok=True)

    def touch(self, rel: str) -> None:
        super().touch(rel)
        os.utime(self.key(rel))


class OpaqueDirFileSystem(DirFileSystem):  # type: ignore[misc]
    """A filesystem class toolfs has no adapter for (a plain ``DirFileSystem`` over a
    known backend is unwrapped to that backend's store)."""


class GenericBackend(Backend):
    """An fsspec filesystem with no adapter (a DirFileSystem subclass over memory): the
    fallback."""

    name = "generic"

    def setup(self) -> None:
        base = f"/toolfs-generic-{uuid.uuid4().hex[:10]}"
        mem = fsspec.filesystem("memory")
        mem.makedirs(base, exist_ok=True)
        self._mem, self._base = mem, base
        self.fs = OpaqueDirFileSystem(path=base, fs=mem)
        self.root = "proj"

    def teardown(self) -> None:
        self._mem.rm(self._base, recursive=True)


class _CloudBackend(Backend):
    """A bucket on a local emulator, fresh for each test (the emulator is reset)."""

    bucket: ClassVar[str] = "toolfs-test"
    keeps_empty_dirs = False
    refused_create_checks: ClassVar[int] = 0
    """Requests a refused create (``If-None-Match``) costs beyond the put and its checks."""

    def __init__(self, emulator: Any) -> None:
        super().__init__()
        self.emulator = emulator

    def _filesystem(self) -> Any:
        raise NotImplementedError

    def setup(self) -> None:
        self.emulator.reset()
        self.emulator.create_bucket(self.bucket)
        self.fs = self._filesystem()
        self.root = f"{self.bucket}/ws"
        self.verify_conditions()
        self.emulator.clear_requests()

    def verify_conditions(self) -> None:
        """Run the condition probe now (once per process and bucket: a no-op after the
        first test on a reused bucket name), so that the tests' request counts see
        only their own calls (tests/test_condition_probe.py counts the probe's)."""
        toolfs.Workspace(self.fs, root=self.root).fs.verify_conditions()

    def put(self, rel: str, data: bytes) -> None:
        self.fs.pipe_file(self.key(rel), data)
        self.fs.invalidate_cache()

    def get(self, rel: str) -> bytes:
        self.fs.invalidate_cache()
        return bytes(self.fs.cat_file(self.key(rel)))

    def exists(self, rel: str) -> bool:
        self.fs.invalidate_cache()
        return bool(self.fs.exists(self.key(rel)))

    def remove(self, rel: str) -> None:
        self.fs.rm_file(self.key(rel))
        self.fs.invalidate_cache()


class S3Backend(_CloudBackend):
    """moto server over HTTP, through s3fs. ETags are MD5s: identical bytes, same version."""

    name = "s3"
    version_kind = "etag"
    if_match_missing_status: ClassVar[int] = 404
    """HTTP status of a conditional put or delete (``If-Match``) on a missing key."""

    def _filesystem(self) -> Any:
        return self.emulator.s3fs_filesystem()


class SeaweedBackend(S3Backend):
    """SeaweedFS's S3 gateway over HTTP, through s3fs: the second S3 implementation, a
    concurrent server. Same adapter, same wire assertions as moto (it is an
    ``S3Backend``); where SeaweedFS answers differently the adapter copes, and the
    capabilities below say what a test may observe."""

    name = "seaweedfs"
    if_match_missing_status = 412
    keeps_empty_dirs = True  # the filer keeps the folder (as a local disk does)
    # its 412 on If-None-Match may be an empty folder, not an object: one HEAD tells
    refused_create_checks = 1


class GCSBackend(_CloudBackend):
    """fake-gcs-server over HTTP, through gcsfs. Every upload makes a new generation."""

    name = "gcs"
    version_kind = "generation"

    def _filesystem(self) -> Any:
        return self.emulator.gcsfs_filesystem()


class AzureBackend(_CloudBackend):
    """Azurite over HTTP, through adlfs. Every write makes a new ETag; a fresh container
    per test (real Azure cannot reuse a deleted container name at once)."""

    name = "azure"
    version_kind = "etag"

    def setup(self) -> None:
        self.bucket = self.emulator.new_container()
        self.fs = self.emulator.adlfs_filesystem()
        self.root = f"{self.bucket}/ws"
        self.verify_conditions()
        self.emulator.clear_requests()

    def teardown(self) -> None:
        self.emulator.delete_container(self.bucket)

    def _filesystem(self) -> Any:
        return self.emulator.adlfs_filesystem()
