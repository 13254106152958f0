"""Deny rules hold on every door of the policy filesystem, on every backend: a path named
is refused as a read of it is, a listing leaves denied entries out as the discovery tools
do, and a "did you mean" hint never names a denied file."""

from __future__ import annotations

import pytest

import toolfs
from tests.backends import Backend

DENY = [".env", "*.pem", ".git/**"]


def _tree(backend: Backend) -> toolfs.Workspace:
    backend.put(".env", b"SECRET=1\n")
    backend.put("id.pem", b"-----BEGIN\n")
    backend.put(".git/config", b"[core]\n")
    backend.put("src/app.py", b"print(1)\n")
    return backend.workspace(deny=DENY)


@pytest.mark.parametrize("method", ["exists", "isfile", "isdir", "modified", "ukey", "info"])
@pytest.mark.parametrize("path", [".env", "id.pem", ".git/config"])
def test_a_denied_path_named_is_refused(backend: Backend, method: str, path: str) -> None:
    fs = _tree(backend).fs
    with pytest.raises(toolfs.FsError) as caught:
        getattr(fs, method)(path)
    assert caught.value.code == "denied"


def test_listings_leave_denied_entries_out(backend: Backend) -> None:
    fs = _tree(backend).fs
    assert fs.find("") == ["src/app.py"]
    names = {e.rstrip("/") for e in fs.ls("", detail=False)}
    assert names == {"src"}
    walked = [(root, sorted(dirs), sorted(files)) for root, dirs, files in fs.walk("")]
    assert walked == [(".", ["src"], []), ("src", [], ["app.py"])]
    assert fs.exists("src/app.py") and fs.isfile("src/app.py") and fs.isdir("src")


def test_did_you_mean_never_names_a_denied_file(backend: Backend) -> None:
    ws = _tree(backend)
    backend.put("notes.md", b"hi\n")
    for typo in (".envv", "id.pe", "id.pemm"):
        out = ws.execute("read", {"file_path": typo})
        assert out.error is not None and out.error.code == "not_found", out.text
        assert ".env" not in out.text.replace(typo, "") and "id.pem" not in out.text.replace(
            typo, ""), out.text
        assert "did_you_mean" not in out.error.details or all(
            n not in (".env", "id.pem") for n in out.error.details["did_you_mean"])
    if backend.capabilities.cheap_listing:  # where hints are given at all
        out = ws.execute("read", {"file_path": "notes.mdd"})
        assert out.error is not None and "notes.md" in out.error.details.get(
            "did_you_mean", []), out.text


def test_a_missing_path_is_not_found_by_its_own_name(backend: Backend) -> None:
    # The wrapped filesystem's FileNotFoundError names the backend path (the root's
    # absolute path, the bucket): never let through.
    fs = _tree(backend).fs
    for call in (fs.ls, fs.ukey, fs.info):
        with pytest.raises(toolfs.FsError) as caught:
            call("missing/x.txt")
        assert caught.value.code == "not_found", call
        assert caught.value.path == "missing/x.txt"
        assert backend.root not in caught.value.message if backend.root else True


def test_a_directory_named_with_a_slash_is_that_directory(backend: Backend) -> None:
    fs = _tree(backend).fs
    assert fs.exists("src/") and fs.isdir("src/") and not fs.isfile("src/")
    assert [e.rsplit("/", 1)[-1] for e in fs.ls("src/", detail=False)] == ["app.py"]
    assert fs.find("src/") == ["src/app.py"]
