"""V4A diffs, the format of OpenAI's ``apply_patch`` tool: parse and apply, no I/O.

A V4A update diff is a sequence of hunks::

    @@ class Greeter            <- optional anchors ("@@ <a line of the file>"), may stack
    @@     def greet(self):
         name = "world"         <- context (" "), deleted ("-") and added ("+") lines
    -    print("Hi")
    +    print("Hello", name)
    *** End of File             <- optional: the hunk's context ends the file

A created file's diff holds only ``+`` lines. The semantics follow the Agents SDK's
``agents.apply_diff`` wherever V4A leaves a point open (a created file has no final
newline unless the diff ends with an empty ``+`` line; a diff can add or remove the
final newline with an empty ``+``/``-`` line after the last line; an anchor already
passed by an earlier hunk does not move the search), and are stricter wherever the SDK
would guess:

* context is matched **exactly**, on the LF-normalised text (the SDK falls back to
  whitespace-insensitive matches and writes there; here such a match is only named in
  the error as a hint);
* a hunk without an anchor must be located uniquely: if its context also occurs later,
  before the next hunk (or the end of the file), it is ``ambiguous_match``; a hunk with
  an anchor takes the first match after its anchor, which is what ``@@`` asks for, unless
  the anchor occurs again before the next hunk and the hunk fits after that too
  (``ambiguous_match``: the SDK takes the first); a hunk of added lines only needs an
  anchor (or ``*** End of File``, or an empty file);
* an anchor already passed keeps the search where it is only when it continues the
  previous hunk's scope (a second hunk in the same function); one above that scope says
  nothing about where the hunk goes (the SDK writes at the context's next occurrence,
  possibly in another function) and is refused;
* an anchor that is not found, a header with line numbers (unified diff), a line with
  no ``' '``/``'-'``/``'+'`` prefix, or anything after the patch are errors, never
  skipped (blank lines before the first ``@@`` are no hunk and are dropped).

A ``no_match`` quotes the line that differs, from the file and from the diff: for a
match that differs only in whitespace or in Unicode form and typographic punctuation
(never used), or after the longest run of the hunk's lines that does match.

Bytes: matching happens on lines without their terminators, and only the lines a hunk
deletes or adds change; every other line keeps its bytes (CRLF, LF, a lone ``\\r`` in a
line). Added lines take the line ending of the lines they replace or follow (the file's
dominant one otherwise, the diff's in a file without any newline). A BOM is the
caller's business (:class:`toolfs.text.Document`): this module sees text without it.

Cost: O(file + diff). Lines are interned to integers once and every search is a
Knuth-Morris-Pratt scan over those integers; hunks are located left to right, each scan
starting where the previous hunk ended, and the uniqueness check of a hunk covers only
the stretch up to the next hunk, so the scans add up to one pass over the file.
Messages and details are bounded (a few context lines, each clipped).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from toolfs.errors import FsError, fs_error

END_OF_FILE = "*** End of File"
END_PATCH = "*** End Patch"
BEGIN_PATCH = "*** Begin Patch"
MAX_SHOWN_LINES = 5
"""Lines of a hunk's context an error message quotes."""
MAX_SHOWN_CHARS = 200
"""Characters of each quoted line."""
MAX_HINT_LINES = 10
"""Line numbers a hint names."""

DiffMode = Literal["default", "create"]


@dataclass(frozen=True)
class Chunk:
    """One run of deletions and additions inside a hunk."""

    offset: int
    """Index, within the hunk's ``old`` lines, of the first deleted line (or of the line
    the additions go before)."""
    deleted: tuple[str, ...]
    inserted: tuple[str, ...]


@dataclass(frozen=True)
class Hunk:
    """One ``@@`` section of an update diff."""

    number: int
    """1-based position in the diff."""
    diff_line: int
    """1-based line of the diff the hunk starts on."""
    anchors: tuple[str, ...]
    """The ``@@ <line>`` headers, outermost first (bare ``@@`` lines are not kept)."""
    old: tuple[str, ...]
    """Context and deleted lines, in file order: what must match the file."""
    chunks: tuple[Chunk, ...]
    eof: bool
    """The hunk ended with ``*** End of File``: ``old`` must end the file."""
    old_lines: tuple[int, ...] = ()
    """1-based line of the diff each of ``old`` comes from (for messages)."""


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


# -- parsing ----------------------------------------------------------------------------


def diff_lines(diff: str) -> list[str]:
    """The diff's lines without terminators (``\\r\\n`` or ``\\n``), as the SDK splits
    them: trailing ``\\r`` removed, no phantom line after a final newline."""
    lines = [line.rstrip("\r") for line in diff.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _shown(line: str) -> str:
    return line if len(line) <= MAX_SHOWN_CHARS else line[:MAX_SHOWN_CHARS] + "..."


def _bad_diff(message: str, path: str | None, *, operation: str = "apply_patch",
              **details: Any) -> FsError:
    """``invalid_arguments`` for a diff (``operation="apply_patch"``: the advice is about
    hunks) or for a whole patch's envelope (``"apply_patch_envelope"``)."""
    return fs_error("invalid_arguments", message, path=path,
                    details={"operation": operation, **details})


def _check_text(diff: str, path: str | None) -> None:
    if "\x00" in diff:
        raise _bad_diff("the diff contains a NUL character; only text can be written", path)
    try:
        diff.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _bad_diff("the diff is not valid Unicode (a lone surrogate)", path) from exc


_NO_NEWLINE = "\\ No newline at end of file"


def _no_newline_marker(i: int, path: str | None) -> FsError:
    return _bad_diff(
        f"diff line {i + 1} ('{_NO_NEWLINE}') is a unified-diff marker that V4A does not "
        "have: leave it out. A file keeps its final newline, or its lack of one, unless the "
        "diff changes it: to add one, put an empty '+' line after the file's last line; to "
        "remove one, an empty '-' line there", path, diff_line=i + 1)


def _is_unified_header(line: str) -> bool:
    """``@@ -12,5 +12,6 @@`` (what ``diff -u`` writes): V4A hunks carry no line numbers.
    Checked by hand, character classes only: no regex on model input."""
    if not line.startswith("@@ -"):
        return False
    rest = line[4:]
    digits = "0123456789,"
    i = 0
    while i < len(rest) and rest[i] in digits:
        i += 1
    if i == 0 or not rest.startswith(" +", i):
        return False
    j = i + 2
    k = j
    while k < len(rest) and rest[k] in digits:
        k += 1
    return k > j and rest.startswith(" @@", k)


def _end_of_patch(lines: Sequence[str], i: int) -> bool:
    """``lines[i]`` is ``*** End Patch`` with nothing but blank lines after it."""
    return lines[i].rstrip() == END_PATCH and all(not s.strip() for s in lines[i + 1:])


def _not_in_update(line: str, i: int, opening: bool) -> str:
    """Why a ``***`` line ends an update diff too early; ``opening``: before any hunk."""
    said = f"diff line {i + 1} ({_shown(line)!r}) is not part of an update diff"
    if line.startswith(BEGIN_PATCH) or (
            opening and line.startswith(("*** Update File:", "*** Move to:"))):
        # A whole Codex-style patch sent as one operation's diff.
        return (f"{said}: an update_file diff holds only the hunks; leave out "
                f"'{BEGIN_PATCH}', '*** Update File:' and '{END_PATCH}' (the operation's "
                "path names the file, its move_to a new name)")
    return (f"{said}: send one operation per file (a '*** ...' line may only be "
            f"'{END_OF_FILE}' after a hunk)")


def parse_update(diff: str, *, path: str | None = None) -> list[Hunk]:
    """The hunks of an ``update_file`` diff, or ``invalid_arguments`` naming the line."""
    _check_text(diff, path)
    lines = diff_lines(diff)
    if not any(s.strip() for s in lines):
        raise _bad_diff("the diff is empty: an update needs at least one hunk", path)
    if len(lines) > 1 and lines[0].startswith("--- ") and lines[1].startswith("+++ "):
        raise _bad_diff("this is a unified diff (--- / +++ file headers); apply_patch takes "
                        "a V4A diff: hunks that start with '@@', then ' ', '-' and '+' "
                        "lines", path, diff_line=1)
    hunks: list[Hunk] = []
    i, n = 0, len(lines)
    # Blank lines before the first '@@' (a diff that starts with a newline) are not a
    # hunk of one empty context line: that would match the file's first empty line and
    # move the search past the change. Before a context line they are context (the SDK).
    first = next(j for j, s in enumerate(lines) if s.strip())
    if lines[first].startswith("@@"):
        i = first
    while i < n:
        start = i
        anchors: list[str] = []
        headers = 0
        while i < n and lines[i].startswith("@@"):
            line = lines[i]
            if _is_unified_header(line):
                raise _bad_diff(
                    f"diff line {i + 1} is a unified-diff hunk header ({_shown(line)!r}); "
                    "V4A hunks have no line numbers: start a hunk with '@@' or with "
                    "'@@ <a line of the file near the change>'", path, diff_line=i + 1)
            if line != "@@" and not line.startswith("@@ "):
                raise _bad_diff(f"diff line {i + 1} ({_shown(line)!r}) is not a hunk header: "
                                "write '@@' or '@@ <a line of the file>'", path,
                                diff_line=i + 1)
            headers += 1
            anchor = line[3:]
            if anchor.strip():
                anchors.append(anchor)
            i += 1
        if headers == 0 and hunks:
            raise _bad_diff(f"diff line {i + 1} ({_shown(lines[i])!r}) should start a new hunk "
                            "with '@@'", path, diff_line=i + 1, hunk=len(hunks) + 1)
        old: list[str] = []
        old_lines: list[int] = []
        chunks: list[Chunk] = []
        deleted: list[str] = []
        inserted: list[str] = []
        body = i
        last = " "
        while i < n and not lines[i].startswith("@@") and not lines[i].startswith("***"):
            line = lines[i] or " "  # an empty line is an empty context line (as the SDK)
            kind = line[0]
            if line.startswith(_NO_NEWLINE):
                raise _no_newline_marker(i, path)
            if kind not in " -+":
                raise _bad_diff(
                    f"diff line {i + 1} ({_shown(line)!r}) has no ' ', '-' or '+' prefix; "
                    "every line of a hunk is context (' '), deleted ('-') or added ('+')",
                    path, diff_line=i + 1, hunk=len(hunks) + 1)
            if kind == " " and last != " " and (deleted or inserted):
                chunks.append(Chunk(len(old) - len(deleted), tuple(deleted), tuple(inserted)))
                deleted, inserted = [], []
            last = kind
            content = line[1:]
            if kind == "+":
                inserted.append(content)
            else:
                old.append(content)
                old_lines.append(i + 1)
                if kind == "-":
                    deleted.append(content)
            i += 1
        if deleted or inserted:
            chunks.append(Chunk(len(old) - len(deleted), tuple(deleted), tuple(inserted)))
        eof = False
        if i < n and lines[i].rstrip() == END_OF_FILE:  # trailing blanks: still the marker
            eof = True
            i += 1
        elif i < n and lines[i].startswith("***"):
            if not _end_of_patch(lines, i):
                raise _bad_diff(_not_in_update(lines[i], i, not hunks and i == body),
                                path, diff_line=i + 1)
            i = n
        if i == body and not eof:
            raise _bad_diff(f"hunk {len(hunks) + 1} (diff line {start + 1}) has no lines",
                            path, diff_line=start + 1, hunk=len(hunks) + 1)
        hunks.append(Hunk(number=len(hunks) + 1, diff_line=start + 1, anchors=tuple(anchors),
                          old=tuple(old), chunks=tuple(chunks), eof=eof,
                          old_lines=tuple(old_lines)))
    return hunks


def parse_create(diff: str, *, path: str | None = None) -> str:
    """The text of a ``create_file`` diff (``+`` lines only), joined as the SDK joins
    them: with the diff's line ending (CRLF if it uses any, else LF) and no final
    newline unless the diff ends with an empty ``+`` line."""
    _check_text(diff, path)
    lines = diff_lines(diff)
    out: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith("+"):
            out.append(line[1:])
        elif line.startswith("***") and _end_of_patch(lines, i):
            break
        elif line.startswith(_NO_NEWLINE):
            raise _no_newline_marker(i, path)
        else:
            raise _bad_diff(f"diff line {i + 1} ({_shown(line)!r}) does not start with '+'; "
                            "every line of a created file's diff is '+' and its text",
                            path, diff_line=i + 1)
    newline = "\r\n" if "\r\n" in diff else "\n"
    return newline.join(out)


# -- searching --------------------------------------------------------------------------


def _failure(pattern: Sequence[int]) -> list[int]:
    """Knuth-Morris-Pratt failure table of ``pattern``."""
    table = [0] * len(pattern)
    k = 0
    for i in range(1, len(pattern)):
        while k and pattern[i] != pattern[k]:
            k = table[k - 1]
        if pattern[i] == pattern[k]:
            k += 1
        table[i] = k
    return table


def _occurrences(seq: Sequence[int], pattern: Sequence[int], start: int, end: int,
                 table: list[int] | None = None) -> Iterator[int]:
    """Start offsets of ``pattern`` in ``seq[start:end]`` (overlapping ones too), in
    O(end - start + len(pattern)). ``pattern`` is not empty."""
    if table is None:
        table = _failure(pattern)
    m, k = len(pattern), 0
    for i in range(start, min(end, len(seq))):
        c = seq[i]
        while k and c != pattern[k]:
            k = table[k - 1]
        if c == pattern[k]:
            k += 1
            if k == m:
                yield i - m + 1
                k = table[k - 1]


def _first(seq: Sequence[int], pattern: Sequence[int], start: int, end: int) -> int:
    return next(_occurrences(seq, pattern, start, end), -1)


class _Lines:
    """The file as lines: contents (matched) and terminators (kept)."""

    def __init__(self, raw: str) -> None:
        parts = raw.split("\n")
        last = len(parts) - 1
        self.contents: list[str] = []
        self.terms: list[str] = []
        crlf = 0
        for i, part in enumerate(parts):
            if i < last and part.endswith("\r"):
                self.contents.append(part[:-1])
                self.terms.append("\r\n")
                crlf += 1
            else:
                self.contents.append(part)
                self.terms.append("\n" if i < last else "")
        # str.split keeps an empty last element after a final newline: the SDK's model
        # of a file, which lets a diff add or remove the final newline.
        newlines = last
        self.dominant = "\r\n" if crlf and crlf * 2 >= newlines else "\n"
        self.has_newline = newlines > 0
        self.ids: dict[str, int] = {}
        self.seq = [self.ids.setdefault(c, len(self.ids)) for c in self.contents]

    def pattern(self, lines: Sequence[str]) -> list[int]:
        return [self.ids.get(c, -1) for c in lines]

    def mapped(self, key: Callable[[str], str]) -> tuple[list[int], dict[str, int]]:
        """The file's lines interned after ``key`` (for near-miss hints)."""
        ids: dict[str, int] = {}
        seq = [ids.setdefault(key(c), len(ids)) for c in self.contents]
        return seq, ids


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


# -- the envelope: several files in one patch --------------------------------------------

_FILE_HEADERS = ("*** Add File: ", "*** Delete File: ", "*** Update File: ")
_MOVE_TO = "*** Move to: "


@dataclass(frozen=True)
class FileOperation:
    """One file's part of a ``*** Begin Patch`` envelope, in the Responses API's terms."""

    type: Literal["create_file", "update_file", "delete_file"]
    path: str
    diff: str | None
    move_to: str | None = None
    patch_line: int = 0
    """1-based line of the envelope where this file's header is."""


def parse_patch(patch: str) -> list[FileOperation]:
    """The file operations of a whole patch (``*** Begin Patch`` ... ``*** End Patch``,
    ``*** Add File:`` / ``*** Delete File:`` / ``*** Update File:`` [``*** Move to:``]),
    in order; ``invalid_arguments`` naming the line for anything else. Each operation's
    ``diff`` is its section's lines, to be parsed as any ``create_file`` or
    ``update_file`` diff; an added file ends with a newline, as in Codex (whose format
    this is: each ``+`` line is a line of the file), where a lone ``create_file``
    operation follows the Agents SDK (no final newline unless its diff ends with an
    empty ``+`` line)."""
    _check_text(patch, None)
    lines = diff_lines(patch)
    envelope = "apply_patch_envelope"
    # Once for the whole patch: per section it made many small files quadratic.
    newline = "\r\n" if "\r\n" in patch else "\n"  # kept for the new lines' ending
    first = next((i for i, s in enumerate(lines) if s.strip()), None)
    last = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].strip()), None)
    if first is None or last is None or lines[first].strip() != BEGIN_PATCH:
        raise _bad_diff(f"a patch starts with '{BEGIN_PATCH}'", None, operation=envelope,
                        patch_line=1)
    if last == first or lines[last].strip() != END_PATCH:
        raise _bad_diff(f"a patch ends with '{END_PATCH}'", None, operation=envelope,
                        patch_line=last + 1)
    ops: list[FileOperation] = []
    i = first + 1
    while i < last:
        line = lines[i]
        header = next((h for h in _FILE_HEADERS if line.startswith(h)), None)
        if header is None:
            if not line.strip():
                i += 1
                continue
            raise _bad_diff(f"patch line {i + 1} ({_shown(line)!r}) is not a file header: "
                            "each file starts with '*** Add File: ', '*** Delete File: ' or "
                            "'*** Update File: ' and its path", None, operation=envelope,
                            patch_line=i + 1)
        path = line[len(header):].strip()
        if not path:
            raise _bad_diff(f"patch line {i + 1} names no file", None, operation=envelope,
                            patch_line=i + 1)
        start = i
        i += 1
        body_start = i
        while i < last and not lines[i].startswith(_FILE_HEADERS):
            i += 1
        body = lines[body_start:i]
        move_to = None
        if header == "*** Update File: " and body and body[0].startswith(_MOVE_TO):
            move_to = body[0][len(_MOVE_TO):].strip()
            if not move_to:
                raise _bad_diff(f"patch line {body_start + 1} names no file to move to",
                                path, operation=envelope, patch_line=body_start + 1)
            body = body[1:]
        if header == "*** Delete File: ":
            if any(s.strip() for s in body):
                raise _bad_diff(f"patch line {body_start + 1}: a deleted file has no lines",
                                path, operation=envelope, patch_line=body_start + 1)
            ops.append(FileOperation("delete_file", path, None, patch_line=start + 1))
        else:
            kind: Literal["create_file", "update_file"] = (
                "create_file" if header == "*** Add File: " else "update_file")
            if kind == "create_file" and body:
                # Codex's grammar: every added line ends with its newline ("+" line LF),
                # so an added file ends with one; as a create_file diff (the SDK's join,
                # no final newline) that is one more empty '+' line.
                body = [*body, "+"]
            ops.append(FileOperation(kind, path, newline.join(body) + newline if body else "",
                                     move_to, patch_line=start + 1))
    if not ops:
        raise _bad_diff("the patch names no file", None, operation=envelope,
                        patch_line=first + 1)
    return ops
