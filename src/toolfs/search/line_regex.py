"""``grep``'s line regex: a pattern compiled with RE2 over a file's UTF-8 bytes, and the
numbers of the lines it matches (one left-to-right pass, no match across a line end).
Path patterns (glob, ``-g``, ``.gitignore``) are :mod:`toolfs.search.discovery`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import re2

from toolfs.errors import fs_error

MAX_PATTERN_CHARS = 4096
"""Most characters of a pattern (grep's regex, a glob, a ``.gitignore`` line)."""


def _options() -> re2.Options:
    opts = re2.Options()
    opts.max_mem = 8 << 20
    opts.log_errors = False
    return opts


@dataclass(frozen=True)
class LineRegex:
    """A ``grep`` pattern compiled with RE2 over UTF-8 bytes (no backtracking).

    Compiled with RE2's ``never_nl``: no match contains a ``\\n`` (``\\s``, ``[^y]``,
    ``\\D``, ``(?s).`` lose it and a literal ``\\n`` never matches), as ripgrep strips the
    line terminator from its patterns. A match in the whole text is then a match inside
    one line, so one left-to-right pass finds every matching line."""

    regex: re2._Regexp
    whole_text: bool
    """Candidates may be found over the whole text at once (the pattern has no
    construct whose meaning differs between a line and a text: ``\\A``, ``\\z``,
    ``(?-m)``)."""
    match_start: Callable[[bytes, int, int], int] = field(init=False, compare=False,
                                                         repr=False)
    """``match_start(data, pos, endpos)``: see :func:`_match_start`."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "match_start", _match_start(self.regex))

    def matching_lines(self, data: bytes) -> list[int]:
        """0-based numbers of the lines of ``data`` (``\\n``-separated, ``\\r\\n``
        already normalised) that hold a match. O(len(data)): each byte is scanned by
        one search (a match never spans a line end, so the search after a matching
        line starts past it), or each line is searched once on its own."""
        out: list[int] = []
        end = len(data)
        found = self.match_start
        if not self.whole_text:
            for i, line in enumerate(_lines(data)):
                if found(line, 0, len(line)) >= 0:
                    out.append(i)
            return out
        pos, line_no = 0, 0
        while pos <= end:
            start = found(data, pos, end)
            if start < 0:
                break
            if start == end and (end == 0 or data[end - 1:end] == b"\n"):
                break  # the empty "line" after a final newline is not a line
            line_no += data.count(b"\n", pos, start)
            out.append(line_no)
            le = data.find(b"\n", start)
            if le < 0:
                break
            pos = le + 1
            line_no += 1
        return out


def _match_start(regex: re2._Regexp) -> Callable[[bytes, int, int], int]:
    """``f(data, pos, endpos)``: where the first match in ``data[pos:endpos]`` starts,
    or -1. Calls RE2's engine directly when the wrapper exposes it: the public
    ``search`` builds a generator and a match object per call, which is most of grep's
    cost on a tree of small files. Both give the same answer
    (``tests/contract/test_discovery.py`` checks the two paths agree)."""
    engine = getattr(regex, "_regexp", None)
    anchor = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)
    if engine is not None and anchor is not None and hasattr(engine, "Match"):
        match = engine.Match

        def direct(data: bytes, pos: int, endpos: int) -> int:
            start: int = match(anchor, data, pos, endpos)[0][0]
            return start

        return direct

    return _public_match_start(regex)


def _public_match_start(regex: re2._Regexp) -> Callable[[bytes, int, int], int]:
    """:func:`_match_start` through the wrapper's public ``search`` only."""

    def public(data: bytes, pos: int, endpos: int) -> int:
        m = regex.search(data, pos, endpos)
        return -1 if m is None else int(m.start())

    return public


def _lines(data: bytes) -> list[bytes]:
    if not data:
        return []
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


def split_data_lines(data: bytes) -> list[bytes]:
    """Lines of normalised bytes, without terminators, no phantom last line."""
    return _lines(data)


def compile_regex(pattern: str, *, ignore_case: bool = False) -> LineRegex:
    """Compile ``pattern`` with RE2 (``invalid_arguments`` with RE2's reason if it is not
    valid RE2 syntax). Never falls back to Python's ``re``."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise fs_error("invalid_arguments",
                       f"the pattern is over {MAX_PATTERN_CHARS} characters")
    if _ANY_BYTE.search(pattern) is not None:
        # RE2's never_nl does not hold for \C, which matches any byte, a newline too:
        # a match could span lines. ripgrep refuses it as well.
        raise fs_error("invalid_arguments",
                       "invalid regular expression: \\C (any byte) is not supported")
    opts = _options()
    opts.case_sensitive = not ignore_case
    opts.never_nl = True
    try:
        regex = re2.compile(("(?m)" + pattern).encode("utf-8", "surrogateescape"), opts)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        reason = str(reason).replace("(?m)", "", 1)  # our line-mode prefix, not theirs
        raise fs_error("invalid_arguments",
                       f"invalid regular expression (RE2 syntax): {reason}") from None
    return LineRegex(regex, _whole_text(pattern))


_UNSET_MULTILINE = re2.compile(r"\(\?[a-zA-Z]*-[a-zA-Z]*m")
# A \C escape: a backslash preceded by an even number of backslashes (none escaped).
_ANY_BYTE = re2.compile(r"(?:^|[^\\])(?:\\\\)*\\C")


def _whole_text(pattern: str) -> bool:
    """Whether ``pattern`` finds the same lines in a whole text as in each line alone
    (conservative: a literal ``\\\\A`` also answers False, which is only slower)."""
    return "\\A" not in pattern and "\\z" not in pattern \
        and _UNSET_MULTILINE.search(pattern) is None
