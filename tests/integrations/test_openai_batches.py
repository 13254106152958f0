"""``apply_patch(ws, [operations])``: several operations, all or nothing."""

from __future__ import annotations

import pytest

from tests.backend_fixtures import Backend
from toolfs.integrations.openai import PatchReport, apply_patch
from toolfs.policy.events import FsEvent, Veto


def _update(path: str, diff: str, **extra: str) -> dict[str, str]:
    return {"type": "update_file", "path": path, "diff": diff, **extra}


def test_a_batch_lands_every_operation(backend: Backend) -> None:
    backend.put("a.txt", b"a\n")
    backend.put("gone.txt", b"bye\n")
    backend.put("m.txt", b"m\n")
    ws = backend.workspace()
    for p in ("a.txt", "gone.txt", "m.txt"):
        ws.read(p)
    report = apply_patch(ws, [
        _update("a.txt", "@@\n-a\n+A\n"),
        {"type": "create_file", "path": "new.txt", "diff": "+hello\n"},
        {"type": "delete_file", "path": "gone.txt"},
        _update("m.txt", "@@\n-m\n+M\n", move_to="d/m.txt"),
        _update("a.txt", "@@\n-A\n+AA\n"),  # a later operation sees the earlier one
    ])
    assert isinstance(report, PatchReport)
    assert not report.is_error, report.text
    assert backend.get("a.txt") == b"AA\n" and backend.get("new.txt") == b"hello"
    assert not backend.exists("gone.txt") and not backend.exists("m.txt")
    assert backend.get("d/m.txt") == b"M\n"
    assert report.text.splitlines()[0] == "Updated a.txt"


def test_a_failing_third_operation_leaves_nothing_applied(backend: Backend) -> None:
    backend.put("a.txt", b"a\n")
    backend.put("b.txt", b"b\n")
    backend.put("c.txt", b"c\n")
    ws = backend.workspace()
    for p in ("a.txt", "b.txt", "c.txt"):
        ws.read(p)
    report = apply_patch(ws, [
        _update("a.txt", "@@\n-a\n+A\n"),
        _update("b.txt", "@@\n-b\n+B\n"),
        _update("c.txt", "@@\n-nope\n+C\n"),
    ])
    assert report.is_error
    assert "no_match" in report.text and "c.txt" in report.text
    assert report.skipped == ("a.txt", "b.txt")
    assert [backend.get(p) for p in ("a.txt", "b.txt", "c.txt")] == [b"a\n", b"b\n", b"c\n"]


def test_a_stale_file_refuses_the_batch_with_the_other_change(backend: Backend) -> None:
    backend.put("a.txt", b"a\n")
    backend.put("b.txt", b"one\ntwo\n")
    ws = backend.workspace()
    ws.read("a.txt")
    ws.read("b.txt")
    backend.put("b.txt", b"one\nTWO\n")
    report = apply_patch(ws, [_update("a.txt", "@@\n-a\n+A\n"),
                              _update("b.txt", "@@\n-one\n+ONE\n")])
    assert report.is_error and "stale" in report.text and "+TWO" in report.text
    assert backend.get("a.txt") == b"a\n"


def test_a_write_failing_midway_is_rolled_back(backend: Backend) -> None:
    backend.put("a.txt", b"a\n")
    backend.put("b.txt", b"b\n")
    ws = backend.workspace()
    ws.read("a.txt")
    ws.read("b.txt")

    def veto_b(event: FsEvent) -> None:
        if event.type == "fs/write-intent" and event.path == "b.txt":
            raise Veto("not b")

    ws.subscribe(veto_b)
    report = apply_patch(ws, [_update("a.txt", "@@\n-a\n+A\n"),
                              _update("b.txt", "@@\n-b\n+B\n")])
    assert report.is_error and "denied" in report.text
    assert backend.get("a.txt") == b"a\n" and backend.get("b.txt") == b"b\n"


@pytest.mark.parametrize("backend", ["memory"], indirect=True)
def test_one_operation_still_answers_a_tool_output(backend: Backend) -> None:
    backend.put("a.txt", b"a\n")
    ws = backend.workspace()
    ws.read("a.txt")
    out = apply_patch(ws, _update("a.txt", "@@\n-a\n+A\n"))
    assert out.text == "Updated a.txt" and not out.is_error


@pytest.mark.parametrize("backend", ["memory"], indirect=True)
def test_a_batch_patches_a_notebooks_cell_sources(backend: Backend) -> None:
    import json

    from tests.notebook_samples import base_notebook

    raw = (json.dumps(base_notebook(), indent=1) + "\n").encode()
    backend.put("nb.ipynb", raw)
    backend.put("a.txt", b"a\n")
    ws = backend.workspace()
    ws.read("nb.ipynb")
    ws.read("a.txt")
    report = apply_patch(ws, [_update("nb.ipynb", "@@\n-plot(df)\n+plot(df, kind='bar')\n"),
                              _update("a.txt", "@@\n-a\n+A\n")])
    assert not report.is_error, report.text
    stored = backend.get("nb.ipynb")
    assert "plot(df, kind='bar')" in json.loads(stored)["cells"][2]["source"]
    # Every byte outside the changed source stays as it was.
    assert stored.replace(b"plot(df, kind='bar')", b"plot(df)") == raw
