"""fsspec's own abstract test suite (``fsspec.tests.abstract``: copy, get, put, pipe,
open) run against :class:`toolfs.PolicyFileSystem`, as s3fs and gcsfs run it against
theirs: imported and subclassed, never rewritten.

Each test gets a fresh policy filesystem (a fresh context) over a fresh root on memory,
local disk, S3 (moto server), GCS (fake-gcs-server) and Azure (Azurite). Paths are
relative to the root, as the tools give them.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fsspec.tests.abstract import AbstractFixtures
from fsspec.tests.abstract.copy import AbstractCopyTests
from fsspec.tests.abstract.get import AbstractGetTests
from fsspec.tests.abstract.open import AbstractOpenTests
from fsspec.tests.abstract.pipe import AbstractPipeTests
from fsspec.tests.abstract.put import AbstractPutTests

from tests.backends import Backend, LocalBackend, MemoryBackend
from toolfs.policy import PolicyFileSystem

ABSTRACT_BACKENDS = ["memory", "local", "s3", "gcs", "azure"]


@pytest.fixture(params=ABSTRACT_BACKENDS)
def abstract_backend(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Backend]:
    name = request.param
    b: Backend
    if name == "memory":
        b = MemoryBackend()
    elif name == "local":
        b = LocalBackend(str(tmp_path / "remote"))
    else:
        b = request.getfixturevalue(f"{name}_backend")
    b.setup()
    try:
        yield b
    finally:
        b.teardown()


class PolicyFixtures(AbstractFixtures):  # type: ignore[misc]
    """The fixtures fsspec's abstract tests ask for, over a policy filesystem."""

    @pytest.fixture
    def fs(self, abstract_backend: Backend) -> PolicyFileSystem:
        return PolicyFileSystem(abstract_backend.fs, abstract_backend.root)

    @pytest.fixture
    def fs_path(self) -> str:
        # A directory below the root, as s3fs's suite works in a bucket: fsspec's
        # ``other_paths`` finds the common parent of a recursive copy by cutting the last
        # ``/``-part, so sources at the top of a root-relative namespace (``src``,
        # ``src/file``) have none to cut.
        return "abstract"

    @pytest.fixture
    def fs_join(self) -> Callable[..., str]:
        return posixpath.join

    @pytest.fixture
    def supports_empty_directories(self, abstract_backend: Backend) -> bool:
        return abstract_backend.keeps_empty_dirs


class TestPolicyCopy(AbstractCopyTests, PolicyFixtures):  # type: ignore[misc]
    pass


class TestPolicyGet(AbstractGetTests, PolicyFixtures):  # type: ignore[misc]
    pass


class TestPolicyPut(AbstractPutTests, PolicyFixtures):  # type: ignore[misc]
    pass


class TestPolicyPipe(AbstractPipeTests, PolicyFixtures):  # type: ignore[misc]
    pass


class TestPolicyOpen(AbstractOpenTests, PolicyFixtures):  # type: ignore[misc]
    pass
