"""Content-digest versions: the algorithm is named in the version and checked as named.

Large contents get a BLAKE3 version when the ``blake3`` package is installed (extra
``fast``), small ones keep SHA-256. Whatever made a version, it is checked with the
algorithm it names, so a ledger moved between processes with and without blake3 keeps
working (without the package, a blake3 version is refused as uncheckable); and a
store that compares the caller's copy of the expected bytes instead of hashing the file
still refuses every change it did not see. Digest backends only (memory, local, generic).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest

import toolfs
import toolfs.versions as versions
from tests.backend_fixtures import Backend, GenericBackend, LocalBackend, MemoryBackend
from toolfs.versions import BLAKE3_MIN_BYTES, FileVersion

blake3 = pytest.importorskip("blake3")

BIG = ("".join(f"{i:06d} some text of a big file\n" for i in range(4000))).encode()
assert len(BIG) >= BLAKE3_MIN_BYTES


@pytest.fixture(params=["memory", "local", "generic"])
def digest_backend(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[Backend]:
    b: Backend = {"memory": MemoryBackend, "generic": GenericBackend}[request.param]() \
        if request.param != "local" else LocalBackend(str(tmp_path))
    b.setup()
    try:
        yield b
    finally:
        b.teardown()


@pytest.fixture
def no_blake3(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as one without the blake3 package."""
    monkeypatch.setattr(versions, "_blake3", None)


def test_algorithm_by_size_and_named_in_the_version() -> None:
    small, big = FileVersion.of_bytes(b"x" * 100), FileVersion.of_bytes(BIG)
    assert small == FileVersion(kind="sha256", value=hashlib.sha256(b"x" * 100).hexdigest())
    assert big == FileVersion(kind="blake3", value=blake3.blake3(BIG).hexdigest())
    assert big.matches(BIG) and not big.matches(BIG + b"\n")
    # Asked to compare with a version, a digest is made in that version's algorithm.
    as_sha = FileVersion(kind="sha256", value=hashlib.sha256(BIG).hexdigest())
    assert FileVersion.of_bytes(BIG, like=as_sha) == as_sha
    assert not FileVersion(kind="etag", value='"x"').matches(BIG)


def test_big_file_versions_are_blake3_and_edits_land(digest_backend: Backend) -> None:
    digest_backend.put("big.txt", BIG)
    ws = digest_backend.workspace()
    read = ws.read("big.txt")
    assert read.version.kind == "blake3"
    edit = ws.edit("big.txt", "002000 some", "002000 SOME")
    expected = BIG.replace(b"002000 some", b"002000 SOME")
    assert digest_backend.get("big.txt") == expected
    assert edit.version == FileVersion(kind="blake3", value=blake3.blake3(expected).hexdigest())


def test_sha256_ledger_is_checked_by_a_blake3_process(
        digest_backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    digest_backend.put("big.txt", BIG)
    with monkeypatch.context() as m:
        m.setattr(versions, "_blake3", None)
        old = digest_backend.workspace()
        assert old.read("big.txt").version.kind == "sha256"
        snapshot = old.snapshot()
    new = digest_backend.workspace()
    new.restore(snapshot)  # the observation, not the bytes: the edit re-reads and checks
    new.edit("big.txt", "000001 some", "000001 SOME")
    assert digest_backend.get("big.txt") == BIG.replace(b"000001 some", b"000001 SOME")
    # ... and a change behind its back is still stale for a restored sha256 observation.
    with monkeypatch.context() as m:
        m.setattr(versions, "_blake3", None)
        old = digest_backend.workspace()
        old.read("big.txt")
        snapshot = old.snapshot()
    digest_backend.put("big.txt", BIG)
    other = digest_backend.workspace()
    other.restore(snapshot)
    with pytest.raises(toolfs.FsError) as err:
        other.edit("big.txt", "000001 some", "000001 SOME")
    assert err.value.code == "stale"


def test_blake3_ledger_without_blake3_is_refused_as_uncheckable(
        digest_backend: Backend, no_blake3: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # A process without the package cannot check a blake3 version made elsewhere: the
    # edit is refused with a clear message naming the extra, and nothing is written.
    digest_backend.put("big.txt", BIG)
    with monkeypatch.context() as m:
        m.setattr(versions, "_blake3", blake3.blake3)
        made = digest_backend.workspace()
        assert made.read("big.txt").version.kind == "blake3"
        ledger = made.snapshot()
    ws = digest_backend.workspace()
    ws.restore(ledger)
    with pytest.raises(toolfs.FsError) as err:
        ws.edit("big.txt", "000001 some", "000001 SOME")
    assert err.value.code == "unsupported"
    assert "toolfs[fast]" in err.value.message
    assert digest_backend.get("big.txt") == BIG
    # A read here observes the file afresh (a sha256 version), and the edit then lands.
    assert ws.read("big.txt").version.kind == "sha256"
    edit = ws.edit("big.txt", "000001 some", "000001 SOME")
    expected = BIG.replace(b"000001 some", b"000001 SOME")
    assert digest_backend.get("big.txt") == expected
    assert edit.version == FileVersion(kind="sha256",
                                       value=hashlib.sha256(expected).hexdigest())


@pytest.mark.parametrize("size", [1_000, len(BIG)])
def test_same_size_change_behind_the_back_is_stale(digest_backend: Backend, size: int) -> None:
    # The store compares the file with the edit's own copy of the expected bytes: a
    # change of one byte, same size, must still be seen, for an edit and for a write.
    data = BIG[:size]
    digest_backend.put("f.txt", data)
    ws, other = digest_backend.workspace(), digest_backend.workspace()
    ws.read("f.txt")
    other.read("f.txt")
    changed = data[:10] + (b"X" if data[10:11] != b"X" else b"Y") + data[11:]
    digest_backend.put("f.txt", changed)
    with pytest.raises(toolfs.FsError) as err:
        ws.edit("f.txt", "000002 some", "000002 SOME")
    assert err.value.code == "stale"
    with pytest.raises(toolfs.FsError) as err:  # (the refusal above counts as ws's read)
        other.write("f.txt", "new content\n")
    assert err.value.code == "stale"
    assert digest_backend.get("f.txt") == changed
