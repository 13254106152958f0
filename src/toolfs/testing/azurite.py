"""A local Azure Blob emulator (Azurite) for tests and demos.

:class:`AzuriteEmulator` runs Azurite's blob service (the npm package, installed with
npm into a cache directory on first use) behind the same in-process counting proxy as
:class:`~toolfs.testing.emulators.GCSEmulator`, so a test can assert how many round
trips an operation really costs. It has the interface of the other emulators:
:meth:`start`/:meth:`stop` (or ``with``), :attr:`endpoint_url`, :meth:`requests`,
:meth:`request_count`, :meth:`clear_requests`, :meth:`reset`, plus
:meth:`create_container` (alias :meth:`create_bucket`), :meth:`new_container`,
:meth:`adlfs_storage_options` and :meth:`adlfs_filesystem`.

Typical use in a pytest fixture::

    @pytest.fixture(scope="session")
    def azurite() -> Iterator[AzuriteEmulator]:
        with AzuriteEmulator() as emulator:
            yield emulator

    def test_write(azurite: AzuriteEmulator) -> None:
        container = azurite.new_container()  # fresh per test
        fs = azurite.adlfs_filesystem()
        fs.pipe_file(f"{container}/key", b"data")
        assert azurite.request_count("PUT") == 1

Azurite 3.35.0 is the last release that runs on Node 20 (later ones need Node >= 21).
It is started with ``--skipApiVersionCheck``: azure-storage-blob sends the newest
service version it knows, which an Azurite release predating that SDK refuses with 400
otherwise. ``--loose`` is not needed (the SDK sends no header Azurite rejects).

Environment: ``TOOLFS_AZURITE`` names an ``azurite-blob`` executable to use instead of
the cached install; ``TOOLFS_AZURITE_CACHE`` overrides the cache directory
(``~/.cache/toolfs/azurite``).

Running this module (``python -m toolfs.testing.azurite``) starts Azurite and prints
the storage options until interrupted.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolfs.testing.process import _HOST, _log_tail, _spawn_python_child
from toolfs.testing.proxy import _ProxiedEmulator
from toolfs.testing.requestlog import RecordedRequest

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

__all__ = ["AZURITE_VERSION", "AzuriteEmulator", "azurite_unavailable", "ensure_azurite"]

AZURITE_VERSION = "3.35.0"
"""The newest Azurite that runs on Node 20."""
# Azurite's well-known development account (public, documented; not a secret).
ACCOUNT_NAME = "devstoreaccount1"
ACCOUNT_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/"
               "K1SZFPTOtr/KBHBeksoGMGw==")
_BINARY_ENV = "TOOLFS_AZURITE"
_CACHE_ENV = "TOOLFS_AZURITE_CACHE"
_LISTENING = re.compile(rb"successfully listens on https?://[^\s:]+:(\d+)")
_INSTALL_TIMEOUT = 600.0


def _cache_dir() -> Path:
    override = os.environ.get(_CACHE_ENV)
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "toolfs" / "azurite"


@contextlib.contextmanager
def _install_lock(path: Path) -> Iterator[None]:
    """An exclusive lock between processes (pytest-xdist workers) installing at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        try:
            import fcntl
        except ImportError:  # Windows: no lock; npm tolerates a second identical install
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_azurite(version: str = AZURITE_VERSION, *, cache_dir: Path | None = None) -> Path:
    """The ``azurite-blob`` executable of ``version``, installing it with npm into the
    cache directory when missing. Raises :class:`RuntimeError` naming what is missing
    (node, npm) or how npm failed."""
    override = os.environ.get(_BINARY_ENV)
    if override:
        return Path(override)
    prefix = (cache_dir or _cache_dir()) / version
    binary = prefix / "node_modules" / ".bin" / "azurite-blob"
    if binary.exists():
        return binary
    if shutil.which("node") is None:
        raise RuntimeError("Azurite needs Node.js (node was not found on PATH); install "
                           f"Node >= 18 or set {_BINARY_ENV} to an azurite-blob executable")
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("installing Azurite needs npm (not found on PATH); set "
                           f"{_BINARY_ENV} to an azurite-blob executable instead")
    with _install_lock(prefix.parent / f".{version}.lock"):
        if binary.exists():  # another process installed it while we waited
            return binary
        prefix.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
             "--no-save", "--loglevel=error", f"azurite@{version}"],
            stdin=subprocess.DEVNULL, capture_output=True, timeout=_INSTALL_TIMEOUT,
            check=False)
        if result.returncode != 0 or not binary.exists():
            output = (result.stderr or result.stdout or b"")[-2000:].decode(
                "utf-8", "replace")
            raise RuntimeError(f"npm could not install azurite@{version} into {prefix} "
                               f"(exit {result.returncode}):\n{output}")
    return binary


def azurite_unavailable(version: str = AZURITE_VERSION) -> str | None:
    """Why :class:`AzuriteEmulator` cannot start here, or ``None`` if it can (as far as
    can be told without starting it): the ``azure`` extra (adlfs, azure-storage-blob)
    must be importable, and Azurite cached or Node.js and npm on PATH to install it.
    Meant for a clear skip message in a user's fixtures."""
    for module in ("adlfs", "azure.storage.blob"):
        try:
            if importlib.util.find_spec(module) is None:
                raise ModuleNotFoundError(module)
        except ModuleNotFoundError:
            return f"{module} is not installed (pip install 'toolfs[azure]')"
    override = os.environ.get(_BINARY_ENV)
    if override:
        return None if Path(override).exists() else f"{_BINARY_ENV}={override} does not exist"
    if (_cache_dir() / version / "node_modules" / ".bin" / "azurite-blob").exists():
        return None if shutil.which("node") else "Azurite needs Node.js (node not on PATH)"
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        return (f"Azurite is not installed and {' and '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} not on PATH to install it")
    return None


class AzuriteEmulator(_ProxiedEmulator):
    """Azurite's blob service (in-memory) behind an in-process counting proxy.

    ``endpoint_url`` is the proxy; Azurite itself listens on another 127.0.0.1 port,
    picked by the OS at bind time (``--blobPort 0``) and read from its start-up line.
    Housekeeping (:meth:`reset`, :meth:`create_container`, :meth:`delete_container`)
    goes to Azurite directly and never shows up in the request log.
    """

    _kind = "azurite"

    def __init__(self, *, startup_timeout: float = 60.0,
                 binary: str | os.PathLike[str] | None = None,
                 version: str = AZURITE_VERSION) -> None:
        """Prepare an emulator; nothing runs (or is installed) until :meth:`start`.

        Args:
            startup_timeout: seconds to wait for Azurite to come up.
            binary: an ``azurite-blob`` executable; by default ``$TOOLFS_AZURITE`` or
                the npm install in the cache directory (made on first use).
            version: the Azurite release to install when none is cached.
        """
        super().__init__(startup_timeout=startup_timeout)
        self._binary = Path(binary) if binary is not None else None
        self._version = version
        self.account_name = ACCOUNT_NAME
        self.account_key = ACCOUNT_KEY

    # -- lifecycle ---------------------------------------------------------------

    def _launch(self, workdir: Path) -> str:
        binary = self._binary or ensure_azurite(self._version)
        endpoint = self._open_proxy()
        log_path = workdir / "server.log"
        command = [
            str(binary),
            "--disableTelemetry",
            "--inMemoryPersistence",
            "--skipApiVersionCheck",
            "--silent",
            "--blobHost", _HOST,
            "--blobPort", "0",
            "--extentMemoryLimit", "1024",
        ]  # fmt: skip
        # In memory, Azurite writes no files; the supervisor (a small Python parent)
        # kills it when this process goes away, however it ends.
        self._process = _spawn_python_child(["_supervise", *command], log_path)
        self._serve_proxy(self._wait_ready(log_path))
        return endpoint

    def _wait_ready(self, log_path: Path) -> int:
        deadline = time.monotonic() + self._startup_timeout
        while True:
            self._check_alive(log_path)
            with contextlib.suppress(OSError):
                found = _LISTENING.search(log_path.read_bytes())
                if found:
                    return int(found.group(1))
            if time.monotonic() > deadline:
                raise TimeoutError(f"Azurite did not start within {self._startup_timeout}s:"
                                   f"\n{_log_tail(log_path)}")
            time.sleep(0.02)

    def requests(self) -> list[RecordedRequest]:
        """Requests received through ``endpoint_url`` since start or the last reset/clear,
        in order (paths are ``/devstoreaccount1/container/blob``)."""
        return super().requests()

    # -- housekeeping (straight to Azurite, not logged) -------------------------------

    def connection_string(self, *, direct: bool = False) -> str:
        """An Azure Storage connection string for the emulator (through the proxy, or
        straight to Azurite with ``direct``)."""
        url = self._backend() if direct else self.endpoint_url
        return (f"DefaultEndpointsProtocol=http;AccountName={self.account_name};"
                f"AccountKey={self.account_key};BlobEndpoint={url}/{self.account_name};")

    def _service(self) -> Any:
        from azure.storage.blob import BlobServiceClient

        return BlobServiceClient.from_connection_string(self.connection_string(direct=True))

    def reset(self) -> None:
        """Delete every container and blob and clear the request log."""
        with self._service() as service:
            for container in list(service.list_containers()):
                service.delete_container(container.name)
        self._log.clear()

    def create_container(self, name: str) -> None:
        """Create ``name`` (not logged as a request); error if it exists."""
        with self._service() as service:
            service.create_container(name)

    create_bucket = create_container
    """The other emulators' name for :meth:`create_container`."""

    def delete_container(self, name: str) -> None:
        """Delete ``name`` and its blobs (not logged); nothing if it does not exist."""
        from azure.core.exceptions import ResourceNotFoundError

        with self._service() as service, contextlib.suppress(ResourceNotFoundError):
            service.delete_container(name)

    def new_container(self, prefix: str = "toolfs") -> str:
        """Create a container with a fresh name (``prefix-<hex>``) and return the name:
        one per test, so tests never see each other's blobs."""
        name = f"{prefix}-{uuid.uuid4().hex[:12]}".lower()
        self.create_container(name)
        return name

    # -- clients -------------------------------------------------------------------------

    def adlfs_storage_options(self) -> dict[str, Any]:
        """Keyword arguments for ``adlfs.AzureBlobFileSystem`` / ``fsspec.filesystem("az")``
        and ``Workspace("az://container/prefix", storage_options=...)``."""
        return {"connection_string": self.connection_string()}

    def adlfs_filesystem(self, **overrides: Any) -> AbstractFileSystem:
        """A new ``adlfs.AzureBlobFileSystem`` for this emulator, bypassing fsspec's
        instance cache (listings cached by one test stay out of the next)."""
        adlfs = importlib.import_module("adlfs")  # optional: the ``azure`` extra
        options = {**self.adlfs_storage_options(), "skip_instance_cache": True, **overrides}
        filesystem: AbstractFileSystem = adlfs.AzureBlobFileSystem(**options)
        return filesystem


def _serve_demo() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with AzuriteEmulator() as azurite:
        print(json.dumps({"adlfs_storage_options": azurite.adlfs_storage_options()},
                         indent=2), flush=True)
        print("Azurite running; press Ctrl-C to stop.", file=sys.stderr, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while azurite.running:
                time.sleep(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(_serve_demo())

