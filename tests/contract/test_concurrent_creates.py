"""Concurrent creates: N contexts create the same new file at once; exactly one succeeds.

Threads on every backend, processes on every backend whose guarantee
holds between processes (``Capabilities.cross_process``: local disk and the object
stores; memory and the generic store live in one process by declaration). A context
that saw the file absent and lost is ``stale`` ("created by someone else"); one that
wrote without looking is ``not_observed`` (the file exists and it never read it), as
docs/policy.md's table says. The winner's bytes are the file's.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import multiprocessing
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

import toolfs
from tests.backend_fixtures import Backend, LocalBackend

CONTEXTS = 8


PROCESSES = 4


LOST_SEEN_ABSENT = "was created by someone else since you saw it absent"


LOST_BLIND = "already exists and was not read in this context"


def _race(contexts: list[Any], rel: str, *, look_first: bool) -> list[Any]:
    """Each context writes ``rel`` (after reading it absent, if ``look_first``), all
    released at once; the tool outputs, in context order."""
    if look_first:
        for ws in contexts:
            assert ws.execute("read", {"file_path": rel}).error.code == "not_found"
    barrier = threading.Barrier(len(contexts))

    def write(i: int) -> Any:
        barrier.wait(timeout=30)
        return contexts[i].execute("write", {"file_path": rel, "content": f"context {i}\n"})

    with concurrent.futures.ThreadPoolExecutor(len(contexts)) as pool:
        return list(pool.map(write, range(len(contexts))))


SHARED = ["local", "s3", "seaweedfs", "gcs", "azure"]


_FILESYSTEMS = {
    "local": ("fsspec.implementations.local", "LocalFileSystem"),
    "s3": ("s3fs", "S3FileSystem"),
    "seaweedfs": ("s3fs", "S3FileSystem"),
    "gcs": ("gcsfs.core", "GCSFileSystem"),  # the core class (see GCSEmulator)
    "azure": ("adlfs", "AzureBlobFileSystem"),
}


def _options(b: Backend) -> dict[str, Any]:
    if isinstance(b, LocalBackend):
        return {}
    emulator: Any = b.emulator  # type: ignore[attr-defined]
    for method in ("s3fs_storage_options", "gcsfs_storage_options", "adlfs_storage_options"):
        if hasattr(emulator, method):
            return {**getattr(emulator, method)(), "skip_instance_cache": True}
    raise AssertionError(b.name)


def _create_in_process(name: str, options: dict[str, Any], root: str, rel: str,
                       index: int, barrier: Any) -> tuple[str, str, str]:
    """In a worker process: a context of its own over ``root`` reads ``rel`` absent,
    waits for the others, writes. Returns (outcome, message, content sent)."""
    module, cls = _FILESYSTEMS[name]
    fs = getattr(importlib.import_module(module), cls)(**options)
    ws = toolfs.Workspace(fs, root=root)
    ws.check_root()  # the condition probe, before the race
    assert ws.execute("read", {"file_path": rel}).error.code == "not_found"  # type: ignore[union-attr]
    content = f"process {index}\n"
    barrier.wait(timeout=60)
    out = ws.execute("write", {"file_path": rel, "content": content})
    if out.error is not None:
        return out.error.code, out.error.message, content
    return out.value.action, "", content  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def workers() -> Iterator[tuple[Any, Any]]:
    """``PROCESSES`` spawned workers (no fork of a process running fsspec's I/O thread)
    and a manager for the barrier they meet at, reused by every backend; terminated at
    the end (their clients' exit-time cleanup is not what this file tests)."""
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        pool = context.Pool(PROCESSES)
        try:
            yield pool, manager
        finally:
            pool.terminate()
            pool.join()


@pytest.fixture(params=SHARED)
def shared(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Backend]:
    b: Backend = (LocalBackend(str(tmp_path)) if request.param == "local"
                  else request.getfixturevalue(f"{request.param}_backend"))
    b.setup()
    try:
        yield b
    finally:
        b.teardown()


def test_processes_creating_one_file_exactly_one_wins(
        shared: Backend, workers: tuple[Any, Any]) -> None:
    pool, manager = workers
    assert shared.capabilities.cross_process
    barrier = manager.Barrier(PROCESSES)
    pending = [pool.apply_async(_create_in_process, (shared.name, _options(shared),
                                                     shared.root, "new/plan.md", i, barrier))
               for i in range(PROCESSES)]
    results = [p.get(timeout=120) for p in pending]
    outcomes = Counter(code for code, _, _ in results)
    assert outcomes == {"created": 1, "stale": PROCESSES - 1}, results
    assert all(LOST_SEEN_ABSENT in message for code, message, _ in results if code == "stale")
    (won,) = [content for code, _, content in results if code == "created"]
    assert shared.get("new/plan.md") == won.encode()


def test_memory_and_generic_declare_one_process() -> None:
    """Where processes do not share the files, the capability says so."""
    from tests.backend_fixtures import GenericBackend, MemoryBackend

    for b in (MemoryBackend(), GenericBackend()):
        b.setup()
        try:
            assert not b.capabilities.cross_process
        finally:
            b.teardown()


class SyncConcurrentCreates:
    """Concurrent creates of one file: exactly one wins."""

    @pytest.mark.parametrize("look_first", [True, False], ids=["seen-absent", "blind"])
    def test_threads_creating_one_file_exactly_one_wins(self, backend: Backend, look_first: bool
                                                        ) -> None:
        first = backend.workspace()
        contexts = [first, *(first.new_context() for _ in range(CONTEXTS - 1))]
        outs = _race(contexts, "new/plan.md", look_first=look_first)
        winners = [i for i, out in enumerate(outs) if out.error is None]
        assert len(winners) == 1, [out.text for out in outs]
        assert outs[winners[0]].value.action == "created"
        code, words = ("stale", LOST_SEEN_ABSENT) if look_first else ("not_observed", LOST_BLIND)
        for out in outs:
            if out.error is not None:
                assert (out.error.code, words in out.error.message) == (code, True), out.text
        assert backend.get("new/plan.md") == f"context {winners[0]}\n".encode()
