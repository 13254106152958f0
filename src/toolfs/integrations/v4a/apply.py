"""Applying a parsed V4A update: every hunk located first, then the text spliced.

:func:`apply_update` finds where each hunk's context starts (left to right, each search
from where the previous hunk ended; anchors move the search, and an anchor already
passed must continue the previous hunk's scope), checks that no hunk could equally go
elsewhere, and only then builds the new text, keeping every untouched line's bytes.
:func:`apply_diff` is the Agents SDK's signature over it. Refusals are worded in
:mod:`toolfs.integrations.v4a.mismatch`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from toolfs.errors import fs_error
from toolfs.integrations.v4a.mismatch import (
    _ambiguous,
    _anchor_not_found,
    _hunk_details,
    _name,
    _no_match,
    _out_of_scope,
    _unlocated,
)
from toolfs.integrations.v4a.parse import (
    MAX_HINT_LINES,
    DiffMode,
    Hunk,
    _shown,
    parse_create,
    parse_update,
)
from toolfs.integrations.v4a.search import _first, _Lines, _occurrences


@dataclass(frozen=True)
class PatchOutcome:
    """The patched text and what changed."""

    text: str
    hunks: int
    added: int
    """Lines added."""
    removed: int
    """Lines removed."""
    first_line: int | None
    """1-based line, in the new text, of the first changed line (``None``: no change)."""


@dataclass
class _AnchorIndex:
    """The file's lines (stripped) before the search cursor, each with its last line:
    grown with the cursor, so all anchor look-ups together are linear."""

    last: dict[str, int]
    upto: int = 0

    def grow(self, lines: _Lines, cursor: int) -> None:
        contents = lines.contents
        while self.upto < cursor:
            self.last[contents[self.upto].strip()] = self.upto
            self.upto += 1


def _locate_anchor(lines: _Lines, hunk: Hunk, anchor: str, cursor: int,
                   index: _AnchorIndex, forward_only: bool,
                   path: str | None) -> tuple[int, int, bool]:
    """Where the search goes after ``anchor``: ``(cursor, anchor's line, passed)``.

    The anchor is compared with the lines ignoring surrounding whitespace (it only
    locates; the context still matches exactly). An anchor already passed (on a line
    before ``cursor``: an earlier hunk of the same function) leaves the cursor where it
    is, as in the SDK (``passed``; the caller checks it continues the previous hunk's
    scope); a stacked anchor always searches forward.
    """
    key = anchor.strip()
    contents = lines.contents
    if not forward_only:
        index.grow(lines, cursor)
        if key in index.last:
            return cursor, index.last[key], True
    for i in range(cursor, len(contents)):
        if contents[i].strip() == key:
            return i + 1, i, False
    raise _anchor_not_found(lines, hunk, anchor, cursor, path)


def _locate(lines: _Lines, hunks: Sequence[Hunk], path: str | None) -> list[int]:
    """The index, in ``lines``, where each hunk's ``old`` lines start.

    Each hunk has a scope: the line of its first anchor, or (no anchor) the previous
    hunk's scope, or its own position for an anchorless first hunk. An anchor already
    passed is accepted only at or below the previous hunk's scope -- a second hunk in
    the same function -- because above it the SDK would search on from its cursor and
    write wherever the context happens to occur next.
    """
    seq = lines.seq
    n = len(seq)
    cursor = 0
    index = _AnchorIndex(last={})
    positions: list[int] = []
    starts: list[int] = []  # where each hunk's search started
    scope: int | None = None  # the previous hunk's
    # Each hunk's first anchor: (its line, passed) -- passed: already behind the cursor.
    found_at: list[tuple[int, bool] | None] = []
    for h, hunk in enumerate(hunks):
        own_scope: int | None = None
        ahead: tuple[int, bool] | None = None
        for j, anchor in enumerate(hunk.anchors):
            at = cursor
            cursor, line, passed = _locate_anchor(lines, hunk, anchor, cursor, index,
                                                  forward_only=j > 0, path=path)
            if j == 0:
                if passed and scope is not None and line < scope:
                    raise _out_of_scope(hunk, anchor, line, hunks[h - 1], scope, at, path)
                own_scope = line
                # Where another reading of the anchor would be searched from: past this
                # occurrence, or (passed) from the cursor on.
                ahead = (at, True) if passed else (line + 1, False)
        found_at.append(ahead)
        starts.append(cursor)
        k = len(hunk.old)
        if hunk.eof:
            # The empty last element after a final newline is the terminator, not a line.
            size = n - 1 if n and lines.contents[-1] == "" and lines.has_newline else n
            if not lines.has_newline and lines.contents == [""]:
                size = 0
            at = size - k
            pattern = lines.pattern(hunk.old)
            if at < cursor or (k and seq[at:size] != pattern):
                raise _no_match(lines, hunk, cursor, n, path,
                                (hunks[h - 1], positions[-1]) if h else None)
            pos = at
        elif not hunk.old:
            # Only added lines: an anchor says where, or the file is empty; otherwise
            # nothing in the diff locates them (the SDK would put them at its cursor).
            if not hunk.anchors and not (hunk.number == 1 and lines.contents == [""]):
                raise _unlocated(hunk, cursor, path)
            pos = cursor
        else:
            pos = _first(seq, lines.pattern(hunk.old), cursor, n)
            if pos < 0:
                raise _no_match(lines, hunk, cursor, n, path,
                                (hunks[h - 1], positions[-1]) if h else None)
        positions.append(pos)
        cursor = pos + k
        scope = own_scope if own_scope is not None else (pos if scope is None else scope)
    # Uniqueness of anchorless hunks: another match starting before the next hunk's
    # (or anywhere after, for the last) would be an equally valid reading of the diff.
    # The stretches are disjoint, so this is one more pass over the file.
    for idx, hunk in enumerate(hunks):
        if hunk.eof:
            continue
        if hunk.anchors:
            _check_anchor_unique(lines, hunks, idx, positions, found_at[idx], starts[idx],
                                 path)
            continue
        if not hunk.old:
            continue
        pos = positions[idx]
        k = len(hunk.old)
        stop = positions[idx + 1] if idx + 1 < len(hunks) else n
        again = []
        for p in _occurrences(seq, lines.pattern(hunk.old), pos + 1, stop + k - 1):
            if p >= stop:
                break
            again.append(p)
            if len(again) >= MAX_HINT_LINES:
                break
        if again:
            raise _ambiguous(hunk, pos, again, starts[idx], path)
    return positions


def _check_anchor_unique(lines: _Lines, hunks: Sequence[Hunk], idx: int,
                         positions: Sequence[int], anchored: tuple[int, bool] | None,
                         start: int, path: str | None) -> None:
    """``ambiguous_match`` if the hunk's first anchor occurs again before the next hunk
    and the hunk (its stacked anchors, then its context) also fits after that other
    occurrence: ``@@ def f():`` in a file with two ``def f():`` chooses nothing, and the
    SDK would take the first. For an anchor already passed (read as "the previous
    hunk's scope") the other reading is its next occurrence ahead of the cursor.

    ``anchored``: ``(index to search again from, passed)``; not passed, that index is
    the 1-based line of the anchor found. Work: the stretch from there to
    the next hunk, which overlaps the next hunk's own stretch at most (each line is looked
    at twice)."""
    if anchored is None:
        return
    hunk = hunks[idx]
    contents, seq = lines.contents, lines.seq
    n = len(seq)
    # The last hunk may also go after the file's last line (an insertion at ``n``).
    stop = positions[idx + 1] if idx + 1 < len(hunks) else n + 1
    key = hunk.anchors[0].strip()
    since, passed = anchored
    again = next((i for i in range(since, min(stop, n)) if contents[i].strip() == key),
                 None)
    if again is None:
        return
    cursor = again + 1
    for anchor in hunk.anchors[1:]:
        inner = anchor.strip()
        found = next((i for i in range(cursor, min(stop, n)) if contents[i].strip() == inner),
                     None)
        if found is None:
            return
        cursor = found + 1
    k = len(hunk.old)
    other = cursor if not k else _first(seq, lines.pattern(hunk.old), cursor, stop + k - 1)
    if other < 0 or other >= stop or other == positions[idx]:
        return
    pos = positions[idx]
    anchor = _shown(hunk.anchors[0])
    if passed:
        said = (f"its anchor '@@ {anchor}' was passed already (it continues the previous "
                f"hunk's scope, which puts the hunk at line {pos + 1}), but it also occurs "
                f"at line {again + 1}, and the hunk fits after that too (at line "
                f"{other + 1})")
    else:
        said = (f"its anchor '@@ {anchor}' occurs more than once (lines {since} and "
                f"{again + 1}) and the hunk fits after each (at lines {pos + 1} and "
                f"{other + 1})")
    raise fs_error(
        "ambiguous_match",
        f"{_name(hunk)}: {said}, so the anchor chooses nothing. Put the enclosing class or "
        "function on an '@@' line of its own before it (anchors stack, outermost first), "
        "or add context lines that occur in one place only.",
        path=path,
        details=_hunk_details(hunk, start, lines=[pos + 1, other + 1], anchor=anchor,
                              anchor_lines=[again + 1] if passed else [since, again + 1]))


def apply_update(raw: str, hunks: Sequence[Hunk], *, path: str | None = None,
                 diff_newline: str = "\n") -> PatchOutcome:
    """Apply parsed hunks to ``raw`` (text without BOM, any line endings).

    ``no_match`` / ``ambiguous_match`` name the hunk; nothing is built until every hunk
    is located. ``diff_newline`` is the line ending added lines get in a file that has
    no newline at all.
    """
    lines = _Lines(raw)
    positions = _locate(lines, hunks, path)
    default = lines.dominant if lines.has_newline else diff_newline
    contents, terms = lines.contents, lines.terms
    out_contents: list[str] = []
    out_terms: list[str] = []
    added = removed = 0
    first_changed: int | None = None
    cursor = 0
    for hunk, pos in zip(hunks, positions, strict=True):
        for chunk in hunk.chunks:
            at = pos + chunk.offset
            out_contents.extend(contents[cursor:at])
            out_terms.extend(terms[cursor:at])
            if first_changed is None:
                first_changed = len(out_contents) + 1
            # Added lines take the line ending of what they replace, else of the line
            # before them, else of the line after: a CRLF region stays CRLF.
            style = ""
            if chunk.deleted and at < len(terms):
                style = terms[at]
            if not style and at > 0:
                style = terms[at - 1]
            if not style and at < len(terms):
                style = terms[at]
            out_contents.extend(chunk.inserted)
            out_terms.extend([style or default] * len(chunk.inserted))
            cursor = at + len(chunk.deleted)
            added += len(chunk.inserted)
            removed += len(chunk.deleted)
    out_contents.extend(contents[cursor:])
    out_terms.extend(terms[cursor:])
    pieces: list[str] = []
    last = len(out_contents) - 1
    for i, (content, term) in enumerate(zip(out_contents, out_terms, strict=True)):
        pieces.append(content)
        if i < last:
            pieces.append(term or default)
    return PatchOutcome(text="".join(pieces), hunks=len(hunks), added=added, removed=removed,
                        first_line=first_changed)


def apply_diff(text: str, diff: str, mode: DiffMode = "default", *,
               path: str | None = None) -> str:
    """``agents.apply_diff``'s signature: the patched text (``mode="create"``: the text of
    a created file). Raises :class:`~toolfs.errors.FsError` where the SDK raises
    ``ValueError``, and where it would guess."""
    if mode == "create":
        return parse_create(diff, path=path)
    hunks = parse_update(diff, path=path)
    newline = "\r\n" if "\r\n" in diff else "\n"
    return apply_update(text, hunks, path=path, diff_newline=newline).text
