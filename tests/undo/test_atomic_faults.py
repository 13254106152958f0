"""All-or-nothing commits under network faults: moto behind the fault proxy fails the
k-th PUT of a 5-file commit, for every k. Every file ends all old or all new, as the
result's report says, and nothing is lost; without a fault the commit costs at most
2N + 1 requests (N of them writes), counted at the proxy."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import toolfs
from tests.backend_fixtures import S3Backend
from toolfs.testing.emulators import S3Emulator
from toolfs.testing.faults import FaultProxy, ProxiedRequest, fast_failing_s3fs_options
from toolfs.undo.atomic import Planned, commit_all

pytest.importorskip("moto.server")
s3fs = pytest.importorskip("s3fs")

FILES = ["a.txt", "b.txt", "c.txt", "new1.txt", "new2.txt"]
OLD = {"a.txt": b"a\n", "b.txt": b"b\n", "c.txt": b"c\n", "new1.txt": None,
       "new2.txt": None}
NEW = {name: name.upper().encode() + b"\n" for name in FILES}


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.retries.standard import ExponentialBackoff

    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0.01)


@pytest.fixture(scope="module")
def shared_proxy(s3_emulator: S3Emulator) -> Iterator[FaultProxy]:
    with FaultProxy(s3_emulator.endpoint_url, timeout=5.0) as p:
        yield p


@pytest.fixture
def proxy(shared_proxy: FaultProxy) -> FaultProxy:
    assert shared_proxy.wait_idle()
    shared_proxy.clear()
    shared_proxy.reset_counts()
    return shared_proxy


def _setup(backend: S3Backend, proxy: FaultProxy) -> tuple[toolfs.Workspace, Any]:
    backend.setup()
    direct = backend.fs
    for name, data in OLD.items():
        if data is not None:
            direct.pipe_file(backend.key(name), data)
    options = fast_failing_s3fs_options(backend.emulator.s3fs_storage_options(),
                                        proxy.endpoint_url, timeout=0.5, max_attempts=1)
    fs = s3fs.S3FileSystem(**options)
    fs.retries = 1
    ws = toolfs.Workspace(fs, root=backend.root)
    ws.check_root()
    for name in FILES:
        try:
            ws.read(name)
        except toolfs.FsError as err:
            assert err.code == "not_found"
    return ws, direct


def _plan(ws: toolfs.Workspace) -> list[Planned]:
    plans = []
    for name in FILES:
        key = ws.fs.resolve(name).backend_path
        obs = ws.fs.ledger.get(key)
        version = obs.version if obs is not None else None
        plans.append(Planned(name, version, NEW[name], OLD[name]))
    return plans


def _stored(direct: Any, backend: S3Backend, name: str) -> bytes | None:
    direct.invalidate_cache()
    try:
        return bytes(direct.cat_file(backend.key(name)))
    except FileNotFoundError:
        return None


def test_a_commit_of_n_files_costs_at_most_2n_plus_1_requests(
        s3_backend: S3Backend, proxy: FaultProxy) -> None:
    ws, direct = _setup(s3_backend, proxy)
    plans = _plan(ws)
    before, seen = proxy.requests, []
    # A rule that never fires, to see every request the commit sends.
    proxy.plan("delay", times=None, match=lambda r: seen.append(
        (r.method, r.path.rsplit("/", 1)[-1])) is None and False)
    result = commit_all(ws.fs, plans)
    assert proxy.wait_idle()
    n = len(FILES)
    assert result.ok, result.refused
    assert proxy.requests - before <= 2 * n + 1, repr(seen)
    writes = [m for m, _ in seen if m in ("PUT", "DELETE", "POST")]
    assert len(writes) <= n, seen
    assert [_stored(direct, s3_backend, f) for f in FILES] == [NEW[f] for f in FILES]


@pytest.mark.parametrize("fault", ["500_before_forward", "reset_after_forward"])
@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_the_kth_put_failing_leaves_every_file_all_old_or_all_new(
        s3_backend: S3Backend, proxy: FaultProxy, fault: str, k: int) -> None:
    ws, direct = _setup(s3_backend, proxy)
    plans = _plan(ws)
    seen = {"puts": 0}

    def kth_put(request: ProxiedRequest) -> bool:
        seen["puts"] += 1
        return seen["puts"] == k

    proxy.plan(fault, method="PUT", times=1, match=kth_put)  # type: ignore[arg-type]
    result = commit_all(ws.fs, plans)
    assert proxy.wait_idle()
    assert proxy.injected() == {fault: 1}
    stored = {f: _stored(direct, s3_backend, f) for f in FILES}
    for name in FILES:  # nothing lost: each file is its old or its new bytes
        assert stored[name] in (OLD[name], NEW[name]), (name, stored[name])
    for name, state in result.states.items():  # exactly as the report says
        if state == "new":
            assert stored[name] == NEW[name], (name, result)
        elif state == "old":
            assert stored[name] == OLD[name], (name, result)
        else:
            assert state == "unknown", (name, state)
    if result.ok:  # a lost response the adapter confirmed: the set landed whole
        assert result.committed == FILES
    else:  # one failed write: everything rolled back
        assert result.committed == [], result
        assert set(result.states.values()) == {"old"}, result.states
        assert stored == OLD
        assert any(err.code == "backend_error" for err in result.refused.values())


def test_a_commit_past_its_deadline_rolls_back_under_its_own(
        s3_backend: S3Backend, proxy: FaultProxy) -> None:
    import time

    from toolfs import deadline
    from toolfs.policy.events import FsEvent

    ws, direct = _setup(s3_backend, proxy)
    plans = _plan(ws)

    def slow_third(event: FsEvent) -> None:  # the call's time runs out before the 3rd
        if event.type == "fs/write-intent" and event.path == "a.txt":
            time.sleep(1.2)

    ws.subscribe(slow_third)
    with deadline.scope(1.0):
        result = commit_all(ws.fs, plans)
    assert not result.ok
    assert any(e.code == "backend_error" for e in result.refused.values()), result.refused
    assert set(result.states.values()) == {"old"}, result.states
    assert {f: _stored(direct, s3_backend, f) for f in FILES} == OLD
