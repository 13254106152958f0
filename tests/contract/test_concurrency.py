"""No lost updates: many contexts racing read->edit on one file, on every atomic backend;
reads crossed by writes; seeded random mixes of read, edit and write within and across
contexts, threads and (on local) processes.

Pass: every successful edit's marker is in the final content, and every failed call
failed with ``stale`` (no other error, no exception).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pathlib
import random
import select
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

import toolfs
from tests.backend_fixtures import Backend, LocalBackend
from tests.contract.calls import local_backend
from toolfs.backends import store_for
from toolfs.backends.base import Blob
from toolfs.policy.events import FsEvent

CYCLES = {"memory": 50, "local": 50, "s3": 25, "gcs": 25, "azure": 25}


def _agent(ws: toolfs.Workspace, name: str, cycles: int, wins: list[str],
           failures: Counter[str], mixed: bool) -> None:
    for i in range(cycles):
        marker = f"<{name}:{i}>"
        r = ws.execute("read", {"file_path": "race.txt"})
        if r.is_error:
            failures[r.error.code if r.error else "?"] += 1
            continue
        if mixed and i % 3 == 0:
            assert isinstance(r.value, toolfs.ReadResult)
            content = "\n".join(r.value.lines) + "\n" + marker + "\n"
            out = ws.execute("write", {"file_path": "race.txt", "content": content})
        else:
            out = ws.execute("edit", {"file_path": "race.txt", "old_string": "END",
                                      "new_string": f"{marker}\nEND"})
        if out.is_error:
            failures[out.error.code if out.error else "?"] += 1
        else:
            wins.append(marker)


def _process_agent(root: str, name: str, cycles: int, out: str) -> None:
    ws = toolfs.Workspace(root)
    wins: list[str] = []
    failures: Counter[str] = Counter()
    _agent(ws, name, cycles, wins, failures, mixed=False)
    pathlib.Path(out).write_text("\n".join(wins) + "\n#" + ",".join(
        f"{k}={v}" for k, v in failures.items()))


_WRITER = """
import sys, toolfs
root, n = sys.argv[1], 0
ws = toolfs.Workspace(root, policy=None)
while True:
    n += 1
    ws.write("crash.txt", (f"version {n} " * 20000) + "\\n")
    if n == 1:  # the test kills it only once it writes: start-up time varies with load
        print("writing", flush=True)
"""

WRITER_START_TIMEOUT = 60.0  # only reached when the writer cannot start at all


FILE = "race.txt"


LINES = 200


PARK_TIMEOUT = 30.0  # only reached when something is broken


SERIAL_TIMEOUT = 3.0  # only reached if calls of one context were serialised by a lock


def _body() -> bytes:
    return "".join(f"line {i} tick\n" for i in range(LINES)).encode() + b"END\n"


class _GateStore:
    """A backend's own store, with a hook on the first ``get`` after :meth:`arm`.

    The hook runs after the real read returned, in the calling thread: the caller holds
    the bytes (and their version) and has not decided anything yet.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self._hook: Callable[[], None] | None = None
        self.fired = False

    def __getattr__(self, name: str) -> Any:  # capabilities, put, delete, ...
        return getattr(self._inner, name)

    def arm(self, hook: Callable[[], None]) -> None:
        with self._lock:
            self._hook, self.fired = hook, False

    def get(self, path: str, **kw: Any) -> Any:
        blob = self._inner.get(path, **kw)
        with self._lock:
            hook, self._hook = self._hook, None
        if hook is not None:
            self.fired = True
            hook()
        return blob


class _Gate:
    """Arms a hook at one of the two park points of a workspace's next change."""

    def __init__(self, where: str, ws: Any, store: _GateStore) -> None:
        self.where, self._store = where, store
        self._lock = threading.Lock()
        self._hook: Callable[[], None] | None = None
        self.fired = False
        ws.subscribe(self._on_event)

    def _on_event(self, event: FsEvent) -> None:
        if event.type != "fs/write-intent":
            return
        with self._lock:
            hook, self._hook = self._hook, None
        if hook is not None:
            self.fired = True
            hook()

    def arm(self, hook: Callable[[], None]) -> None:
        if self.where == "read":
            self._store.arm(hook)
        else:
            with self._lock:
                self._hook, self.fired = hook, False

    @property
    def has_fired(self) -> bool:
        return self._store.fired if self.where == "read" else self.fired


def _gated_workspace(backend: Backend, where: str, **options: Any) -> tuple[Any, _Gate]:
    store = _GateStore(store_for(backend.fs, root=backend.root or None))
    # Parking after the store read needs the edit to fetch its bytes: no content cache.
    cache = {"cache_bytes": 0} if where == "read" else {}
    ws = backend.workspace(store=store, **cache, **options)
    return ws, _Gate(where, ws, store)


def _code(out: toolfs.ToolOutput) -> str | None:
    return out.error.code if out.error is not None else None


def _race(ws: Any, gate: _Gate, slow: tuple[str, dict[str, Any]],
          fast: tuple[str, dict[str, Any]]) -> tuple[toolfs.ToolOutput, toolfs.ToolOutput,
                                                     bool]:
    """Run ``slow`` parked at the gate while ``fast`` runs to completion in the same
    context. Returns both outputs and whether ``fast`` finished while ``slow`` was parked
    (it does unless the context serialises its calls)."""
    parked, release = threading.Event(), threading.Event()
    outs: dict[str, toolfs.ToolOutput] = {}

    def park() -> None:
        parked.set()
        assert release.wait(PARK_TIMEOUT), "never released"

    def call(name: str, tool: str, args: dict[str, Any]) -> None:
        outs[name] = ws.execute(tool, args)

    gate.arm(park)
    slow_t = threading.Thread(target=call, args=("slow", *slow))
    slow_t.start()
    assert parked.wait(PARK_TIMEOUT), "the slow call never reached the park point"
    fast_t = threading.Thread(target=call, args=("fast", *fast))
    fast_t.start()
    fast_t.join(SERIAL_TIMEOUT)
    overlapped = not fast_t.is_alive()
    release.set()
    slow_t.join(PARK_TIMEOUT)
    fast_t.join(PARK_TIMEOUT)
    assert not slow_t.is_alive() and not fast_t.is_alive()
    assert gate.has_fired
    return outs["slow"], outs["fast"], overlapped


POLICIES = {
    "policy": toolfs.Policy(),
    "no-require-observation": toolfs.Policy(require_observation=False),
    "no-policy": None,
}


FAST_EDIT = ("edit", {"file_path": FILE, "old_string": "END", "new_string": "FAST\nEND"})


# Without a read first, the default policy refuses an edit before reading anything.
CONDITIONAL_CASES = [("policy", True), ("no-require-observation", True),
                     ("no-require-observation", False), ("no-policy", True),
                     ("no-policy", False)]


FIRST_BLOCK = 16


BODY = b"".join(b"line %02d of a file longer than the first block\n" % i for i in range(8))


def _split_reads(ws: Any, after_head: Callable[[int], None] | None = None,
                 rest_error: toolfs.FsError | None = None) -> list[str]:
    """Make every whole-file read of ``ws``'s store take two requests, and return what
    the store was asked, in order ("head": the first block, ``start=0`` and no pin;
    "rest": the remainder pinned to its version). ``after_head(n)`` runs after the
    ``n``-th head; ``rest_error`` is raised instead of answering a rest.

    A store that reads the whole file anyway (memory, local: to digest it) returns it
    all from the first request; the first block is cut to ``length`` here, as a remote
    store returns it, so that every backend takes the two-request path."""
    store = ws.fs.store
    real = store.get
    asked: list[str] = []

    def get(path: str, **kw: Any) -> Any:
        first = kw.get("start", 0) == 0 and kw.get("if_version") is None
        asked.append("head" if first else "rest")
        if not first and rest_error is not None:
            raise rest_error
        blob = real(path, **kw)
        length = kw.get("length")
        if first and length is not None and len(blob.data) > length:
            blob = Blob(data=blob.data[:length], version=blob.version, size=blob.size)
        if first and after_head is not None:
            after_head(asked.count("head"))
        return blob

    store.get = get
    return asked


def _writes_between_gets(ws: Any, other: toolfs.Workspace, times: int) -> list[str]:
    """:func:`_split_reads` with ``other``'s edit right after each of the first ``times``
    heads: the file changes between a read's requests."""
    def edit(n: int) -> None:
        if n <= times:
            other.read("f.txt", limit=1)  # its latest observation, whoever wrote last
            other.edit("f.txt", f"line 0{n - 1}", f"LINE 0{n - 1}")

    return _split_reads(ws, after_head=edit)


FUZZ_FILE = "fuzz.txt"


SEED = 1729


SWITCH_INTERVAL = 1e-5  # seconds (CPython's default: 5e-3)


# contexts, threads per context, calls per thread, padding lines (of 2,000 bytes: the
# bigger the file, the longer an edit holds bytes of an old version). S3 and GCS are
# HTTP emulators (Azure too): few calls, a small file.
SIZES = {"s3": (3, 2, 6, 4), "gcs": (3, 2, 6, 4), "azure": (3, 2, 6, 4)}


DEFAULT_SIZE = (2, 4, 30, 300)


POLICY_MIXES = {
    "policy": [toolfs.Policy()],
    "mixed-policies": [toolfs.Policy(), toolfs.Policy(require_observation=False), None],
}


def _initial(padding: int) -> str:
    return "START\n" + "".join(f"pad {i:04d} " + "x" * 1990 + "\n"
                               for i in range(padding)) + "END\n"


@dataclass
class _Context:
    ws: Any
    index: int
    strict: bool
    """The policy requires an observation before a change."""
    observed: threading.Event = field(default_factory=threading.Event)


def _fuzz_agent(ctx: _Context, thread: int, calls: int, seed: int, initial: str,
           records: list[dict[str, Any]], start: threading.Barrier) -> None:
    rng = random.Random(f"{seed}/{ctx.index}/{thread}")
    last_read: str | None = None
    reread = False
    start.wait()
    for i in range(calls):
        marker = f"<c{ctx.index}t{thread}n{i}>"
        kind = rng.choices(["read", "edit", "write"], weights=[3, 5, 2])[0]
        if reread:  # as a model does after stale or not_observed
            kind, reread = "read", False
        unobserved = not ctx.observed.is_set()
        content = None
        if kind == "read":
            out = ctx.ws.execute("read", {"file_path": FUZZ_FILE})
        elif kind == "edit":
            out = ctx.ws.execute("edit", {
                "file_path": FUZZ_FILE, "old_string": "END", "new_string": f"{marker}\nEND",
                "replace_all": rng.random() < 0.3})
        else:
            base = last_read if last_read is not None else initial
            content = base.replace("END\n", f"{marker}\nEND\n")
            out = ctx.ws.execute("write", {"file_path": FUZZ_FILE, "content": content})
        rec: dict[str, Any] = {
            "context": ctx.index, "kind": kind, "marker": marker, "content": content,
            "code": out.error.code if out.error is not None else None,
            "message": out.text if out.is_error else None,
            "version": None, "unobserved": unobserved, "strict": ctx.strict}
        if out.is_error:
            reread = True
        else:
            ctx.observed.set()
            if kind == "read":
                assert isinstance(out.value, toolfs.ReadResult)
                assert not out.value.partial, "the fuzz file must fit one read"
                last_read = "".join(line + "\n" for line in out.value.lines)
            else:
                rec["version"] = str(out.value.version)
        records.append(rec)


def _run(contexts: list[_Context], threads: int, calls: int, seed: int,
         initial: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run the agents; returns the call records and the ``fs/written`` events."""
    records: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []

    def on_event(event: FsEvent) -> None:
        if event.type == "fs/written":
            events.append({
                "operation": event.operation,
                "before": str(event.version_before) if event.version_before else None,
                "after": str(event.version_after)})

    for ctx in contexts:
        ctx.ws.subscribe(on_event)
    start = threading.Barrier(len(contexts) * threads)
    # Switch threads far more often than every 5 ms, so that calls of one context
    # interleave inside each other's read-modify-write, not only between calls.
    switch = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        _start_and_join(contexts, threads, calls, seed, initial, records, start)
    finally:
        sys.setswitchinterval(switch)
    return records, events


def _start_and_join(contexts: list[_Context], threads: int, calls: int, seed: int,
                    initial: str, records: list[dict[str, Any]],
                    start: threading.Barrier) -> None:
    workers = [threading.Thread(target=_fuzz_agent, args=(ctx, t, calls, seed, initial,
                                                     records, start))
               for ctx in contexts for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(240)
        assert not w.is_alive(), "an agent hung"


def _check(records: list[dict[str, Any]], events: list[dict[str, Any]], *,
           initial: str, initial_version: str, final: bytes, final_version: str,
           atomic: bool, expected_calls: int) -> None:
    assert len(records) == expected_calls, "an agent died"
    # (1) failures: only the expected codes.
    for r in records:
        if r["code"] is None:
            continue
        assert r["kind"] != "read", f"a read failed: {r['message']}"
        allowed = {"stale"} | ({"not_observed"} if r["strict"] and r["unobserved"] else set())
        assert r["code"] in allowed, f"{r['kind']} {r['marker']}: {r['message']}"
    if not atomic:
        return  # documented: the generic check-then-write fallback may lose updates
    wins = [r for r in records if r["code"] is None and r["kind"] != "read"]
    assert wins, "no change succeeded at all"

    # (2) the commits are the successes, chained by their conditions.
    by_version = {r["version"]: r for r in wins}
    assert len(by_version) == len(wins), "two commits made the same version"
    assert sorted(e["after"] for e in events) == sorted(by_version), \
        "the fs/written events do not match the successful calls"
    child: dict[str, dict[str, Any]] = {}
    for e in events:
        rec = by_version[e["after"]]
        if e["before"] is None:
            assert rec["kind"] == "write", (
                f"edit {rec['marker']} was committed unconditionally: a change made "
                "between its read and its put would be lost")
            continue
        assert e["before"] not in child, (
            f"{rec['kind']} {rec['marker']} and {child[e['before']]['marker']} were both "
            f"committed on {e['before']}")
        child[e["before"]] = {**rec, "before": e["before"]}
    parent = {c["version"]: b for b, c in child.items()}

    # (3) replay the chain that ends at the final version.
    chain: list[dict[str, Any]] = []
    version = final_version
    while version != initial_version:
        rec = by_version.get(version)
        assert rec is not None, f"the final chain reaches {version}, which nobody made"
        chain.append(rec)
        if version not in parent:  # an unconditional write starts the chain
            break
        version = parent[version]
    chain.reverse()
    text = initial
    if chain and chain[0]["version"] not in parent:
        text = chain[0]["content"]
        chain = chain[1:]
    else:  # nothing replaced the initial chain, so every commit must be on it
        assert len(chain) == len(wins), (
            f"{len(wins) - len(chain)} successful calls are not in the history of the "
            "final version")
    for rec in chain:
        if rec["kind"] == "write":
            text = rec["content"]
        else:
            text = text.replace("END\n", f"{rec['marker']}\nEND\n")
    got = final.decode()
    if got != text:
        lost = [r["marker"] for r in chain if r["marker"] in text and r["marker"] not in got]
        pytest.fail(f"the final bytes are not derived from the last commit: successful "
                    f"calls whose change is gone: {lost[:8]} (of {len(wins)} successes, "
                    f"{len(chain)} on the final chain)")
    assert got.count("END") == 1


PROCESSES, PROC_CONTEXTS, PROC_THREADS, PROC_CALLS, PROC_PADDING = 3, 2, 3, 12, 300


def _process_main(root: str, index: int, out: str) -> None:
    contexts = [_Context(toolfs.Workspace(root), index * PROC_CONTEXTS + c, strict=True)
                for c in range(PROC_CONTEXTS)]
    records, events = _run(contexts, PROC_THREADS, PROC_CALLS, SEED,
                           _initial(PROC_PADDING))
    pathlib.Path(out).write_text(json.dumps({"records": records, "events": events}))


def test_an_in_place_change_during_the_temp_write_is_stale_not_lost(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = local_backend(tmp_path)
    b.put("f.txt", b"original\n")
    ws = b.workspace()
    ws.read("f.txt")
    target = os.path.join(b.root, "f.txt")
    real_fsync = os.fsync
    fired: list[int] = []

    def fsync_then_other_program_writes(fd: int) -> None:
        real_fsync(fd)
        if not fired:  # after our temp file is written: another program, no lock
            fired.append(fd)
            with open(target, "r+") as other:
                other.write("OTHER!!!\n")

    monkeypatch.setattr(os, "fsync", fsync_then_other_program_writes)
    out = ws.execute("edit", {"file_path": "f.txt", "old_string": "original",
                              "new_string": "mine"})
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert fired
    assert out.error is not None and out.error.code == "stale", out.text
    assert b.get("f.txt") == b"OTHER!!!\n"
    assert os.listdir(b.root) == ["f.txt"]


def test_processes_lose_no_update_on_local(tmp_path: pathlib.Path) -> None:
    b = LocalBackend(str(tmp_path))
    b.setup()
    b.put("race.txt", b"START\nEND\n")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_process_agent,
                         args=(b.root, f"p{n}", 30, str(tmp_path / f"p{n}.out")))
             for n in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    final = b.get("race.txt").decode()
    wins: list[str] = []
    for n in range(4):
        body, _, fails = (tmp_path / f"p{n}.out").read_text().rpartition("\n#")
        wins += [w for w in body.splitlines() if w]
        codes = {kv.split("=")[0] for kv in fails.split(",") if kv}
        assert codes <= {"stale"}, codes
    assert wins and all(w in final for w in wins)
    assert final.count("<") == len(wins)


def test_sigkill_mid_write_never_tears_the_file(tmp_path: pathlib.Path) -> None:
    b = LocalBackend(str(tmp_path))
    b.setup()
    b.put("crash.txt", b"initial\n")
    valid = {b"initial\n"}
    for kill in range(12):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, b.root],
                                stdout=subprocess.PIPE)
        assert proc.stdout is not None
        started, _, _ = select.select([proc.stdout], [], [], WRITER_START_TIMEOUT)
        assert started, "the writer did not start"
        proc.stdout.readline()
        time.sleep(0.005 * kill)  # a kill at a different point of a later write each time
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        data = b.get("crash.txt")
        if data not in valid:
            words = data.split(b" ")
            n = words[1]
            assert data == (b"version " + n + b" ") * 20000 + b"\n", "torn file"
            valid.add(data)
    leftovers = [p for p in os.listdir(b.root) if p != "crash.txt"]
    # A kill between temp creation and rename may leave one temp; the next write cleans it.
    assert len(leftovers) <= 1, leftovers
    toolfs.Workspace(b.root, policy=None).write("crash.txt", "clean\n")
    assert os.listdir(b.root) == ["crash.txt"]
    assert len(valid) > 2, "the writer never got going"


def test_local_write_keeps_mode_and_leaves_no_temp_on_error(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = LocalBackend(str(tmp_path))
    b.setup()
    b.put("script.sh", b"echo hi\n")
    os.chmod(os.path.join(b.root, "script.sh"), 0o750)
    ws = b.workspace()
    ws.read("script.sh")
    ws.edit("script.sh", "hi", "hello")
    assert os.stat(os.path.join(b.root, "script.sh")).st_mode & 0o7777 == 0o750

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    out = ws.execute("edit", {"file_path": "script.sh", "old_string": "hello",
                              "new_string": "bye"})
    assert out.error is not None and out.error.code == "backend_error", out.text
    assert "No space left" in out.text
    assert b.get("script.sh") == b"echo hello\n"
    assert os.listdir(b.root) == ["script.sh"]


def test_processes_and_threads_on_local(tmp_path: pathlib.Path) -> None:
    b = LocalBackend(str(tmp_path))
    b.setup()
    initial = _initial(PROC_PADDING)
    b.put(FUZZ_FILE, initial.encode())
    initial_version = str(toolfs.Workspace(b.root).read(FUZZ_FILE, limit=1).version)
    ctx = multiprocessing.get_context("spawn")
    outs = [tmp_path / f"p{n}.json" for n in range(PROCESSES)]
    procs = [ctx.Process(target=_process_main, args=(b.root, n, str(outs[n])))
             for n in range(PROCESSES)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(240)
        assert p.exitcode == 0
    records: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for out in outs:
        data = json.loads(out.read_text())
        records += data["records"]
        events += data["events"]
    final_version = str(toolfs.Workspace(b.root).read(FUZZ_FILE, limit=1).version)
    _check(records, events, initial=initial, initial_version=initial_version,
           final=b.get(FUZZ_FILE), final_version=final_version, atomic=True,
           expected_calls=PROCESSES * PROC_CONTEXTS * PROC_THREADS * PROC_CALLS)


class Concurrency:
    """Parallel calls within and across contexts lose no update."""

    @pytest.mark.parametrize("mixed", [False, True], ids=["edits", "edits+writes"])
    def test_threads_lose_no_update(self, backend: Backend, mixed: bool) -> None:
        backend.put("race.txt", b"START\nEND\n")
        cycles = CYCLES.get(backend.name, 20) // (2 if mixed else 1)
        wins: list[str] = []
        failures: Counter[str] = Counter()
        threads = [threading.Thread(target=_agent,
                                    args=(backend.workspace(), f"t{n}", cycles, wins, failures,
                                          mixed))
                   for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        final = backend.get("race.txt").decode()
        assert set(failures) <= {"stale"}, failures
        assert len(wins) + sum(failures.values()) == 8 * cycles
        assert wins, "no edit succeeded at all"
        if not backend.capabilities.atomic:
            return  # documented: the generic check-then-write fallback may lose updates
        missing = [m for m in wins if m not in final]
        assert not missing, f"lost updates: {missing[:5]}"
        if not mixed:
            assert final.count("<") == len(wins)

    @pytest.mark.parametrize("where", ["read", "write-intent"])
    @pytest.mark.parametrize("policy", list(POLICIES))
    def test_one_context_parallel_edits_lose_no_reported_success(self,
            backend: Backend, policy: str, where: str) -> None:
        """Item 1: a slow replace_all and a fast one-line edit, sent together in one context."""
        backend.put(FILE, _body())
        ws, gate = _gated_workspace(backend, where, policy=POLICIES[policy])
        if policy == "policy":
            ws.read(FILE)  # the other policies let an edit read the file itself
        slow = ("edit", {"file_path": FILE, "old_string": "tick", "new_string": "tock",
                         "replace_all": True})
        slow_out, fast_out, overlapped = _race(ws, gate, slow, FAST_EDIT)
        final = backend.get(FILE)

        assert {_code(slow_out), _code(fast_out)} <= {None, "stale"}, (slow_out.text,
                                                                        fast_out.text)
        fast_kept = b"FAST\nEND\n" in final
        slow_kept = b"tick" not in final and final.count(b"tock") == LINES
        assert fast_out.is_error or fast_kept, (
            f"the fast edit answered {fast_out.text!r} but its change is gone")
        assert slow_out.is_error or slow_kept, (
            f"the slow edit answered {slow_out.text!r} but its change is gone")
        if overlapped:
            # The fast edit committed while the slow one held bytes of the older version.
            assert not fast_out.is_error, fast_out.text
            assert _code(slow_out) == "stale", (
                f"the slow edit was derived from the version before the fast edit and must "
                f"be stale, but answered {slow_out.text!r}")
            assert final == _body().replace(b"END\n", b"FAST\nEND\n")

    @pytest.mark.parametrize("policy", ["policy", "no-require-observation"])
    def test_one_context_write_commits_on_the_version_seen_when_it_started(self,
            backend: Backend, policy: str) -> None:
        """A write parked before its put while an edit of the same context commits.

        (Without a policy a write is create-or-overwrite by design: no case here.)
        """
        backend.put(FILE, _body())
        ws, gate = _gated_workspace(backend, "write-intent", policy=POLICIES[policy])
        ws.read(FILE)
        slow = ("write", {"file_path": FILE, "content": "rewritten\nEND\n"})
        slow_out, fast_out, overlapped = _race(ws, gate, slow, FAST_EDIT)
        final = backend.get(FILE)

        assert {_code(slow_out), _code(fast_out)} <= {None, "stale"}, (slow_out.text,
                                                                        fast_out.text)
        assert fast_out.is_error or b"FAST\nEND\n" in final, (
            f"the fast edit answered {fast_out.text!r} but its change is gone")
        assert slow_out.is_error or final.startswith(b"rewritten\n"), (
            f"the write answered {slow_out.text!r} but the file is not derived from it")
        if overlapped:
            assert not fast_out.is_error, fast_out.text
            assert _code(slow_out) == "stale", slow_out.text
            assert final == _body().replace(b"END\n", b"FAST\nEND\n")

    @pytest.mark.parametrize("where", ["read", "write-intent"])
    @pytest.mark.parametrize(("policy", "read_first"), CONDITIONAL_CASES,
                             ids=[f"{p}-{'read' if r else 'unread'}" for p, r in CONDITIONAL_CASES])
    def test_edit_is_conditional_whatever_the_policy(self,
            backend: Backend, policy: str, read_first: bool, where: str) -> None:
        """Item 2: another program writes between an edit's read and its put: ``stale``."""
        backend.put(FILE, _body())
        ws, gate = _gated_workspace(backend, where, policy=POLICIES[policy])
        if read_first:
            ws.read(FILE)
        outside = b"written by another program\nEND\n"
        gate.arm(lambda: backend.put(FILE, outside))
        out = ws.execute("edit", {"file_path": FILE, "old_string": "END",
                                  "new_string": "MINE\nEND"})
        assert gate.has_fired
        final = backend.get(FILE)
        assert final == outside, (
            f"the edit answered {out.text!r} and overwrote a change it never saw")
        assert _code(out) == "stale", out.text

    def test_a_read_crossed_by_a_write_reads_the_file_again(self, backend: Backend) -> None:
        """The second request is pinned to the first's version; a write between them makes
        it ``stale``. The reader had read nothing yet, so the read starts over and returns
        the file as the write left it, whole and of one version."""
        backend.put("f.txt", BODY)
        ws = backend.workspace(first_block=FIRST_BLOCK, size_cap=4096)
        other = toolfs.Workspace(backend.fs, root=backend.root)  # always sync: it runs inside
        asked = _writes_between_gets(ws, other, times=1)
        out = ws.execute("read", {"file_path": "f.txt"})
        assert not out.is_error, out.text
        expected = BODY.replace(b"line 00", b"LINE 00")
        assert isinstance(out.value, toolfs.ReadResult)
        assert "\n".join(out.value.lines) + "\n" == expected.decode()
        assert asked == ["head", "rest", "head", "rest"]
        # What it recorded is the version it returned: an edit stands on it.
        edited = ws.execute("edit", {"file_path": "f.txt", "old_string": "line 01",
                                     "new_string": "line one"})
        assert not edited.is_error, edited.text
        assert backend.get("f.txt") == expected.replace(b"line 01", b"line one")

    def test_a_read_crossed_by_a_write_every_time_gives_up_as_stale(self, backend: Backend) -> None:
        """Three tries, each crossed by a write: ``stale``, saying the file kept changing
        while it was read (not "since you read it": this reader never had), and nothing
        recorded, so an edit still asks for a read first."""
        backend.put("f.txt", BODY)
        ws = backend.workspace(first_block=FIRST_BLOCK, size_cap=4096)
        other = toolfs.Workspace(backend.fs, root=backend.root)
        asked = _writes_between_gets(ws, other, times=3)
        out = ws.execute("read", {"file_path": "f.txt"})
        assert out.error is not None and out.error.code == "stale", out.text
        assert "kept changing while it was being read" in out.error.message
        assert "since you read it" not in out.error.message
        assert out.error.path == "f.txt"
        assert asked == ["head", "rest"] * 3
        edit = ws.execute("edit", {"file_path": "f.txt", "old_string": "line 03",
                                   "new_string": "x"})
        assert edit.error is not None and edit.error.code == "not_observed", edit.text

    def test_a_read_whose_second_request_fails_says_so(self, backend: Backend) -> None:
        """Only ``stale`` starts a read over: a second request that fails otherwise
        (``backend_error``) is answered as it is, at once, not as a file "that kept changing"
        after three tries."""
        backend.put("f.txt", BODY)
        ws = backend.workspace(first_block=FIRST_BLOCK, size_cap=4096)
        asked = _split_reads(ws, rest_error=toolfs.errors.fs_error(
            "backend_error", "f.txt: connection reset"))
        out = ws.execute("read", {"file_path": "f.txt"})
        assert out.error is not None and out.error.code == "backend_error", out.text
        assert asked == ["head", "rest"]

    def test_a_small_read_is_still_one_request(self, backend: Backend) -> None:
        """A file within the first block: one request, nothing pinned (the fast path)."""
        backend.put("f.txt", BODY)
        ws = backend.workspace(first_block=len(BODY), size_cap=4096)
        other = toolfs.Workspace(backend.fs, root=backend.root)
        asked = _writes_between_gets(ws, other, times=0)
        out = ws.execute("read", {"file_path": "f.txt"})
        assert not out.is_error, out.text
        assert asked == ["head"]

    @pytest.mark.parametrize("mix", list(POLICY_MIXES))
    def test_parallel_calls_within_and_across_contexts(self, backend: Backend, mix: str) -> None:
        n_contexts, threads, calls, padding = SIZES.get(backend.name, DEFAULT_SIZE)
        initial = _initial(padding)
        backend.put(FUZZ_FILE, initial.encode())
        policies = POLICY_MIXES[mix]
        n_contexts = max(n_contexts, len(policies))
        contexts = [_Context(backend.workspace(policy=p), i,
                             strict=p is not None and p.require_observation)
                    for i, p in enumerate(policies[n % len(policies)] for n in range(n_contexts))]
        initial_version = str(toolfs.Workspace(backend.fs, root=backend.root)
                              .read(FUZZ_FILE, limit=1).version)
        records, events = _run(contexts, threads, calls, SEED, initial)
        final_version = str(toolfs.Workspace(backend.fs, root=backend.root)
                            .read(FUZZ_FILE, limit=1).version)
        _check(records, events, initial=initial, initial_version=initial_version,
               final=backend.get(FUZZ_FILE), final_version=final_version,
               atomic=backend.capabilities.atomic,
               expected_calls=n_contexts * threads * calls)
