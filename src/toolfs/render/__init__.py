"""Projection of canonical results and errors to what the model reads.

Everything the model gets -- :attr:`ToolOutput.text` and the structured content of
:meth:`ToolOutput.to_dict` -- is cut here to one character budget (``max_output_chars``,
default :data:`MAX_OUTPUT_CHARS`): a read shows whole lines only and ends, when cut, with
the offset to continue at; long lines, long paths, long messages and long lists are cut
with a visible marker. The structured content carries no more than the text shows.
The canonical values (``ws.read()``, ``ToolOutput.value``) are never cut.
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from typing import Any

from toolfs.discovery import MAX_IGNORE_PATTERNS
from toolfs.errors import FsError, fs_error
from toolfs.escaping import escape_undecodable, escape_undecodable_data
from toolfs.results import (
    MAX_OUTPUT_CHARS,
    EditResult,
    GlobResult,
    GrepMatch,
    GrepResult,
    ListResult,
    MediaResult,
    NotebookEditResult,
    NotebookReadResult,
    PatchResult,
    ReadResult,
    ToolImage,
    ToolResult,
    WriteResult,
)

__all__ = ["MAX_LINE_CHARS", "MAX_OUTPUT_CHARS", "MIN_OUTPUT_CHARS", "bound_text",
           "check_output_budget", "diff_budget", "error_diff", "number_line", "render_edit",
           "render_error", "render_glob", "render_grep", "render_ls",
           "render_output", "render_patch", "render_read", "render_result", "render_write",
           "structured_content"]
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


# -- read ---------------------------------------------------------------------------


def _read_view(r: ReadResult, max_chars: int) -> tuple[str, list[str], bool]:
    """The text of a read, the lines it shows (as shown) and whether the budget cut it."""
    limits = _Limits(max_chars)
    path = _clip(r.path, limits.path)
    if r.total_lines == 0 or r.size == 0:
        return f"(File {path} is empty: 0 lines.)", [], False
    if r.line_count == 0:
        if r.total_lines is None:
            return (f"(Offset {r.start_line} is past the end of {path}: the file has fewer "
                    "lines.)"), [], False
        use = ("Use offset=1." if r.total_lines == 1
               else f"Use an offset between 1 and {r.total_lines}.")
        return (f"(Offset {r.start_line} is past the end of {path}: the file has "
                f"{_plural(r.total_lines, 'line')}. {use})"), [], False
    # The lines hold no more characters than the file has bytes, so ``size`` bounds the
    # numbered text of the window.
    if _narrow_numbers(r.start_line, r.lines, r.cut_lines) \
            and r.size + 8 * len(r.lines) <= 2 * max_chars:
        plain = _plain_read_view(r, max_chars, limits.line)
        if plain is not None:
            return plain
    widths = _plain_widths(r.start_line, r.lines, limits, r.cut_lines)
    shown = _fit(r.start_line, r.lines, limits, max_chars, r.cut_lines, widths, r.size)
    if len(shown) == len(r.lines):  # a cut body is never built: it is cut again below
        footer = _read_footer(r, r.start_line + len(shown) - 1, cut=False,
                              max_chars=max_chars)
        body = _numbered_lines(r.start_line, shown)
        text = f"{body}\n\n{footer}" if footer else body
        if len(text) <= max_chars:
            return text, shown, False
    # Cut: by the lengths themselves, not the size (a hand-made one may be off).
    shown = _fit(r.start_line, r.lines, limits, max_chars - _FOOTER_ROOM, r.cut_lines,
                 widths)
    body = _numbered_lines(r.start_line, shown)
    footer = _read_footer(r, r.start_line + len(shown) - 1, cut=True, max_chars=max_chars)
    return f"{body}\n\n{footer}", shown, True


def _plain_read_view(r: ReadResult, max_chars: int, max_line: int
                     ) -> tuple[str, list[str], bool] | None:
    """:func:`_read_view` of lines with narrow numbers whose numbered text is at most
    about twice the budget: it is built once, whole, and cut where it exceeds the
    budget; ``None`` if a line is longer than ``max_line`` (the caller then takes each
    line in hand). That is told from the text itself, by a run between newlines longer
    than a line and its prefix: a search per line's worth of characters, where the
    lines' lengths would cost a call each."""
    start, lines = r.start_line, r.lines
    body = _numbered_lines(start, lines)
    if _has_run_over(body, _PREFIX_WIDTH + max_line):
        return None
    if len(body) <= max_chars:
        footer = _read_footer(r, start + len(lines) - 1, cut=False, max_chars=max_chars)
        text = f"{body}\n\n{footer}" if footer else body
        if len(text) <= max_chars:
            return text, lines, False
    count, end = _plain_cut(body, start, len(lines), max_chars - _FOOTER_ROOM)
    text = body[:end]
    del body  # so that the footer is appended in place (one large string at a time)
    text += "\n\n" + _read_footer(r, start + count - 1, cut=True, max_chars=max_chars)
    return text, lines[:count], True


def _read_footer(r: ReadResult, end: int, *, cut: bool, max_chars: int) -> str:
    """What was shown and where to continue; empty when the whole file was shown."""
    span = _span(r.start_line, end)
    if r.total_lines is None:
        # The scan of a file over the whole-file cap stopped before the end.
        of = (f"; more lines follow: the file is {r.size} bytes, over the whole-file cap, "
              "so they were not counted")
        more = True
    else:
        if not cut and r.start_line == 1 and end >= r.total_lines:
            return ""
        of = f" of {r.total_lines}"
        more = end < r.total_lines
    then = f" Use offset={end + 1} to continue." if more else ""
    if cut:
        return f"(Output truncated at {max_chars} characters: showing {span}{of}.{then})"
    return f"(Showing {span}{of}.{then})"


def render_read(r: ReadResult, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    return _read_view(r, max_chars)[0]


# -- write and edit -----------------------------------------------------------------


def render_write(r: WriteResult, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    verb = "Created" if r.action == "created" else "Updated"
    text = f"{verb} {_clip(r.path, _Limits(max_chars).path)} ({r.size} bytes)."
    if r.merged:
        text += "\n" + _merged_note(r.merged_lines or [], _Limits(max_chars))
    return text


def _merged_note(ranges: list[tuple[int, int]], limits: _Limits) -> str:
    """The line that says a change was merged, naming the other writer's lines."""
    parts = [f"lines removed after line {last}" if first > last
             else f"line {first}" if first == last else f"lines {first}-{last}"
             for first, last in ranges[:limits.listed]]
    if len(ranges) > limits.listed:
        parts.append(f"... ({len(ranges) - limits.listed} more)")
    where = ", ".join(parts) if parts else "no line (only line endings or the BOM)"
    return f"Merged with a change made since you read it: {where}."


def _edit_view(r: EditResult, max_chars: int) -> tuple[str, list[int], list[str]]:
    """The text of an edit, the line numbers it lists and the snippet lines it shows."""
    limits = _Limits(max_chars)
    path = _clip(r.path, limits.path)
    listed = r.lines[:limits.listed]
    where = ", ".join(map(str, listed))
    if len(r.lines) > len(listed):
        where += f", ... ({len(r.lines) - len(listed)} more)"
    head = (f"Edited {path}: replaced {_plural(r.replacements, 'occurrence')} at "
            f"{'line' if len(r.lines) == 1 else 'lines'} {where}.")
    if r.merged:
        head += "\n" + _merged_note(r.merged_lines or [], limits)
    if not r.snippet:
        return f"{head}\n(The file is now empty.)", listed, []
    around = ", around the first change" if r.replacements > 1 else ""
    # Room for the intro line and a possible cut note.
    room = max_chars - len(head) - 60 - len(around)
    shown = _fit(r.snippet_start, r.snippet, limits, room)
    if len(shown) < len(r.snippet):
        shown = _fit(r.snippet_start, r.snippet, limits, room - _FOOTER_ROOM)
    end = r.snippet_start + len(shown) - 1
    text = (f"{head}\n{_span(r.snippet_start, end).capitalize()} of the edited file"
            f"{around}:\n"
            + _numbered_lines(r.snippet_start, shown))
    if len(shown) < len(r.snippet):
        text += (f"\n(Snippet cut at {max_chars} characters; read from offset={end + 1} "
                 "to see the rest of the change.)")
    return text, listed, shown


def render_edit(r: EditResult, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    return _edit_view(r, max_chars)[0]


# -- glob, grep, ls -----------------------------------------------------------------


def _fit_rows(rows: list[str], room: int) -> int:
    """How many leading ``rows`` fit in ``room`` characters, joined by newlines."""
    used = -1
    for i, row in enumerate(rows):
        used += len(row) + 1
        if used > room:
            return i
    return len(rows)


def _listing(rows: list[str], footer: list[str], max_chars: int, what: str
             ) -> tuple[str, int]:
    """Rows then footer notes within ``max_chars``; the number of rows shown."""
    def text(n: int, notes: list[str]) -> str:
        body = "\n".join(rows[:n])
        tail = "\n".join(f"({note})" for note in notes)
        return f"{body}\n\n{tail}" if body and tail else body or tail

    full = text(len(rows), footer)
    if len(full) <= max_chars:
        return full, len(rows)
    notes = [n if len(n) <= _FOOTER_ROOM // 2 else n[:_FOOTER_ROOM // 2] for n in footer]
    room = max_chars - _FOOTER_ROOM - sum(len(n) + 3 for n in notes)
    n = _fit_rows(rows, max(0, room))
    cut = (f"Output truncated at {max_chars} characters: showing {n} of "
           f"{_plural(len(rows), what)}")
    return text(n, [cut, *notes]), n


def _glob_view(r: GlobResult, max_chars: int) -> tuple[str, list[str]]:
    limits = _Limits(max_chars)
    if not r.paths:
        return "No files found.", []
    rows = [_clip(p, limits.path) for p in r.paths]
    footer = []
    if r.truncated:
        footer.append(f"Showing the {len(r.paths)} newest matching files; more matched. "
                      "Narrow the pattern or pass a path to see the others.")
    text, n = _listing(rows, footer, max_chars, "path")
    return text, rows[:n]


def render_glob(r: GlobResult, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    return _glob_view(r, max_chars)[0]


_SKIP_WORDS = {"too_large": "over the size cap", "not_text": "not text (binary or not UTF-8)",
               "unreadable": "unreadable (changed or vanished while searched)"}


def _grep_rows(r: GrepResult, limits: _Limits) -> tuple[list[str], list[int]]:
    """The rows of a grep text, and for each row the index of the entry it shows (-1
    for a ``--`` separator)."""
    rows: list[str] = []
    index: list[int] = []
    if r.mode == "files_with_matches":
        return [_clip(p, limits.path) for p in r.files], list(range(len(r.files)))
    if r.mode == "count":
        items = list(r.counts.items())
        return ([f"{_clip(p, limits.path)}:{n}" for p, n in items], list(range(len(items))))
    grouped = any(m.context for m in r.matches)
    prev: GrepMatch | None = None
    for i, m in enumerate(r.matches):
        if grouped and prev is not None and (prev.path != m.path or m.line != prev.line + 1):
            rows.append("--")
            index.append(-1)
        sep = "-" if m.context else ":"
        rows.append(f"{_clip(m.path, limits.path)}{sep}{m.line}{sep}"
                    f"{_clip_line(m.text, limits.line, m.chars)}")
        index.append(i)
        prev = m
    return rows, index


def _grep_view(r: GrepResult, max_chars: int) -> tuple[str, int]:
    """The text of a grep, and how many entries it shows."""
    limits = _Limits(max_chars)
    what = {"files_with_matches": "file", "content": "line", "count": "count"}[r.mode]
    rows, index = _grep_rows(r, limits)
    footer = []
    if r.truncated:
        shown = len(r.files) if r.mode == "files_with_matches" else len(
            r.counts if r.mode == "count" else r.matches)
        footer.append(f"Showing the first {_plural(shown, what)} (by path); more matched. "
                      "Narrow the pattern, path or glob, or raise head_limit.")
    if r.skipped:
        total = sum(r.skipped.values())
        why = ", ".join(f"{n} {_SKIP_WORDS.get(k, k)}" for k, n in r.skipped.items())
        footer.append(f"Skipped {_plural(total, 'file')}: {why}.")
    if r.ignore_rules_not_applied:
        footer.append(f"{_plural(r.ignore_rules_not_applied, '.gitignore wildcard rule')} "
                      f"over the limit of {MAX_IGNORE_PATTERNS} per file not applied.")
    if not rows:
        head = f"No matches found in {_plural(r.files_searched, 'file')} searched."
        return "\n".join([head, *(f"({n})" for n in footer)]), 0
    text, n = _listing(rows, footer, max_chars, what)
    # A `--` left last by the cut is dropped by never counting it as an entry.
    shown = len([i for i in index[:n] if i >= 0])
    return text, shown


def render_grep(r: GrepResult, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    return _grep_view(r, max_chars)[0]


def _ls_view(r: ListResult, max_chars: int) -> tuple[str, int]:
    limits = _Limits(max_chars)
    if not r.entries:
        return f"(Empty directory: {_clip(r.path, limits.path)})", 0
    rows = [f"{_clip(e.name, limits.path)}/" if e.kind == "dir"
            else _clip(e.name, limits.path) + ("" if e.size is None else f"  ({e.size} bytes)")
            for e in r.entries]
    footer = []
    if r.truncated:
        footer.append(f"Showing the first {len(r.entries)} entries by name; the directory "
                      "has more. Use glob to find files in it.")
    return _listing(rows, footer, max_chars, "entry")


def render_ls(r: ListResult, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    return _ls_view(r, max_chars)[0]


def render_result(r: ToolResult, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    """Model text for a result."""
    if isinstance(r, ReadResult):
        return render_read(r, max_chars)
    if isinstance(r, WriteResult):
        return render_write(r, max_chars)
    if isinstance(r, GlobResult):
        return render_glob(r, max_chars)
    if isinstance(r, GrepResult):
        return render_grep(r, max_chars)
    if isinstance(r, ListResult):
        return render_ls(r, max_chars)
    if isinstance(r, PatchResult):
        return render_patch(r, max_chars)
    if isinstance(r, MediaResult):
        from toolfs.media_render import media_view

        return media_view(r, max_chars)[0]
    if isinstance(r, NotebookReadResult | NotebookEditResult):
        from toolfs import notebook_render  # it builds on this module

        if isinstance(r, NotebookReadResult):
            return notebook_render.render_notebook_read(r, max_chars)
        return notebook_render.render_notebook_edit(r, max_chars)
    return render_edit(r, max_chars)


def render_patch(r: PatchResult, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    """The Agents SDK's own result strings (``Created x``, ``Updated x``, ``Deleted x``,
    ``Updated x\nMoved x to y``): the texts apply_patch models were trained on."""
    limit = _Limits(max_chars).path
    path = _clip(r.path, limit)
    if r.action == "deleted":
        return f"Deleted {path}"
    if r.action == "created":
        return f"Created {path}"
    if r.moved_to is not None:
        return f"Updated {path}\nMoved {path} to {_clip(r.moved_to, limit)}"
    return f"Updated {path}"


# -- errors -------------------------------------------------------------------------


def render_error(e: FsError, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    """Model text for an error: code, message, what to do next; for a ``stale`` refusal
    the diff since the observed version comes between message and advice."""
    limits = _Limits(max_chars)
    where = f" ({_clip(e.path, limits.path)})" if e.path and e.path not in e.message else ""
    head = f"Error [{e.code}]{where}: {_clip_message(e.message, limits.message)}\n"
    return head + error_diff(e, max_chars - len(head) - len(e.advice) - 1) + e.advice


def error_diff(e: FsError, room: int) -> str:
    """The diff a ``stale`` refusal carries (``details["diff"]``), as the lines that go
    between its message and its advice, within ``room`` characters; ``""`` without one.
    A complete diff is shown whole (the policy keeps it within :func:`diff_budget`);
    one cut by the policy, or too long for ``room``, is cut at a line and says so."""
    diff = e.details.get("diff")
    if not isinstance(diff, str) or not diff:
        return ""
    if e.details.get("diff_complete") and len(diff) + 30 <= room:
        return "Changes since you read it:\n" + diff
    note = "[diff cut: the change is larger than this; read the file]\n"
    cut = diff[:max(0, room - len(note) - 40)]
    return "Changes since you read it (first part):\n" + cut[:cut.rfind("\n") + 1] + note


def diff_budget(max_chars: int) -> int:
    """The most characters of diff a ``stale`` refusal may carry for its whole diff to be
    shown within ``max_chars`` next to the longest message, path and advice (what a
    ``Workspace`` gives its policy as ``diff_chars``, at most the policy's default)."""
    limits = _Limits(max_chars)
    return max(0, max_chars - limits.message - limits.path - 300)


def _bounded(value: Any, listed: int, chars: int) -> tuple[Any, bool]:
    """JSON-like ``value`` with lists cut to ``listed`` items and strings to ``chars``,
    and whether anything was cut."""
    if isinstance(value, str):
        return _clip(value, chars), len(value) > chars
    if isinstance(value, dict):
        out, cut = {}, False
        for k, v in value.items():
            out[k], c = _bounded(v, listed, chars)
            cut = cut or c
        return out, cut
    if isinstance(value, list | tuple):
        items = [_bounded(v, listed, chars) for v in value[:listed]]
        return [v for v, _ in items], len(value) > listed or any(c for _, c in items)
    return value, False


def _error_data(e: FsError, limits: _Limits) -> dict[str, Any]:
    """``e.to_dict()`` clipped as the text is; ``details`` fits in what is left. A
    ``stale`` refusal's diff is kept as the text shows it (whole when complete)."""
    message = _clip_message(e.message, limits.message)
    path = None if e.path is None else _clip(e.path, limits.path)
    room = limits.total - len(message) - len(path or "") - 200
    facts = e.details
    diff = facts.get("diff")
    if isinstance(diff, str):
        facts = {k: v for k, v in facts.items() if k != "diff"}
        room -= len(diff)
    listed, chars = limits.listed, limits.path
    while True:
        details, cut = _bounded(facts, listed, chars)
        if listed <= 1 or len(json.dumps(details, ensure_ascii=False)) <= room:
            break
        listed, chars = listed // 2, max(chars // 2, 20)
    if isinstance(diff, str):
        details["diff"] = diff
    if cut:
        details["truncated"] = True
    return {"code": e.code, "message": message, "path": path, "details": details}


# -- the model's view ---------------------------------------------------------------


def render_output(outcome: ToolResult | FsError,
                  max_chars: int = MAX_OUTPUT_CHARS) -> ToolOutput:
    """The :class:`ToolOutput` of a result or an error, within ``max_chars``."""
    if isinstance(outcome, FsError):
        return ToolOutput(text=render_error(outcome, max_chars), value=None, error=outcome,
                          max_chars=max_chars)
    if isinstance(outcome, MediaResult):
        from toolfs.media_render import render_media  # it builds on this module

        return render_media(outcome, max_chars)
    if isinstance(outcome, NotebookReadResult):
        from toolfs.notebook_render import render_notebook_output  # it builds on this module

        return render_notebook_output(outcome, max_chars)
    if isinstance(outcome, ReadResult):
        # The lines the text shows are kept, so that to_dict() need not render it again.
        text, shown, cut = _read_view(outcome, max_chars)
        return ToolOutput(text=text, value=outcome, error=None, max_chars=max_chars,
                          _shown=_Shown(outcome, max_chars, shown, cut))
    return ToolOutput(text=render_result(outcome, max_chars), value=outcome, error=None,
                      max_chars=max_chars)


@dataclass(frozen=True)
class _Shown:
    """What a read's text shows, computed with that text (see :func:`render_output`)."""

    value: ReadResult
    max_chars: int
    lines: list[str]
    cut: bool


def bound_text(text: str, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    """``text`` as valid Unicode and within ``max_chars`` (a last resort: the renderers
    already keep their text within the budget)."""
    text = escape_undecodable(text)
    if len(text) <= max_chars:
        return text
    note = f"\n[Output truncated at {max_chars} characters.]"
    return text[:max_chars - len(note)] + note


def structured_content(output: ToolOutput) -> dict[str, Any]:
    """``output`` as JSON-safe data holding no more than its text shows: the lines a read
    shows (long ones cut as in the text, ``truncated`` when anything was cut), the
    snippet and line numbers an edit shows, an error's clipped message and details.
    Written as JSON it stays within the budget too: where JSON's escapes (up to six
    characters for a control character) would take a list of lines, paths or matches
    over it, the list is cut further (``truncated``)."""
    limits = _Limits(output.max_chars)
    if output.error is not None:
        data: dict[str, Any] = {"ok": False, "error": _error_data(output.error, limits)}
        data = escape_undecodable_data(data)
        _fit_error_json(data, output.max_chars)
        return data
    value = output.value
    assert value is not None
    if isinstance(value, MediaResult):
        from toolfs.media_render import media_structured

        return media_structured(output)
    view: ToolResult
    if isinstance(value, GlobResult | GrepResult | ListResult):
        view = _discovery_view(value, output.max_chars, limits)
        data = escape_undecodable_data({"ok": True, "result": view.model_dump(mode="json")})
        _fit_json(data, output.max_chars)
        return data
    if isinstance(value, NotebookReadResult | NotebookEditResult):
        from toolfs import notebook_render  # it builds on this module

        part: NotebookReadResult | NotebookEditResult = (
            notebook_render.notebook_read_view(value, output.max_chars)[1]
            if isinstance(value, NotebookReadResult)
            else notebook_render.notebook_edit_view(value, output.max_chars)[1])
        data = escape_undecodable_data({"ok": True, "result": part.model_dump(mode="json")})
        return notebook_render.fit_json(data, output.max_chars)
    path = _clip(value.path, limits.path)
    if isinstance(value, ReadResult):
        known = output._shown
        if known is not None and known.value is value and known.max_chars == output.max_chars:
            shown, cut = known.lines, known.cut
        else:
            _, shown, cut = _read_view(value, output.max_chars)
        view = value.model_copy(update={
            "path": path, "lines": shown, "line_count": len(shown),
            "partial": value.partial or cut, "truncated": shown != value.lines})
    elif isinstance(value, EditResult):
        _, listed, snippet = _edit_view(value, output.max_chars)
        view = value.model_copy(update={"path": path, "lines": listed, "snippet": snippet})
    else:
        view = value.model_copy(update={"path": path})
    data = escape_undecodable_data({"ok": True, "result": view.model_dump(mode="json")})
    _fit_json(data, output.max_chars)
    return data


# The list each structured result can hold many of: an item's strings, and what JSON
# adds to an item at most besides their escapes (a string's quotes and the ", " after it;
# an object's keys, numbers and punctuation).
_LISTED_STRINGS: dict[str, tuple[Callable[[Any], str] | None, int]] = {
    "lines": (None, 4), "paths": (None, 4), "files": (None, 4),  # lists of strings
    "counts": (None, 30),  # its paths (the dict's keys)
    "matches": (lambda m: m["path"] + m["text"], 80),
    "entries": (lambda e: e["name"], 80),
}
_LISTS = ("lines", "matches", "counts", "paths", "entries", "files")
# The bytes JSON escapes: control characters (up to six characters each), '"' and '\'.
_ESCAPED_BYTES = bytes(range(32)) + b'"\\'


def _fit_json(data: dict[str, Any], max_chars: int) -> None:
    """Cut (in place) the long list of ``data``'s result, and if need be its path, so
    that ``data`` written as JSON (``json.dumps(..., ensure_ascii=False)``) stays within
    ``max_chars``; ``truncated`` says so.

    No work when even six characters per character (JSON's longest escape) cannot reach
    the budget; else a count of the characters JSON escapes, in C, which settles almost
    every case; only when that leaves a doubt, the exact sizes, and a pass per item to
    find the cut when the list is too long."""
    result: dict[str, Any] = data["result"]
    key = next((k for k in _LISTS if result.get(k)), None)
    if key == "lines" and type(result["lines"][0]) is not str:
        key = None  # an edit's line numbers: a short list of numbers
    # A content or count grep's `files` are the paths of its matches or counts.
    paired = key in ("matches", "counts")
    # The other fields, loosely: their strings' characters and their other items.
    rest_chars, rest_items = 0, 0
    for k, v in result.items():
        if k == key or (paired and k == "files"):
            continue
        if type(v) is str:
            rest_chars += len(v)
        elif isinstance(v, list | dict):
            rest_items += len(v)
            rest_chars += sum(len(x) for x in v if type(x) is str)
    room = max_chars - 6 * rest_chars - 80 * rest_items - 500
    items: list[Any] = []
    if key is None:
        if room >= 0:
            return
    else:
        listed = result[key]
        items = listed if type(listed) is list else list(listed)  # counts: its paths
        strings, per_item = _LISTED_STRINGS[key]
        text = "".join(items if strings is None else map(strings, items))
        room -= per_item * len(items)
        copies = 2 if paired else 1
        if 6 * copies * len(text) <= room:
            return
        raw = text.encode("utf-8", "surrogatepass")
        escaped = len(raw) - len(raw.translate(None, _ESCAPED_BYTES))
        if copies * (len(text) + 5 * escaped) <= room:
            return
    empty: dict[str, Any] = {} if key is None else {key: {} if key == "counts" else []}
    if paired:
        empty["files"] = []
    rest = len(json.dumps({**data, "result": {**result, **empty}}, ensure_ascii=False))
    if rest > max_chars and isinstance(result.get("path"), str):
        result["path"] = _json_clip(result["path"], rest - max_chars)
        result["truncated"] = True
        rest = len(json.dumps({**data, "result": {**result, **empty}}, ensure_ascii=False))
    if key is None:
        return
    room = max_chars - rest
    size, keep = 0, 0
    seen: set[str] = set()
    values = result[key]
    for item in items:
        if key == "counts":
            size += _json_size(item) + 4 + len(str(values[item]))  # "p": n and ", "
        else:
            size += _json_size(item) + 2  # with the ", " that joins it to the next
        path = item if key == "counts" else item["path"] if paired else None
        if path is not None and path not in seen:
            seen.add(path)
            size += _json_size(path) + 2
        if size > room + 2:  # the last item has no ", " after it
            break
        keep += 1
    if keep == len(items):
        return
    kept = items[:keep]
    result[key] = {p: values[p] for p in kept} if key == "counts" else kept
    result["truncated"] = True
    if key == "lines":
        result["line_count"] = keep
        result["partial"] = True
    elif key == "matches":  # the files of the matches kept
        result["files"] = list(dict.fromkeys(m["path"] for m in kept))
    elif key == "counts":
        result["files"] = kept


def _fit_error_json(data: dict[str, Any], max_chars: int) -> None:
    """Shorten (in place) an error's message, then drop its details and shorten its
    path, until ``data`` written as JSON fits in ``max_chars`` (errors are small: one
    exact measure, usually the only one)."""
    error: dict[str, Any] = data["error"]
    for step in ("message", "details", "path"):
        over = len(json.dumps(data, ensure_ascii=False)) - max_chars
        if over <= 0:
            return
        if step == "details":
            error["details"] = {}
        elif isinstance(error.get(step), str):
            error[step] = _json_clip(error[step], over)


def _json_clip(text: str, over: int) -> str:
    """``text`` cut, with "..." at the end, so that JSON writes it in at least ``over``
    characters fewer: the longest prefix that does, found by halving."""
    budget = len(encode_basestring(text)) - 2 - over - 3
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(encode_basestring(text[:mid])) - 2 <= budget:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo] + "..."


def _json_size(value: Any) -> int:
    """``len(json.dumps(value, ensure_ascii=False))``; for a list of strings, one C pass
    over their text joined by NULs (each written as six characters where the list has the
    four of ``", "``)."""
    if isinstance(value, str):
        return len(encode_basestring(value))
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        if not value:
            return 2
        return len(encode_basestring("\x00".join(value))) - 2 * len(value) + 4
    return len(json.dumps(value, ensure_ascii=False))


def _discovery_view(value: GlobResult | GrepResult | ListResult, max_chars: int,
                    limits: _Limits) -> GlobResult | GrepResult | ListResult:
    """The part of a glob, grep or ls result its text shows."""
    if isinstance(value, GlobResult):
        _, rows = _glob_view(value, max_chars)
        return value.model_copy(update={"paths": rows,
                                        "truncated": value.truncated or
                                        len(rows) < len(value.paths)})
    if isinstance(value, ListResult):
        _, n = _ls_view(value, max_chars)
        entries = [e.model_copy(update={"name": _clip(e.name, limits.path)})
                   for e in value.entries[:n]]
        return value.model_copy(update={"path": _clip(value.path, limits.path),
                                        "entries": entries,
                                        "truncated": value.truncated or n < len(value.entries)})
    _, n = _grep_view(value, max_chars)
    cut = value.truncated
    if value.mode == "files_with_matches":
        files = [_clip(p, limits.path) for p in value.files[:n]]
        return value.model_copy(update={"files": files,
                                        "truncated": cut or n < len(value.files)})
    if value.mode == "count":
        items = list(value.counts.items())[:n]
        counts = {_clip(p, limits.path): c for p, c in items}
        return value.model_copy(update={"files": list(counts), "counts": counts,
                                        "truncated": cut or n < len(value.counts)})
    matches = [m.model_copy(update={"path": _clip(m.path, limits.path),
                                    "text": _clip_line(m.text, limits.line, m.chars)})
               for m in value.matches[:n]]
    files = list(dict.fromkeys(m.path for m in matches))
    return value.model_copy(update={"files": files, "matches": matches,
                                    "truncated": cut or n < len(value.matches)})


@dataclass(frozen=True)
class ToolOutput:
    """The outcome of :meth:`toolfs.Workspace.execute`: model text plus the canonical value
    or the error. ``execute`` never raises for tool errors.

    ``text`` and :meth:`to_dict` are what goes to the model: valid Unicode (undecodable
    names escaped visibly) and within ``max_chars`` characters. ``value`` is never cut."""

    text: str
    value: ToolResult | None
    error: FsError | None
    max_chars: int = MAX_OUTPUT_CHARS
    """The character budget of ``text`` and of the lines in :meth:`to_dict`."""
    images: tuple[ToolImage, ...] = ()
    """Images shown to the model next to ``text`` (a read of an image, a PDF's scanned
    pages); empty for text. Each adapter sends them in its provider's own form."""
    _shown: _Shown | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", bound_text(self.text, self.max_chars))

    @property
    def is_error(self) -> bool:
        return self.error is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe structured content: the value's fields or the error's, cut the way
        ``text`` is (see :func:`structured_content`)."""
        return structured_content(self)
