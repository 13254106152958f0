"""Text semantics shared by every backend: decoding, line windows and literal edits.

Pure functions over ``bytes``/``str``; no I/O. The rules:

* files are UTF-8; invalid UTF-8 or a NUL byte makes a file ``not_text``;
* a UTF-8 BOM is kept and is not part of the text the model sees or matches;
* the model sees and writes ``\\n``; in a file that uses ``\\r\\n``, matches are found
  on the LF-normalised text and replacements are written back with the line ending
  of the span they replace; every byte outside the replaced spans is unchanged;
* the presence or absence of a final newline is whatever the bytes say.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from toolfs.errors import fs_error

BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Document:
    """A decoded text file: its text without BOM, and whether it had one."""

    text: str
    bom: bool

    def encode(self, text: str | None = None) -> bytes:
        """Bytes of ``text`` (default: this document's), with the BOM if it had one."""
        body = (self.text if text is None else text).encode("utf-8")
        return BOM + body if self.bom else body


def decode(data: bytes, path: str | None = None) -> Document:
    """Decode file bytes, or raise ``not_text``."""
    bom = data.startswith(BOM)
    body = data[len(BOM):] if bom else data
    if b"\x00" in body:
        raise fs_error("not_text", f"{path or 'file'} contains NUL bytes; it is not text",
                       path=path)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fs_error(
            "not_text", f"{path or 'file'} is not valid UTF-8 (byte {exc.start})",
            path=path, details={"byte_offset": exc.start}) from exc
    return Document(text=text, bom=bom)


def normalize_newlines(s: str) -> str:
    """``\\r\\n`` to ``\\n``."""
    return s.replace("\r\n", "\n")


def split_lines(text: str) -> list[str]:
    """Lines without their terminators (``\\n`` or ``\\r\\n``); no phantom last line."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if "\r" not in text:  # the common case: no per-line work at all
        return lines
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def lines_around(text: str, start: int, end: int, context: int) -> tuple[int, list[str]]:
    """The lines covering ``text[start:end]`` plus ``context`` lines on each side, and the
    1-based number of the first; only that region of ``text`` is split."""
    lo = start
    for _ in range(context + 1):
        lo = text.rfind("\n", 0, lo) if lo > 0 else -1
        if lo < 0:
            break
    lo = lo + 1 if lo >= 0 else 0
    hi = end
    # A span that ends with its newline already holds its last line whole.
    ends_whole = end > start and text[end - 1] == "\n"
    for _ in range(context if ends_whole else context + 1):
        nxt = text.find("\n", hi)
        if nxt < 0:
            hi = len(text)
            break
        hi = nxt + 1
    return text.count("\n", 0, lo) + 1, split_lines(text[lo:hi])


# -- edit ---------------------------------------------------------------------------


@dataclass(frozen=True)
class EditOutcome:
    """The new text and facts about the replacement."""

    text: str
    count: int
    lines: list[int]
    """1-based first line of each replaced span, in the original text."""
    first_span: tuple[int, int]
    """Where the first replacement lies in the new text (start, end offsets)."""


class _CrlfMap:
    """Maps offsets in the LF-normalised text back to the original text."""

    def __init__(self, raw: str) -> None:
        self.raw = raw
        # Position, in normalised coordinates, of each "\n" that was a "\r\n".
        self.crlf: list[int] = []
        removed = 0
        pos = raw.find("\r\n")
        while pos != -1:
            self.crlf.append(pos - removed)
            removed += 1
            pos = raw.find("\r\n", pos + 2)
        self.normalized = raw.replace("\r\n", "\n") if self.crlf else raw

    def to_raw(self, i: int) -> int:
        return i + bisect.bisect_left(self.crlf, i)

    def span_uses_crlf(self, start: int, end: int) -> bool | None:
        """Whether the newlines inside ``[start, end)`` were CRLF (None: no newline)."""
        lo = bisect.bisect_left(self.crlf, start)
        hi = bisect.bisect_left(self.crlf, end)
        newlines = self.normalized.count("\n", start, end)
        if newlines == 0:
            return None
        return hi - lo >= newlines - (hi - lo)

    @property
    def mostly_crlf(self) -> bool:
        return len(self.crlf) * 2 >= self.normalized.count("\n") > 0


def find_all(haystack: str, needle: str) -> list[int]:
    """Start offsets of the non-overlapping occurrences, as ``str.replace`` sees them."""
    out: list[int] = []
    pos = haystack.find(needle)
    while pos != -1:
        out.append(pos)
        pos = haystack.find(needle, pos + len(needle))
    return out


def line_of(text: str, offset: int) -> int:
    """1-based line number of ``offset``."""
    return text.count("\n", 0, offset) + 1


def apply_edit(raw: str, old: str, new: str, *, replace_all: bool,
               path: str | None = None) -> EditOutcome:
    """Replace ``old`` by ``new`` literally, or raise ``no_match``/``ambiguous_match``."""
    old_n, new_n = normalize_newlines(old), normalize_newlines(new)
    m = _CrlfMap(raw)
    text = m.normalized
    starts = find_all(text, old_n)
    if not starts:
        raise _no_match(text, old_n, path)
    lines = [line_of(text, s) for s in starts]
    if len(starts) > 1 and not replace_all:
        raise fs_error(
            "ambiguous_match",
            f"old_string matches {len(starts)} times (lines {_fmt_lines(lines)}); "
            "add context to make it unique, or set replace_all to true",
            path=path, details={"lines": lines, "count": len(starts)})
    default_crlf = m.mostly_crlf

    def replacement(s: int, e: int) -> str:
        uses = m.span_uses_crlf(s, e)
        crlf = default_crlf if uses is None else uses
        return new_n.replace("\n", "\r\n") if crlf else new_n

    pieces: list[str] = []
    prev = 0
    for s in starts:
        e = s + len(old_n)
        rs, re_ = m.to_raw(s), m.to_raw(e)
        pieces.append(raw[prev:rs])
        pieces.append(replacement(s, e))
        prev = re_
    pieces.append(raw[prev:])
    # The text before the first match is unchanged, so its offsets hold in the new text.
    first = m.to_raw(starts[0])
    return EditOutcome(text="".join(pieces), count=len(starts), lines=lines,
                       first_span=(first, first + len(pieces[1])))


def _fmt_lines(lines: list[int], limit: int = 20) -> str:
    shown = ", ".join(map(str, lines[:limit]))
    return shown + (f", ... ({len(lines) - limit} more)" if len(lines) > limit else "")


_WS = re.compile(r"\s+")


def _no_match(text: str, old: str, path: str | None) -> Exception:
    """``no_match``, with a hint where a whitespace-insensitive match exists."""
    details: dict[str, object] = {}
    hint = ""
    tokens = [t for t in _WS.split(old) if t]
    if tokens and len(old) <= 100_000:
        pattern = re.compile(r"\s*".join(re.escape(t) for t in tokens))
        found = [line_of(text, mt.start()) for mt in pattern.finditer(text)][:10]
        if found:
            details["similar_lines"] = found
            hint = (f" A match that differs only in whitespace or line endings exists at "
                    f"line{'s' if len(found) > 1 else ''} {_fmt_lines(found)}; it was not "
                    "used. Read those lines and copy the text exactly.")
    return fs_error("no_match", "old_string was not found in the file." + hint,
                    path=path, details=details)
