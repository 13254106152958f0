"""The contract suite: every behaviour mixin, run by one fixture class per backend.

In the style of fsspec's ``tests/abstract``: each module of ``tests/contract`` holds the
tests of one behaviour, and those that hold on every backend are methods of a mixin class
(``Reading``, ``Writing``, ...) taking the ``backend`` fixture. The classes here provide that
fixture, one per backend and mode: ``TestS3`` runs every mixin on moto through s3fs,
``TestS3Async`` runs them through ``AsyncWorkspace``. Mixins named ``Sync...`` hold the
behaviours of the policy layer, the filesystem or a tool called directly, which the async
path reaches through the same code: only the sync classes run them (they also provide
``sync_backend``, the same backend, for tests written against that name).

A new behaviour: a mixin in its module, added to ``EveryBackend`` or ``SyncOnly`` below. A
new backend: a ``Backend`` class in tests/backend_fixtures.py, a branch in ``open_backend``
(tests/conftest.py), and two classes here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import pytest

from tests.backend_fixtures import Backend
from tests.conftest import open_backend
from tests.contract.test_arguments import Arguments
from tests.contract.test_bounds import Bounds
from tests.contract.test_concurrency import Concurrency
from tests.contract.test_concurrent_creates import SyncConcurrentCreates
from tests.contract.test_condition_probe import SyncConditionProbe
from tests.contract.test_confinement_and_deny import ConfinementAndDeny
from tests.contract.test_discovery import Discovery
from tests.contract.test_editing import Editing
from tests.contract.test_events_and_hooks import EventsAndHooks
from tests.contract.test_fsspec_semantics import FsspecSemantics, SyncFsspecSemantics
from tests.contract.test_grep_content_cache import GrepContentCache
from tests.contract.test_listing import Listing
from tests.contract.test_media import SyncMedia
from tests.contract.test_moves_and_handles import MovesAndHandles
from tests.contract.test_notebook_cells import SyncNotebookCells
from tests.contract.test_observation_and_staleness import ObservationAndStaleness
from tests.contract.test_output_budget import OutputBudget
from tests.contract.test_paths import Paths, SyncPaths
from tests.contract.test_reading import Reading
from tests.contract.test_stale_diff import StaleDiff, SyncStaleDiff
from tests.contract.test_stale_merge import StaleMerge, SyncStaleMerge
from tests.contract.test_undo_and_forks import Forks, UndoJournal
from tests.contract.test_wide_text import WideText
from tests.contract.test_writing import Writing


class EveryBackend(
    Reading, Writing, Editing, ObservationAndStaleness, StaleDiff, StaleMerge,
    ConfinementAndDeny, Paths, Discovery, Listing, GrepContentCache, Bounds, OutputBudget,
    Arguments, EventsAndHooks, Concurrency, MovesAndHandles, FsspecSemantics, WideText,
):
    """The behaviours run on every backend, sync and async."""


class SyncOnly(
    SyncStaleDiff, SyncStaleMerge, SyncPaths, SyncConcurrentCreates, SyncFsspecSemantics,
    SyncMedia, SyncNotebookCells, SyncConditionProbe, UndoJournal, Forks,
):
    """The behaviours run once per backend, through the sync path."""


class BackendFixture:
    """Provides ``backend``: a fresh root on the class's backend for each test."""

    backend_name: ClassVar[str]
    use_async: ClassVar[bool] = False

    @pytest.fixture
    def backend(self, request: pytest.FixtureRequest, tmp_path: object) -> Iterator[Backend]:
        yield from open_backend(request, tmp_path, self.backend_name, use_async=self.use_async)


class SyncBackendFixture(BackendFixture):
    """A sync run: ``sync_backend`` is the same backend as ``backend``."""

    @pytest.fixture
    def sync_backend(self, backend: Backend) -> Backend:
        return backend


class TestMemory(SyncBackendFixture, EveryBackend, SyncOnly):
    backend_name = "memory"


class TestMemoryAsync(BackendFixture, EveryBackend):
    backend_name = "memory"
    use_async = True


class TestLocal(SyncBackendFixture, EveryBackend, SyncOnly):
    backend_name = "local"


class TestLocalAsync(BackendFixture, EveryBackend):
    backend_name = "local"
    use_async = True


class TestGeneric(SyncBackendFixture, EveryBackend, SyncOnly):
    backend_name = "generic"


class TestGenericAsync(BackendFixture, EveryBackend):
    backend_name = "generic"
    use_async = True


class TestS3(SyncBackendFixture, EveryBackend, SyncOnly):
    backend_name = "s3"


class TestS3Async(BackendFixture, EveryBackend):
    backend_name = "s3"
    use_async = True


class TestSeaweedFS(SyncBackendFixture, EveryBackend, SyncOnly):
    backend_name = "seaweedfs"


class TestSeaweedFSAsync(BackendFixture, EveryBackend):
    backend_name = "seaweedfs"
    use_async = True


class TestGCS(SyncBackendFixture, EveryBackend, SyncOnly):
    backend_name = "gcs"


class TestGCSAsync(BackendFixture, EveryBackend):
    backend_name = "gcs"
    use_async = True


class TestAzure(SyncBackendFixture, EveryBackend, SyncOnly):
    backend_name = "azure"


class TestAzureAsync(BackendFixture, EveryBackend):
    backend_name = "azure"
    use_async = True
