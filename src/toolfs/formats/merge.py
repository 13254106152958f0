"""Merging a change made from an older version into the current one, by lines.

Pure functions; no I/O. Both merges refuse (``None``) rather than guess: a change
lands only where the other writer's change left the lines it needs untouched, so
neither side's bytes are ever dropped or duplicated.

* :func:`merge_write` is a three-way line merge of (observed -> mine) and
  (observed -> current): it applies when the two change sets touch disjoint,
  **non-adjacent** line ranges (at least one untouched line between them; an insertion
  next to a changed line is adjacent). The result keeps every line of the current file
  that this change did not replace, byte for byte; the lines this change brings get the
  current file's line ending (its most common one) and the current file's BOM. The final
  newline belongs to the last line: whichever side changed that line decides it.
* :func:`merge_edit` re-applies a literal replacement (``edit``) to the current text
  when every span ``old_string`` matched in the observed text lies in lines the other
  change left untouched (no line of the span changed, nothing inserted inside it) and
  ``old_string`` matches the current text exactly there and nowhere else.

Both report the other writer's change as line ranges of the merged file
(:attr:`Rebased.theirs`), so a tool can tell the model what it did not see.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from toolfs.errors import FsError
from toolfs.formats.diff import MAX_DIFF_WORK, Hunk, diff_lines, line_keys, split_lines_keepends
from toolfs.formats.text import BOM, EditOutcome, apply_edit, decode, find_all


@dataclass(frozen=True)
class Rebased:
    """A change moved onto the current version of a file."""

    data: bytes
    """The merged file's bytes."""
    theirs: tuple[tuple[int, int], ...]
    """The other writer's change: ``(first, last)`` 1-based line ranges of the merged
    file, in order; an empty range (``first == last + 1``) marks lines removed there."""


def _conflict(mine: Sequence[Hunk], theirs: Sequence[Hunk]) -> bool:
    """Whether a hunk of one side overlaps or touches a hunk of the other (in the base's
    line numbers; both lists are in order and each side's hunks are apart)."""
    i = j = 0
    while i < len(mine) and j < len(theirs):
        a, b = mine[i], theirs[j]
        if a.a_start <= b.a_end and b.a_start <= a.a_end:
            return True
        if a.a_end < b.a_start:
            i += 1
        else:
            j += 1
    return False


def _line_ending(lines: Sequence[str]) -> str:
    crlf = sum(1 for line in lines if line.endswith("\r\n"))
    return "\r\n" if crlf * 2 > sum(1 for line in lines if line.endswith("\n")) else "\n"


def _range(first: int, count: int) -> tuple[int, int]:
    return (first + 1, first + count)


def merge_write(base: bytes, mine: bytes, current: bytes, *,
                max_work: int = MAX_DIFF_WORK) -> Rebased | None:
    """Three-way line merge (see the module docstring); ``None`` when the changes
    overlap or touch, when a version is not text, or when a diff is too costly."""
    try:
        base_doc, mine_doc, cur_doc = decode(base), decode(mine), decode(current)
    except FsError:
        return None
    b = split_lines_keepends(base_doc.text)
    m = split_lines_keepends(mine_doc.text)
    c = split_lines_keepends(cur_doc.text)
    b_keys = line_keys(b)
    ours = diff_lines(b_keys, line_keys(m), max_work=max_work)
    theirs = diff_lines(b_keys, line_keys(c), max_work=max_work)
    if ours is None or theirs is None or _conflict(ours, theirs):
        return None
    eol = _line_ending(c) if c else _line_ending(m)
    out: list[str] = []
    ranges: list[tuple[int, int]] = []
    x = 0  # next base line
    y = 0  # the current file's line for base line x (between their hunks)
    steps = sorted([(h, True) for h in theirs] + [(h, False) for h in ours],
                   key=lambda step: (step[0].a_start, step[0].a_end))
    for h, is_theirs in steps:
        out.extend(c[y:y + h.a_start - x])  # untouched: the current file's bytes
        y += h.a_start - x
        if is_theirs:
            ranges.append(_range(len(out), h.b_end - h.b_start))
            out.extend(c[h.b_start:h.b_end])
            y = h.b_end
        else:
            out.extend(_with_ending(line, eol) for line in m[h.b_start:h.b_end])
            y += h.a_end - h.a_start  # the lines this change replaced, untouched there
        x = h.a_end
    out.extend(c[y:])
    # In the current file's encoding and BOM (UTF-16/32 stays so: toolfs.formats.text).
    return Rebased(data=cur_doc.encode("".join(out)), theirs=tuple(ranges))


def _with_ending(line: str, eol: str) -> str:
    if line.endswith("\r\n"):
        return line[:-2] + eol
    if line.endswith("\n"):
        return line[:-1] + eol
    return line


def merge_edit(base_text: str, current: bytes, old: str, new: str, *, replace_all: bool,
               path: str | None = None, max_bytes: int | None = None,
               max_work: int = MAX_DIFF_WORK) -> tuple[EditOutcome, Rebased] | None:
    """Re-apply ``edit(old -> new)``, which matched ``base_text`` (the observed text,
    without BOM), to the current bytes (see the module docstring). Returns the edit's
    outcome on the current text and the merged bytes, or ``None`` when the edit's spans
    were touched or ``old`` matches the current text elsewhere too. Raises what
    :func:`~toolfs.formats.text.apply_edit` raises (``too_large`` past ``max_bytes``)."""
    try:
        cur_doc = decode(current, path)
    except FsError:
        return None
    old_n = old.replace("\r\n", "\n")
    base_n = base_text.replace("\r\n", "\n")
    cur_n = cur_doc.text.replace("\r\n", "\n")
    b = split_lines_keepends(base_n)
    c = split_lines_keepends(cur_n)
    hunks = diff_lines(b, c, max_work=max_work)
    if hunks is None:
        return None
    b_starts = _starts(b)
    c_starts = _starts(c)
    mapped: list[int] = []
    match_lines: list[int] = []  # the current file's line (0-based) of each match
    k = 0  # hunks wholly before the match's first line
    shift = 0
    for s in find_all(base_n, old_n):
        first = bisect.bisect_right(b_starts, s) - 1
        last = bisect.bisect_right(b_starts, s + len(old_n) - 1) - 1
        # An insertion at `first` comes before the span: it moves it, it does not touch it.
        while k < len(hunks) and hunks[k].a_end <= first:
            h = hunks[k]
            shift += (h.b_end - h.b_start) - (h.a_end - h.a_start)
            k += 1
        for h in hunks[k:]:
            if h.a_start > last:
                break
            touched = (h.a_start < h.a_end and h.a_start <= last and h.a_end > first) or \
                (h.a_start == h.a_end and first < h.a_start <= last)
            if touched:
                return None
        line = first + shift
        match_lines.append(line)
        mapped.append(c_starts[line] + (s - b_starts[first]))
    if not mapped or find_all(cur_n, old_n) != mapped:
        return None
    outcome = apply_edit(cur_doc.text, old, new, replace_all=replace_all, path=path,
                         max_bytes=max_bytes, bom=cur_doc.bom,
                         size=len(current) - (len(BOM) if cur_doc.bom else 0)
                         if cur_doc.codec == "utf-8" else None)
    # Their hunks in the merged file: moved by the lines each earlier replacement adds.
    grow = new.replace("\r\n", "\n").count("\n") - old_n.count("\n")
    ranges = []
    for h in hunks:
        before = bisect.bisect_left(match_lines, h.b_start)
        ranges.append(_range(h.b_start + grow * before, h.b_end - h.b_start))
    return outcome, Rebased(data=cur_doc.encode(outcome.text), theirs=tuple(ranges))


def _starts(lines: Sequence[str]) -> list[int]:
    """Offset of each line in the text the lines make (and one past the end)."""
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    return starts
