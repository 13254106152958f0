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

import pytest

import toolfs
from tests.backends import Backend, LocalBackend

CYCLES = {"memory": 50, "local": 50, "s3": 25, "gcs": 25}


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
