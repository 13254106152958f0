"""Network faults between toolfs and S3: moto behind :class:`toolfs.testing.faults.FaultProxy`
(and, for a lost DELETE response, GCS: fake-gcs-server behind the same proxy).

Pass criteria, checked after every tool call:

* ``ws.execute(...)`` returns a result or an error coded ``backend_error`` or ``stale``,
  and that error is toolfs's own (it names the path), not ``execute``'s safety net for an
  exception that escaped the adapter;
* the object, read from the emulator directly (not through the proxy) once the proxy is
  idle (a delayed request may land after its client gave up), is exactly one of the
  contents ever written (or still absent);
* a write whose first attempt landed but whose response was lost (reset, 500, timeout
  after forwarding) is reported as success, on create (If-None-Match) and update (If-Match);
* so is a delete (If-Match): the resend meets the key gone, a HEAD confirms it, and a
  move whose delete this was keeps its copy; when that check fails too the outcome is
  ``backend_error``, never ``stale``.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

import toolfs
from tests.backend_fixtures import GCSBackend, S3Backend
from tests.lost_deletes import (
    DELETE_LOST,
    MOVES,
    delete_or_move,
    gone_from_ledger,
    moved_bytes,
    unverifiable_delete,
)
from toolfs.render import ToolOutput
from toolfs.testing.emulators import GCSEmulator, S3Emulator
from toolfs.testing.faults import FAULTS, Fault, FaultProxy, Rule, fast_failing_s3fs_options

pytest.importorskip("moto.server")
s3fs = pytest.importorskip("s3fs")

TIMEOUT = 0.4  # botocore connect/read timeout
DELAY = 0.6  # > TIMEOUT: the client times out, and the request still lands, late
ALLOWED = ("backend_error", "stale")


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's standard mode sleeps up to 1 s before a retry; 10 ms keeps this file fast."""
    from botocore.retries.standard import ExponentialBackoff

    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0.01)


@pytest.fixture(scope="module")
def shared_proxy(s3_emulator: S3Emulator) -> Iterator[FaultProxy]:
    with FaultProxy(s3_emulator.endpoint_url, timeout=5.0) as p:
        yield p


@pytest.fixture
def proxy(shared_proxy: FaultProxy) -> FaultProxy:
    """The module's proxy with an empty plan and zeroed counts."""
    assert shared_proxy.wait_idle()
    shared_proxy.clear()
    shared_proxy.reset_counts()
    return shared_proxy


@pytest.fixture(scope="module")
def aio_session() -> Any:
    """Shared by the test clients: botocore then parses the S3 model once, not per client."""
    from aiobotocore.session import AioSession

    return AioSession()


class Harness:
    """Workspaces that talk to S3 through the proxy, and the checks after each call."""

    def __init__(self, backend: S3Backend, proxy: FaultProxy, session: Any) -> None:
        backend.setup()
        self.b, self.proxy, self.session = backend, proxy, session
        self.direct = backend.emulator.s3fs_filesystem(session=session)
        """Straight to the emulator, never through the proxy."""
        self.written: dict[str, set[bytes | None]] = {}
        """Per file, every state it may be in: None (absent) and every content sent."""

    def workspace(self) -> toolfs.Workspace:
        """A new agent with its own S3 client (own retry quota), through the proxy."""
        options = fast_failing_s3fs_options(
            self.b.emulator.s3fs_storage_options(), self.proxy.endpoint_url, timeout=TIMEOUT)
        fs = s3fs.S3FileSystem(session=self.session, **options)
        fs.retries = 1
        ws = toolfs.Workspace(fs, root=self.b.root)
        ws.check_root()  # the condition probe (once per proxy), before any fault
        return ws

    def seed(self, rel: str, data: bytes | None) -> None:
        """Put (or leave absent) ``rel`` behind toolfs's back, straight to the emulator."""
        if data is not None:
            self.direct.pipe_file(self.b.key(rel), data)
        self.written.setdefault(rel, set()).add(data)

    def stored(self, rel: str) -> bytes | None:
        """The object as the emulator holds it (read directly, not through the proxy)."""
        self.direct.invalidate_cache()
        try:
            return bytes(self.direct.cat_file(self.b.key(rel)))
        except FileNotFoundError:
            return None

    def call(self, ws: toolfs.Workspace, tool: str, args: dict[str, Any], *,
             sends: bytes | None = None) -> str:
        """Run one tool call, check the criteria; returns "ok" or the error code."""
        rel = args["file_path"]
        if sends is not None:
            self.written.setdefault(rel, set()).add(sends)
        out = ws.execute(tool, args)
        assert self.proxy.wait_idle(), "a proxied request never finished"
        outcome = check_output(out)
        stored = self.stored(rel)
        assert stored in self.written[rel], (tool, outcome, stored)
        if outcome == "stale" and sends is not None:
            # Contents are unique per call: holding ours, the file did not "change since".
            assert stored != sends, f"our own write was reported stale: {out.text}"
        return outcome


def check_output(out: ToolOutput) -> str:
    if out.error is None:
        return "ok"
    err = out.error
    assert err.code in ALLOWED, f"unexpected error code: {err!r}"
    # execute() turns an escaped foreign exception into a path-less backend_error.
    assert err.path is not None, f"an exception escaped the adapter: {err!r} ({err.__cause__!r})"
    return err.code


def observed(ws: toolfs.Workspace, rel: str) -> bytes:
    """The bytes this context last observed of ``rel`` (from its ledger cache)."""
    key = ws.fs.resolve(rel).backend_path
    obs = ws.fs.ledger.get(key)
    assert obs is not None and obs.version is not None
    content = ws.fs.ledger.content(key, obs.version)
    assert content is not None
    return content


def md5_etag(data: bytes) -> str:
    return '"' + hashlib.md5(data, usedforsecurity=False).hexdigest() + '"'


# -- (1) the table: every fault on every operation, once and persistently -------------

OPS = ["read", "write-create", "write-update", "edit"]
OLD, NEW = b"alpha\nbeta\n", b"ALPHA\nbeta\n"
LANDS = {"reset_after_forward", "500_after_forward", "delay", "delay_after_forward",
         "truncate_after_forward"}
"""Faults whose request reaches moto (a ``*_before_forward`` never does)."""
PERSISTENT = ["reset_before_forward", "reset_after_forward", "500_before_forward",
              "500_after_forward"]  # every attempt: retries cannot help
CASES = [(f, op, False) for f in FAULTS for op in OPS] + [
    (f, op, True) for f in PERSISTENT for op in OPS]


def expected(fault: Fault, op: str, persistent: bool) -> str:
    if fault == "truncate_after_forward":
        # A PUT's response has no body to cut; a GET's cut body is not retried.
        return "backend_error" if op == "read" else "ok"
    return "backend_error" if persistent else "ok"  # one fault: a retry absorbs it


@pytest.mark.parametrize(("fault", "op", "persistent"), CASES,
                         ids=[f"{f}-{op}{'-always' if p else ''}" for f, op, p in CASES])
def test_fault_table(s3_backend: S3Backend, proxy: FaultProxy, aio_session: Any, fault: Fault,
                     op: str, persistent: bool) -> None:
    h = Harness(s3_backend, proxy, aio_session)
    ws = h.workspace()
    rel = "f.txt"
    h.seed(rel, None if op == "write-create" else OLD)
    # Observe first, unfaulted: the absence (create) or the content (update, edit).
    if op == "write-create":
        assert ws.execute("read", {"file_path": rel}).error.code == "not_found"  # type: ignore[union-attr]
    else:
        assert h.call(ws, "read", {"file_path": rel}) == "ok"
    before = h.stored(rel)
    proxy.plan(fault, method="GET" if op == "read" else "PUT",
               times=None if persistent else 1, delay=DELAY)
    if op == "read":
        outcome = h.call(ws, "read", {"file_path": rel})
    elif op == "edit":
        outcome = h.call(ws, "edit", {"file_path": rel, "old_string": "alpha",
                                      "new_string": "ALPHA"}, sends=NEW)
    else:
        outcome = h.call(ws, "write", {"file_path": rel, "content": NEW.decode()}, sends=NEW)
    assert proxy.injected().get(fault, 0) >= 1
    assert outcome == expected(fault, op, persistent)
    stored = h.stored(rel)
    if op == "read":
        assert stored == before
    elif outcome == "ok" or fault in LANDS:
        assert stored == NEW
    else:
        assert stored == before  # refused before it reached the store: nothing changed


# -- (2) lost responses: our own write is success, on create and on update ------------

LOST = ["reset_after_forward", "500_after_forward", "delay_after_forward"]


@pytest.mark.parametrize("fault", LOST)
@pytest.mark.parametrize("mode", ["create", "update"])
def test_lost_response_is_success(s3_backend: S3Backend, proxy: FaultProxy, aio_session: Any,
                                  s3_emulator: S3Emulator, mode: str, fault: Fault) -> None:
    h = Harness(s3_backend, proxy, aio_session)
    ws = h.workspace()
    rel = "lost.txt"
    h.seed(rel, OLD if mode == "update" else None)
    # One unfaulted request first, so the client is warm (its HTTP session exists) and
    # the retry decision rests on what the adapter learnt, not on a cold-start default.
    read = ws.execute("read", {"file_path": rel})
    assert (read.error is None) if mode == "update" else (read.error.code == "not_found")  # type: ignore[union-attr]
    s3_emulator.clear_requests()
    proxy.plan(fault, method="PUT", delay=DELAY)

    out = ws.execute("write", {"file_path": rel, "content": NEW.decode()})
    assert proxy.wait_idle()
    requests = s3_emulator.requests()

    assert out.error is None, out.text
    assert out.value.action == ("created" if mode == "create" else "updated")  # type: ignore[union-attr]
    assert out.value.version.value == md5_etag(NEW)  # type: ignore[union-attr]
    assert h.stored(rel) == NEW
    assert proxy.injected() == {fault: 1}
    puts = [(r.method, r.status, r.headers.get("if-none-match"), r.headers.get("if-match"))
            for r in requests if r.method in ("PUT", "HEAD")]
    condition = ("*", None) if mode == "create" else (None, md5_etag(OLD))
    # The first attempt landed; the retry met its own write (412); a HEAD recognised it.
    assert puts == [("PUT", 200, *condition), ("PUT", 412, *condition),
                    ("HEAD", 200, None, None)], puts
    # The version it reported is the real one: the next edit stands on it.
    follow = ws.execute("edit", {"file_path": rel, "old_string": "ALPHA", "new_string": "A"})
    assert follow.error is None, follow.text
    assert h.stored(rel) == b"A\nbeta\n"


@pytest.mark.parametrize("mode", ["create", "update"])
def test_lost_response_unverifiable_is_backend_error(s3_backend: S3Backend, proxy: FaultProxy,
                                                     aio_session: Any, mode: str) -> None:
    """When the check for our own write fails too, the outcome is unknown: backend_error,
    never stale (the write did land: "changed since you read it" would be false)."""
    h = Harness(s3_backend, proxy, aio_session)
    ws = h.workspace()
    rel = "unverifiable.txt"
    h.seed(rel, OLD if mode == "update" else None)
    ws.execute("read", {"file_path": rel})
    proxy.plan("reset_after_forward", method="PUT")
    proxy.plan("500_before_forward", method="HEAD", times=None)
    assert h.call(ws, "write", {"file_path": rel, "content": NEW.decode()},
                  sends=NEW) == "backend_error"
    assert h.stored(rel) == NEW
    assert proxy.injected()["500_before_forward"] >= 1


# -- (2b) lost responses on DELETE: our own delete is success, and a move keeps the file -

@pytest.mark.parametrize("fault", DELETE_LOST)
@pytest.mark.parametrize("how", MOVES)
def test_lost_delete_response_is_success(s3_backend: S3Backend, proxy: FaultProxy,
                                         aio_session: Any, s3_emulator: S3Emulator,
                                         how: str, fault: Fault) -> None:
    """The DELETE lands, its response is lost, botocore resends it and meets the key
    gone (404): a HEAD sees it gone, so the delete succeeded. A move then keeps its copy
    (before the fix, "stale" made it undo the copy: the file was gone from both paths)."""
    h = Harness(s3_backend, proxy, aio_session)
    ws = h.workspace()
    h.seed("a.txt", OLD)
    h.seed("b.txt", None)
    assert ws.execute("read", {"file_path": "a.txt"}).error is None
    s3_emulator.clear_requests()
    proxy.plan(fault, method="DELETE")

    out = delete_or_move(ws, how, "a.txt", "b.txt")
    assert proxy.wait_idle()
    requests = s3_emulator.requests()

    assert out is None or out.error is None, out.text
    assert proxy.injected() == {fault: 1}
    assert h.stored("a.txt") is None
    assert h.stored("b.txt") == (None if how == "rm_file" else moved_bytes(how))
    assert gone_from_ledger(ws, "a.txt")
    seen = [(r.method, r.status) for r in requests if r.method in ("DELETE", "HEAD")]
    # The first DELETE landed; the resend met the key gone; a HEAD confirmed it.
    missing = s3_backend.if_match_missing_status
    assert seen[-3:] == [("DELETE", 204), ("DELETE", missing), ("HEAD", 404)], seen


@pytest.mark.parametrize("how", MOVES)
def test_lost_delete_response_unverifiable_is_backend_error(
        s3_backend: S3Backend, proxy: FaultProxy, aio_session: Any, how: str) -> None:
    """When the HEAD after the refused resend fails too, the outcome is unknown:
    backend_error, never stale; a move keeps its copy (the source is gone, as it
    happens, so the copy is the file)."""
    h = Harness(s3_backend, proxy, aio_session)
    ws = h.workspace()
    h.seed("a.txt", OLD)
    assert ws.execute("read", {"file_path": "a.txt"}).error is None
    unverifiable_delete(ws, proxy, how, "HEAD")
    assert h.stored("a.txt") is None
    assert h.stored("b.txt") == (None if how == "rm_file" else moved_bytes(how))


def test_resent_delete_of_a_file_changed_meanwhile_is_stale(
        s3_backend: S3Backend, proxy: FaultProxy, aio_session: Any) -> None:
    """A resent DELETE refused because someone else wrote the file in between: the HEAD
    finds it there, so ``stale`` as before, and their bytes stay."""
    h = Harness(s3_backend, proxy, aio_session)
    ws = h.workspace()
    h.seed("a.txt", OLD)
    assert ws.execute("read", {"file_path": "a.txt"}).error is None
    theirs = b"someone else's\n"

    def write_theirs(_: Any) -> bool:  # runs in the proxy, as the DELETE arrives
        h.seed("a.txt", theirs)
        return True

    proxy.plan("500_before_forward", method="DELETE", match=write_theirs)
    with pytest.raises(toolfs.FsError) as caught:
        ws.fs.rm_file("a.txt")
    assert proxy.wait_idle()
    assert caught.value.code == "stale"
    assert proxy.injected() == {"500_before_forward": 1}
    assert h.stored("a.txt") == theirs


# -- (2c) the same lost DELETE on GCS: fake-gcs-server behind the proxy ----------------


@pytest.fixture
def gcs_proxy(gcs_emulator: GCSEmulator) -> Iterator[FaultProxy]:
    with FaultProxy(gcs_emulator.endpoint_url, timeout=5.0) as p:
        yield p


def gcs_workspace(gcs: GCSBackend, proxy: FaultProxy) -> toolfs.Workspace:
    """A workspace whose gcsfs talks to fake-gcs-server through ``proxy``."""
    fs = gcs.emulator.gcsfs_filesystem(endpoint_url=proxy.endpoint_url)
    ws = toolfs.Workspace(fs, root=gcs.root)
    ws.check_root()  # the condition probe, before any fault is planned
    return ws


@pytest.fixture
def quick_gcs_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The adapter's own retry back-off (50 ms, doubling) is fine; keep it, but bound
    it so a persistent fault costs little."""
    monkeypatch.setattr("toolfs.backends.gcs.RETRIES", 2)


@pytest.mark.parametrize("fault", DELETE_LOST)
@pytest.mark.parametrize("how", MOVES)
def test_gcs_lost_delete_response_is_success(gcs_backend: GCSBackend, gcs_proxy: FaultProxy,
                                             how: str, fault: Fault) -> None:
    """The adapter resends the DELETE whose response was lost; the resend meets the
    object gone (404) and a metadata GET confirms it: success, and a move keeps its copy."""
    gcs_backend.setup()
    gcs_backend.put("a.txt", OLD)
    ws = gcs_workspace(gcs_backend, gcs_proxy)
    assert ws.execute("read", {"file_path": "a.txt"}).error is None
    gcs_backend.emulator.clear_requests()
    gcs_proxy.plan(fault, method="DELETE")

    out = delete_or_move(ws, how, "a.txt", "b.txt")
    assert gcs_proxy.wait_idle()
    requests = gcs_backend.emulator.requests()

    assert out is None or out.error is None, out.text
    assert gcs_proxy.injected() == {fault: 1}
    assert not gcs_backend.exists("a.txt")
    if how == "rm_file":
        assert not gcs_backend.exists("b.txt")
    else:
        assert gcs_backend.get("b.txt") == moved_bytes(how)
    assert gone_from_ledger(ws, "a.txt")
    # fake-gcs-server answers a delete 200 where GCS answers 204: both are success.
    seen = [(r.method, 204 if (r.method, r.status) == ("DELETE", 200) else r.status)
            for r in requests if r.method in ("DELETE", "GET")]
    assert seen[-3:] == [("DELETE", 204), ("DELETE", 404), ("GET", 404)], seen


@pytest.mark.usefixtures("quick_gcs_retries")
@pytest.mark.parametrize("how", MOVES)
def test_gcs_lost_delete_response_unverifiable_is_backend_error(
        gcs_backend: GCSBackend, gcs_proxy: FaultProxy, how: str) -> None:
    """The metadata GET after the refused resend fails too: backend_error, never stale;
    a move keeps its copy."""
    gcs_backend.setup()
    gcs_backend.put("a.txt", OLD)
    ws = gcs_workspace(gcs_backend, gcs_proxy)
    assert ws.execute("read", {"file_path": "a.txt"}).error is None
    unverifiable_delete(ws, gcs_proxy, how, "GET")
    assert not gcs_backend.exists("a.txt")
    if how != "rm_file":
        assert gcs_backend.get("b.txt") == moved_bytes(how)


# -- (3) a seeded soak: three agents, random calls, ~30% of requests faulted ----------

SOAK_MIX: dict[Fault, float] = {
    "reset_before_forward": 0.07, "reset_after_forward": 0.07, "500_before_forward": 0.05,
    "500_after_forward": 0.05, "truncate_after_forward": 0.04, "delay": 0.01,
    "delay_after_forward": 0.01,
}


def mixed_rules(mix: dict[Fault, float]) -> list[Rule]:
    """Rules tried in order whose overall chances are ``mix`` (each rule rolls only when
    the ones before it did not fire, so its roll is conditional)."""
    rules, left = [], 1.0
    for fault, share in mix.items():
        rules.append(Rule(fault, times=None, probability=share / left, delay=DELAY))
        left -= share
    return rules


@pytest.mark.parametrize("seed", [20260])
def test_soak(s3_backend: S3Backend, proxy: FaultProxy, aio_session: Any, seed: int) -> None:
    rng = random.Random(seed)
    h = Harness(s3_backend, proxy, aio_session)
    rel = "soak.txt"
    h.seed(rel, b"seed\nbody line\n")
    agents = [h.workspace() for _ in range(3)]
    for ws in agents:
        assert h.call(ws, "read", {"file_path": rel}) == "ok"
    proxy.add(*mixed_rules(SOAK_MIX))
    outcomes: Counter[tuple[str, str]] = Counter()
    by_fault: Counter[tuple[str, str, str]] = Counter()
    must_read = [False] * len(agents)  # after stale, an agent reads again (as advised)
    for step in range(30 * len(agents)):
        injected_before = len(proxy.injections)
        who = rng.randrange(len(agents))
        ws = agents[who]
        op = "read" if must_read[who] else rng.choices(["read", "write", "edit"], [2, 3, 3])[0]
        if op == "read":
            outcome = h.call(ws, "read", {"file_path": rel})
            if outcome == "ok":  # what it returned is what is stored (no one wrote since)
                assert observed(ws, rel) == h.stored(rel)
        elif op == "write":
            content = f"step {step} written by agent {who}\nbody line\n"
            outcome = h.call(ws, "write", {"file_path": rel, "content": content},
                             sends=content.encode())
            if outcome == "ok":
                assert h.stored(rel) == content.encode()
        else:
            seen = observed(ws, rel)
            old = seen.decode().splitlines()[0]
            new = f"step {step} edited by agent {who}"
            outcome = h.call(ws, "edit", {"file_path": rel, "old_string": old,
                                          "new_string": new},
                             sends=seen.replace(old.encode(), new.encode(), 1))
            if outcome == "ok":
                assert h.stored(rel) == seen.replace(old.encode(), new.encode(), 1)
        must_read[who] = outcome == "stale"
        outcomes[op, outcome] += 1
        for fault in {i.fault for i in proxy.injections[injected_before:]}:
            by_fault[fault, op, outcome] += 1
    injected = proxy.injected()
    share = sum(injected.values()) / proxy.requests
    print(f"\nsoak seed={seed}: {proxy.requests} requests, {share:.0%} faulted, "
          f"{dict(sorted(injected.items()))}\noutcomes {dict(sorted(outcomes.items()))}\n"
          f"calls with a fault, by (fault, op, outcome): {dict(sorted(by_fault.items()))}")
    assert 0.15 < share < 0.45, share
    assert outcomes["write", "ok"] + outcomes["edit", "ok"] > 0


# -- the proxy itself ------------------------------------------------------------------

def test_proxy_plan_matching_and_counts(s3_emulator: S3Emulator) -> None:
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with FaultProxy(s3_emulator.endpoint_url, timeout=5.0) as p:
        url = p.endpoint_url + "/_toolfs/requests"
        p.plan("500_before_forward", method="POST")  # not a GET: never fires here
        p.plan("500_after_forward", path="/_toolfs", times=2)
        statuses = []
        for _ in range(3):
            try:
                statuses.append(opener.open(url, timeout=5).status)
            except urllib.error.HTTPError as e:
                statuses.append(e.code)
        assert statuses == [500, 500, 200]
        p.plan("reset_before_forward")
        with pytest.raises(OSError):
            opener.open(url, timeout=5)
        assert p.injected() == {"500_after_forward": 2, "reset_before_forward": 1}
        assert p.requests == 4
        assert [i.upstream_status for i in p.injections] == [200, 200, None]
    with pytest.raises(RuntimeError):
        _ = p.endpoint_url  # stopped with the context
    with pytest.raises(ValueError):
        Rule("explode")  # type: ignore[arg-type]
