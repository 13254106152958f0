"""S3, GCS and Azure specifics: requests per tool call counted at the server, conditions on the
wire, recognising our own write, and the gcsfs internals the GCS adapter relies on."""

from __future__ import annotations

from typing import Any

import pytest

import toolfs
from tests.backend_fixtures import AzureBackend, Backend, GCSBackend, S3Backend
from toolfs.backends.base import Create, Update


@pytest.fixture(params=["s3", "seaweedfs", "gcs", "azure"])
def cloud(request: pytest.FixtureRequest) -> Any:
    b: Backend = request.getfixturevalue(f"{request.param}_backend")
    b.setup()
    return b


def counted(b: Any, call: Any) -> list[Any]:
    b.emulator.clear_requests()
    call()
    return [r for r in b.emulator.requests() if not r.path.startswith("/_toolfs")]


def methods(reqs: list[Any]) -> list[str]:
    return [r.method for r in reqs]


def test_round_trips_per_tool_call(cloud: Any) -> None:
    cloud.put("f.txt", b"alpha\nbeta\n")
    ws = cloud.workspace()
    reqs = counted(cloud, lambda: ws.read("f.txt"))
    assert methods(reqs) == ["GET"], reqs  # content and version in one response
    # edit after a full read of an unchanged file: one conditional PUT, no re-download
    reqs = counted(cloud, lambda: ws.edit("f.txt", "alpha", "ALPHA"))
    assert methods(reqs) in (["PUT"], ["POST"]), reqs
    # edit chain: still one request each
    reqs = counted(cloud, lambda: ws.edit("f.txt", "beta", "BETA"))
    assert len(reqs) == 1
    # write (update) = 1
    assert len(counted(cloud, lambda: ws.write("f.txt", "new\n"))) == 1
    # write (create) = the conditional put, plus one listing that the name is not a
    # "directory" and one metadata request per parent below the root (not a file)
    assert sorted(methods(counted(cloud, lambda: ws.write("g.txt", "created\n"))))[0] == "GET"
    assert len(counted(cloud, lambda: ws.write("h.txt", "created\n"))) == 2
    assert len(counted(cloud, lambda: ws.write("d/e/f.txt", "created\n"))) == 4


def test_conditions_on_the_wire(cloud: Any) -> None:
    ws = cloud.workspace()
    reqs = counted(cloud, lambda: ws.write("c.txt", "one\n"))
    (first,) = [r for r in reqs if r.method in ("PUT", "POST")]
    r = ws.read("c.txt")
    reqs = counted(cloud, lambda: ws.write("c.txt", "two\n"))
    (second,) = reqs
    if isinstance(cloud, S3Backend | AzureBackend):
        assert first.headers.get("if-none-match") == "*"
        assert second.headers.get("if-match") == r.version.value
    else:
        assert first.params["ifGenerationMatch"] == ["0"]
        assert second.params["ifGenerationMatch"] == [r.version.value]


def test_a_stale_refusal_costs_the_refused_put_and_one_get(cloud: Any) -> None:
    # The refused conditional put, then the current bytes, once, for the diff it shows.
    cloud.put("s.txt", b"one\n")
    ws, ws2 = cloud.workspace(), cloud.workspace()
    ws.read("s.txt")
    ws2.read("s.txt")
    cloud.put("s.txt", b"two\n")
    for context, call in ((ws, ("edit", {"file_path": "s.txt", "old_string": "one",
                                          "new_string": "1"})),
                          (ws2, ("write", {"file_path": "s.txt", "content": "x"}))):
        reqs = counted(cloud, lambda c=context, t=call: c.execute(*t))
        assert len(reqs) == 2 and reqs[0].status == 412, reqs
        assert reqs[1].method == "GET" and reqs[1].status in (200, 206)  # (a ranged GET)
    # updating an unobserved file: one refused create-only put (after the listing
    # that checks the name is not a directory, as every create does)
    other = cloud.workspace()
    reqs = counted(cloud, lambda: other.execute("write", {"file_path": "s.txt",
                                                          "content": "x"}))
    # (Azure answers If-None-Match: * on an existing blob 409 BlobAlreadyExists)
    refused = 409 if isinstance(cloud, AzureBackend) else 412
    assert [r.status for r in reqs if r.method in ("PUT", "POST")] == [refused]
    # SeaweedFS's 412 does not say whether an object or an empty folder is in the way:
    # one HEAD tells (see tests/test_s3_differences.py)
    assert len(reqs) == 2 + cloud.refused_create_checks
    assert sum(r.method == "HEAD" for r in reqs) == cloud.refused_create_checks


def test_edit_without_cached_bytes_is_two_requests(cloud: Any) -> None:
    cloud.put("w.txt", b"line\n" * 10)
    ws = cloud.workspace()
    ws.read("w.txt", offset=3, limit=1)
    restarted = cloud.workspace()
    restarted.restore(ws.snapshot())  # the observation survives, the cached bytes do not
    reqs = counted(cloud, lambda: restarted.edit("w.txt", "line\n", "LINE\n",
                                                 replace_all=True))
    assert methods(reqs)[0] == "GET" and len(reqs) == 2, reqs
    assert cloud.get("w.txt") == b"LINE\n" * 10


def test_windowed_read_of_big_object_is_pinned_and_bounded(cloud: Any) -> None:
    lines = b"".join(b"%08d some text to make a line longer\n" % i for i in range(20000))
    cloud.put("big.txt", lines)  # ~860 KB
    ws = cloud.workspace(size_cap=64 * 1024, first_block=16 * 1024, block_size=16 * 1024)
    reqs = counted(cloud, lambda: ws.read("big.txt", offset=100, limit=5))
    assert len(reqs) == 1  # the window lies inside the first block
    r = ws.read("big.txt", offset=1000, limit=3)
    assert r.lines[0].startswith("00000999")
    reqs = counted(cloud, lambda: ws.read("big.txt", offset=1500, limit=2))
    assert 2 <= len(reqs) <= 5  # stops once the window is complete; never the whole object
    assert all(r.status == 206 for r in reqs)
    pinned = reqs[1:]
    if isinstance(cloud, S3Backend | AzureBackend):
        assert all(r.headers.get("if-match") for r in pinned)
    else:
        assert all(r.params.get("ifGenerationMatch") for r in pinned)
    # An overwrite between blocks gives stale, never a torn view.
    f = ws.fs.open_observed("big.txt")
    f.read(16 * 1024)
    cloud.put("big.txt", lines.replace(b"some", b"SOME"))
    with pytest.raises(toolfs.FsError) as exc:
        f.read(16 * 1024)
    assert exc.value.code == "stale"


def test_empty_object_read(cloud: Any) -> None:
    cloud.put("empty.txt", b"")
    ws = cloud.workspace()
    reqs = counted(cloud, lambda: ws.read("empty.txt"))
    # A ranged GET of a 0-byte object is 416 on both services; a second, unranged GET
    # returns its version. Documented in docs/backends.md.
    assert [r.status for r in reqs] == [416, 200]
    ws.write("empty.txt", "now text\n")
    assert cloud.get("empty.txt") == b"now text\n"


def test_own_write_after_lost_response_is_success(cloud: Any) -> None:
    """A retried create whose first attempt landed gets 412; the adapter recognises the
    object as exactly what it sent and reports success."""
    store = cloud.workspace().fs.store
    key = f"{cloud.root}/lost.txt"
    data = b"exactly these bytes\n"
    first = store.put(key, data, Create())  # the attempt whose response was "lost"
    if isinstance(cloud, S3Backend | AzureBackend):
        import asyncio

        own = asyncio.run_coroutine_threadsafe(
            store._own_write(*store._split(key), data), store.fs.loop).result()
    else:
        import fsspec.asyn

        own = fsspec.asyn.sync(store.fs.loop, store._own_write, *store._split(key), data, key)
    assert own == first
    with pytest.raises(toolfs.FsError) as exc:  # not retried: a plain conflict is stale
        store.put(key, data, Create())
    assert exc.value.code == "stale"
    other = store.put(key, b"different\n", Update(first))
    assert other != first


def test_gcsfs_internals_the_adapter_relies_on(gcs_backend: GCSBackend) -> None:
    import gcsfs
    import gcsfs.retry

    gcs_backend.setup()
    fs = gcs_backend.fs
    for name in ("_location", "_set_session", "_get_params", "_get_headers", "split_path",
                 "requests_timeout"):
        assert hasattr(fs, name), name
    assert fs.split_path("b/k/x.txt")[:2] == ("b", "k/x.txt")
    assert tuple(int(p) for p in gcsfs.__version__.split(".")[:1]) < (2027,)
    # Why the adapter builds its own upload: gcsfs maps every 412 to FileExistsError.
    with pytest.raises(FileExistsError):
        gcsfs.retry.validate_response(412, b"", "x")


def test_s3_versioned_bucket_reports_version_id(s3_backend: S3Backend) -> None:
    s3_backend.setup()
    s3_backend.fs.call_s3("put_bucket_versioning", Bucket=s3_backend.bucket,
                          VersioningConfiguration={"Status": "Enabled"})
    ws = s3_backend.workspace()
    w = ws.write("v.txt", "one\n")
    r = ws.read("v.txt")
    assert w.version.version_id and r.version.version_id == w.version.version_id
    e = ws.edit("v.txt", "one", "two")
    assert e.version.version_id and e.version.version_id != w.version.version_id


def test_discovery_round_trips(cloud: Any) -> None:
    for i in range(12):
        cloud.put(f"src/pkg/m{i}.py", f"x = {i}\n".encode() + (b"needle\n" if i % 4 == 0 else b""))
    cloud.put("src/.gitignore", b"gen/\n")
    cloud.put("src/gen/skip.py", b"needle\n")
    cloud.put("docs/readme.md", b"needle\n")
    ws = cloud.workspace()
    # glob: the listing of the narrowest literal prefix, nothing else (no GET of content)
    reqs = counted(cloud, lambda: ws.glob("**/*.py", path="src"))
    assert len(reqs) == 1 and reqs[0].method == "GET", reqs
    assert "prefix=ws%2Fsrc%2F" in reqs[0].query or "prefix=ws/src/" in reqs[0].query
    # ls: one delimiter listing
    reqs = counted(cloud, lambda: ws.ls("src"))
    assert len(reqs) == 1 and "delimiter" in reqs[0].query, reqs
    # grep: the listing, the .gitignore files that apply (the root's, looked for above
    # the search path, and src's, from the listing), one GET per candidate (src/gen/ is
    # ignored: never fetched); no HEAD, no directory check per file
    result: list[Any] = []
    reqs = counted(cloud, lambda: result.append(ws.grep("needle", path="src")))
    assert result[0].files == ["src/pkg/m0.py", "src/pkg/m4.py", "src/pkg/m8.py"]
    assert "HEAD" not in methods(reqs)
    assert len(reqs) == 1 + 2 + 12, methods(reqs)
    assert not [r for r in reqs if "gen" in r.path]
    # head_limit stops early: files are searched in path order (m0, m1, m10, m11, m2, m3,
    # m4, ...); the second match (m4, the 7th) proves the result truncated and ends the
    # search, with at most 2 more reads in flight: at most 9 of the 12 are fetched
    narrow = cloud.workspace(max_in_flight=2, content_cache_bytes=0)  # fetches counted
    out: list[Any] = []
    reqs = counted(cloud, lambda: out.append(narrow.grep("needle", path="src/pkg",
                                                         head_limit=1)))
    assert out[0].files == ["src/pkg/m0.py"] and out[0].truncated
    fetched = [r for r in reqs if "/pkg/m" in r.path]
    assert 7 <= len(fetched) <= 9, methods(reqs)
    # a file created behind toolfs's back shows up at once, in every tool
    cloud.put("src/pkg/new.py", b"needle\n")
    assert "src/pkg/new.py" in ws.glob("**/*.py", path="src").paths
    assert "src/pkg/new.py" in ws.grep("needle", path="src").files
    assert "new.py" in [e.name for e in ws.ls("src/pkg").entries]
