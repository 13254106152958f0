"""Fitting text to the model's budget: the limits, the clipping and the numbered lines.

Every renderer (:mod:`toolfs.render.views`, :mod:`toolfs.render.media`,
:mod:`toolfs.render.notebook`, the Anthropic text editor) builds on these parts: the
per-part limits that keep one output within its character budget (:class:`_Limits`), the
visible cut markers for long lines, paths and messages, and ``cat -n`` style numbered
lines made without Python work per line (:func:`_numbered_lines`, :func:`_fit`). They know
no result type, which is why they stand apart from the views that use them.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass
from typing import Any

from toolfs.errors import fs_error

MIN_OUTPUT_CHARS = 1_000
"""The smallest budget accepted: one cut line and a footer always fit."""
MAX_LINE_CHARS = 2000
"""A longer line is cut in the output (``[line truncated: ...]``)."""
MAX_LISTED = 100
"""At most this many line numbers are listed (edit results, error details)."""
MAX_PATH_CHARS = 1000
MAX_MESSAGE_CHARS = 4000
_FOOTER_ROOM = 300  # kept free for the footer when a body is cut to the budget


@dataclass(frozen=True)
class _Limits:
    """The per-part limits that keep one output within ``total`` characters."""

    total: int

    @property
    def line(self) -> int:
        return min(MAX_LINE_CHARS, self.total // 2)

    @property
    def path(self) -> int:
        return min(MAX_PATH_CHARS, self.total // 5)

    @property
    def message(self) -> int:
        return min(MAX_MESSAGE_CHARS, self.total // 2)

    @property
    def listed(self) -> int:
        return min(MAX_LISTED, self.total // 50)


def check_output_budget(max_chars: object) -> int:
    """``max_chars`` if it is a usable budget, else ``invalid_arguments``."""
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) \
            or max_chars < MIN_OUTPUT_CHARS:
        raise fs_error("invalid_arguments", f"max_output_chars must be an integer of at least "
                       f"{MIN_OUTPUT_CHARS}, not {str(max_chars)[:50]!r}")
    return max_chars


def _plural(n: int, word: str) -> str:
    """``1 file``, ``2 files``; ``entry`` -> ``entries`` (a consonant and ``y``)."""
    if n == 1:
        return f"{n} {word}"
    if word.endswith("y") and word[-2:-1] not in ("a", "e", "i", "o", "u", ""):
        return f"{n} {word[:-1]}ies"
    return f"{n} {word}s"


def _clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with a visible marker."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"


def _clip_message(text: str, limit: int) -> str:
    """A message cut to ``limit`` characters in the middle: the cause of an error is
    often at its end (a huge path, then the backend's reason)."""
    if len(text) <= limit:
        return text
    tail = limit // 4
    head = limit - tail
    return f"{text[:head]} ... [{len(text) - limit} characters cut] ... {text[-tail:]}"


def _clip_line(line: str, max_chars: int = MAX_LINE_CHARS, full: int | None = None) -> str:
    """``line`` cut past ``max_chars``; ``full`` is the whole line's length when ``line``
    is already a prefix (a streamed read keeps only the start of a long line)."""
    total = len(line) if full is None else full
    if total <= max_chars:
        return line
    shown = min(max_chars, len(line))
    return (f"{line[:shown]}... [line truncated: {shown} of {total} characters shown]")


def number_line(n: int, line: str, max_chars: int = MAX_LINE_CHARS) -> str:
    """One ``cat -n`` style line, cut with a visible marker past ``max_chars``."""
    return _numbered(n, _clip_line(line, max_chars))


def _numbered(n: int, shown: str) -> str:
    return f"{n:>6}\t{shown}"


# Numbered text is built without Python work per line: the ``"\n     N\t"`` prefixes of
# the first _PREFIX_CACHE_LINES line numbers are made once, and a window's text is one
# join of prefixes interleaved with its lines (slice assignment and ``str.join`` run in
# C). Past the cache, the prefixes are formatted by ``map`` (still no bytecode per line).
_PREFIX_CACHE_LINES = 20_000
_PREFIX_FORMAT = "\n{:>6}\t".format
_prefix_cache: list[str] = []
_WIDE_NUMBERS = 1_000_000  # from here on a prefix is wider than 6 digits + tab


def _prefixes(start: int, count: int) -> list[str]:
    """``"\n" + _numbered(n, "")`` for ``n`` in ``start .. start+count-1``."""
    global _prefix_cache  # made once, then only read
    end = start + count
    if end - 1 <= _PREFIX_CACHE_LINES:
        if not _prefix_cache:
            # Replaced whole (never appended in place), so a concurrent reader always
            # sees a complete list.
            _prefix_cache = list(map(_PREFIX_FORMAT, range(1, _PREFIX_CACHE_LINES + 1)))
        return _prefix_cache[start - 1:end - 1]
    return list(map(_PREFIX_FORMAT, range(start, end)))


def _numbered_lines(start: int, shown: list[str]) -> str:
    if not shown:
        return ""
    parts = shown * 2  # the right length; every slot is overwritten below
    parts[0::2] = _prefixes(start, len(shown))
    parts[1::2] = shown
    parts[0] = parts[0][1:]  # no newline before the first line
    return "".join(parts)


def _span(start: int, end: int) -> str:
    return f"line {start}" if start == end else f"lines {start}-{end}"


class _PlainWidths:
    """Lines that need no per-line care; the running totals of their lengths are made
    only if a bound on their sum cannot tell that every line fits."""

    __slots__ = ("_running", "lines")

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self._running: list[int] | None = None

    def running(self) -> list[int]:
        if self._running is None:
            self._running = list(itertools.accumulate(map(len, self.lines)))
        return self._running


def _narrow_numbers(start: int, lines: list[str],
                    cut_lines: dict[int, Any] | None) -> bool:
    """Whether ``lines`` can be plain as far as their numbers tell: none is cut, and
    every number fits 6 digits (each prefix is then ``_PREFIX_WIDTH`` characters)."""
    return not cut_lines and bool(lines) and start + len(lines) <= _WIDE_NUMBERS


_PREFIX_WIDTH = 7  # "{:>6}\t" below _WIDE_NUMBERS


def _plain_widths(start: int, lines: list[str], limits: _Limits,
                  cut_lines: dict[int, Any] | None = None) -> _PlainWidths | None:
    """A :class:`_PlainWidths` of ``lines`` when they need no per-line care (none is
    cut, none is too long, every number fits 6 digits), else ``None``. Checked in C
    (``max`` over ``map``), with no Python work per line."""
    if not _narrow_numbers(start, lines, cut_lines) or max(map(len, lines)) > limits.line:
        return None
    return _PlainWidths(lines)


def _has_run_over(text: str, limit: int) -> bool:
    """Whether ``text`` holds more than ``limit`` characters in a row without a newline:
    one backward search per ``limit`` characters or so, not a step per line. Each search
    starts where a run starts and looks for the last newline within ``limit + 1``
    characters: none means a run that long; else the next run starts after it, and
    within two searches the start has moved on by more than ``limit``."""
    pos, end = 0, len(text)
    while end - pos > limit:
        newline = text.rfind("\n", pos, pos + limit + 1)
        if newline < 0:
            return True
        pos = newline + 1
    return False


def _plain_cut(body: str, start: int, count: int, room: int) -> tuple[int, int]:
    """How many leading lines of ``body`` (the numbered text of ``count`` plain lines
    from ``start``) fit in ``room`` characters, and where their text ends in ``body``.

    Every newline of a plain body ends a line and is followed by the next line's
    ``"{:>6}\t"`` prefix, so the last newline within ``room`` both ends the fitting
    text and names, in the number after it, the first line that does not fit: a search
    and a parse, not a pass over the lines' lengths."""
    if len(body) <= room:
        return count, len(body)
    end = body.rfind("\n", 0, room + 1)
    if end < 0:
        return 0, 0
    return int(body[end + 1:end + 7]) - start, end


def _fit(start: int, lines: list[str], limits: _Limits, room: int,
         cut_lines: dict[int, Any] | None = None, widths: _PlainWidths | None = None,
         at_most: int | None = None) -> list[str]:
    """The shown form of as many leading ``lines`` as fit in ``room`` characters, joined
    by newlines and numbered from ``start``; whole lines only. ``cut_lines`` gives the
    whole length of lines that are only prefixes (``ReadResult.cut_lines``); ``widths``
    is :func:`_plain_widths` of the lines, when the caller has it; ``at_most``, a bound
    on the sum of their lengths, when the caller has one."""
    if widths is None:
        widths = _plain_widths(start, lines, limits, cut_lines)
    if widths is not None:
        # Every line is shown as is, behind a 7-character prefix: lines 0..i take
        # running[i] + 8 * (i + 1) - 1 characters. A bisection: O(log n) Python calls.
        if at_most is not None and at_most + 8 * len(lines) - 1 <= room:
            return lines
        running = widths.running()
        if running[-1] + 8 * len(lines) - 1 <= room:
            return lines
        fit = bisect.bisect_right(range(len(lines)), room,
                                  key=lambda i: running[i] + 8 * i + 7)
        return lines[:fit]
    shown: list[str] = []
    used = -1  # no newline before the first line
    for i, line in enumerate(lines):
        cut = cut_lines.get(start + i) if cut_lines else None
        text = _clip_line(line, limits.line, None if cut is None else cut.chars)
        used += len(_numbered(start + i, text)) + 1
        if used > room:
            break
        shown.append(text)
    return shown
