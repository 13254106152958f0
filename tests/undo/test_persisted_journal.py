"""A persisted journal (``Workspace(..., journal=URL)``): a context killed with SIGKILL,
then opened again by ``context_id`` in a new process, lists and rewinds its changes;
on versioned buckets the journal names old versions instead of copying bytes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import toolfs
from tests.backend_fixtures import Backend

SRC = str(Path(__file__).resolve().parents[2] / "src")

AGENT = textwrap.dedent('''
    import sys, time
    import toolfs
    data, journal = sys.argv[1], sys.argv[2]
    ws = toolfs.Workspace(data, context_id="agent-7", journal=journal)
    ws.read("keep.txt")
    ws.checkpoint("start")
    ws.edit("keep.txt", "one", "ONE")
    ws.write("made.txt", "made\\n")
    ws.read("gone.txt")
    ws.fs.rm_file("gone.txt")
    ws.fs.mv("keep.txt", "moved.txt")
    print("ready", flush=True)
    time.sleep(600)
''')


def test_a_context_killed_then_reopened_lists_and_rewinds_its_changes(
        tmp_path: Path) -> None:
    data, journal = tmp_path / "data", tmp_path / "journal"
    data.mkdir()
    (data / "keep.txt").write_bytes(b"one\ntwo\n")
    (data / "gone.txt").write_bytes(b"bye\n")
    proc = subprocess.Popen([sys.executable, "-c", AGENT, str(data), str(journal)],
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": SRC})
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    ws = toolfs.Workspace(str(data), context_id="agent-7", journal=str(journal))
    changes = ws.changes()
    assert [(c.path, c.kind) for c in changes] == [
        ("keep.txt", "updated"), ("made.txt", "created"), ("gone.txt", "deleted"),
        ("keep.txt", "moved")]
    assert "+ONE" in changes[0].diff()
    result = ws.rewind("start")
    assert not result.refused, result.refused
    assert (data / "keep.txt").read_bytes() == b"one\ntwo\n"
    assert (data / "gone.txt").read_bytes() == b"bye\n"
    assert not (data / "made.txt").exists() and not (data / "moved.txt").exists()
    # The rewind is journaled too, for the next process.
    again = toolfs.Workspace(str(data), context_id="agent-7", journal=str(journal))
    assert [c.tool for c in again.changes()][-1] == "rewind"


def _copied(journal_fs: Any, prefix: str) -> list[str]:
    try:
        journal_fs.invalidate_cache()
        return [p for p in journal_fs.find(prefix) if "/p/" in p]
    except FileNotFoundError:
        return []


def _enable_versioning(backend: Backend) -> bool:
    """Turn object versioning on for the backend's bucket, where the emulator can."""
    import fsspec.asyn

    if backend.name == "s3":
        fs = backend.fs
        fsspec.asyn.sync(fs.loop, fs._call_s3, "put_bucket_versioning",
                         Bucket=backend.root.split("/")[0],
                         VersioningConfiguration={"Status": "Enabled"})
        return True
    if backend.name == "gcs":
        import json

        from toolfs.testing import fakegcs

        emu = backend.emulator  # type: ignore[attr-defined]
        bucket = backend.root.split("/")[0]
        status, _ = fakegcs._http(
            "PATCH", f"{emu._backend()}/storage/v1/b/{bucket}",
            body=json.dumps({"versioning": {"enabled": True}}).encode(),
            headers={"Content-Type": "application/json"})
        return status == 200
    return False  # Azurite implements no blob versioning


@pytest.mark.parametrize("backend", ["memory", "s3", "gcs", "azure"], indirect=True)
@pytest.mark.parametrize("versioned", [False, True])
def test_a_persisted_journal_reopens_and_copies_bytes_only_without_versions(
        backend: Backend, versioned: bool) -> None:
    # Where the store keeps no versions (memory; Azurite implements no blob versioning),
    # asking for them changes nothing: the journal copies the bytes, as without.
    versioned = versioned and _enable_versioning(backend)
    backend.put("a.txt", b"alpha\n")
    backend.put("b.txt", b"beta\n")
    journal_url = f"memory://journals-{backend.name}-{versioned}-{id(backend)}"
    ws = toolfs.Workspace(backend.fs, root=backend.root, context_id="ctx-1",
                          journal=journal_url)
    ws.read("a.txt")
    ws.read("b.txt")
    cp = ws.checkpoint("cp")
    ws.edit("a.txt", "alpha", "ALPHA")
    ws.write("b.txt", "BETA\n")
    ws.write("c.txt", "gamma\n")
    sink = ws.journal._sink
    assert sink is not None
    copies = _copied(sink.fs, sink.prefix)
    # Versioned: the old versions are named, no bytes copied; else one copy per update.
    assert len(copies) == (0 if versioned else 2), copies
    records = ws.journal.records()
    assert all((r.pre_version is not None) == (versioned and r.before is not None)
               for r in records)
    reopened = toolfs.Workspace(backend.fs, root=backend.root, context_id="ctx-1",
                                journal=journal_url)
    assert [(c.path, c.kind) for c in reopened.changes(since="cp")] == [
        ("a.txt", "updated"), ("b.txt", "updated"), ("c.txt", "created")]
    assert "-alpha" in reopened.changes()[0].diff()
    result = reopened.rewind(cp.id)
    assert not result.refused, result.refused
    assert backend.get("a.txt") == b"alpha\n" and backend.get("b.txt") == b"beta\n"
    assert not backend.exists("c.txt")
