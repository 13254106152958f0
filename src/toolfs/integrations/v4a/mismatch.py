"""What a V4A hunk that does not fit the file is told.

Every refusal of :mod:`toolfs.integrations.v4a.apply` is built here: ``no_match`` quotes the line
that differs, from the file and from the diff -- a near miss (whitespace, Unicode form,
typographic punctuation; never used), or the line after the longest run of the hunk that
does match, or a match in the wrong place (before the cursor, inside the previous hunk,
not at the end of the file) -- and ``ambiguous_match`` names the places a hunk could go.
The work stays linear and the messages bounded (a few quoted lines, each clipped).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

from toolfs.errors import FsError, fs_error
from toolfs.integrations.v4a.parse import (
    END_OF_FILE,
    MAX_HINT_LINES,
    MAX_SHOWN_LINES,
    Hunk,
    _shown,
)
from toolfs.integrations.v4a.search import _failure, _first, _Lines, _occurrences


def _no_space(line: str) -> str:
    return "".join(line.split())


# Typographic punctuation a model writes as ASCII (or the reverse): the characters
# Codex's apply_patch folds when it searches. Here they only name a near miss.
_TYPOGRAPHIC = str.maketrans({
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
    **dict.fromkeys("\u2018\u2019\u201a\u201b", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u201f", '"'),
})


def _folded(line: str) -> str:
    """``line`` without whitespace, Unicode-normalised (NFKC) and with typographic
    quotes and dashes as ASCII: equal for lines a model may have retyped."""
    return "".join(unicodedata.normalize("NFKC", line).translate(_TYPOGRAPHIC).split())


_NEAR_MISSES: tuple[tuple[Callable[[str], str], str], ...] = (
    (str.rstrip, "only in trailing whitespace"),
    (_no_space, "only in whitespace"),
    (_folded, "only in whitespace, Unicode normalisation or typographic quotes and dashes"),
)


def _quote(lines: Sequence[str]) -> str:
    shown = [f"    {_shown(s)}" for s in lines[:MAX_SHOWN_LINES]]
    if len(lines) > MAX_SHOWN_LINES:
        shown.append(f"    ... ({len(lines) - MAX_SHOWN_LINES} more lines)")
    return "\n".join(shown)


def _hunk_details(hunk: Hunk, cursor: int, **extra: Any) -> dict[str, Any]:
    return {"operation": "apply_patch", "hunk": hunk.number, "diff_line": hunk.diff_line,
            "context": [_shown(s) for s in hunk.old[:MAX_SHOWN_LINES]],
            "context_lines": len(hunk.old), "search_from_line": cursor + 1, **extra}


def _name(hunk: Hunk) -> str:
    return f"hunk {hunk.number} (diff line {hunk.diff_line})"


def _fmt(lines: Sequence[int]) -> str:
    return ", ".join(str(n) for n in lines)


def _longest_prefix(seq: Sequence[int], pattern: Sequence[int], start: int,
                    end: int) -> tuple[int, int]:
    """``(length, offset)`` of the longest prefix of ``pattern`` found in
    ``seq[start:end]`` (the first such place): one KMP pass, O(end - start + len)."""
    table = _failure(pattern)
    best, at, k = 0, -1, 0
    m = len(pattern)
    for i in range(start, min(end, len(seq))):
        c = seq[i]
        while k and c != pattern[k]:
            k = table[k - 1]
        if c == pattern[k]:
            k += 1
            if k > best:
                best, at = k, i - k + 1
            if k == m:
                k = table[k - 1]
    return best, at


def _difference(lines: _Lines, hunk: Hunk, at: int, t: int) -> tuple[dict[str, Any], str]:
    """The file's line ``at + t`` against the hunk's ``old[t]``: details and a sentence
    that quotes both (``repr``, so whitespace and odd characters show)."""
    contents = lines.contents
    i = at + t
    diff_line = hunk.old_lines[t] if t < len(hunk.old_lines) else hunk.diff_line
    expected = repr(_shown(hunk.old[t]))
    phantom = lines.has_newline and i == len(contents) - 1 and contents[i] == ""
    if i >= len(contents) or phantom:
        return ({"file_line": None, "diff_line": diff_line, "diff": expected},
                f"the file ends after line {i}, where diff line {diff_line} has {expected}")
    found = repr(_shown(contents[i]))
    return ({"file_line": i + 1, "file": found, "diff_line": diff_line, "diff": expected},
            f"line {i + 1} of the file is {found}, where diff line {diff_line} has "
            f"{expected}")


def _no_match(lines: _Lines, hunk: Hunk, cursor: int, end: int, path: str | None,
              previous: tuple[Hunk, int] | None = None) -> FsError:
    """``no_match`` for a hunk's context, with what is known near it: the line that
    differs, quoted from the file and from the diff (linear work)."""
    k = len(hunk.old)
    hints: list[str] = []
    details: dict[str, Any] = {}
    missing = next((s for s in hunk.old if s not in lines.ids), None)
    if missing is not None:
        details["missing_line"] = _shown(missing)
        hints.append(f"The line {_shown(missing)!r} occurs nowhere in the file.")
    # Near misses, strictest first: the same lines but for trailing whitespace, any
    # whitespace, or Unicode form and typographic punctuation.
    near = False
    for key, how in _NEAR_MISSES if k else ():
        seq, ids = lines.mapped(key)
        pattern = [ids.get(key(s), -1) for s in hunk.old]
        found = []
        for p in _occurrences(seq, pattern, cursor, end):
            found.append(p)
            if len(found) >= MAX_HINT_LINES:
                break
        if found:
            near = True
            details["similar_lines"] = [p + 1 for p in found]
            t = next((t for t in range(k) if lines.contents[found[0] + t] != hunk.old[t]), 0)
            diff, said = _difference(lines, hunk, found[0], t)
            details["differs"] = diff
            hints.append(f"A match that differs {how} starts at line"
                         f"{'s' if len(found) > 1 else ''} {_fmt([p + 1 for p in found])} "
                         f"and was not used: {said}.")
            break
    exact = lines.pattern(hunk.old)
    if k and not near:
        # The longest run of the context that does match: the next line is the one
        # the model got wrong.
        best, at = _longest_prefix(lines.seq, exact, cursor, end)
        if 0 < best < k and any(s.strip() for s in hunk.old[:best]):
            details["partial_match"] = {"file_line": at + 1, "matched": best}
            diff, said = _difference(lines, hunk, at, best)
            details["differs"] = diff
            hints.append(f"Of its {k} context/deleted lines, the first {best} match at line "
                         f"{at + 1}; then {said}.")
    later = _first(lines.seq, exact, cursor, end) if hunk.eof and k else -1
    earlier = _first(lines.seq, exact, 0, min(len(lines.seq), cursor + k - 1)) if k else -1
    if later >= 0:
        details["matches_at_line"] = later + 1
        hints.append(f"The context matches at line {later + 1}, but the hunk ends with "
                     f"'{END_OF_FILE}' and the file goes on after it.")
    elif earlier >= 0:
        # Inside the previous hunk's lines: the two overlap (a model that wrote the
        # shared context twice); above them: out of order.
        inside = -1
        if previous is not None:
            inside = _first(lines.seq, exact, previous[1], min(len(lines.seq), cursor + k - 1))
        if previous is not None and inside >= 0:
            prev = previous[0]
            details["earlier_line"] = inside + 1
            details["overlaps_hunk"] = prev.number
            hints.append(f"The context matches at line {inside + 1}, inside the lines of "
                         f"{_name(prev)} (lines {previous[1] + 1}-{cursor}): this hunk "
                         f"overlaps hunk {prev.number}. Merge the two into one hunk: the "
                         "shared lines once, the changes in file order.")
        else:
            details["earlier_line"] = earlier + 1
            hints.append(f"The context matches at line {earlier + 1}, before where this "
                         "hunk may start: hunks must follow the order of the file.")
    where = "at the end of the file" if hunk.eof else f"at or after line {cursor + 1}"
    message = (f"{_name(hunk)} does not match the file: its {k} context/deleted "
               f"line{'s were' if k != 1 else ' was'} not found {where}:\n{_quote(hunk.old)}")
    if hints:
        message += "\n" + " ".join(hints)
    return fs_error("no_match", message, path=path,
                    details=_hunk_details(hunk, cursor, **details))


def _anchor_not_found(lines: _Lines, hunk: Hunk, anchor: str, cursor: int,
                      path: str | None) -> FsError:
    key = anchor.strip()
    hints = []
    details: dict[str, Any] = {}
    if key.endswith("@@") and key[:-2].strip():
        hints.append(f"V4A headers have no closing '@@': write '@@ {key[:-2].strip()}'.")
    else:
        folded = _folded(key)
        near = next((i for i in range(cursor, len(lines.contents))
                     if _folded(lines.contents[i]) == folded), None)
        if near is not None:
            details["similar_line"] = near + 1
            hints.append(f"Line {near + 1} of the file is {_shown(lines.contents[near])!r}, "
                         f"which differs from it only in whitespace or Unicode form.")
    message = (f"{_name(hunk)}: the anchor line '@@ {_shown(anchor)}' was not found at or "
               f"after line {cursor + 1}; an anchor must be a line of the file (indentation "
               "aside), or leave it out: a bare '@@' starts a hunk that its context lines "
               "locate.")
    if hints:
        message += " " + " ".join(hints)
    return fs_error("no_match", message, path=path,
                    details=_hunk_details(hunk, cursor, anchor=_shown(anchor), **details))


def _out_of_scope(hunk: Hunk, anchor: str, line: int, previous: Hunk, scope: int,
                  cursor: int, path: str | None) -> FsError:
    return fs_error(
        "no_match",
        f"{_name(hunk)}: its anchor '@@ {_shown(anchor)}' is line {line + 1} of the file, "
        f"above line {scope + 1}, where the scope of {_name(previous)} starts, so it does "
        "not say where this hunk goes: hunks must follow the file order. If this hunk is "
        f"in the same function as hunk {previous.number}, give both the same anchor (or "
        f"this one none); if it belongs above hunk {previous.number}, move it before that "
        "hunk; if below, name a line between them as its anchor.",
        path=path,
        details=_hunk_details(hunk, cursor, anchor=_shown(anchor), anchor_line=line + 1,
                              earlier_line=line + 1))


def _ambiguous(hunk: Hunk, first: int, again: list[int], cursor: int,
               path: str | None) -> FsError:
    return fs_error(
        "ambiguous_match",
        f"{_name(hunk)} matches the file in more than one place (starting at lines "
        f"{first + 1}, {_fmt([p + 1 for p in again])}) and has no '@@' anchor to choose "
        f"one:\n{_quote(hunk.old)}\nAdd more context lines, or an '@@ <line>' header "
        "naming the enclosing class or function.",
        path=path,
        details=_hunk_details(hunk, cursor, lines=[first + 1, *[p + 1 for p in again]]))


def _unlocated(hunk: Hunk, cursor: int, path: str | None) -> FsError:
    return fs_error(
        "ambiguous_match",
        f"{_name(hunk)} only adds lines and has neither context nor an '@@ <line>' anchor, "
        "so nothing says where they go; add the lines around the insertion point as "
        "context (' ' lines), or end the hunk with '*** End of File' to append",
        path=path, details=_hunk_details(hunk, cursor))
