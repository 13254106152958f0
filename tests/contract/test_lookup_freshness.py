"""fsspec's lookups on the policy filesystem see the store as it is now.

``info``, ``exists``, ``isfile``, ``isdir``, ``ls`` and ``find`` answer changes made
behind toolfs's back (another process, another client) even after a listing the wrapped
client cached, and so does the guard that rests on them: ``rm(path, recursive=True)``
refuses while the directory holds a file this context never read.

This is why every forwarded lookup drops the wrapped client's cached listings first
(``Forwarding._fresh``), not only the policy's own commits: s3fs, gcsfs and adlfs answer
``info`` and ``exists`` from a cached listing of the parent without a request, and by
default that cache never expires, so a file written by another process after the listing
would stay invisible (a missing file, a directory whose new file a recursive delete never
checks). What the freshness costs is pinned at the moto emulator: a lookup after a
listing asks the service again, one request, never more.
"""

from __future__ import annotations

from typing import Any

import pytest

import toolfs
from tests.backend_fixtures import AzureBackend, Backend, GCSBackend, S3Backend
from toolfs.errors import FsError
from toolfs.policy import PolicyFileSystem


@pytest.fixture(params=["s3", "gcs", "azure"])
def cloud(request: pytest.FixtureRequest) -> Any:
    b: Backend = request.getfixturevalue(f"{request.param}_backend")
    b.setup()
    return b


def _other_client(b: Backend) -> Any:
    """A second client of the same service, as another process has: its writes never
    reach the first client's caches."""
    if isinstance(b, S3Backend):
        return b.emulator.s3fs_filesystem()
    if isinstance(b, GCSBackend):
        return b.emulator.gcsfs_filesystem()
    assert isinstance(b, AzureBackend)
    return b.emulator.adlfs_filesystem()


def _policy_fs(b: Backend) -> PolicyFileSystem:
    return toolfs.Workspace(b.fs, root=b.root).fs


def test_lookups_see_changes_made_behind_their_back(cloud: Any) -> None:
    cloud.put("d/a.txt", b"a")
    fs = _policy_fs(cloud)
    # Listings the wrapped client may cache: the directory, the whole tree, the file.
    assert fs.find("") == ["d/a.txt"]
    assert fs.info("d/a.txt")["size"] == 1
    assert not fs.exists("d/new.txt") and not fs.isdir("e")
    assert fs.ls("d", detail=False) == ["d/a.txt"]  # last: its listing stays cached

    other = _other_client(cloud)
    other.pipe_file(cloud.key("d/new.txt"), b"new!")
    other.pipe_file(cloud.key("e/x.txt"), b"x")
    other.rm_file(cloud.key("d/a.txt"))

    assert fs.exists("d/new.txt") and fs.isfile("d/new.txt")
    assert fs.info("d/new.txt")["size"] == 4
    assert not fs.exists("d/a.txt") and not fs.isfile("d/a.txt")
    with pytest.raises(FsError) as gone:
        fs.info("d/a.txt")
    assert gone.value.code == "not_found"
    assert fs.isdir("e")
    assert fs.ls("d", detail=False) == ["d/new.txt"]
    assert fs.find("") == ["d/new.txt", "e/x.txt"]


def test_own_writes_are_seen_after_a_listing(cloud: Any) -> None:
    # What pyarrow does after writing a dataset: list, then ask for the file it wrote.
    cloud.put("d/a.txt", b"a")
    fs = _policy_fs(cloud)
    fs.ls("d")
    fs.pipe_file("d/b.txt", b"bb")
    assert fs.info("d/b.txt")["size"] == 2
    assert fs.ls("d", detail=False) == ["d/a.txt", "d/b.txt"]


def test_a_recursive_delete_checks_files_written_behind_its_back(cloud: Any) -> None:
    cloud.put("d/a.txt", b"a")
    ws = toolfs.Workspace(cloud.fs, root=cloud.root)
    ws.read("d/a.txt")
    assert ws.fs.find("d") == ["d/a.txt"]  # a listing the wrapped client may cache
    _other_client(cloud).pipe_file(cloud.key("d/b.txt"), b"theirs")

    with pytest.raises(FsError) as refused:
        ws.fs.rm("d", recursive=True)
    assert refused.value.code == "not_observed"
    assert refused.value.details["files"] == ["d/b.txt"]
    assert cloud.get("d/a.txt") == b"a" and cloud.get("d/b.txt") == b"theirs"


def test_a_lookup_after_a_listing_asks_the_service_once(s3_backend: S3Backend) -> None:
    s3_backend.setup()
    s3_backend.put("d/a.txt", b"a")
    fs = _policy_fs(s3_backend)
    fs.ls("d")
    emulator, key = s3_backend.emulator, f"/{s3_backend.key('d/a.txt')}"
    for lookup in (fs.info, fs.exists, fs.isfile):
        emulator.clear_requests()
        assert lookup("d/a.txt")
        asked = [(r.method, r.path) for r in emulator.requests()]
        assert asked == [("HEAD", key)], (lookup.__name__, asked)
