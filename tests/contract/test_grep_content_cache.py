"""grep on object stores reuses the content it downloaded when the listing says the
object did not change (its ETag / generation as listed), and only then: requests per
call counted at the S3 (moto), GCS (fake-gcs-server) and Azure (Azurite) emulators."""

from __future__ import annotations

from typing import Any

import pytest

from toolfs.policy.content_cache import ContentCache, shared_cache
from toolfs.versions import FileVersion

N = 40


@pytest.fixture(params=["s3", "gcs", "azure"])
def cloud(request: pytest.FixtureRequest) -> Any:
    b = request.getfixturevalue(f"{request.param}_backend")
    b.setup()
    return b


def counted(b: Any, call: Any) -> tuple[Any, list[Any]]:
    b.emulator.clear_requests()
    out = call()
    return out, [r for r in b.emulator.requests() if not r.path.startswith("/_toolfs")]


def _body(i: int, tag: str = "") -> bytes:
    lines = [f"line {n} of {i}" for n in range(20)]
    if i % 3 == 0:
        lines[7] = f"needle {i}{tag}"
    return ("\n".join(lines) + "\n").encode()


def _tree(b: Any) -> None:
    b.fs.pipe({b.key(f"src/p{i % 4}/m{i:03}.py"): _body(i) for i in range(N)})


def _summary(result: Any) -> tuple[Any, ...]:
    return (result.files, [(m.path, m.line, m.text) for m in result.matches],
            result.counts, result.files_searched, result.skipped, result.truncated)


def _listing(reqs: list[Any]) -> list[Any]:
    return [r for r in reqs if "/src/p" not in r.path and "%2Fsrc%2Fp" not in r.path]


def _gets(reqs: list[Any]) -> list[Any]:
    return [r for r in reqs if ("/src/p" in r.path or "%2Fsrc%2Fp" in r.path)]


def test_second_grep_costs_the_listing_only(cloud: Any) -> None:
    _tree(cloud)
    # A budget of its own: other tests' entries never evict these.
    ws = cloud.workspace(content_cache_bytes=8 << 20, gitignore=False)
    other = ws.new_context()  # contexts of one process share the cache
    cold, reqs = counted(cloud, lambda: ws.grep("needle", path="src", output_mode="content"))
    assert len(_gets(reqs)) == N
    listing = len(_listing(reqs))
    for mode in ("files_with_matches", "content", "count"):
        warm, reqs = counted(cloud, lambda m=mode: other.grep("needle", path="src",
                                                                output_mode=m))
        assert _gets(reqs) == [], [r.path for r in reqs]
        assert len(reqs) == listing
        if mode == "content":
            assert _summary(warm) == _summary(cold)
    assert len(cold.files) == len(range(0, N, 3))


def test_changed_new_and_deleted_objects(cloud: Any) -> None:
    _tree(cloud)
    ws = cloud.workspace(content_cache_bytes=8 << 20, gitignore=False)
    ws.grep("needle", path="src")
    # behind toolfs's back: K=3 changes (one rewritten with the same length), one new,
    # one deleted
    cloud.put("src/p0/m000.py", _body(0, "X"))
    cloud.put("src/p1/m001.py", _body(1).replace(b"line 3 of 1", b"needle now"))
    cloud.put("src/p2/m002.py", _body(2).replace(b"line", b"LINE"))
    cloud.put("src/p3/new.py", b"needle new\n")
    cloud.remove("src/p3/m003.py")
    result, reqs = counted(cloud, lambda: ws.grep("needle", path="src", output_mode="content"))
    fetched = sorted(r.path.rsplit("/", 1)[-1].rsplit("%2F", 1)[-1] for r in _gets(reqs))
    assert fetched == ["m000.py", "m001.py", "m002.py", "new.py"], fetched
    fresh = cloud.workspace(content_cache_bytes=0, gitignore=False)
    assert _summary(result) == _summary(fresh.grep("needle", path="src",
                                                   output_mode="content"))
    texts = {m.path: m.text for m in result.matches}
    assert texts["src/p0/m000.py"] == "needle 0X" and "src/p3/new.py" in texts
    assert "src/p3/m003.py" not in texts
    # the deleted object's bytes are gone from the cache too
    cache = ws.fs.content_cache
    assert cache is not None
    assert (ws.fs._cache_namespace, cloud.key("src/p3/m003.py")) not in cache._items


def test_budget_too_small_for_the_tree(cloud: Any) -> None:
    _tree(cloud)
    budget = 5 * len(_body(1))  # five files of forty
    ws = cloud.workspace(content_cache_bytes=budget, gitignore=False)
    fresh = cloud.workspace(content_cache_bytes=0, gitignore=False)
    first = ws.grep("needle", path="src", output_mode="content")
    second, reqs = counted(cloud, lambda: ws.grep("needle", path="src",
                                                  output_mode="content"))
    assert _summary(first) == _summary(second) == _summary(
        fresh.grep("needle", path="src", output_mode="content"))
    assert len(_gets(reqs)) >= N - 5
    assert ws.fs.content_cache is not None and ws.fs.content_cache.bytes_held <= budget


def test_denied_content_is_never_cached(cloud: Any) -> None:
    cloud.put("src/secret.env", b"needle secret\n")
    cloud.put("src/ok.py", b"needle ok\n")
    ws = cloud.workspace(content_cache_bytes=4 << 20, deny=["**/*.env"], gitignore=False)
    assert ws.grep("needle", path="src").files == ["src/ok.py"]
    cache = ws.fs.content_cache
    assert cache is not None
    held = {p for (ns, p) in cache._items if ns == ws.fs._cache_namespace}
    assert cloud.key("src/ok.py") in held and cloud.key("src/secret.env") not in held


def test_grep_reads_a_file_over_the_first_block_in_one_request(cloud: Any) -> None:
    big = b"".join(b"row %07d\n" % i for i in range(150_000)) + b"needle\n"  # 1.8 MB
    cloud.put("big/data.txt", big)
    ws = cloud.workspace(first_block=64 * 1024, content_cache_bytes=0)
    result, reqs = counted(cloud, lambda: ws.grep("needle", path="big"))
    assert result.files == ["big/data.txt"]
    body = [r for r in reqs if "data.txt" in r.path]
    assert len(body) == 1, [(r.method, r.path, r.query) for r in reqs]


def test_cache_unit_bounds_and_versions(tmp_path: Any) -> None:
    v1, v2 = FileVersion(kind="etag", value='"a"'), FileVersion(kind="etag", value='"b"')
    for directory in (None, str(tmp_path)):
        cache = ContentCache(10, directory)
        cache.put("ns", "b/k", v1, b"12345")
        assert cache.get("ns", "b/k", v1) == b"12345"
        assert cache.get("ns", "b/k", v2) is None  # another version: dropped
        assert cache.get("ns", "b/k", v1) is None
        cache.put("ns", "b/a", v1, b"123456")
        cache.put("ns", "b/b", v1, b"123456")  # over budget: the older goes
        assert cache.get("ns", "b/a", v1) is None and cache.bytes_held == 6
        cache.put("ns", "b/c", v1, b"x" * 11)  # larger than the budget: not held
        assert cache.get("ns", "b/c", v1) is None
        cache.forget_paths("ns", cache.paths_under("ns", "b"))
        assert len(cache) == 0
    assert shared_cache(0) is None
    assert shared_cache(1234) is shared_cache(1234)


class GrepContentCache:
    """grep's content cache on every backend."""

    def test_denied_only_directory_is_an_empty_result_everywhere(self, backend: Any) -> None:
        backend.put("d/.env", b"needle\n")
        backend.put("d/sub/x.key", b"needle\n")
        ws = backend.workspace(deny=["**/.env", "**/*.key"])
        for mode in ("files_with_matches", "content", "count"):
            result = ws.grep("needle", path="d", output_mode=mode)
            assert result.files == [] and result.files_searched == 0
        assert ws.grep("needle", path="d/").files == []
        assert ws.grep("needle", path="d/sub").files == []
