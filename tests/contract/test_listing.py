"""The store listing interface (``list_files``, ``list_dir``, ``get_many``) on every
backend: the same answers everywhere, fresh from the backend, and what it costs on the
wire (requests counted at the emulators)."""

from __future__ import annotations

import asyncio
import math
import os
import socket
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import fsspec
import pytest

import toolfs
from tests.backend_fixtures import (
    AzureBackend,
    Backend,
    GCSBackend,
    LocalBackend,
    S3Backend,
    _CloudBackend,
)
from tests.contract.test_discovery import TREE as DISCOVERY_TREE
from toolfs.backends import GenericStore, store_for
from toolfs.backends.base import Blob, Entry, Store
from toolfs.backends.memory import MemoryStore
from toolfs.search import ripgrep

TREE: dict[str, bytes] = {
    "a.txt": b"alpha\n",
    "src/main.py": b"print(1)\n",
    "src/pkg/mod.py": b"x = 1\n",
    "src/pkg/deep/empty.txt": b"",
    "docs/readme.md": b"# readme\n",
    "docs/odd name %2F+é.md": b"odd\n",
}


def store_of(b: Backend) -> Store:
    return b.workspace().fs.store  # type: ignore[no-any-return]


def rel(b: Backend, path: str) -> str:
    root = b.root.rstrip("/")
    assert path.startswith(root + "/"), (path, root)
    return path[len(root) + 1:]


def shape(b: Backend, entries: list[Entry]) -> set[tuple[str, str, int | None]]:
    return {(rel(b, e.path), e.kind, e.size) for e in entries}


def behind_back(b: Backend, name: str, data: bytes) -> None:
    """Write as another program would: on the cloud, through a separate client, so
    that the store's own fsspec instance gets no chance to invalidate its caches."""
    if isinstance(b, S3Backend | GCSBackend | AzureBackend):
        other = (b.emulator.s3fs_filesystem() if isinstance(b, S3Backend)
                 else b.emulator.adlfs_filesystem() if isinstance(b, AzureBackend)
                 else b.emulator.gcsfs_filesystem())
        other.pipe_file(b.key(name), data)
    else:
        b.put(name, data)


@pytest.fixture(params=["s3", "seaweedfs", "gcs", "azure"])
def cloud(request: pytest.FixtureRequest) -> Any:
    b: Backend = request.getfixturevalue(f"{request.param}_backend")
    b.setup()
    return b


def _many(cloud: Any, files: dict[str, bytes]) -> None:
    """Create many objects at once (one client, its own parallelism)."""
    cloud.fs.pipe({cloud.key(k): v for k, v in files.items()})
    cloud.fs.invalidate_cache()


def _listing_requests(cloud: Any) -> list[Any]:
    return [r for r in cloud.emulator.requests() if not r.path.startswith("/_toolfs")]


def _is_listing(cloud: Any, r: Any) -> bool:
    if isinstance(cloud, S3Backend):
        return r.method == "GET" and r.path == f"/{cloud.bucket}" and \
            r.params.get("list-type") == ["2"]
    if isinstance(cloud, AzureBackend):  # List Blobs
        return r.method == "GET" and r.path == f"/devstoreaccount1/{cloud.bucket}" and \
            r.params.get("comp") == ["list"]
    return r.method == "GET" and r.path == f"/storage/v1/b/{cloud.bucket}/o"


def _token(cloud: Any, r: Any) -> str | None:
    key = ("continuation-token" if isinstance(cloud, S3Backend)
           else "marker" if isinstance(cloud, AzureBackend) else "pageToken")
    return (r.params.get(key) or [None])[0]


class _Instrumented:
    """Wraps a store's ``get_async``: counts calls, concurrency and cancellations."""

    def __init__(self, store: Any, *, gate: int = 0, hold: set[str] | None = None) -> None:
        self.store, self.orig = store, store.get_async
        self.started: list[str] = []
        self.now = self.peak = self.cancelled = 0
        self.gate = gate
        self.hold = hold or set()
        self.full = asyncio.Event()
        self.never = asyncio.Event()
        store.get_async = self

    async def __call__(self, path: str, **kw: Any) -> Blob:
        self.started.append(path)
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            if self.now >= self.gate:
                self.full.set()
            if len(self.started) <= self.gate:
                # The first calls wait until `gate` of them run at once: a window that
                # ran them one at a time would time out here and fail the test.
                await asyncio.wait_for(self.full.wait(), timeout=20)
            if path in self.hold:
                await self.never.wait()
            blob: Blob = await self.orig(path, **kw)
            return blob
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.now -= 1


@pytest.fixture
def local(tmp_path: Any) -> LocalBackend:
    b = LocalBackend(str(tmp_path))
    b.setup()
    return b


N = 50_000


class HugeListing(MemoryStore):
    """Memory, except that listing the root yields N generated files, one at a time,
    and counts them."""

    yielded = 0

    def list_files(self, prefix: str, *, sizes: bool = True) -> Iterator[Entry]:
        for i in range(N):
            HugeListing.yielded += 1
            yield Entry(path=f"/huge/d{i % 100:02}/f{i:06}.txt", kind="file", size=4,
                        mtime=float(i))

    def list_dir(self, path: str) -> Iterator[Entry]:
        for i in range(N):
            HugeListing.yielded += 1
            yield Entry(path=f"/huge/f{i:06}.txt", kind="file", size=4, mtime=float(i))


def _peak(call: Any) -> tuple[Any, float]:
    tracemalloc.start()
    try:
        out = call()
        return out, tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def test_list_files_is_paginated_listing_only(cloud: Any, monkeypatch: Any) -> None:
    n, page = 25, 10
    _many(cloud, {f"many/k{i:03d}.txt": b"x" * i for i in range(n)}
          | {"many/sub/deeper/z.txt": b"zz", "many/marker/": b""})
    store = store_of(cloud)
    monkeypatch.setattr(store, "list_page_size", page)
    cloud.emulator.clear_requests()
    files = list(store.list_files(f"{cloud.root}/many"))
    reqs = _listing_requests(cloud)
    keys = n + 2  # the marker counts against the page, though it is not a file
    assert len(reqs) == math.ceil(keys / page) == 3, reqs
    assert all(_is_listing(cloud, r) and r.status == 200 for r in reqs), reqs
    assert _token(cloud, reqs[0]) is None and all(_token(cloud, r) for r in reqs[1:])
    assert len(files) == n + 1  # no "many/marker/" entry
    assert {rel(cloud, e.path) for e in files} == (
        {f"many/k{i:03d}.txt" for i in range(n)} | {"many/sub/deeper/z.txt"})
    assert all(e.version is not None and e.version.kind == cloud.version_kind
               for e in files)

    # The default page: one request for all of them, asking for 1000.
    monkeypatch.undo()
    cloud.emulator.clear_requests()
    assert len(list(store.list_files(f"{cloud.root}/many"))) == n + 1
    (req,) = _listing_requests(cloud)
    size_key = ("max-keys" if isinstance(cloud, S3Backend)
                else "maxresults" if isinstance(cloud, AzureBackend) else "maxResults")
    assert req.params[size_key] == ["1000"]


def test_list_dir_is_one_delimiter_listing(cloud: Any, monkeypatch: Any) -> None:
    files, dirs = 22, 5
    _many(cloud, {f"d/f{i:02d}": b"y" for i in range(files)}
          | {f"d/s{j}/x/y.txt": b"deep" for j in range(dirs)} | {"d/": b""})
    store = store_of(cloud)
    cloud.emulator.clear_requests()
    entries = list(store.list_dir(f"{cloud.root}/d"))
    (req,) = _listing_requests(cloud)
    assert _is_listing(cloud, req)
    delimiter = "delimiter"
    assert req.params[delimiter] == ["/"]
    assert shape(cloud, entries) == ({(f"d/f{i:02d}", "file", 1) for i in range(files)}
                                     | {(f"d/s{j}", "dir", None) for j in range(dirs)})

    monkeypatch.setattr(store, "list_page_size", 10)
    cloud.emulator.clear_requests()
    assert len(list(store.list_dir(f"{cloud.root}/d"))) == files + dirs
    reqs = _listing_requests(cloud)
    # files + dirs + the marker "d/" itself = 28 results, 10 a page
    assert len(reqs) == math.ceil((files + dirs + 1) / 10) == 3, reqs
    assert all(_is_listing(cloud, r) and r.params[delimiter] == ["/"] for r in reqs)

    # The errors cost one more request each, only when the listing came back empty.
    cloud.emulator.clear_requests()
    with pytest.raises(toolfs.FsError) as exc:
        list(store.list_dir(f"{cloud.root}/d/f01"))
    assert exc.value.code == "not_a_file"
    assert len(_listing_requests(cloud)) == 2
    cloud.emulator.clear_requests()
    with pytest.raises(toolfs.FsError) as exc:
        list(store.list_dir(f"{cloud.root}/nothing"))
    assert exc.value.code == "not_found"
    assert len(_listing_requests(cloud)) == 2
    cloud.emulator.clear_requests()
    assert list(store.list_dir(cloud.root + "/d/s0/x")) != []
    assert len(_listing_requests(cloud)) == 1


def test_empty_directory_marker_lists_empty(cloud: Any) -> None:
    _many(cloud, {"empty/": b""})
    store = store_of(cloud)
    assert list(store.list_dir(f"{cloud.root}/empty")) == []
    assert list(store.list_files(f"{cloud.root}/empty")) == []


def test_missing_bucket_is_missing_bucket_naming_it(cloud: Any) -> None:
    store = store_for(cloud.fs, root="no-such-bucket-here/ws")
    for call in (store.list_files, store.list_dir):
        with pytest.raises(toolfs.FsError) as exc:
            list(call("no-such-bucket-here/ws"))
        assert exc.value.code == "missing_bucket"
        assert exc.value.details.get("bucket") == "no-such-bucket-here"
        assert "no-such-bucket-here" in str(exc.value)


def test_bucket_root_lists(cloud: Any) -> None:
    cloud.put("a.txt", b"a")
    store = store_for(cloud.fs, root=cloud.bucket)
    assert {e.path for e in store.list_files(cloud.bucket)} == {f"{cloud.root}/a.txt"}
    assert [(e.path, e.kind) for e in store.list_dir(cloud.bucket)] == [
        (cloud.root, "dir")]


def test_generic_default_does_not_use_stale_caches(s3_backend: S3Backend) -> None:
    """The fsspec defaults over a caching filesystem (s3fs), also through a
    DirFileSystem: a listing cached before a write behind their back is not reused."""
    from fsspec.implementations.dirfs import DirFileSystem

    s3_backend.setup()
    s3_backend.put("a.txt", b"a")
    s3_backend.put("sub/b.txt", b"b")
    for fs, root in ((s3_backend.fs, s3_backend.root),
                     (DirFileSystem(path=s3_backend.root, fs=s3_backend.fs), "")):
        store = GenericStore(fs, root=root or None)
        top = root or ""
        sub = f"{root}/sub" if root else "sub"
        fs.find(top)
        fs.ls(sub)
        s3_backend.fs.ls(f"{s3_backend.root}/sub")
        assert len(list(store.list_files(top))) == len(list(store.list_files(top)))
        name = f"n{len(root)}.txt"
        behind_back(s3_backend, f"sub/{name}", b"n")
        assert name in {e.path.rsplit("/", 1)[-1] for e in store.list_files(top)}
        assert name in {e.path.rsplit("/", 1)[-1] for e in store.list_dir(sub)}


def test_get_many_bounded_window(cloud: Any) -> None:
    names = [f"g{i:02d}.txt" for i in range(12)]
    _many(cloud, {n: n.encode() for n in names})
    store = store_of(cloud)
    probe = _Instrumented(store, gate=4)
    paths = [cloud.key(n) for n in names]
    consumed = 0
    for path, blob in store.get_many(paths, max_in_flight=4):
        consumed += 1
        # never more than the window outstanding, counting the result just handed over
        assert len(probe.started) - consumed <= 3
        assert isinstance(blob, Blob) and blob.data == path.rsplit("/", 1)[1].encode()
    assert consumed == len(paths)
    assert probe.peak == 4
    assert probe.started == paths  # started in input order too


def test_get_many_abandoned_early_cancels(cloud: Any) -> None:
    names = [f"h{i:02d}.txt" for i in range(20)]
    _many(cloud, {n: b"h" for n in names})
    store = store_of(cloud)
    paths = [cloud.key(n) for n in names]
    probe = _Instrumented(store, hold=set(paths[1:]))
    it = store.get_many(paths, max_in_flight=4)
    first_path, first = next(it)
    assert first_path == paths[0] and isinstance(first, Blob)
    assert len(probe.started) == 4
    it.close()  # type: ignore[attr-defined]
    # close() returns once the calls in flight were cancelled and unwound
    assert probe.cancelled == 3 and probe.now == 0
    store._sync(asyncio.sleep(0.05))  # let the loop run: nothing new starts
    assert len(probe.started) == 4


def test_get_many_failures_are_yielded(cloud: Any) -> None:
    _many(cloud, {"ok.txt": b"ok", "d/inner.txt": b"i"})
    store = store_of(cloud)
    out = list(store.get_many([cloud.key("ok.txt"), cloud.key("nope.txt"), cloud.key("d"),
                               cloud.key("ok.txt")], max_in_flight=2))
    assert [isinstance(r, Blob) for _, r in out] == [True, False, False, True]
    assert all(isinstance(r, Blob | toolfs.FsError) for _, r in out)
    assert [r.code for _, r in out if isinstance(r, toolfs.FsError)] == [
        "not_found", "not_found"]  # no directory check for listed paths (see above)


def test_local_symlinks_and_special_files(local: LocalBackend, tmp_path: Any) -> None:
    root = local.root
    local.put("real.txt", b"real!")
    local.put("d/inner.txt", b"in")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(b"secret")
    os.symlink(os.path.join(root, "real.txt"), os.path.join(root, "link.txt"))
    os.symlink("../real.txt", os.path.join(root, "d", "rel-link.txt"))
    os.symlink(str(outside / "secret.txt"), os.path.join(root, "out.txt"))
    os.symlink(os.path.join(root, "gone.txt"), os.path.join(root, "dangling.txt"))
    os.symlink(root, os.path.join(root, "d", "loop"))  # a directory loop
    os.symlink("..", os.path.join(root, "d", "up"))
    os.symlink(str(outside), os.path.join(root, "ext"))
    os.symlink("self", os.path.join(root, "self"))  # ELOOP
    os.mkfifo(os.path.join(root, "pipe"))
    sock_path = os.path.join(root, "s.sock")
    sock = None
    if len(os.fsencode(sock_path)) < 100:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(sock_path)
    try:
        store = store_of(local)
        assert shape(local, list(store.list_files(root))) == {
            ("real.txt", "file", 5), ("link.txt", "file", 5), ("d/inner.txt", "file", 2),
            ("d/rel-link.txt", "file", 5)}
        top = shape(local, list(store.list_dir(root)))
        assert top == {("real.txt", "file", 5), ("link.txt", "file", 5),
                       ("d", "dir", None)}
        assert shape(local, list(store.list_dir(f"{root}/d"))) == {
            ("d/inner.txt", "file", 2), ("d/rel-link.txt", "file", 5),
            ("d/loop", "dir", None), ("d/up", "dir", None)}
        # Each listed link names the real file its bytes are read from.
        targets = {e.path: e.target for e in store.list_files(root) if e.target}
        real = os.path.realpath(os.path.join(root, "real.txt"))
        assert targets == {os.path.join(root, "link.txt"): real,
                           os.path.join(root, "d", "rel-link.txt"): real}
        # grep (the Python engine) and glob reach a link inside the root under its own
        # name, and search the file it reaches; links that lead outside, dangle or loop
        # are not there at all.
        ws = local.workspace(grep_engine="python")
        (outside / "secret.txt").write_bytes(b"real! secret")
        found = ws.grep("real!", output_mode="content")
        assert sorted(m.path for m in found.matches) == [
            "d/rel-link.txt", "link.txt", "real.txt"]
        assert found.skipped == {}, found.skipped
        # ripgrep's engine follows no symlink at all (no -L; docs/contract.md).
        if ripgrep.ripgrep_binary() is not None:
            found = local.workspace().grep("real!", output_mode="content")
            assert [m.path for m in found.matches] == ["real.txt"]
            assert found.skipped_unknown
        assert sorted(ws.glob("**/*.txt").paths) == [
            "d/inner.txt", "d/rel-link.txt", "link.txt", "real.txt"]
        denied = local.workspace(deny=["real.txt"])
        assert denied.grep("real!").files == []  # the links reach a denied file
        # A start that resolves outside the root is refused.
        for call in (store.list_files, store.list_dir):
            with pytest.raises(toolfs.FsError) as exc:
                list(call(f"{root}/ext"))
            assert exc.value.code == "outside_root"
        # A FIFO is not a directory either.
        with pytest.raises(toolfs.FsError) as exc:
            list(store.list_dir(f"{root}/pipe"))
        assert exc.value.code == "not_a_file"
    finally:
        if sock is not None:
            sock.close()


def test_local_undecodable_name_is_listed(local: LocalBackend) -> None:
    raw = os.path.join(os.fsencode(local.root), b"bad\xff.txt")
    with open(raw, "wb") as f:
        f.write(b"odd")
    name = os.fsdecode(b"bad\xff.txt")
    store = store_of(local)
    assert shape(local, list(store.list_files(local.root))) == {(name, "file", 3)}
    (entry,) = store.list_dir(local.root)
    assert entry.path == os.path.join(local.root, name) and "\udcff" in entry.path
    blob = store.get(entry.path)
    assert blob.data == b"odd"


def test_memory_list_dir_sees_pseudo_dirs() -> None:
    import fsspec

    fs = fsspec.filesystem("memory")
    root = "/toolfs-listing-pseudo"
    fs.makedirs(f"{root}/empty/inner", exist_ok=True)
    try:
        store = store_for(fs, root=root)
        assert [(e.path, e.kind) for e in store.list_dir(root)] == [
            (f"{root}/empty", "dir")]
        assert list(store.list_dir(f"{root}/empty/inner")) == []
        assert list(store.list_files(root)) == []
    finally:
        fs.rm(root, recursive=True)


def test_glob_and_ls_stream_a_huge_listing() -> None:
    fs = fsspec.filesystem("memory")
    store = HugeListing(fs, root="/huge")
    ws = toolfs.Workspace(fs, root="/huge", store=store, content_cache_bytes=0)
    HugeListing.yielded = 0
    result, peak = _peak(lambda: ws.glob("**/*.txt"))
    assert HugeListing.yielded == N and len(result.paths) == 200 and result.truncated
    assert result.paths[0] == f"d{(N - 1) % 100:02}/f{N - 1:06}.txt"  # newest first
    # 50,000 entries held at once take about 11 MB as Entry objects, 25 MB as Found
    assert peak < 4, peak
    HugeListing.yielded = 0
    listing, peak = _peak(lambda: ws.ls())
    assert HugeListing.yielded == N and len(listing.entries) == 1000 and listing.truncated
    assert peak < 4, peak


class Listing:
    """The backends' listings agree with each other and are fresh."""

    def test_same_tree_same_answers(self, backend: Backend) -> None:
        before = time.time()
        for name, data in TREE.items():
            backend.put(name, data)
        store = store_of(backend)
        root = backend.root

        files = list(store.list_files(root))
        assert len(files) == len(TREE)
        assert shape(backend, files) == {(n, "file", len(d)) for n, d in TREE.items()}
        for e in files:  # every backend here has modification times
            assert e.mtime is not None and before - 600 < e.mtime < time.time() + 600, e
        assert shape(backend, list(store.list_files(f"{root}/src"))) == {
            ("src/main.py", "file", 9), ("src/pkg/mod.py", "file", 6),
            ("src/pkg/deep/empty.txt", "file", 0)}

        assert ("docs/odd name %2F+é.md", "file", 4) in shape(
            backend, list(store.list_dir(f"{root}/docs")))
        assert shape(backend, list(store.list_dir(root))) == {
            ("a.txt", "file", 6), ("src", "dir", None), ("docs", "dir", None)}
        assert shape(backend, list(store.list_dir(f"{root}/src"))) == {
            ("src/main.py", "file", 9), ("src/pkg", "dir", None)}
        assert shape(backend, list(store.list_dir(f"{root}/src/pkg/deep"))) == {
            ("src/pkg/deep/empty.txt", "file", 0)}
        for e in store.list_dir(root):
            if e.kind == "file":
                assert e.mtime is not None and e.mtime > before - 600

        # Where a listing carries versions (S3 ETag, GCS generation), they are the ones a
        # read reports, so a discovery tool can skip unchanged files without reading them.
        for e in files:
            if e.version is not None:
                assert e.version == store.get(e.path).version

    def test_listing_is_fresh(self, backend: Backend) -> None:
        backend.put("a.txt", b"a")
        backend.put("sub/b.txt", b"b")
        store = store_of(backend)
        root = backend.root
        # Prime whatever listing caches the filesystem keeps.
        backend.fs.ls(root)
        backend.fs.find(root)
        assert len(list(store.list_files(root))) == 2
        assert len(list(store.list_dir(f"{root}/sub"))) == 1

        behind_back(backend, "new.txt", b"new!")
        behind_back(backend, "sub/c.txt", b"cc")
        assert shape(backend, list(store.list_files(root))) == {
            ("a.txt", "file", 1), ("sub/b.txt", "file", 1), ("new.txt", "file", 4),
            ("sub/c.txt", "file", 2)}
        assert ("new.txt", "file", 4) in shape(backend, list(store.list_dir(root)))
        assert ("sub/c.txt", "file", 2) in shape(backend, list(store.list_dir(f"{root}/sub")))

    def test_missing_and_file_paths(self, backend: Backend) -> None:
        backend.put("a.txt", b"a")
        backend.put("d/b.txt", b"b")
        store = store_of(backend)
        root = backend.root
        with pytest.raises(toolfs.FsError) as exc:
            list(store.list_dir(f"{root}/missing"))
        assert exc.value.code == "not_found"
        with pytest.raises(toolfs.FsError) as exc:
            list(store.list_dir(f"{root}/a.txt"))
        assert exc.value.code == "not_a_file"
        with pytest.raises(toolfs.FsError) as exc:
            list(store.list_dir(f"{root}/d/b.txt"))
        assert exc.value.code == "not_a_file"
        # list_files answers "every file below": nothing below a missing name or a file.
        assert list(store.list_files(f"{root}/missing")) == []
        assert list(store.list_files(f"{root}/a.txt")) == []
        # A name that merely starts like a directory is not inside it.
        backend.put("dx.txt", b"x")
        assert shape(backend, list(store.list_files(f"{root}/d"))) == {("d/b.txt", "file", 1)}

    def test_empty_root_lists_empty(self, backend: Backend) -> None:
        store = store_of(backend)
        assert list(store.list_files(backend.root)) == []
        assert list(store.list_dir(backend.root)) == []

    def test_get_many_in_order_with_failures(self, backend: Backend) -> None:
        for i in range(6):
            backend.put(f"f{i}.txt", b"%d" % i * (i + 1))
        backend.put("d/x.txt", b"x")
        store = store_of(backend)
        root = backend.root
        names = ["f3.txt", "missing.txt", "f0.txt", "d", "f5.txt", "f1.txt", "f2.txt", "f4.txt"]
        out = list(store.get_many([f"{root}/{n}" for n in names], max_in_flight=3))
        assert [p for p, _ in out] == [f"{root}/{n}" for n in names]
        codes = {n: r.code for n, (_, r) in zip(names, out, strict=True)
                 if isinstance(r, toolfs.FsError)}
        # get_many's paths come from a listing: on object stores a missing one is not_found
        # without the "is it a directory?" requests a read makes to explain a 404
        listed_dir = "not_found" if isinstance(backend, _CloudBackend) else "not_a_file"
        assert codes == {"missing.txt": "not_found", "d": listed_dir}
        for n, (_, r) in zip(names, out, strict=True):
            if n.startswith("f"):
                i = int(n[1])
                assert isinstance(r, Blob) and r.data == b"%d" % i * (i + 1) and r.complete
        # length: a prefix of each file (or all of it, where the adapter read it whole
        # anyway, as ``get`` allows), with the whole file's size
        ((_, head),) = store.get_many([f"{root}/f5.txt"], length=2)
        assert isinstance(head, Blob) and head.size == 6
        assert head.data == b"55" or (head.complete and head.data == b"555555")
        assert list(store.get_many([])) == []

    def test_list_files_equals_the_per_entry_rule(self, backend: Any) -> None:
        for rel, data in DISCOVERY_TREE.items():
            backend.put(rel, data)
        ws = backend.workspace(deny=["secrets/**", "*.pem", "**/.env"])
        fs = ws.fs if hasattr(ws, "fs") else ws._sync.fs
        for path, prefix in ((None, ""), ("src", ""), (None, "src/deep"), ("docs", "")):
            target = fs.search_root(path)
            listed = target.backend_path
            if prefix:
                listed = f"{listed.rstrip('/')}/{prefix}" if listed else prefix
            want = [f for e in fs.store.list_files(listed, sizes=True) if e.kind == "file"
                    if (f := fs._found(target, listed, e, prefix)) is not None]
            got = list(fs.list_files(path, prefix=prefix))
            assert sorted(got, key=lambda f: f.path) == sorted(want, key=lambda f: f.path)
            assert got and all(type(f).__name__ == "Found" for f in got)
        assert "id.pem" not in [f.path for f in fs.list_files(None)]
