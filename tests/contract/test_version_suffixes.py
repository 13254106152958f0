"""Version suffixes never redirect a path: object-store clients read parts of a path as
a version selector (s3fs: ``?versionId=``; a version-aware gcsfs: ``#<n>``,
``?generation=<n>``; adlfs: ``?versionid=``), which would let ``.env?versionId=x`` reach
``.env`` past a deny rule on ``.env`` and ``?versionId=`` alone the root's own key.

Pass: on every object store (moto, SeaweedFS, fake-gcs-server with gcsfs plain and
version-aware, Azurite), a path its client would read that way is refused with
``invalid_arguments`` naming the part, before any request; a suffix the client leaves
alone names its own object, literally. Either way ``.env`` is never read, written or
edited, and the root is never a file.
"""

from __future__ import annotations

from typing import Any

import pytest

import toolfs
from tests.backend_fixtures import Backend, GCSBackend

STORES = ["s3", "seaweedfs", "gcs", "gcs-version-aware", "azure"]
SUFFIXES = ["?versionId=x", "?versionId=", "?versionid=x", "#1", "?generation=1"]
PARSED: dict[str, set[str]] = {
    "s3": {"?versionId=x", "?versionId="},
    "seaweedfs": {"?versionId=x", "?versionId="},
    "gcs": set(),  # gcsfs reads no suffix unless version-aware
    "gcs-version-aware": {"#1", "?generation=1"},
    "azure": {"?versionid=x"},
}
"""The suffixes each store's client reads as a version: these must be refused."""
SECRET = b"SECRET=hunter2\n"


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> Any:
    """``(name, backend)`` with a fresh root; the version-aware gcsfs is its own case."""
    name: str = request.param
    fixture = {"s3": "s3_backend", "seaweedfs": "seaweedfs_backend",
               "gcs": "gcs_backend", "gcs-version-aware": "gcs_backend",
               "azure": "azure_backend"}[name]
    b: Backend = request.getfixturevalue(fixture)
    b.setup()
    if name == "gcs-version-aware":
        assert isinstance(b, GCSBackend)
        b.fs = b.emulator.gcsfs_filesystem(version_aware=True)
    try:
        yield name, b
    finally:
        b.teardown()


def _requests(b: Backend) -> list[Any]:
    return list(b.emulator.requests())  # type: ignore[attr-defined]


def _calls(name: str) -> list[tuple[str, dict[str, str]]]:
    return [("read", {"file_path": name}),
            ("write", {"file_path": name, "content": "ATTACK\n"}),
            ("read", {"file_path": name}),
            ("edit", {"file_path": name, "old_string": "ATTACK", "new_string": "EDITED"})]


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_suffix_never_reaches_the_denied_file(store: Any, suffix: str) -> None:
    name, b = store
    b.put(".env", SECRET)
    ws = toolfs.Workspace(b.fs, root=b.root, deny=[".env"])
    assert ws.execute("read", {"file_path": ".env"}).error.code == "denied"  # type: ignore[union-attr]
    path = ".env" + suffix
    if suffix in PARSED[name]:
        for tool, args in _calls(path):
            b.emulator.clear_requests()  # type: ignore[attr-defined]
            out = ws.execute(tool, args)
            assert out.error is not None and out.error.code == "invalid_arguments", (
                tool, out.text)
            assert out.error.details["part"] == suffix
            assert f"'{suffix}' is not allowed" in out.error.message
            assert out.error.path == path
            assert _requests(b) == [], (tool, _requests(b))  # refused before any request
    else:
        # The client leaves the suffix alone: the path names its own object.
        outs = [ws.execute(tool, args) for tool, args in _calls(path)]
        assert outs[0].error is not None and outs[0].error.code == "not_found", outs[0].text
        assert [o.error for o in outs[1:]] == [None, None, None], [o.text for o in outs]
        assert "ATTACK" in outs[2].text and "hunter2" not in outs[2].text
        assert b.get(path) == b"EDITED\n"
    assert b.get(".env") == SECRET


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_the_root_is_never_a_file(store: Any, suffix: str) -> None:
    """A suffix alone would name the root's own key (``ws/`` once s3fs cut it off):
    refused where the client reads it, else a file of that literal name in the root."""
    name, b = store
    ws = toolfs.Workspace(b.fs, root=b.root)
    store_ = ws.fs.store
    write = ws.execute("write", {"file_path": suffix, "content": "over the root\n"})
    read = ws.execute("read", {"file_path": suffix})
    listed = {e.path: e.kind for e in store_.list_dir(b.root)}
    if suffix in PARSED[name]:
        for out in (write, read):
            assert out.error is not None and out.error.code == "invalid_arguments", out.text
        assert listed == {}
    else:
        assert write.error is None and read.error is None, (write.text, read.text)
        assert listed == {f"{b.root}/{suffix}": "file"}


@pytest.mark.parametrize("suffix", ["?versionId=x", "#1", "?versionid=x"])
def test_listings_and_many_reads_refuse_a_parsed_directory(store: Any, suffix: str) -> None:
    """Listing ``d<suffix>`` and reading files through ``get_many`` take the same check:
    a directory name the client would cut is refused, not listed as ``d``."""
    name, b = store
    b.put("d/inner.txt", b"inner\n")
    ws = toolfs.Workspace(b.fs, root=b.root)
    st = ws.fs.store
    path = f"{b.root}/d{suffix}"
    many = dict(st.get_many([f"{path}/inner.txt"]))
    if suffix in PARSED[name]:
        with pytest.raises(toolfs.FsError) as caught:
            list(st.list_dir(path))
        assert caught.value.code == "invalid_arguments"
        with pytest.raises(toolfs.FsError) as caught:
            list(st.list_files(path))
        assert caught.value.code == "invalid_arguments"
    else:
        assert list(st.list_files(path)) == []  # its own (empty) prefix, not d/
    # A file below: refused where the client would cut its key, else its own (missing)
    # object; never d/inner.txt (gcsfs reads "#1/inner.txt" as no generation).
    err = many[f"{path}/inner.txt"]
    assert isinstance(err, toolfs.FsError), err
    assert err.code in ("invalid_arguments", "not_found"), err
    if name in ("s3", "seaweedfs", "azure") and suffix in PARSED[name]:
        assert err.code == "invalid_arguments"


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_the_policy_filesystems_own_calls_take_the_same_check(store: Any,
                                                              suffix: str) -> None:
    """``info``, ``exists``, ``isfile``, ``modified``, ``ls`` and ``find`` call the
    client directly: a suffix it would read is refused there too, never described as
    ``.env``."""
    name, b = store
    b.put(".env", SECRET)
    fs = toolfs.Workspace(b.fs, root=b.root, deny=[".env"]).fs
    path = ".env" + suffix
    assert fs.exists(path) is False  # a name that cannot be stored does not exist
    for call in (fs.info, fs.isfile, fs.modified, fs.ls, fs.find):
        if suffix in PARSED[name]:
            with pytest.raises(toolfs.FsError) as caught:
                call(path)
            assert caught.value.code == "invalid_arguments", call
        else:
            try:
                answer = call(path)
            except toolfs.FsError as err:
                assert err.code == "not_found", (call, err)
            except FileNotFoundError:
                pass  # modified() of a missing file, as fsspec answers it
            else:
                assert not answer, (call, answer)  # its own (missing) object
    assert b.get(".env") == SECRET
