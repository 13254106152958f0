"""UTF-16 and UTF-32 text with a byte-order mark is text (:mod:`toolfs.formats.text`): ``read``
decodes it for the model, ``edit`` and ``write`` over the file keep its encoding, its BOM
and its line endings byte for byte (an edit then its reverse gives back the original
bytes), a stale diff reads it as text and a merge keeps its encoding; ``grep`` finds its
lines. Without a BOM such bytes are not UTF-8: ``not_text`` as before. On every backend.
"""

from __future__ import annotations

from typing import Any

import pytest

import toolfs
from tests.backend_fixtures import Backend
from toolfs import Policy

WIDE = {
    "utf-16-le": b"\xff\xfe", "utf-16-be": b"\xfe\xff",
    "utf-32-le": b"\xff\xfe\x00\x00", "utf-32-be": b"\x00\x00\xfe\xff",
}
TEXT = "first line\r\nsecond: h\u00e9llo \U0001d11e\nthird\r\nlast, no newline"
"""Mixed line endings (CRLF, LF, none at the end), a non-ASCII letter, an astral one."""


def _bytes(codec: str, text: str = TEXT) -> bytes:
    return WIDE[codec] + text.encode(codec)


def _ok(out: toolfs.ToolOutput) -> Any:
    assert not out.is_error, out.text
    return out.value


def _edit(ws: Any, path: str, old: str, new: str) -> Any:
    return _ok(ws.execute("edit", {"file_path": path, "old_string": old,
                                   "new_string": new}))


class WideText:
    """BOM-marked UTF-16/32 files through read, edit, write, grep (sync and async)."""

    @pytest.mark.parametrize("codec", sorted(WIDE))
    def test_read_then_an_edit_and_its_reverse_give_back_the_bytes(
            self, backend: Backend, codec: str) -> None:
        original = _bytes(codec)
        backend.put("w.txt", original)
        ws = backend.workspace()
        read = _ok(ws.execute("read", {"file_path": "w.txt"}))
        assert read.lines == ["first line", "second: h\u00e9llo \U0001d11e", "third",
                              "last, no newline"]
        done = _edit(ws, "w.txt", "h\u00e9llo \U0001d11e\nthird", "HELLO\nTHIRD")
        assert done.lines == [2]
        changed = backend.get("w.txt")
        assert changed == _bytes(codec, TEXT.replace("h\u00e9llo \U0001d11e\nthird",
                                                     "HELLO\nTHIRD"))
        _edit(ws, "w.txt", "HELLO\nTHIRD", "h\u00e9llo \U0001d11e\nthird")
        assert backend.get("w.txt") == original
        # An edit across the CRLF: the line endings of the span are the file's own.
        _edit(ws, "w.txt", "first line\nsecond", "first\nline\nsecond")
        assert backend.get("w.txt") == _bytes(
            codec, TEXT.replace("first line\r\n", "first\r\nline\r\n"))
        _edit(ws, "w.txt", "first\nline\nsecond", "first line\nsecond")
        assert backend.get("w.txt") == original

    @pytest.mark.parametrize("codec", sorted(WIDE))
    def test_a_write_over_the_file_keeps_its_encoding(self, backend: Backend,
                                                     codec: str) -> None:
        backend.put("w.txt", _bytes(codec))
        ws = backend.workspace()
        _ok(ws.execute("read", {"file_path": "w.txt"}))
        _ok(ws.execute("write", {"file_path": "w.txt", "content": "new\r\ntext \u00e9\n"}))
        assert backend.get("w.txt") == _bytes(codec, "new\r\ntext \u00e9\n")
        assert _ok(ws.execute("read", {"file_path": "w.txt"})).lines == ["new", "text \u00e9"]
        # A new file is UTF-8, as always.
        _ok(ws.execute("write", {"file_path": "n.txt", "content": "new\n"}))
        assert backend.get("n.txt") == b"new\n"

    @pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
    def test_grep_finds_its_lines(self, backend: Backend, codec: str) -> None:
        backend.put("w.txt", _bytes(codec))
        backend.put("plain.txt", b"h\xc3\xa9llo plain\n")
        got = backend.workspace().grep("h\u00e9llo", output_mode="content")
        assert [(m.path, m.line, m.text) for m in got.matches] == [
            ("plain.txt", 1, "h\u00e9llo plain"),
            ("w.txt", 2, "second: h\u00e9llo \U0001d11e")]

    def test_without_a_bom_it_is_not_text(self, backend: Backend) -> None:
        backend.put("w.txt", TEXT.encode("utf-16-le"))
        backend.put("bad.txt", b"\xff\xfe\x00\xd8")  # a lone surrogate after the BOM
        ws = backend.workspace()
        for path in ("w.txt", "bad.txt"):
            out = ws.execute("read", {"file_path": path})
            assert out.is_error and out.error is not None and out.error.code == "not_text"
        assert ws.grep("f").files == []

    @pytest.mark.parametrize("codec", ["utf-16-le", "utf-32-be"])
    def test_a_merged_edit_keeps_the_encoding(self, backend: Backend, codec: str) -> None:
        """An edit in merge mode over a file changed since it was read lands in the
        file's encoding, BOM and line endings; a refused one carries a readable diff."""
        original = _bytes(codec)
        backend.put("w.txt", original)
        ws = backend.workspace(policy=Policy(on_stale="merge"))
        _ok(ws.execute("read", {"file_path": "w.txt"}))
        theirs = TEXT.replace("first line", "FIRST LINE")
        backend.put("w.txt", _bytes(codec, theirs))
        done = _edit(ws, "w.txt", "third", "3rd")
        assert done.merged is True
        assert backend.get("w.txt") == _bytes(codec, theirs.replace("third", "3rd"))
        # Their change touches the line: refused, with the diff in text, file untouched.
        now = theirs.replace("third", "3rd (theirs)")
        backend.put("w.txt", _bytes(codec, now))
        out = ws.execute("edit", {"file_path": "w.txt", "old_string": "3rd",
                                  "new_string": "three"})
        assert out.is_error and out.error is not None and out.error.code == "stale"
        assert "-3rd\n+3rd (theirs)\n" in out.error.details["diff"]
        assert backend.get("w.txt") == _bytes(codec, now)

    def test_a_merged_write_keeps_the_encoding(self, backend: Backend) -> None:
        lines = "".join(f"line {i}\r\n" for i in range(1, 21))
        backend.put("w.txt", _bytes("utf-16-le", lines))
        ws = backend.workspace(policy=Policy(on_stale="merge"))
        _ok(ws.execute("read", {"file_path": "w.txt"}))
        theirs = lines.replace("line 2\r\n", "line two\r\n")
        backend.put("w.txt", _bytes("utf-16-le", theirs))
        mine = lines.replace("line 18\r\n", "line eighteen\r\n")
        assert _ok(ws.execute("write", {"file_path": "w.txt", "content": mine})).merged
        assert backend.get("w.txt") == _bytes(
            "utf-16-le", theirs.replace("line 18\r\n", "line eighteen\r\n"))
