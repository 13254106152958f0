"""Shared fixtures: the ``backend`` fixture runs the contract suite on every backend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.backends import Backend, GenericBackend, LocalBackend, MemoryBackend

BACKENDS = ["memory", "local", "generic", "s3", "gcs"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[Backend]:
    """A fresh root on each backend; S3 and GCS talk to real local servers."""
    name = request.param
    b: Backend
    if name == "memory":
        b = MemoryBackend()
    elif name == "local":
        b = LocalBackend(str(tmp_path))
    elif name == "generic":
        b = GenericBackend()
    elif name == "s3":
        b = request.getfixturevalue("s3_backend")
    else:
        b = request.getfixturevalue("gcs_backend")
    b.setup()
    try:
        yield b
    finally:
        b.teardown()
