"""Shared fixtures: the ``backend`` fixture runs the contract suite on every backend."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.backend_fixtures import (
    AzureBackend,
    Backend,
    GCSBackend,
    GenericBackend,
    LocalBackend,
    MemoryBackend,
    S3Backend,
    SeaweedBackend,
)
from toolfs.testing.azurite import AzuriteEmulator
from toolfs.testing.emulators import GCSEmulator, S3Emulator
from toolfs.testing.seaweedfs import SeaweedFSEmulator

BACKENDS = ["memory", "local", "generic", "s3", "seaweedfs", "gcs", "azure"]
# The async path (AsyncWorkspace) runs the same suite on every backend too.
PARAMS = BACKENDS + [f"{name}-async" for name in BACKENDS]


MAX_WORKERS = 4
"""Workers for ``-n auto`` (pyproject's addopts): each starts its own emulators (about
1 GiB with its own memory), and past a few the start-ups cost more than they save."""


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many worker processes ``-n auto`` starts: one per CPU, at most MAX_WORKERS."""
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


@pytest.fixture(params=PARAMS)
def backend(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[Backend]:
    """A fresh root on each backend; S3, GCS and Azure talk to real local servers. The
    contract suite (tests/contract/test_backends.py) names the backend by its class; this
    parametrised fixture serves the adapter and integration suites."""
    name, _, mode = request.param.partition("-")
    yield from open_backend(request, tmp_path, name, use_async=mode == "async")


@pytest.fixture(params=BACKENDS)
def sync_backend(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[Backend]:
    """:func:`backend` without the async runs: for behaviours of the policy layer, the
    filesystem or an adapter called directly, which the async path reaches through the
    same code (the ``backend`` tests cover that path)."""
    yield from open_backend(request, tmp_path, request.param, use_async=False)


def open_backend(request: pytest.FixtureRequest, tmp_path: object, name: str, *,
                 use_async: bool) -> Iterator[Backend]:
    """A fresh root on the backend called ``name``, set up for this test and torn down after."""
    b: Backend
    if name == "memory":
        b = MemoryBackend()
    elif name == "local":
        b = LocalBackend(str(tmp_path))
    elif name == "generic":
        b = GenericBackend()
    elif name == "s3":
        b = request.getfixturevalue("s3_backend")
    elif name == "azure":
        b = request.getfixturevalue("azure_backend")
    elif name == "seaweedfs":
        b = request.getfixturevalue("seaweedfs_backend")
    elif name == "gcs":
        b = request.getfixturevalue("gcs_backend")
    else:
        raise ValueError(f"no backend called {name!r}")
    b.use_async = use_async
    b.setup()
    try:
        yield b
    finally:
        b.teardown()


@pytest.fixture(scope="session")
def s3_emulator() -> Iterator[S3Emulator]:
    """One moto server for the session (single-threaded: see S3Emulator's docstring)."""
    with S3Emulator() as emu:
        yield emu


@pytest.fixture(scope="session")
def seaweedfs_emulator() -> Iterator[SeaweedFSEmulator]:
    """One SeaweedFS server (master, volume, filer, S3 gateway) for the session."""
    with SeaweedFSEmulator() as emu:
        yield emu


@pytest.fixture(scope="session")
def gcs_emulator() -> Iterator[GCSEmulator]:
    """One fake-gcs-server for the session."""
    with GCSEmulator() as emu:
        yield emu


@pytest.fixture
def s3_backend(s3_emulator: S3Emulator) -> S3Backend:
    return S3Backend(s3_emulator)


@pytest.fixture
def gcs_backend(gcs_emulator: GCSEmulator) -> GCSBackend:
    return GCSBackend(gcs_emulator)


@pytest.fixture(scope="session")
def azure_emulator() -> Iterator[AzuriteEmulator]:
    """One Azurite (blob service, in memory) for the session; a container per test."""
    with AzuriteEmulator() as emu:
        yield emu


@pytest.fixture
def azure_backend(azure_emulator: AzuriteEmulator) -> AzureBackend:
    return AzureBackend(azure_emulator)


@pytest.fixture
def seaweedfs_backend(seaweedfs_emulator: SeaweedFSEmulator) -> SeaweedBackend:
    return SeaweedBackend(seaweedfs_emulator)

