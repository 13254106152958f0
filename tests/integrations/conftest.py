"""Fixtures the adapter suites share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.backend_fixtures import Backend
from tests.conftest import open_backend


@pytest.fixture(params=["memory", "local", "s3", "gcs"])
def store(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[Backend]:
    """A fresh root on memory, local disk, S3 (moto) and GCS (fake-gcs-server): an
    adapter's round trips on a local and a remote store of each kind."""
    yield from open_backend(request, tmp_path, request.param, use_async=False)


@pytest.fixture
def mem(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[Backend]:
    """A fresh root in memory."""
    yield from open_backend(request, tmp_path, "memory", use_async=False)
