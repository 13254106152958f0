"""Arguments at the edge of what the schemas let through, on every backend: an offset too
large to print, and text that cannot be stored, always answer ``invalid_arguments``
(never an exception, never ``backend_error``) and change nothing."""

from __future__ import annotations

import pytest

import toolfs
from tests.backends import Backend
from toolfs.tools import MAX_OFFSET


@pytest.mark.parametrize("offset", [10**5000, MAX_OFFSET + 1], ids=["5001 digits", "max+1"])
def test_an_offset_past_any_file_is_invalid(backend: Backend, offset: int) -> None:
    backend.put("a.txt", b"one\ntwo\n")
    ws = backend.workspace()
    out = ws.execute("read", {"file_path": "a.txt", "offset": offset})
    assert out.error is not None and out.error.code == "invalid_arguments", out.text
    assert str(MAX_OFFSET) in out.text
    with pytest.raises(toolfs.FsError) as caught:
        ws.read("a.txt", offset=offset)
    assert caught.value.code == "invalid_arguments"


def test_the_largest_offset_is_past_the_end(backend: Backend) -> None:
    backend.put("a.txt", b"one\ntwo\n")
    out = backend.workspace().execute("read", {"file_path": "a.txt", "offset": MAX_OFFSET})
    assert out.error is None, out.text
    assert "past the end" in out.text


@pytest.mark.parametrize("content", [b"one\ntwo\n", b"one\r\ntwo\r\n"])
@pytest.mark.parametrize(("old", "new", "replace_all"), [
    ("one", "\ud800", False), ("o", "x\udcff", True), ("one\ntwo", "a\ud800\nb", False)])
def test_an_edit_to_text_with_a_lone_surrogate_is_invalid(
        backend: Backend, content: bytes, old: str, new: str, replace_all: bool) -> None:
    backend.put("a.txt", content)
    ws = backend.workspace()
    ws.read("a.txt")
    out = ws.execute("edit", {"file_path": "a.txt", "old_string": old, "new_string": new,
                              "replace_all": replace_all})
    assert out.error is not None and out.error.code == "invalid_arguments", out.text
    assert "surrogate" in out.text
    assert backend.get("a.txt") == content
