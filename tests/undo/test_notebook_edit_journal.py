"""``notebook_edit`` is journaled as itself, and a rewind restores the notebook's bytes."""

from __future__ import annotations

import json

import toolfs
from tests.notebook_samples import base_notebook


def test_notebook_edits_are_journaled_and_rewound() -> None:
    ws = toolfs.Workspace("memory://undo-notebook")
    original = json.dumps(base_notebook(), indent=1) + "\n"
    ws.write("nb.ipynb", original)
    before = ws.fs.cat_file("nb.ipynb")
    cp = ws.checkpoint()
    ws.notebook_edit("nb.ipynb", "empty", "x = 1")
    assert ws.execute("notebook_edit", {"file_path": "nb.ipynb", "cell_id": "fail",
                                        "new_source": "", "edit_mode": "delete"}
                      ).error is None
    assert [(c.kind, c.tool) for c in ws.changes(since=cp)] == [
        ("updated", "notebook_edit"), ("updated", "notebook_edit")]
    assert not ws.rewind(cp).refused
    assert ws.fs.cat_file("nb.ipynb") == before
