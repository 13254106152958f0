"""The numbered text of a read, built in bulk, equals the line-by-line definition.

``render`` builds a read's text without Python work per line (cached number prefixes,
one join; the budget's cut found in that text, or by a bisection over the lines'
lengths). These tests compare it with the plain definition (``number_line`` per line,
whole lines while they fit) wherever the bulk path has an edge: the end of the prefix
cache, numbers wider than six digits, long lines that must be cut, and budgets that
cut the window anywhere.
"""

from __future__ import annotations

import random

import pytest

from toolfs.render import (
    _FOOTER_ROOM,
    _PREFIX_CACHE_LINES,
    _WIDE_NUMBERS,
    MAX_LINE_CHARS,
    _fit,
    _Limits,
    _numbered_lines,
    number_line,
    render_read,
)
from toolfs.results import ReadResult
from toolfs.versions import FileVersion


def _reference_fit(start: int, lines: list[str], limits: _Limits, room: int) -> list[str]:
    shown: list[str] = []
    used = -1
    for i, line in enumerate(lines):
        text = number_line(start + i, line, limits.line)
        used += len(text) + 1
        if used > room:
            break
        shown.append(text)
    return shown


def _result(start: int, lines: list[str], total: int) -> ReadResult:
    return ReadResult(path="f.txt", version=FileVersion(kind="sha256", value="0" * 64),
                      lines=lines, start_line=start, line_count=len(lines),
                      total_lines=total, size=sum(map(len, lines)) + len(lines),
                      partial=len(lines) < total)


@pytest.mark.parametrize("start", [1, 2, _PREFIX_CACHE_LINES - 5, _PREFIX_CACHE_LINES,
                                   _PREFIX_CACHE_LINES + 1, _WIDE_NUMBERS - 3,
                                   _WIDE_NUMBERS, 12_345_678])
@pytest.mark.parametrize("room", [1_000, 5_000, 100_000])
def test_numbered_window_matches_the_line_by_line_definition(start: int, room: int) -> None:
    rng = random.Random(start * 7 + room)
    lines = ["x" * rng.randrange(0, 120) for _ in range(300)]
    limits = _Limits(100_000)
    expected = _reference_fit(start, lines, limits, room)
    shown = _fit(start, lines, limits, room)
    assert len(shown) == len(expected)
    assert _numbered_lines(start, shown) == "\n".join(expected)


@pytest.mark.parametrize("long_at", [0, 7, 299])
def test_long_lines_are_cut_as_number_line_cuts_them(long_at: int) -> None:
    lines = [f"line {i}" for i in range(300)]
    lines[long_at] = "y" * (MAX_LINE_CHARS + 50)
    limits = _Limits(100_000)
    expected = _reference_fit(1, lines, limits, 100_000)
    shown = _fit(1, lines, limits, 100_000)
    assert _numbered_lines(1, shown) == "\n".join(expected)
    assert "[line truncated: 2000 of 2050 characters shown]" in expected[long_at]


@pytest.mark.parametrize("budget", [1_000, 4_321, 100_000])
def test_read_text_cut_at_the_budget_keeps_whole_numbered_lines(budget: int) -> None:
    lines = [f"{i:05d} " + "z" * (i % 90) for i in range(2000)]
    text = render_read(_result(1, lines, 2000), budget)
    assert len(text) <= budget
    body, footer = text.rsplit("\n\n", 1)
    rows = body.split("\n")
    assert rows == [number_line(i + 1, lines[i]) for i in range(len(rows))]
    assert len(rows) == len(_reference_fit(1, lines, _Limits(budget), budget - _FOOTER_ROOM))
    assert footer.startswith(f"(Output truncated at {budget} characters: showing lines 1-")


def test_whole_small_file_has_no_footer() -> None:
    assert render_read(_result(1, ["a", "", "b"], 3)) == "     1\ta\n     2\t\n     3\tb"


def _by_definition(r: ReadResult, budget: int) -> str:
    """The read's text with the numbered body built line by line (the reference)."""
    rows = _reference_fit(r.start_line, r.lines, _Limits(budget), budget)
    if len(rows) == len(r.lines) and len("\n".join(rows)) <= budget:
        text = render_read(r, budget)
        assert text.split("\n\n")[0] == "\n".join(rows)
        return text
    rows = _reference_fit(r.start_line, r.lines, _Limits(budget), budget - _FOOTER_ROOM)
    return "\n".join(rows)


@pytest.mark.parametrize("size", ["exact", "understated", "overstated"])
def test_a_read_that_just_fits_or_just_does_not_is_cut_by_its_lines(size: str) -> None:
    """The file's size bounds the characters of its lines, so a read the size says fits
    is not measured line by line; a size that is wrong (a hand-made result) still gives
    a text within the budget, cut at the same line as the true one."""
    lines = [f"{i:04d} " + "w" * (i % 37) for i in range(400)]
    exact = sum(map(len, lines)) + len(lines)
    whole = len(_numbered_lines(1, lines))
    for budget in (whole - 1, whole, whole + 1, whole + 400, whole - 50):
        r = _result(1, lines, 400)
        r = r.model_copy(update={"size": {"exact": exact, "understated": 1,
                                          "overstated": 10 * exact}[size]})
        text = render_read(r, budget)
        assert len(text) <= budget
        body = text.split("\n\n")[0]
        assert body == _by_definition(r, budget).split("\n\n")[0]


@pytest.mark.parametrize("start", [1, 9_990, _WIDE_NUMBERS - 300])
def test_a_cut_found_in_the_numbered_text_is_the_bisected_cut(start: int) -> None:
    """A plain window whose numbered text is at most about twice the budget is numbered
    whole and cut at its last newline within the budget; the number after that newline
    names the first line left out. Every budget from "nothing fits" to "all fits" gives
    the text of the bisection over the lines' lengths (the path a size too large for
    that bound takes, pinned to the definition above), with lines that look like
    prefixes (digits, tabs, empty)."""
    rng = random.Random(start)
    lines = [rng.choice(["", "\t", "   12\t", "999999\tx", "z" * rng.randrange(1, 40)])
             for _ in range(300)]
    for total in (start + 299, start + 5_000):  # the window is the file's end, or not
        r = _result(start, lines, total)
        bisected = r.model_copy(update={"size": 10**9})
        whole = len(_numbered_lines(start, lines))
        budgets = sorted({*range(_FOOTER_ROOM - 2, _FOOTER_ROOM + 40),
                          *range(whole // 2, whole // 2 + 60),
                          *range(whole - 5, whole + 80)})
        for budget in budgets:
            text = render_read(r, budget)
            assert len(text) <= budget
            assert text == render_read(bisected, budget), budget


@pytest.mark.parametrize("budget", [5_000, 100_000])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("over", [-1, 0, 1, 2_000])
def test_a_line_too_long_is_told_from_the_numbered_text(budget: int, where: str,
                                                        over: int) -> None:
    """The plain view tells a line too long by a run between newlines of its numbered
    text; each line just under, at and over the limit (first, middle or last) gives the
    text of the path that measures the lines one by one."""
    limit = _Limits(budget).line
    lines = [f"{i:04d} " + "q" * (i % 23) for i in range(120)]
    at = {"first": 0, "middle": 60, "last": 119}[where]
    lines[at] = "L" * (limit + over)
    for start in (1, _WIDE_NUMBERS - 200):
        r = _result(start, lines, start + 200)
        text = render_read(r, budget)
        assert len(text) <= budget
        assert text == render_read(r.model_copy(update={"size": 10**9}), budget)
        if over > 0 and text.count("\n") > at:  # the long line is shown: cut
            assert "[line truncated:" in text


def test_a_run_over_the_limit_is_found_as_defined() -> None:
    """``_has_run_over`` (a backward search per ``limit`` characters) answers as the
    longest run between newlines does."""
    from toolfs.render import _has_run_over

    rng = random.Random(5)
    for _ in range(3_000):
        text = "".join(rng.choice(["x", "x", "x", "\n", "xxxxxxx"])
                       for _ in range(rng.randrange(0, 60)))
        limit = rng.randrange(0, 20)
        longest = max(map(len, text.split("\n")))
        assert _has_run_over(text, limit) == (longest > limit), (text, limit)
