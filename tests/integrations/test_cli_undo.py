"""``toolfs changes`` and ``toolfs rewind``: a context's persisted journal at a terminal."""

from __future__ import annotations

import io
import pathlib
from contextlib import redirect_stderr, redirect_stdout

import pytest

import toolfs
from toolfs.integrations.cli import main


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _agent(tmp_path: pathlib.Path) -> tuple[str, str]:
    data, journal = tmp_path / "repo", tmp_path / "journal"
    data.mkdir()
    (data / "a.py").write_text("x = 1\n")
    ws = toolfs.Workspace(str(data), context_id="agent-1", journal=str(journal))
    ws.read("a.py")
    ws.checkpoint("before")
    ws.edit("a.py", "x = 1", "x = 2")
    ws.write("b.py", "y = 1\n")
    return str(data), str(journal)


def test_changes_lists_a_contexts_changes_with_their_diffs(tmp_path: pathlib.Path) -> None:
    data, journal = _agent(tmp_path)
    code, out, err = _cli("changes", data, "--context", "agent-1", "--journal", journal,
                          "--diff")
    assert code == 0, err
    lines = out.splitlines()
    assert "updated  a.py  (edit;" in lines[0] and "created  b.py  (write;" in out
    assert "-x = 1" in out and "+x = 2" in out and "+y = 1" in out
    assert "checkpoint " in out and "'before' at position 0" in out


def test_rewind_restores_and_refuses_over_someone_elses_change(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data, journal = _agent(tmp_path)
    monkeypatch.setenv("TOOLFS_JOURNAL", journal)
    (pathlib.Path(data) / "a.py").write_text("x = 3\n")  # someone else, since
    code, out, err = _cli("rewind", data, "--context", "agent-1", "--to", "before")
    assert code == 1 and "nothing was rewound" in err
    # A new process holds no bytes the agent left, and the local disk keeps no old
    # versions: the refusal says the other change cannot be shown.
    assert "refused a.py: [stale]" in out and "cannot be shown" in out
    assert (pathlib.Path(data) / "b.py").exists()  # all or nothing
    (pathlib.Path(data) / "a.py").write_text("x = 2\n")  # put back as the agent left it
    code, out, err = _cli("rewind", data, "--context", "agent-1", "--to", "before")
    assert code == 0, err
    assert sorted(out.split()) == sorted(["restored", "a.py", "restored", "b.py"])
    assert (pathlib.Path(data) / "a.py").read_text() == "x = 1\n"
    assert not (pathlib.Path(data) / "b.py").exists()


def test_a_journal_url_is_required(tmp_path: pathlib.Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLFS_JOURNAL", raising=False)
    code, _, err = _cli("changes", str(tmp_path), "--context", "x")
    assert code == 2 and "--journal" in err and len(err.splitlines()) == 1
