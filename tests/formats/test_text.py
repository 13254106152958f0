"""The text helpers (``toolfs.formats.text``) against their per-line and per-match definitions."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given, settings

from tests.contract.test_editing import TEXT


@settings(max_examples=300, deadline=None)
@given(text=TEXT, a=st.integers(0, 200), b=st.integers(0, 200), context=st.integers(0, 3))
def test_lines_around_is_a_slice_of_the_lines(text: str, a: int, b: int,
                                              context: int) -> None:
    from toolfs.formats.text import lines_around, split_lines

    def line_of(text: str, offset: int) -> int:
        return text.count("\n", 0, offset) + 1

    start, end = sorted((min(a, len(text)), min(b, len(text))))
    first, lines = lines_around(text, start, end, context)
    every = split_lines(text)
    assert lines == every[first - 1: first - 1 + len(lines)]
    if text and start < len(text):
        assert first <= line_of(text, start) and first >= line_of(text, start) - context


@settings(max_examples=1000, deadline=None)
@given(text=st.lists(st.sampled_from(["a", "漢", "\r", "\n", "\r\n", "\r\r\n", "\n\r",
                                      "\v", "\f", "\x1c", "\x85", "\u2028"]),
                     max_size=20).map("".join))
def test_split_lines_is_the_per_line_definition(text: str) -> None:
    """``split_lines`` splits LF, CRLF and mixed text in bulk; line by line it means: split
    at each ``\\n``, drop an empty last piece, drop one ``\\r`` that ends each line. The
    other characters ``str.splitlines`` breaks at are text here."""
    from toolfs.formats.text import split_lines

    pieces = text.split("\n") if text else []
    if pieces and pieces[-1] == "":
        pieces.pop()
    assert split_lines(text) == [p[:-1] if p.endswith("\r") else p for p in pieces]


@settings(max_examples=1000, deadline=None)
@given(text=st.lists(st.sampled_from(["a", "漢", "\r", "\n", "\r\n", "\r\r\n", "\n\r"]),
                     max_size=20).map("".join))
def test_crlf_map_is_the_per_match_definition(text: str) -> None:
    """An edit's map of a CRLF file is made in bulk; match by match it means: each
    ``\\r\\n`` (left to right, not overlapping) becomes ``\\n``, at its position less the
    ``\\r`` dropped before it, and offsets map back by adding those."""
    from toolfs.formats.text import _CrlfMap

    crlf, removed, pos = [], 0, text.find("\r\n")
    while pos != -1:
        crlf.append(pos - removed)
        removed += 1
        pos = text.find("\r\n", pos + 2)
    m = _CrlfMap(text)
    assert (m.crlf, m.normalized) == (crlf, text.replace("\r\n", "\n"))
    for i in range(len(m.normalized) + 1):
        assert text[:m.to_raw(i)].replace("\r\n", "\n") == m.normalized[:i]
