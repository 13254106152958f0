"""Where S3 implementations answer differently, and what toolfs makes of it.

moto answers as AWS does; SeaweedFS (a second, concurrent S3 server) differs in a few
places. The adapter handles both answers to the same outcome, and where a difference
stays visible it is a flag on the fixture class (``tests/backend_fixtures.py``), not a skip:

* ``If-Match`` on a missing key (update or delete of a file deleted meanwhile): AWS 404,
  SeaweedFS 412 (``if_match_missing_status``); toolfs answers ``stale`` either way, in
  one request;
* a "directory" outlives its last file on SeaweedFS, whose filer keeps the folder, as a
  local disk does (``keeps_empty_dirs``); on AWS, GCS and memory the prefix is gone.
"""

from __future__ import annotations

from typing import Any

import pytest

import toolfs
from tests.backend_fixtures import S3Backend


@pytest.fixture(params=["s3", "seaweedfs"])
def s3(request: pytest.FixtureRequest) -> S3Backend:
    b: S3Backend = request.getfixturevalue(f"{request.param}_backend")
    b.setup()
    return b


def counted(b: Any, call: Any) -> list[Any]:
    b.emulator.clear_requests()
    call()
    return [r for r in b.emulator.requests() if not r.path.startswith("/_toolfs")]


def test_update_of_a_file_deleted_meanwhile_is_stale(s3: S3Backend) -> None:
    s3.put("gone.txt", b"one\n")
    ws = s3.workspace()
    ws.read("gone.txt")
    s3.remove("gone.txt")
    out: list[toolfs.ToolOutput] = []
    reqs = counted(s3, lambda: out.append(ws.execute(
        "edit", {"file_path": "gone.txt", "old_string": "one", "new_string": "1"})))
    assert out[0].error is not None and out[0].error.code == "stale", out[0].text
    # one conditional PUT, answered as this implementation answers If-Match on no key;
    # then only reads: the refusal looks at what is there now (nothing: "deleted")
    assert (reqs[0].method, reqs[0].status) == ("PUT", s3.if_match_missing_status)
    assert all(r.method in ("GET", "HEAD") for r in reqs[1:]), reqs
    assert "deleted since you read it" in out[0].text
    assert not s3.exists("gone.txt")  # never written unconditionally


def test_delete_of_a_file_deleted_meanwhile_is_stale(s3: S3Backend) -> None:
    s3.put("gone.txt", b"one\n")
    ws = s3.workspace()
    ws.read("gone.txt")
    s3.remove("gone.txt")
    with pytest.raises(toolfs.FsError) as exc:
        ws.fs.rm_file("gone.txt")
    assert exc.value.code == "stale"


def test_delete_of_a_changed_file_is_stale_and_keeps_it(s3: S3Backend) -> None:
    s3.put("f.txt", b"one\n")
    ws = s3.workspace()
    ws.read("f.txt")
    s3.put("f.txt", b"two\n")
    with pytest.raises(toolfs.FsError) as exc:
        ws.fs.rm_file("f.txt")
    assert exc.value.code == "stale"
    assert s3.get("f.txt") == b"two\n"


def test_conditional_delete_on_the_wire(s3: S3Backend) -> None:
    s3.put("f.txt", b"one\n")
    ws = s3.workspace()
    version = ws.read("f.txt").version
    reqs = counted(s3, lambda: ws.fs.rm_file("f.txt"))
    # HEAD If-Match (every implementation honours it), then DELETE If-Match
    assert [(r.method, r.headers.get("if-match")) for r in reqs] == [
        ("HEAD", version.value), ("DELETE", version.value)]
    assert not s3.exists("f.txt")


def test_create_races_one_winner(s3: S3Backend) -> None:
    from concurrent.futures import ThreadPoolExecutor

    contexts = [s3.workspace() for _ in range(8)]
    with ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(lambda iw: iw[1].execute(
            "write", {"file_path": "new.txt", "content": f"writer {iw[0]}\n"}),
            enumerate(contexts)))
    winners = [i for i, o in enumerate(outs) if not o.is_error]
    assert len(winners) == 1, [o.text for o in outs]
    assert {o.error.code for o in outs if o.error is not None} <= {"stale", "not_observed"}
    assert s3.get("new.txt") == f"writer {winners[0]}\n".encode()


def test_a_file_where_an_emptied_directory_was(s3: S3Backend) -> None:
    # SeaweedFS keeps the folder "d" after its last file goes and refuses If-None-Match
    # on it (412) although no object "d" exists; the adapter removes the empty folder
    # and creates the file, still conditionally.
    s3.put("d/only.txt", b"x\n")
    ws = s3.workspace()
    ws.read("d/only.txt")
    ws.fs.rm_file("d/only.txt")
    out = ws.execute("write", {"file_path": "d", "content": "now a file\n"})
    assert not out.is_error, out.text
    assert s3.get("d") == b"now a file\n"
    assert ws.read("d").lines == ["now a file"]
    # a directory that still has files stays one
    s3.put("e/x.txt", b"x\n")
    out = ws.execute("write", {"file_path": "e", "content": "no\n"})
    assert out.error is not None and out.error.code == "not_a_file", out.text
    assert s3.get("e/x.txt") == b"x\n"


def test_a_file_created_over_an_emptied_directory_by_someone_else_is_stale(
        s3: S3Backend) -> None:
    s3.put("d/only.txt", b"x\n")
    s3.remove("d/only.txt")
    ws = s3.workspace()
    assert ws.execute("read", {"file_path": "d"}).error.code == "not_found"
    s3.put("d", b"theirs\n")  # someone else's file where the folder was
    out = ws.execute("write", {"file_path": "d", "content": "mine\n"})
    assert out.error is not None and out.error.code == "stale", out.text
    assert s3.get("d") == b"theirs\n"
