"""fsspec's own abstract test suite (``fsspec.tests.abstract``: copy, get, put, pipe,
open) run against :class:`toolfs.PolicyFileSystem`, as s3fs and gcsfs run it against
theirs: imported and subclassed, never rewritten.

Each test gets a fresh policy filesystem (a fresh context) over a fresh root. Paths are
relative to the root, as the tools give them. Every case runs on memory and local disk;
each runs twice there, at the top of the root (``src``, as the tools name files) and in
a directory below it (``abstract/src``). On object stores (at the top of the root) a
case costs 1-10 s of emulator round trips (the glob cases copy a tree four times), so
by default they run on S3 (moto server) only, and only the put, pipe and
open cases (put with one case of the glob-pattern table: the patterns are expanded by
the policy filesystem's own ``find``, the same code on every backend; copy and get run
the same directory logic on memory and local disk). ``TOOLFS_FSSPEC_ABSTRACT=full`` runs
every case on S3, GCS (fake-gcs-server) and Azure (Azurite) (about 28 min in all; 137 of
137 pass on each, and 274 of 274 on memory and on local disk).

``mv``: fsspec ships no abstract ``mv`` cases to subclass (``fsspec/tests/abstract/mv.py``
tests ``LocalFileSystem`` only); ``tests/test_moves_and_handles.py`` and
``tests/test_fsspec_semantics.py`` cover the policy filesystem's moves.
"""

from __future__ import annotations

import functools
import os
import posixpath
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fsspec.tests.abstract import AbstractFixtures
from fsspec.tests.abstract.common import GLOB_EDGE_CASES_TESTS
from fsspec.tests.abstract.copy import AbstractCopyTests
from fsspec.tests.abstract.get import AbstractGetTests
from fsspec.tests.abstract.open import AbstractOpenTests
from fsspec.tests.abstract.pipe import AbstractPipeTests
from fsspec.tests.abstract.put import AbstractPutTests

from tests.backend_fixtures import Backend, LocalBackend, MemoryBackend
from toolfs.policy import PolicyFileSystem

FULL = os.environ.get("TOOLFS_FSSPEC_ABSTRACT") == "full"
OBJECT_STORES = ["s3", "gcs", "azure"] if FULL else ["s3"]
_GLOB_CASES: list[Any] = GLOB_EDGE_CASES_TESTS["argvalues"]
# The object stores' sample by default: a recursive pattern that matches only a directory,
# so that a non-recursive copy copies nothing -- where object stores (no empty
# directories) first differed from disk.
GLOB_SAMPLE = _GLOB_CASES if FULL else [_GLOB_CASES[21]]


def _make(name: str, request: pytest.FixtureRequest, tmp_path: Any) -> Backend:
    if name == "memory":
        return MemoryBackend()
    if name == "local":
        return LocalBackend(str(tmp_path / "remote"))
    backend: Backend = request.getfixturevalue(f"{name}_backend")
    return backend


class PolicyFixtures(AbstractFixtures):  # type: ignore[misc]
    """The fixtures fsspec's abstract tests ask for, over a policy filesystem on the
    backend of ``abstract_backend`` (parametrised by the subclasses)."""

    @pytest.fixture
    def abstract_backend(self) -> Backend:
        raise NotImplementedError

    @pytest.fixture
    def fs(self, abstract_backend: Backend) -> PolicyFileSystem:
        return PolicyFileSystem(abstract_backend.fs, abstract_backend.root)

    @pytest.fixture(params=["top", "nested"])
    def fs_path(self, request: pytest.FixtureRequest) -> str:
        # The cases at the top of the root (``src``, ``src/file``: names without a
        # parent, as the tools give them) and in a directory below it (as s3fs's suite
        # works in a bucket). fsspec cuts a recursive copy's parent off at the last
        # ``/``, which names at the top lack: the policy filesystem's get and copy give
        # them one (a second get of ``src`` into ``target`` nests ``target/src``).
        return "" if request.param == "top" else "abstract"

    @pytest.fixture
    def fs_join(self) -> Callable[..., str]:
        return posixpath.join

    @pytest.fixture
    def supports_empty_directories(self, abstract_backend: Backend) -> bool:
        return abstract_backend.keeps_empty_dirs


def _set_up(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Backend]:
    """A fresh root on the backend named by the fixture's parameter, torn down after."""
    b = _make(request.param, request, tmp_path)
    b.setup()
    try:
        yield b
    finally:
        b.teardown()


class DiskFixtures(PolicyFixtures):
    @pytest.fixture(params=["memory", "local"])
    def abstract_backend(self, request: pytest.FixtureRequest, tmp_path: Any
                         ) -> Iterator[Backend]:
        yield from _set_up(request, tmp_path)


class ObjectStoreFixtures(PolicyFixtures):
    @pytest.fixture
    def fs_path(self) -> str:
        return ""  # at the top of the root only: the nested names run on disk, same code

    @pytest.fixture(params=OBJECT_STORES)
    def abstract_backend(self, request: pytest.FixtureRequest, tmp_path: Any
                         ) -> Iterator[Backend]:
        yield from _set_up(request, tmp_path)


def _glob_sample(test: Callable[..., None]) -> Any:
    """``test`` (a glob-pattern case of the abstract suite) over :data:`GLOB_SAMPLE`
    instead of the whole table."""
    def run(self: Any, *args: Any, **kwargs: Any) -> None:
        test(self, *args, **kwargs)
    functools.update_wrapper(run, test, updated=())  # its fixtures, not its table
    return pytest.mark.parametrize(GLOB_EDGE_CASES_TESTS["argnames"], GLOB_SAMPLE)(run)


class TestCopy(AbstractCopyTests, DiskFixtures):  # type: ignore[misc]
    pass


class TestGet(AbstractGetTests, DiskFixtures):  # type: ignore[misc]
    pass


class TestPut(AbstractPutTests, DiskFixtures):  # type: ignore[misc]
    pass


class TestPipe(AbstractPipeTests, DiskFixtures):  # type: ignore[misc]
    pass


class TestOpen(AbstractOpenTests, DiskFixtures):  # type: ignore[misc]
    pass


if FULL:  # copy and get copy trees several times per case: tens of seconds on S3
    class TestObjectStoreCopy(AbstractCopyTests, ObjectStoreFixtures):  # type: ignore[misc]
        test_copy_glob_edge_cases = _glob_sample(AbstractCopyTests.test_copy_glob_edge_cases)

    class TestObjectStoreGet(AbstractGetTests, ObjectStoreFixtures):  # type: ignore[misc]
        test_get_glob_edge_cases = _glob_sample(AbstractGetTests.test_get_glob_edge_cases)


class TestObjectStorePut(AbstractPutTests, ObjectStoreFixtures):  # type: ignore[misc]
    test_put_glob_edge_cases = _glob_sample(AbstractPutTests.test_put_glob_edge_cases)


class TestObjectStorePipe(AbstractPipeTests, ObjectStoreFixtures):  # type: ignore[misc]
    pass


class TestObjectStoreOpen(AbstractOpenTests, ObjectStoreFixtures):  # type: ignore[misc]
    pass
