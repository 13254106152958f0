"""What a fork's commit costs on object stores, counted at the emulator.

A commit of N files is ``commit_all``'s: one read and one conditional write per file
(``2N`` requests, ``N`` of them writes) with the overlay in memory; at an overlay URL
on the same store, the reads of the fork's bytes and pre-images and the overlay's clean
up come on top (requests to the overlay, not the base). The numbers are printed
(``-s``) for docs/policy.md.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.backend_fixtures import Backend

N = 5
WRITES = ("PUT", "POST", "DELETE", "PATCH")


@pytest.fixture(params=["s3", "seaweedfs", "gcs", "azure"])
def cloud(request: pytest.FixtureRequest) -> Any:
    b: Backend = request.getfixturevalue(f"{request.param}_backend")
    b.setup()
    yield b
    b.teardown()


def _counted(b: Any, call: Any) -> tuple[Any, list[Any]]:
    b.emulator.clear_requests()
    value = call()
    return value, [r for r in b.emulator.requests() if not r.path.startswith("/_toolfs")]


def _forked(b: Any, overlay: str | None, *, mixed: bool) -> Any:
    """A fork that updated N files (``mixed``: and deleted one, created one)."""
    for k in range(N + 1):
        b.put(f"f{k}.txt", f"file {k}\n".encode())
    fork = b.workspace().fork(overlay=overlay)
    for k in range(N):
        fork.read(f"f{k}.txt")
        fork.edit(f"f{k}.txt", f"file {k}", f"FILE {k}")
    if mixed:
        fork.read(f"f{N}.txt")
        fork.fs.rm_file(f"f{N}.txt")
        fork.write("new.txt", "new\n")
    return fork


def _listed(reqs: list[Any]) -> str:
    return "\n".join(f"{r.method} {r.path} {r.query} {r.status}" for r in reqs)


@pytest.mark.parametrize("mixed", [False, True], ids=["updates", "mixed"])
def test_a_commit_of_n_files_costs_2n_requests_n_of_them_writes(cloud: Any, mixed: bool
                                                                 ) -> None:
    fork = _forked(cloud, None, mixed=mixed)
    files = N + 2 if mixed else N
    result, reqs = _counted(cloud, fork.commit)
    assert result.ok, result.refused
    writes = [r for r in reqs if r.method in WRITES]
    kinds = "updates, a create and a delete" if mixed else "updates"
    print(f"\n{cloud.name}: commit of {files} files ({kinds}), "
          f"overlay in memory: {len(reqs)} requests ({len(reqs) / files:.2f} per file), "
          f"{len(writes)} conditional writes")
    assert len(writes) == files
    assert all(r.headers.get("if-match") or r.headers.get("if-none-match")
               or "ifGenerationMatch" in r.params for r in writes), _listed(writes)
    # One read and one conditional write per file (updates exactly 2N; a create or a
    # delete may cost the store's own extra request, within the bound).
    assert len(reqs) <= 2 * files + 1, _listed(reqs)
    if not mixed:
        assert len(reqs) == 2 * files, _listed(reqs)
    assert cloud.get("f0.txt") == b"FILE 0\n"


def test_a_commit_from_an_overlay_url_adds_only_requests_to_the_overlay(cloud: Any
                                                                       ) -> None:
    overlay = str(cloud.fs.unstrip_protocol(f"{cloud.root}-overlay-{uuid.uuid4().hex[:6]}"))
    fork = _forked(cloud, overlay, mixed=False)
    result, reqs = _counted(cloud, fork.commit)
    assert result.ok, result.refused
    own = cloud.fs._strip_protocol(overlay).split("/", 1)[1]
    base = [r for r in reqs if own not in r.path and own not in r.query]
    writes = [r for r in base if r.method in WRITES]
    print(f"\n{cloud.name}: commit of {N} files from an overlay URL: {len(reqs)} "
          f"requests in all ({len(reqs) / N:.2f} per file), {len(base)} to the base, "
          f"{len(writes)} conditional writes there")
    assert len(base) <= 2 * N + 1 and len(writes) == N, _listed(base)


def test_a_change_in_a_fork_costs_the_base_one_read_then_nothing(cloud: Any) -> None:
    cloud.put("f.txt", b"one\ntwo\n")
    fork = cloud.workspace().fork()
    _, reqs = _counted(cloud, lambda: fork.read("f.txt"))
    assert [r.method for r in reqs] == ["GET"]  # falls through: the base's own read
    # The first change of a base file checks it is still at the version read: one
    # ranged read (the edit's bytes are held, so no more); the bytes go to the overlay.
    _, reqs = _counted(cloud, lambda: fork.edit("f.txt", "one", "ONE"))
    assert [r.method for r in reqs] == ["GET"], _listed(reqs)
    assert reqs[0].headers.get("if-match") or "ifGenerationMatch" in reqs[0].params \
        or reqs[0].headers.get("x-goog-if-generation-match")
    # From then on the file is the fork's: no request to the base at all.
    for call in (lambda: fork.edit("f.txt", "two", "TWO"), lambda: fork.read("f.txt"),
                 lambda: fork.write("g.txt", "new\n")):
        _, reqs = _counted(cloud, call)
        assert all("g.txt" in r.path or "g.txt" in r.query for r in reqs), _listed(reqs)
    print(f"\n{cloud.name}: a fork's first change of a base file: 1 request to the "
          "base; later changes of it: 0")


def test_a_change_in_a_fork_at_an_overlay_url_costs_the_overlay_3_then_1(cloud: Any
                                                                        ) -> None:
    overlay = str(cloud.fs.unstrip_protocol(f"{cloud.root}-overlay-{uuid.uuid4().hex[:6]}"))
    cloud.put("f.txt", b"one\ntwo\n")
    fork = cloud.workspace().fork(overlay=overlay)
    fork.read("f.txt")
    _, first = _counted(cloud, lambda: fork.edit("f.txt", "one", "ONE"))
    _, later = _counted(cloud, lambda: fork.edit("f.txt", "two", "TWO"))
    print(f"\n{cloud.name}: a change in a fork at an overlay URL: first {len(first)} "
          f"requests (1 read of the base, {len(first) - 1} writes to the overlay), "
          f"later {len(later)}")
    # The base's conditional read; then the bytes, the pre-image and the record, each
    # one unconditional PUT of the overlay's own key (no directory checks).
    assert len(first) == 4 and first[0].method == "GET", _listed(first)
    assert all(r.method in WRITES for r in first[1:]), _listed(first)
    assert len(later) == 1 and later[0].method in WRITES, _listed(later)  # the bytes
    assert cloud.get("f.txt") == b"one\ntwo\n"
