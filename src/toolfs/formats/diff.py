"""Line diffs, bounded: what changed between two versions of a text file.

Pure functions; no I/O. A text is compared as a list of lines, each with its terminator,
where ``\\r\\n`` counts as ``\\n`` (a file whose line endings a formatter converted
has the same lines); the bytes of each side are never changed here.

The diff is Myers' O((N+M)·D) greedy algorithm on lines hashed to integers, after the
common head and tail are cut off, so a small change in a large file costs little more
than one pass over it. Its work (diagonals tried, O(D²)) is capped: past
:data:`MAX_DIFF_WORK` the answer is "too different to diff" (``None``), never a
quadratic search. :func:`unified` prints hunks with three lines of context, numbered
as ``diff -u`` numbers them, within a character budget.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from toolfs.formats.text import decode

MAX_DIFF_WORK = 250_000
"""Diagonals one diff may try before it gives up: about 700 changed lines, ~0.1 s of
Python at worst. Runs of equal lines are compared a slice at a time, in C, and are not
counted; a change of a few lines in a file of 100,000 costs a few milliseconds."""
CONTEXT_LINES = 3
NO_NEWLINE = "\\ No newline at end of file"


@dataclass(frozen=True, slots=True)
class Hunk:
    """Lines ``a[a_start:a_end]`` became ``b[b_start:b_end]`` (0-based, half-open)."""

    a_start: int
    a_end: int
    b_start: int
    b_end: int


def split_lines_keepends(text: str) -> list[str]:
    """Lines of ``text`` with their terminators (``\\n`` or ``\\r\\n``); a last line
    without one is kept as it is. Only ``\\n`` ends a line (a lone ``\\r`` is text)."""
    if not text:
        return []
    parts = text.split("\n")
    last = parts.pop()
    lines = [p + "\n" for p in parts]
    if last:
        lines.append(last)
    return lines


def line_keys(lines: Sequence[str]) -> list[str]:
    """What a diff compares of each line: the line with ``\\r\\n`` read as ``\\n``."""
    return [line[:-2] + "\n" if line.endswith("\r\n") else line for line in lines]


def diff_lines(a: Sequence[str], b: Sequence[str], *,
               max_work: int = MAX_DIFF_WORK) -> list[Hunk] | None:
    """The hunks that turn ``a`` into ``b`` (compared as given: pass :func:`line_keys`),
    in order, or ``None`` when finding them would take more than ``max_work``."""
    ids: dict[str, int] = {}
    xs = [ids.setdefault(line, len(ids)) for line in a]
    ys = [ids.setdefault(line, len(ids)) for line in b]
    n, m = len(xs), len(ys)
    head = 0
    while head < n and head < m and xs[head] == ys[head]:
        head += 1
    tail = 0
    while tail < n - head and tail < m - head and xs[n - 1 - tail] == ys[m - 1 - tail]:
        tail += 1
    runs = _myers(xs[head:n - tail], ys[head:m - tail], max_work)
    if runs is None:
        return None
    hunks: list[Hunk] = []
    x = y = 0
    for rx, ry, length in [*runs, (n - head - tail, m - head - tail, 0)]:
        if rx > x or ry > y:
            hunks.append(Hunk(head + x, head + rx, head + y, head + ry))
        x, y = rx + length, ry + length
    return hunks


def _myers(a: list[int], b: list[int], max_work: int) -> list[tuple[int, int, int]] | None:
    """Runs of equal lines ``(x, y, length)`` of a shortest edit script of ``a`` into
    ``b``, in order; ``None`` past ``max_work``. Keeps each step's frontier (O(D²)
    integers, D ≤ √max_work) to walk the path back."""
    n, m = len(a), len(b)
    if n == 0 or m == 0:
        return []
    off = n + m + 1
    v = [0] * (2 * off + 1)
    trace: list[array[int]] = []
    work = 0
    end_d = -1
    for d in range(n + m + 1):
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[off + k - 1] < v[off + k + 1]):
                x = v[off + k + 1]
            else:
                x = v[off + k - 1] + 1
            y = x - k
            if x < n and y < m and a[x] == b[y]:
                x = _snake(a, b, x, y)
                y = x - k
            v[off + k] = x
            if x >= n and y >= m:
                end_d = d
                break
        trace.append(array("q", v[off - d: off + d + 1]))
        if end_d >= 0:
            break
        work += d + 1
        if work > max_work:
            return None
    # Walk back from (n, m): each step's snake is a run of equal lines.
    runs: list[tuple[int, int, int]] = []
    x, y = n, m
    for d in range(end_d, 0, -1):
        prev = trace[d - 1]
        k = x - y
        if k == -d or (k != d and prev[k - 1 + d - 1] < prev[k + 1 + d - 1]):
            pk = k + 1  # came down: b[prev_y] inserted
            px = prev[pk + d - 1]
            mx, my = px, px - pk + 1
        else:
            pk = k - 1  # came right: a[prev_x] deleted
            px = prev[pk + d - 1]
            mx, my = px + 1, px - pk
        if x > mx:
            runs.append((mx, my, x - mx))
        x, y = px, px - pk
    if x > 0:  # the first snake, from (0, 0)
        runs.append((0, 0, x))
    runs.reverse()
    return runs


def _snake(a: list[int], b: list[int], x: int, y: int) -> int:
    """The end of the run of equal lines from ``(x, y)``: compared a slice at a time
    (in C), the slices doubling while they match, then line by line in the last one."""
    n, m = len(a), len(b)
    step = 8
    while True:
        length = min(step, n - x, m - y)
        if length <= 0:
            return x
        if a[x:x + length] != b[y:y + length]:
            while a[x] == b[y]:  # a difference lies within `length`
                x += 1
                y += 1
            return x
        x, y, step = x + length, y + length, step * 2


@dataclass(frozen=True)
class UnifiedDiff:
    """A unified diff as text, and whether it shows every hunk."""

    text: str
    complete: bool
    hunks: int
    """Hunks in the whole diff (shown or not)."""
    shown: int
    """Hunks the text shows."""


def unified(a: Sequence[str], b: Sequence[str], hunks: Sequence[Hunk], *,
            a_label: str, b_label: str, context: int = CONTEXT_LINES,
            max_chars: int | None = None) -> UnifiedDiff:
    """``diff -u`` text of ``hunks`` (from :func:`diff_lines`) between the lines ``a``
    and ``b`` (with terminators), grouped with ``context`` lines around each change.
    With ``max_chars``, only the leading groups that fit are shown (``complete`` false)."""
    groups = _groups(hunks, len(a), len(b), context)
    out = [f"--- {a_label}\n", f"+++ {b_label}\n"]
    size = len(out[0]) + len(out[1])
    shown = 0
    for group in groups:
        text = _group_text(a, b, group, context)
        if max_chars is not None and size + len(text) > max_chars:
            break
        out.append(text)
        size += len(text)
        shown += 1
    if not groups:
        out = []
    return UnifiedDiff(text="".join(out), complete=shown == len(groups),
                       hunks=len(groups), shown=shown)


def _groups(hunks: Sequence[Hunk], n: int, m: int, context: int) -> list[list[Hunk]]:
    """Hunks whose context would touch or overlap, printed as one ``@@`` section."""
    groups: list[list[Hunk]] = []
    for h in hunks:
        if groups and h.a_start - groups[-1][-1].a_end <= 2 * context:
            groups[-1].append(h)
        else:
            groups.append([h])
    return groups


def _group_text(a: Sequence[str], b: Sequence[str], group: list[Hunk], context: int) -> str:
    first, last = group[0], group[-1]
    a_lo = max(0, first.a_start - context)
    a_hi = min(len(a), last.a_end + context)
    b_lo = first.b_start - (first.a_start - a_lo)
    b_hi = last.b_end + (a_hi - last.a_end)
    rows: list[str] = [f"@@ -{_range(a_lo, a_hi)} +{_range(b_lo, b_hi)} @@\n"]
    x = a_lo
    for h in group:
        rows.extend(_row(" ", line) for line in a[x:h.a_start])
        rows.extend(_row("-", line) for line in a[h.a_start:h.a_end])
        rows.extend(_row("+", line) for line in b[h.b_start:h.b_end])
        x = h.a_end
    rows.extend(_row(" ", line) for line in a[x:a_hi])
    return "".join(rows)


def _row(mark: str, line: str) -> str:
    if line.endswith("\n"):
        return mark + (line[:-2] + "\n" if line.endswith("\r\n") else line)
    return f"{mark}{line}\n{NO_NEWLINE}\n"


def _range(lo: int, hi: int) -> str:
    """``diff -u``'s ``start,count`` (a range of no lines is numbered by the line before)."""
    count = hi - lo
    if count == 1:
        return str(lo + 1)
    return f"{lo + 1 if count else lo},{count}"


def text_diff(old: bytes, new: bytes, *, old_label: str, new_label: str,
              max_chars: int | None, max_work: int = MAX_DIFF_WORK) -> UnifiedDiff | None:
    """The unified diff of two versions of a text file, on their lines (``\\r\\n`` read
    as ``\\n``, the BOM left out), within ``max_chars``; ``None`` when the diff would cost
    more than ``max_work``; ``not_text`` when either version is not text. Versions that
    differ only in line endings or a BOM give one explanatory line instead of hunks."""
    a_doc, b_doc = decode(old), decode(new)
    a, b = split_lines_keepends(a_doc.text), split_lines_keepends(b_doc.text)
    hunks = diff_lines(line_keys(a), line_keys(b), max_work=max_work)
    if hunks is None:
        return None
    if not hunks and old != new:
        note = "(only the line endings or the byte order mark changed; the lines are the same)\n"
        return UnifiedDiff(text=note, complete=True, hunks=0, shown=0)
    return unified(a, b, hunks, a_label=old_label, b_label=new_label, max_chars=max_chars)
