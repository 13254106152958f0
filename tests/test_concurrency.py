"""No lost updates: many contexts racing read->edit on one file, on every atomic backend.

Pass: every successful edit's marker is in the final content, and every failed call
failed with ``stale`` (no other error, no exception).
"""

from __future__ import annotations

import multiprocessing
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import toolfs
from tests.backends import Backend, LocalBackend
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


@pytest.mark.parametrize("mixed", [False, True], ids=["edits", "edits+writes"])
def test_threads_lose_no_update(backend: Backend, mixed: bool) -> None:
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


def _process_agent(root: str, name: str, cycles: int, out: str) -> None:
    ws = toolfs.Workspace(root)
    wins: list[str] = []
    failures: Counter[str] = Counter()
    _agent(ws, name, cycles, wins, failures, mixed=False)
    pathlib.Path(out).write_text("\n".join(wins) + "\n#" + ",".join(
        f"{k}={v}" for k, v in failures.items()))


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


_WRITER = """
import sys, toolfs
root, n = sys.argv[1], 0
ws = toolfs.Workspace(root, policy=None)
while True:
    n += 1
    ws.write("crash.txt", (f"version {n} " * 20000) + "\\n")
"""


def test_sigkill_mid_write_never_tears_the_file(tmp_path: pathlib.Path) -> None:
    b = LocalBackend(str(tmp_path))
    b.setup()
    b.put("crash.txt", b"initial\n")
    valid = {b"initial\n"}
    for kill in range(12):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, b.root])
        time.sleep(0.25 + 0.03 * kill)
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


# -- one context, parallel calls: a change commits only on the version it came from ------
#
# Models send several tool calls at once, and one MCP session is one context. An edit's
# bytes are derived from the version it read; if another call of the same context commits
# meanwhile, the edit must commit on the version it was derived from (and so fail
# ``stale``), never on whatever the ledger holds by then. The interleavings below are
# forced, not timed: the slow call is parked either right after its store read (``read``:
# the bytes it edits are fetched) or at ``fs/write-intent`` (right before its put), and
# released only once the fast call (same Workspace) has committed. The generic fallback
# is not atomic, but here no two puts overlap, so it is held to the same outcome.

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


@pytest.mark.parametrize("where", ["read", "write-intent"])
@pytest.mark.parametrize("policy", list(POLICIES))
def test_one_context_parallel_edits_lose_no_reported_success(
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
def test_one_context_write_commits_on_the_version_seen_when_it_started(
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


# Without a read first, the default policy refuses an edit before reading anything.
CONDITIONAL_CASES = [("policy", True), ("no-require-observation", True),
                     ("no-require-observation", False), ("no-policy", True),
                     ("no-policy", False)]


@pytest.mark.parametrize("where", ["read", "write-intent"])
@pytest.mark.parametrize(("policy", "read_first"), CONDITIONAL_CASES,
                         ids=[f"{p}-{'read' if r else 'unread'}" for p, r in CONDITIONAL_CASES])
def test_edit_is_conditional_whatever_the_policy(
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


# -- a whole-file read that a write crosses between its two requests ---------------------

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


def test_a_read_crossed_by_a_write_reads_the_file_again(backend: Backend) -> None:
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


def test_a_read_crossed_by_a_write_every_time_gives_up_as_stale(backend: Backend) -> None:
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


def test_a_read_whose_second_request_fails_says_so(backend: Backend) -> None:
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


def test_a_small_read_is_still_one_request(backend: Backend) -> None:
    """A file within the first block: one request, nothing pinned (the fast path)."""
    backend.put("f.txt", BODY)
    ws = backend.workspace(first_block=len(BODY), size_cap=4096)
    other = toolfs.Workspace(backend.fs, root=backend.root)
    asked = _writes_between_gets(ws, other, times=0)
    out = ws.execute("read", {"file_path": "f.txt"})
    assert not out.is_error, out.text
    assert asked == ["head"]
