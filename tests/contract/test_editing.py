"""Editing: exact replacement, ambiguity, no-match hints and argument rules, on every
backend; the edit semantics against a reference model."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import assume, given, settings

import toolfs
from tests.backend_fixtures import Backend
from tests.contract.calls import err, ok
from toolfs.formats.text import BOM, apply_edit, decode

# (file before, old_string, new_string, file after): every byte outside the span is kept.
BYTE_EXACT_EDITS = {
    "deletion": (b"keep\ndrop me\nkeep\n", "drop me\n", "", b"keep\nkeep\n"),
    "crlf": (b"one\r\ntwo\r\nthree\r\n", "two\nthree", "2\n3\n3b",
             b"one\r\n2\r\n3\r\n3b\r\n"),
    "bom-no-final-newline": (b"\xef\xbb\xbfhead\ntail", "tail", "end",
                             b"\xef\xbb\xbfhead\nend"),
    "mixed-endings": (b"a\r\nb\nc\r\nd\n", "c\nd", "C\nD", b"a\r\nb\nC\r\nD\n"),
}


ALPHABET = st.sampled_from(["a", "b", "ab", " ", "\t", "\n", "漢", "😀", "e\u0301", "x = 1",
                            "\u00e9"])


TEXT = st.lists(ALPHABET, max_size=30).map("".join)


NEEDLE = st.lists(st.sampled_from(["a", "b", "ab", " ", "\n", "漢", "😀", "x = 1"]),
                  min_size=1, max_size=4).map("".join)


def reference(raw: str, old: str, new: str) -> str | None:
    """Python string operations on LF-normalised text, re-encoded with the file's ending."""
    crlf = "\r\n" in raw
    lf = raw.replace("\r\n", "\n")
    old_n, new_n = old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
    if old_n not in lf:
        return None
    out = lf.replace(old_n, new_n)
    return out.replace("\n", "\r\n") if crlf else out


CRLF_TEXT = st.lists(st.sampled_from(["a", "b", "ab", "漢", "\n", "\r", "x = 1"]),
                     max_size=12).map("".join)


def _occurrences(text: str, part: str) -> int:
    """Occurrences of ``part`` in ``text``, overlapping ones included."""
    return sum(text.startswith(part, i) for i in range(len(text)))


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(TEXT, min_size=2, max_size=4), old=NEEDLE, new=TEXT, crlf=st.booleans(),
       bom=st.booleans())
def test_replace_all_equals_reference(parts: list[str], old: str, new: str, crlf: bool,
                                      bom: bool) -> None:
    assume(old != new)
    lf = old.join(parts)  # at least one occurrence, often several
    raw = lf.replace("\n", "\r\n") if crlf else lf
    # The model sends LF, or CRLF copied from somewhere: both mean the same.
    sent_old = old.replace("\n", "\r\n") if crlf and "\n" in old else old
    expected = reference(raw, sent_old, new)
    assert expected is not None
    data = (BOM if bom else b"") + raw.encode()
    doc = decode(data)
    outcome = apply_edit(doc.text, sent_old, new, replace_all=True)
    assert outcome.text == expected
    assert doc.encode(outcome.text) == (BOM if bom else b"") + expected.encode()
    assert outcome.count == lf.count(old)


@settings(max_examples=300, deadline=None)
@given(prefix=TEXT, suffix=TEXT, old=NEEDLE, new=TEXT)
def test_unique_edit_changes_only_the_span(prefix: str, suffix: str, old: str,
                                           new: str) -> None:
    raw = prefix + old + suffix
    assume(old != new and raw.find(old) == len(prefix)
           and raw.find(old, len(prefix) + 1) == -1)
    out = apply_edit(raw, old, new, replace_all=False).text
    assert out == prefix + new + suffix


@settings(max_examples=1000, deadline=None)
@given(before=CRLF_TEXT, after=CRLF_TEXT, old=NEEDLE, new=CRLF_TEXT,
       endings=st.sampled_from(["crlf", "mixed", "scattered", "lf"]),
       bare=st.lists(st.booleans(), min_size=1, max_size=8), bom=st.booleans(),
       replace_all=st.booleans())
def test_a_crlf_file_edited_in_place_matches_the_general_path(
        before: str, after: str, old: str, new: str, endings: str, bare: list[bool],
        bom: bool, replace_all: bool) -> None:
    """The edit of a file with CRs made on the raw text (``_single_crlf_edit``: strings
    without a newline on any file; an ``old`` with a newline whose longest line occurs
    once in the file, whatever its endings; any strings on a file whose every newline
    is a CRLF) gives what the general path, through the map of its CRLFs, gives: the
    same text, count, lines and span, or the same error, cap included."""
    from unittest import mock

    from toolfs.errors import FsError
    from toolfs.formats.text import _single_crlf_edit

    lf = before + old + after
    raw = lf.replace("\n", "\r\n")
    if endings == "mixed":  # the last newline bare
        cut = raw.rfind("\r\n")
        raw = raw if cut < 0 else raw[:cut] + raw[cut + 1:]
    elif endings == "scattered":  # the i-th newline bare where bare[i % len(bare)]
        pieces = lf.split("\n")
        raw = pieces[0] + "".join(("\n" if bare[i % len(bare)] else "\r\n") + piece
                                  for i, piece in enumerate(pieces[1:]))
    elif endings == "lf":
        raw = lf
    size = len(raw.encode("utf-8", "surrogatepass"))

    def outcome(*, general: bool, cap: int | None) -> object:
        try:
            if general:
                with mock.patch("toolfs.formats.text._single_crlf_edit", return_value=None):
                    return apply_edit(raw, old, new, replace_all=replace_all,
                                      max_bytes=cap, bom=bom, size=size)
            return apply_edit(raw, old, new, replace_all=replace_all, max_bytes=cap,
                              bom=bom, size=size)
        except FsError as err:
            return (err.code, err.message, err.details)

    for cap in (None, size, size + 2):
        assert outcome(general=False, cap=cap) == outcome(general=True, cap=cap)
    fast = _single_crlf_edit(raw, old.replace("\r\n", "\n"), new.replace("\r\n", "\n"),
                             None, None, bom, size)
    old_r = old.replace("\n", "\r\n")
    one_line = "\n" not in old + new and raw.count(old) == 1
    crlf_file = endings == "crlf" and "\n" in raw and raw.count(old_r) == 1
    line = max(old.split("\n"), key=len)
    unique_line = "\n" in old and line != "" and _occurrences(raw, line) == 1 \
        and raw.count(old_r) == 1
    if "\r" not in old + new and (one_line or crlf_file or unique_line):
        assert fast is not None  # the cases it is for do take it


class Editing:
    """Edits: exact, unique or all, with hints when nothing matches."""

    def test_edit_replaces_once_and_reports(self, backend: Backend) -> None:
        backend.put("e.py", b"def f():\n    return 1\n")
        ws = backend.workspace()
        ok(ws, "read", file_path="e.py")
        out = ok(ws, "edit", file_path="e.py", old_string="return 1", new_string="return 2")
        assert isinstance(out.value, toolfs.EditResult)
        assert (out.value.replacements, out.value.replace_all, out.value.lines) == (1, False, [2])
        assert backend.get("e.py") == b"def f():\n    return 2\n"

    def test_edit_result_shows_the_new_region_with_context(self, backend: Backend) -> None:
        backend.put("ten.txt", "".join(f"l{i}\n" for i in range(1, 11)).encode())
        ws = backend.workspace()
        ws.read("ten.txt")
        r = ws.edit("ten.txt", "l5\n", "five\nFIVE\n")
        assert r.snippet_start == 2
        assert r.snippet == ["l2", "l3", "l4", "five", "FIVE", "l6", "l7", "l8"]
        backend.put("crlf.txt", b"a\r\nb\r\nc")
        ws.read("crlf.txt")
        r = ws.edit("crlf.txt", "c", "C")
        assert (r.snippet_start, r.snippet) == (1, ["a", "b", "C"])

    def test_edit_ambiguous_lists_lines_and_replace_all_counts(self, backend: Backend) -> None:
        backend.put("m.txt", b"x = 1\ny = 2\nx = 1\nz\nx = 1\n")
        ws = backend.workspace()
        ws.read("m.txt")
        out = err(ws, "edit", "ambiguous_match", file_path="m.txt", old_string="x = 1",
                  new_string="x = 9")
        assert out.error is not None and out.error.details["lines"] == [1, 3, 5]
        assert "1, 3, 5" in out.text
        assert backend.get("m.txt") == b"x = 1\ny = 2\nx = 1\nz\nx = 1\n"
        out = ok(ws, "edit", file_path="m.txt", old_string="x = 1", new_string="x = 9",
                 replace_all=True)
        assert isinstance(out.value, toolfs.EditResult) and out.value.replacements == 3
        assert "3 occurrences" in out.text
        assert backend.get("m.txt") == b"x = 9\ny = 2\nx = 9\nz\nx = 9\n"

    def test_edit_no_match_with_whitespace_hint_never_writes(self, backend: Backend) -> None:
        original = b"def f(x):\n\treturn x\n"
        backend.put("w.py", original)
        ws = backend.workspace()
        ws.read("w.py")
        out = err(ws, "edit", "no_match", file_path="w.py", old_string="def f(x):\n    return x",
                  new_string="def f(x):\n    return x + 1")
        assert "line 1" in out.text and "whitespace" in out.text
        assert backend.get("w.py") == original
        out = err(ws, "edit", "no_match", file_path="w.py", old_string="nothing like it",
                  new_string="y")
        assert "differs only in whitespace" not in out.text

    @pytest.mark.parametrize("case", BYTE_EXACT_EDITS)
    def test_edit_is_byte_exact(self, backend: Backend, case: str) -> None:
        before, old, new, after = BYTE_EXACT_EDITS[case]
        backend.put("f.txt", before)
        ws = backend.workspace()
        ws.read("f.txt")
        ok(ws, "edit", file_path="f.txt", old_string=old, new_string=new)
        assert backend.get("f.txt") == after

    def test_edit_unicode_cjk_emoji_combining(self, backend: Backend) -> None:
        backend.put("u.txt", "名前 = '太郎'\nmood = '😀'\ncafe\u0301\n".encode())
        ws = backend.workspace()
        ws.read("u.txt")
        ok(ws, "edit", file_path="u.txt", old_string="'😀'", new_string="'🎉'")
        ok(ws, "edit", file_path="u.txt", old_string="cafe\u0301", new_string="café")
        assert backend.get("u.txt") == "名前 = '太郎'\nmood = '🎉'\ncafé\n".encode()

    def test_edit_argument_rules(self, backend: Backend) -> None:
        backend.put("a.txt", b"abc\n")
        ws = backend.workspace()
        ws.read("a.txt")
        err(ws, "edit", "invalid_arguments", file_path="a.txt", old_string="", new_string="x")
        err(ws, "edit", "invalid_arguments", file_path="a.txt", old_string="a", new_string="a")
        err(ws, "edit", "invalid_arguments", file_path="a.txt", old_string="a")
        err(ws, "edit", "invalid_arguments", file_path="a.txt", old_string="a", new_string="b",
            extra=1)
        assert backend.get("a.txt") == b"abc\n"
