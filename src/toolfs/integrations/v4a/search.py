"""The file as V4A matches it, and the scans that search it.

:class:`_Lines` splits a text into line contents (what a hunk's context is matched
against) and terminators (kept byte for byte), and interns each content to an integer
once; the Knuth-Morris-Pratt functions then search those integers in linear time. Both
:mod:`.apply` (locating hunks) and :mod:`.mismatch` (near misses) search with them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence


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
