"""``ws.changes()`` in a notebook: HTML diffs (and Markdown), every value escaped."""

from __future__ import annotations

import toolfs
from toolfs.integrations import display


def test_changes_render_as_html_diffs() -> None:
    ws = toolfs.Workspace("memory://undo-display")
    ws.write("a<b>.txt", "one\n")
    ws.edit("a<b>.txt", "one", "<two>")
    changes = ws.changes()
    assert isinstance(changes, list) and len(changes) == 2
    page = display.html(changes)
    assert page.count("<pre>") == 2 and "a&lt;b&gt;.txt" in page
    assert '<span style="color:#116611">+&lt;two&gt;</span>' in page
    assert '<span style="color:#aa1111">-one</span>' in page
    assert "<strong>updated</strong>" in page and "· edit ·" in page
    assert "+<two>" in display.markdown(changes)
    assert display.html(toolfs.Workspace("memory://undo-display-2").changes()) == \
        "<p><em>no changes</em></p>"
    assert "<strong>created</strong>" in display.html(changes[0])
