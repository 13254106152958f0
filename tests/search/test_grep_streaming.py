"""grep over a big prefix streams the listing: files are searched as the listing's pages
come, in path order (the order a whole sorted listing gives), memory bounded by the
read-ahead window, and once the result is full no further page is asked for. glob and
ls stream the pages too. Counted at the S3 (moto), GCS (fake-gcs-server) and Azure
(Azurite) emulators with a small page size, so a few hundred objects span many pages;
the 100,000-object measurement is benchmarks/bench_big_prefix.py."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from typing import Any

import fsspec
import pytest

import toolfs
from toolfs.backends.base import Blob, Entry
from toolfs.backends.memory import MemoryStore
from toolfs.errors import fs_error
from toolfs.versions import FileVersion

PAGE = 10
DIRS = ["-dash", "(group)", "+page", ".hidden", "a", "a-b", "a.b", "sub"]
FILES_PER_DIR = 12


@pytest.fixture(params=["s3", "gcs", "azure"])
def cloud(request: pytest.FixtureRequest) -> Any:
    b = request.getfixturevalue(f"{request.param}_backend")
    b.setup()
    return b


def _tree(b: Any) -> int:
    """Names that sort before ``.gitignore`` (``-dash``, ``(group)``, ``+page``,
    ``.env``) around ``.gitignore`` files that ignore some of them; returns the count."""
    files: dict[str, bytes] = {}
    for d in DIRS:
        for i in range(FILES_PER_DIR):
            body = f"line one\nneedle {d} {i}\nline three\n" if i % 5 == 0 else "hay\n"
            files[f"big/{d}/f{i:02}.py"] = body.encode()
    files["big/.gitignore"] = b"*.log\n-dash/f0*\n!.hidden\n"
    files["big/-top.py"] = b"needle before the root ignore\n"
    files["big/.env"] = b"needle hidden\n"
    files["big/a/.gitignore"] = b"f1*\n-f1*\n"
    files["big/a/-early.py"] = b"needle waits for a/.gitignore\n"
    files["big/a/-f1x.py"] = b"needle\n"
    files["big/sub/x.log"] = b"needle ignored\n"
    files["big/sub/(g)/.gitignore"] = b"*.py\n"
    files["big/sub/(g)/k.py"] = b"needle ignored below\n"
    files["big/sub/(g)/k.txt"] = b"needle kept\n"
    b.fs.pipe({b.key(k): v for k, v in files.items()})
    return len(files)


def _pages(reqs: list[Any]) -> int:
    """Listing requests (S3 ListObjectsV2, GCS objects.list, Azure List Blobs)."""
    return sum(1 for r in reqs if "list-type" in r.params or r.path.endswith("/o")
               or r.params.get("comp") == ["list"])


def _counted(b: Any, call: Any) -> tuple[Any, list[Any]]:
    b.emulator.clear_requests()
    out = call()
    return out, [r for r in b.emulator.requests() if not r.path.startswith("/_toolfs")]


def _summary(result: Any) -> tuple[Any, ...]:
    return (result.files, [(m.path, m.line, m.text, m.context) for m in result.matches],
            result.counts, result.files_searched, result.skipped, result.truncated,
            result.ignore_rules_not_applied)


def test_streamed_grep_equals_the_sorted_whole_listing(cloud: Any) -> None:
    total = _tree(cloud)
    ws = cloud.workspace(content_cache_bytes=8 << 20)
    store = ws.fs.store
    store.list_page_size = PAGE
    assert store.lists_in_order
    cases: list[dict[str, Any]] = [
        {}, {"output_mode": "content", "context": 1}, {"output_mode": "count"},
        {"glob": "*.py"}, {"path": "big/a"}, {"glob": "big/sub/**"},
        {"output_mode": "content", "head_limit": 7}, {"head_limit": 3},
    ]
    for case in cases:
        args = {"path": "big", **case}
        streamed, reqs = _counted(cloud, lambda a=args: ws.grep("needle", **a))
        store.lists_in_order = False  # the whole listing, sorted, first (as before)
        try:
            whole, whole_reqs = _counted(cloud, lambda a=args: ws.grep("needle", **a))
        finally:
            del store.lists_in_order
        if streamed.truncated:  # counts cover the files met before the stop
            assert _summary(streamed)[:4] == _summary(whole)[:4], case
            assert _pages(reqs) < _pages(whole_reqs), case
        else:
            assert _summary(streamed) == _summary(whole), case
            assert _pages(reqs) == _pages(whole_reqs), case
    result = ws.grep("needle", path="big")
    assert "big/a/-early.py" in result.files and "big/a/-f1x.py" not in result.files
    assert "big/-dash/f00.py" not in result.files and "big/-dash/f10.py" in result.files
    assert "big/.env" not in result.files and "big/.hidden/f00.py" in result.files
    assert "big/sub/(g)/k.txt" in result.files and "big/sub/(g)/k.py" not in result.files
    assert "big/sub/x.log" not in result.files
    assert total // PAGE <= _pages(_counted(cloud, lambda: ws.grep("x", path="big"))[1])


def test_head_limit_stops_the_listing(cloud: Any) -> None:
    _tree(cloud)
    # (without .gitignore files: with them, the files listed before big/.gitignore --
    # a third of this tree -- wait for it, as test_streamed_grep_... shows)
    ws = cloud.workspace(content_cache_bytes=0, gitignore=False)
    ws.fs.store.list_page_size = PAGE
    full, full_reqs = _counted(cloud, lambda: ws.grep("needle", path="big"))
    assert not full.truncated and _pages(full_reqs) >= 10
    for mode in ("files_with_matches", "content", "count"):
        first, reqs = _counted(cloud, lambda m=mode: ws.grep(
            "needle", path="big", output_mode=m, head_limit=2))
        assert first.truncated
        # the third match is in the first pages; the read-ahead (16 files) may reach one
        # page further, nothing beyond
        assert _pages(reqs) <= 4, (mode, _pages(reqs))
        gets = len(reqs) - _pages(reqs)
        assert gets < 40, gets


def test_glob_and_ls_page_through_a_big_prefix(cloud: Any) -> None:
    names = [f"flat/f{i:03}.txt" for i in range(120)]
    cloud.fs.pipe({cloud.key(n): b"x" for n in names})
    ws = cloud.workspace()
    ws.fs.store.list_page_size = PAGE
    found, reqs = _counted(cloud, lambda: ws.glob("**/*.txt", path="flat"))
    assert sorted(found.paths) == names and _pages(reqs) in (12, 13)
    listing, reqs = _counted(cloud, lambda: ws.ls("flat"))
    assert [e.name for e in listing.entries] == [n.split("/")[1] for n in names]
    assert _pages(reqs) in (12, 13)
    # directories across pages: each once (a prefix repeated on the next page is not
    # listed twice; only the last page's prefixes are remembered)
    cloud.fs.pipe({cloud.key(f"tree/d{i:02}/x{j}.txt"): b"x" for i in range(30)
                   for j in range(3)})
    tree = ws.ls("tree")  # (fake-gcs-server puts every prefix on the first page)
    assert [e.name for e in tree.entries] == [f"d{i:02}" for i in range(30)]


def test_an_early_stop_never_shows_a_deleted_or_stale_object(cloud: Any) -> None:
    _tree(cloud)
    ws = cloud.workspace(content_cache_bytes=8 << 20)
    ws.fs.store.list_page_size = PAGE
    ws.grep("needle", path="big")  # everything cached
    cloud.remove("big/+page/f00.py")
    cloud.put("big/+page/f05.py", b"needle changed\n")
    cloud.remove("big/sub/f10.py")  # after the stop below: still cached, never listed
    first = ws.grep("needle", path="big", output_mode="content", head_limit=8)
    assert first.truncated
    texts = {m.path: m.text for m in first.matches}
    assert "big/+page/f00.py" not in texts and texts["big/+page/f05.py"] == "needle changed"
    cache = ws.fs.content_cache
    assert cache is not None
    key = (ws.fs._cache_namespace, cloud.key("big/sub/f10.py"))
    assert key in cache._items  # an incomplete listing proves no deletion
    whole = ws.grep("needle", path="big")
    assert "big/sub/f10.py" not in whole.files and key not in cache._items
    fresh = cloud.workspace(content_cache_bytes=0)
    assert _summary(whole) == _summary(fresh.grep("needle", path="big"))


def test_a_store_listing_directory_by_directory_falls_back_once(
        seaweedfs_backend: Any) -> None:
    """SeaweedFS lists its filer's directories one by one (``a/x.py`` before
    ``a.py``), not in key order as S3 does: the first grep finds that out, answers as
    sorting the whole listing would, and the store lists whole from then on."""
    b = seaweedfs_backend
    b.setup()
    _tree(b)
    b.put("big/a.py", b"needle beside a/\n")
    ws = b.workspace(content_cache_bytes=0)
    store = ws.fs.store
    store.list_page_size = PAGE
    first, reqs = _counted(b, lambda: ws.grep("needle", path="big"))
    assert not store.lists_in_order
    again, again_reqs = _counted(b, lambda: ws.grep("needle", path="big"))
    assert _summary(first) == _summary(again)
    assert first.files == sorted(first.files) and "big/a.py" in first.files
    assert _pages(again_reqs) < _pages(reqs) <= 2 * _pages(again_reqs)


# -- memory bounded by the window, not the prefix (a lazily generated listing) --------

N = 20_000


class OrderedHugeListing(MemoryStore):
    """Memory, except that listing yields N generated files one at a time, in path
    order (as object stores list), and reads answer generated bytes; counts both."""

    lists_in_order = True
    count = N
    yielded = 0
    reads = 0
    shuffled = False

    def list_files(self, prefix: str, *, sizes: bool = True) -> Iterator[Entry]:
        order = range(self.count)
        if self.shuffled:  # out of order: the streamed grep must not be used
            order = range(self.count - 1, -1, -1)
        for i in order:
            OrderedHugeListing.yielded += 1
            yield Entry(path=f"/huge/d{i // 500:03}/f{i:06}.txt", kind="file", size=None,
                        mtime=None)

    def get(self, path: str, *, start: int = 0, length: int | None = None,
            if_version: FileVersion | None = None) -> Blob:
        OrderedHugeListing.reads += 1
        if not path.startswith("/huge/d") or not path.endswith(".txt"):
            raise fs_error("not_found", f"{path} does not exist", path=path)
        i = int(path[-10:-4])
        data = b"needle %d\n" % i if i % 1000 == 7 else b"hay\n"
        return Blob(data=data, version=FileVersion.of_bytes(data), size=len(data))


def _huge(**options: Any) -> toolfs.Workspace:
    fs = fsspec.filesystem("memory")
    store = OrderedHugeListing(fs, root="/huge")
    return toolfs.Workspace(fs, root="/huge", store=store, content_cache_bytes=0, **options)


def test_grep_holds_the_window_not_the_listing() -> None:
    ws = _huge()
    OrderedHugeListing.yielded = OrderedHugeListing.reads = 0
    tracemalloc.start()
    try:
        result = ws.grep("needle")
        peak = tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()
    assert OrderedHugeListing.yielded == N and result.files_searched == N
    assert len(result.files) == N // 1000 and result.files == sorted(result.files)
    # 20,000 Found records held at once take about 10 MB
    assert peak < 3, peak
    OrderedHugeListing.yielded = OrderedHugeListing.reads = 0
    first = ws.grep("needle", head_limit=3)
    assert first.files == result.files[:3] and first.truncated
    # stopped at the fourth match (file 3007), with the read-ahead window past it
    assert 3008 <= OrderedHugeListing.yielded < 3100, OrderedHugeListing.yielded


def test_a_listing_out_of_order_falls_back_to_sorting() -> None:
    ws = _huge()
    store = ws.fs.store
    assert isinstance(store, OrderedHugeListing)
    store.count = 3000
    expected = ws.grep("needle", output_mode="content")
    store.shuffled = True
    again = ws.grep("needle", output_mode="content")
    assert _summary(again) == _summary(expected)
    assert [m.path for m in again.matches] == sorted(m.path for m in again.matches)
    assert not store.lists_in_order  # found out once: the whole listing from now on
