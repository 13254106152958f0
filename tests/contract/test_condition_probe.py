"""Conditions verified, not assumed: the probe of a store's conditional writes.

Every emulator passes it, at a request cost counted at the server; a proxy that strips
the conditional headers, one that strips ``If-Match`` only and one that checks them and
then writes unconditionally (right alone, wrong under concurrency) are refused for
writes, with reads still working and ``trust_conditions=True`` as the way through.
"""

from __future__ import annotations

import collections
import concurrent.futures
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import toolfs
from tests.backend_fixtures import Backend, S3Backend, _CloudBackend
from toolfs.backends import Create, conditions
from toolfs.errors import FsError
from toolfs.testing.emulators import S3Emulator
from toolfs.testing.faults import ConditionHandling, FaultProxy, fast_failing_s3fs_options

s3fs = pytest.importorskip("s3fs")



CLOUDS = ["s3", "seaweedfs", "gcs", "azure"]


PROBE_NAME = re.compile(r"\.toolfs-probe\.toolfs-tmp-[0-9a-f]{24}")


# Requests of one probe, by method, counted at each server (docs/backends.md says so).
PROBE_COST = {
    # 2 creates at once, each with its "is the name a directory?" listing; an update; a
    # refused update; a refused delete (its HEAD); a delete (HEAD + DELETE); a refused
    # update of the deleted key
    "s3": {"GET": 2, "PUT": 5, "HEAD": 2, "DELETE": 1},
    # the same, and SeaweedFS's 412 on the losing create costs one HEAD more (an empty
    # folder, or an object? see docs/backends.md)
    "seaweedfs": {"GET": 2, "PUT": 5, "HEAD": 3, "DELETE": 1},
    # the listings, 5 uploads, and each delete checks the generation with a metadata GET
    "gcs": {"GET": 4, "POST": 5, "DELETE": 1},
    # the listings, 5 Put Blob, a refused and a done Delete Blob (If-Match on the delete)
    "azure": {"GET": 2, "PUT": 5, "DELETE": 2},
}


@pytest.fixture(params=CLOUDS)
def cloud(request: pytest.FixtureRequest) -> Iterator[_CloudBackend]:
    b: _CloudBackend = request.getfixturevalue(f"{request.param}_backend")
    b.setup()
    try:
        yield b
    finally:
        b.teardown()


def probe_requests(b: _CloudBackend) -> list[Any]:
    return [r for r in b.emulator.requests() if not r.path.startswith("/_toolfs")]


def raw_names(b: Backend) -> list[str]:
    b.fs.invalidate_cache()
    return [str(p) for p in b.fs.find(b.bucket)]  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def aio_session() -> Any:
    from aiobotocore.session import AioSession

    return AioSession()


class Proxied:
    """moto behind a proxy that handles conditional headers as ``mode`` says."""

    def __init__(self, b: S3Backend, proxy: FaultProxy, session: Any) -> None:
        self.b, self.proxy, self.session = b, proxy, session

    def workspace(self, **options: Any) -> toolfs.Workspace:
        fs = s3fs.S3FileSystem(session=self.session, **fast_failing_s3fs_options(
            self.b.emulator.s3fs_storage_options(), self.proxy.endpoint_url, timeout=2.0))
        return toolfs.Workspace(fs, root=self.b.root, **options)


@pytest.fixture
def proxied(request: pytest.FixtureRequest, s3_backend: S3Backend,
            aio_session: Any) -> Iterator[Proxied]:
    mode: ConditionHandling = request.param
    s3_backend.setup()
    with FaultProxy(s3_backend.emulator.endpoint_url, conditions=mode, timeout=5.0) as proxy:
        yield Proxied(s3_backend, proxy, aio_session)


IGNORED = {
    "strip": "two create-if-absent requests for one new object, sent at once, both succeeded",
    "check_then_write": "two create-if-absent requests for one new object, sent at once, "
                        "both succeeded",
    "strip_if_match": "an update on a version that was no longer current succeeded",
}


def test_every_emulator_passes_the_probe_at_a_counted_cost(cloud: _CloudBackend) -> None:
    conditions.forget_verdicts()
    cloud.emulator.clear_requests()
    ws = cloud.workspace()
    ws.fs.verify_conditions()  # the probe, as the first write or check_root runs it
    sent = probe_requests(cloud)
    cost = collections.Counter(r.method for r in sent)
    assert dict(cost) == PROBE_COST[cloud.name]
    assert len({m.group(0) for r in sent if (m := PROBE_NAME.search(r.path))}) == 1
    assert not any(PROBE_NAME.search(n) for n in raw_names(cloud))  # removed afterwards
    # Cached for the process: another context, a write, check_root: no probe again.
    cloud.emulator.clear_requests()
    other = cloud.workspace()
    other.check_root()
    other.write("a.txt", "x\n")
    assert not any(PROBE_NAME.search(r.path) for r in probe_requests(cloud))


@pytest.mark.parametrize("proxied", list(IGNORED), indirect=True)
def test_a_store_that_ignores_conditions_is_refused_for_writes(proxied: Proxied) -> None:
    mode = proxied.proxy.conditions
    proxied.b.put("kept.txt", b"theirs\n")
    ws = proxied.workspace()
    out = ws.execute("write", {"file_path": "new.txt", "content": "mine\n"})
    assert out.error is not None and out.error.code == "unsupported", out.text
    assert out.error.message.startswith(
        "this store ignores conditional writes; toolfs cannot prevent lost updates on it")
    assert IGNORED[mode] in out.error.message
    assert "trust_conditions=True" in out.error.message
    assert out.error.details["option"] == "trust_conditions"
    assert not proxied.b.exists("new.txt")
    assert not any(PROBE_NAME.search(n) for n in raw_names(proxied.b))  # cleaned up
    # Reads keep working; every other change is refused the same way, from the cache.
    assert ws.read("kept.txt").lines == ["theirs"]
    before = proxied.proxy.requests
    for call in (lambda: ws.edit("kept.txt", "theirs", "mine"),
                 lambda: ws.fs.rm_file("kept.txt"),
                 lambda: proxied.workspace().write("other.txt", "x\n"),
                 lambda: proxied.workspace().check_root()):
        with pytest.raises(FsError) as caught:
            call()
        assert caught.value.code == "unsupported"
    assert proxied.proxy.requests - before == 1  # check_root's HEAD of the bucket only
    assert proxied.b.get("kept.txt") == b"theirs\n"
    # A user who accepts the risk proceeds; a read-only workspace never probes.
    trusting = proxied.workspace(trust_conditions=True)
    trusting.check_root()
    assert trusting.write("new.txt", "mine\n").action == "created"
    proxied.workspace(read_only=True).check_root()


@pytest.mark.parametrize("proxied", ["check_then_write"], indirect=True)
def test_a_check_then_write_proxy_answers_right_alone(proxied: Proxied) -> None:
    """What makes the concurrent pair necessary: one request at a time, this proxy's
    answers are correct, so only creates that cross show that it ignores conditions."""
    store = proxied.workspace(trust_conditions=True).fs.store
    key = proxied.b.key("alone.txt")
    store.put(key, b"first\n", Create())
    with pytest.raises(FsError) as caught:
        store.put(key, b"second\n", Create())
    assert caught.value.code == "stale"
    assert proxied.b.get("alone.txt") == b"first\n"


@pytest.mark.parametrize("proxied", ["honour"], indirect=True)
def test_a_probe_that_cannot_finish_leaves_no_verdict(proxied: Proxied) -> None:
    proxied.proxy.plan("500_before_forward", method="PUT", times=None)
    ws = proxied.workspace()
    out = ws.execute("write", {"file_path": "a.txt", "content": "x\n"})
    assert out.error is not None and out.error.code == "backend_error", out.text
    assert "checking that the store honours conditional writes" in out.error.message
    assert not PROBE_NAME.search(out.text)  # the scratch object is not the model's concern
    proxied.proxy.clear()
    assert ws.write("a.txt", "x\n").action == "created"  # probed again, and passed


def test_concurrent_first_writes_probe_once(s3_backend: S3Backend,
                                             s3_emulator: S3Emulator) -> None:
    s3_backend.setup()
    conditions.forget_verdicts()
    s3_emulator.clear_requests()
    contexts = [s3_backend.workspace() for _ in range(6)]
    barrier = threading.Barrier(len(contexts))

    def write(i: int) -> str:
        barrier.wait(timeout=10)
        return contexts[i].write(f"f{i}.txt", "x\n").action

    with concurrent.futures.ThreadPoolExecutor(len(contexts)) as pool:
        assert list(pool.map(write, range(len(contexts)))) == ["created"] * len(contexts)
    probes = {m.group(0) for r in s3_emulator.requests() if (m := PROBE_NAME.search(r.path))}
    assert len(probes) == 1


@pytest.mark.parametrize("proxied", ["strip"], indirect=True)
def test_serve_checks_the_conditions_at_start(proxied: Proxied, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from toolfs.integrations import mcp_server
    from toolfs.integrations.cli import main

    argv = ["serve", f"s3://{proxied.b.root}"]
    options = {**proxied.b.emulator.s3fs_storage_options(),
               "endpoint_url": proxied.proxy.endpoint_url, "skip_instance_cache": True}
    for key, value in options.items():
        argv += ["-o", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "[unsupported]" in err and "this store ignores conditional writes" in err, err
    assert "--trust-conditions" in err
    served: list[bool] = []
    monkeypatch.setattr(mcp_server.ToolfsMCP, "serve_stdio",
                        lambda self: served.append(
                            self.workspace.new_context().sync.fs.trust_conditions))
    assert main([*argv, "--trust-conditions"]) == 0
    assert served == [True]


class SyncConditionProbe:
    """Reserved probe names are never listed nor written."""

    def test_reserved_names_are_never_listed_nor_written(self, backend: Backend) -> None:
        ws = backend.workspace()
        ws.write("notes.md", "needle\n")
        leftover = ".toolfs-probe.toolfs-tmp-0123456789abcdef01234567"
        backend.put(leftover, b"needle\n")  # a probe that crashed before removing it
        backend.put(f"sub/{leftover}", b"needle\n")
        assert [e.name for e in ws.ls().entries] == ["notes.md", "sub"]
        assert ws.ls("sub").entries == []
        assert ws.glob("**/.*").paths == []
        assert ws.grep("needle").files == ["notes.md"]
        assert ws.fs.find("") == ["notes.md"]
        missing = ws.execute(
            "read", {"file_path": ".toolfs-probe.toolfs-tmp-0123456789abcdef012345"})
        assert missing.error is not None and leftover not in missing.text
        for name in (leftover, "sub/.x.toolfs-tmp-1", ".d.toolfs-tmp-/f.txt"):
            out = ws.execute("write", {"file_path": name, "content": "mine\n"})
            assert out.error is not None and out.error.code == "invalid_arguments", out.text
        assert backend.get(leftover) == b"needle\n"
