"""Text semantics shared by every backend: decoding, line windows and literal edits.

Pure functions over ``bytes``/``str``; no I/O. The rules:

* files are UTF-8; invalid UTF-8 or a NUL byte makes a file ``not_text``;
* a UTF-8 BOM is kept and is not part of the text the model sees or matches; only the
  file's very first bytes can be a BOM (a U+FEFF anywhere else is text);
* a file that starts with a UTF-16 or UTF-32 BOM (LE or BE) is text in that encoding
  (:data:`WIDE_BOMS`): decoded for the model, written back in its own encoding behind
  the same BOM (a code unit that does not decode, or a NUL character, makes it
  ``not_text``); without a BOM such bytes are not UTF-8, so ``not_text``;
* the model sees and writes ``\\n``; in a file that uses ``\\r\\n``, matches are found
  on the LF-normalised text and replacements are written back with the line ending
  of the span they replace; every byte outside the replaced spans is unchanged;
* the presence or absence of a final newline is whatever the bytes say.

Every function here is O(size of its input): line numbers are counted incrementally
across ascending offsets, never from offset 0 per match, and what an error carries is
bounded (:data:`MAX_DETAIL_LINES`, :data:`MAX_MESSAGE_LINES`, :data:`MAX_HINTS`).
"""

from __future__ import annotations

import bisect
import codecs
import itertools
import operator
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from toolfs.errors import FsError, fs_error

BOM = b"\xef\xbb\xbf"

WIDE_BOMS: tuple[tuple[bytes, str], ...] = (
    (b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))
"""The byte-order marks of the wide encodings a file may be in, and their codecs: a
UTF-32 mark first (UTF-32LE's starts with UTF-16LE's)."""
_MARKS = {codec: mark for mark, codec in WIDE_BOMS} | {"utf-8": BOM}


def wide_codec(data: bytes) -> str | None:
    """The codec of a file that starts with a UTF-16 or UTF-32 byte-order mark."""
    if data[:1] in (b"\xff", b"\xfe", b"\x00"):
        for mark, codec in WIDE_BOMS:
            if data.startswith(mark):
                return codec
    return None

MAX_DETAIL_LINES = 100
"""Line numbers an ``ambiguous_match`` error carries in ``details["lines"]``."""
MAX_MESSAGE_LINES = 20
"""Distinct line numbers an error message names."""
MAX_HINTS = 10
"""Whitespace-insensitive matches a ``no_match`` error points at."""
MAX_HINT_OLD = 100_000
"""Longest ``old_string`` (characters) the ``no_match`` hint is searched for."""


class Document(NamedTuple):  # made on every edit: a tuple is the cheapest to make
    """A decoded text file: its text without BOM, whether it had one, and its codec
    (``utf-8``, or ``utf-16-le``... for a file with a wide BOM: :data:`WIDE_BOMS`)."""

    text: str
    bom: bool
    codec: str = "utf-8"

    @property
    def mark(self) -> bytes:
        """The BOM's bytes (``b""`` for a file without one)."""
        return _MARKS[self.codec] if self.bom else b""

    def encode(self, text: str | None = None) -> bytes:
        """Bytes of ``text`` (default: this document's) in this document's encoding, with
        the BOM if it had one."""
        body = (self.text if text is None else text).encode(self.codec)
        return self.mark + body if self.bom else body


def _not_text_nul(path: str | None, offset: int | None = None) -> FsError:
    details = {} if offset is None else {"byte_offset": offset}
    return fs_error("not_text", f"{path or 'file'} contains NUL bytes; it is not text",
                    path=path, details=details)


def _not_text_utf8(path: str | None, offset: int) -> FsError:
    return fs_error("not_text", f"{path or 'file'} is not valid UTF-8 (byte {offset})",
                    path=path, details={"byte_offset": offset})


def decode(data: bytes, path: str | None = None, *, wide: bool = True) -> Document:
    """Decode file bytes, or raise ``not_text``. ``wide=False``: a UTF-16/32 file is
    ``not_text`` too (formats that are UTF-8 by definition: notebooks)."""
    codec = wide_codec(data) if wide else None
    if codec is not None:
        return _decode_wide(data, codec, path)
    bom = data.startswith(BOM)
    body = data[len(BOM):] if bom else data
    if b"\x00" in body:
        raise _not_text_nul(path)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_text_utf8(path, exc.start) from exc
    return Document(text=text, bom=bom)


def _decode_wide(data: bytes, codec: str, path: str | None) -> Document:
    mark = _MARKS[codec]
    try:
        text = data[len(mark):].decode(codec)
    except UnicodeDecodeError as exc:
        raise fs_error("not_text", f"{path or 'file'} is not valid {codec.upper()} (byte "
                       f"{len(mark) + exc.start})", path=path,
                       details={"byte_offset": len(mark) + exc.start}) from exc
    if "\x00" in text:
        raise _not_text_nul(path)
    return Document(text=text, bom=True, codec=codec)


def normalize_newlines(s: str) -> str:
    """``\\r\\n`` to ``\\n``."""
    return s.replace("\r\n", "\n")


_OTHER_BREAKS = "\v\f\x1c\x1d\x1e\x85\u2028\u2029"
"""What ``str.splitlines`` breaks lines at besides ``\\n``, ``\\r\\n`` and ``\\r``."""


def split_lines(text: str) -> list[str]:
    """Lines without their terminators (``\\n`` or ``\\r\\n``); no phantom last line.

    A ``\\r`` that ends the text is dropped too, as if a ``\\n`` followed it. No
    Python work per line: one split for LF text. Text with CRs is split by
    ``str.splitlines``, which is that split when every break it made was at a ``\\n``
    (one count of them shows it) and the text does not end with a break of its own kind;
    else it is split at CRLF, and where a bare LF is left, joined by LF and split again."""
    if not text:
        return []
    if "\r" not in text:  # the common case
        lines = text.split("\n")
    else:
        # splitlines breaks at each \n (a \r\n once), and at each lone \r or other
        # break; with the final break the text ends with, no line follows it.
        newlines = text.count("\n")
        lines = text.splitlines()
        last = text[-1]
        if len(lines) == newlines + (last != "\n") and last not in _OTHER_BREAKS:
            return lines  # no break but the newlines and a final \r: the same lines
        lines = text.split("\r\n")
        if len(lines) - 1 != newlines:  # a bare LF too: rejoined, split again
            lines = "\n".join(lines).split("\n")
        if lines[-1].endswith("\r"):
            lines[-1] = lines[-1][:-1]
            return lines
    if lines[-1] == "":
        lines.pop()
    return lines


def lines_around(text: str, start: int, end: int, context: int,
                 start_line: int | None = None) -> tuple[int, list[str]]:
    """The lines covering ``text[start:end]`` plus ``context`` lines on each side, and the
    1-based number of the first; only that region of ``text`` is split. ``start_line``,
    the line of ``start`` when the caller knows it, spares counting from offset 0."""
    rfind, find = text.rfind, text.find
    lo = start
    for _ in range(context + 1):
        lo = rfind("\n", 0, lo) if lo > 0 else -1
        if lo < 0:
            break
    lo = lo + 1 if lo >= 0 else 0
    hi = end
    # A span that ends with its newline already holds its last line whole.
    ends_whole = end > start and text[end - 1] == "\n"
    for _ in range(context if ends_whole else context + 1):
        nxt = find("\n", hi)
        if nxt < 0:
            hi = len(text)
            break
        hi = nxt + 1
    first = (text.count("\n", 0, lo) + 1 if start_line is None
             else start_line - text.count("\n", lo, start))
    return first, split_lines(text[lo:hi])


# -- streamed lines ---------------------------------------------------------------------


class LineDecoder:
    """One line of a streamed file, decoded piece by piece in O(piece) memory.

    Every byte fed is validated (a NUL byte or invalid UTF-8 anywhere in the line makes it
    ``not_text``, as a whole-file read would), but only the first ``keep`` characters are
    kept. A BOM is dropped only when the line starts the file (``at_file_start``); a
    U+FEFF anywhere else is text. ``offset`` is the line's first byte in the file: errors
    give ``byte_offset`` in file coordinates.
    """

    def __init__(self, keep: int, *, offset: int, at_file_start: bool = False,
                 path: str | None = None) -> None:
        self._keep = keep
        self._offset = offset
        self._path = path
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self._parts: list[str] = []
        self._kept = 0  # characters in _parts
        self._chars = 0  # characters decoded so far (a dropped BOM excluded)
        self._bytes = 0  # bytes fed so far
        self._bom_pending = at_file_start
        self._bom = False  # a BOM was dropped
        self._last = ""  # the last character decoded

    def feed(self, data: bytes, final: bool = False) -> None:
        """Decode the next bytes of the line (never its ``\\n``)."""
        nul = data.find(b"\x00")
        if nul >= 0:
            raise _not_text_nul(self._path, self._offset + self._bytes + nul)
        buffered = len(self._decoder.getstate()[0])
        try:
            text = self._decoder.decode(data, final)
        except UnicodeDecodeError as exc:
            at = self._offset + self._bytes - buffered + exc.start
            raise _not_text_utf8(self._path, at) from exc
        self._bytes += len(data)
        if not text:
            return
        if self._bom_pending:
            self._bom_pending = False
            if text[0] == "\ufeff":
                self._bom = True
                text = text[1:]
                if not text:
                    return
        self._chars += len(text)
        self._last = text[-1]
        if self._kept < self._keep:
            part = text[: self._keep - self._kept]
            self._parts.append(part)
            self._kept += len(part)

    def finish(self) -> tuple[str, int, int]:
        """The kept text (the ``\\r`` of a CRLF ending removed), and the whole line's
        length in characters and in bytes (BOM and line terminator excluded)."""
        self.feed(b"", final=True)
        chars = self._chars
        nbytes = self._bytes - (len(BOM) if self._bom else 0)
        if self._last == "\r":
            chars -= 1
            nbytes -= 1
        return "".join(self._parts)[:chars], chars, nbytes


# -- edit ---------------------------------------------------------------------------


@dataclass(slots=True)  # not frozen: a frozen dataclass sets each field by a call
class EditOutcome:
    """The new text and facts about the replacement (made once per edit, never changed)."""

    text: str
    count: int
    lines: list[int]
    """1-based first line of each replaced span, in the original text."""
    first_span: tuple[int, int]
    """Where the first replacement lies in the new text (start, end offsets)."""


class _CrlfMap:
    """Maps offsets in the LF-normalised text back to the original text."""

    def __init__(self, raw: str) -> None:
        # Position, in normalised coordinates, of each "\n" that was a "\r\n": the
        # length of the pieces before it, plus one "\n" for each of them. Made in C
        # (split, accumulate, map), with no Python work per line.
        self.crlf: list[int] = []
        self.normalized = raw
        pieces = raw.split("\r\n") if "\r" in raw else [raw]
        if len(pieces) > 1:
            before = itertools.accumulate(itertools.islice(map(len, pieces), len(pieces) - 1))
            self.crlf = list(map(operator.add, before, itertools.count()))
            self.normalized = "\n".join(pieces)

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
        return bool(self.crlf) and len(self.crlf) * 2 >= self.normalized.count("\n")


def iter_find(haystack: str, needle: str) -> Iterator[int]:
    """Start offsets of the non-overlapping occurrences, as ``str.replace`` sees them."""
    if not needle:
        raise ValueError("empty needle")
    pos = haystack.find(needle)
    while pos != -1:
        yield pos
        pos = haystack.find(needle, pos + len(needle))


def find_all(haystack: str, needle: str) -> list[int]:
    """Start offsets of the non-overlapping occurrences, as ``str.replace`` sees them."""
    return list(iter_find(haystack, needle))


def iter_lines(text: str, offsets: Iterable[int]) -> Iterator[int]:
    """1-based line numbers of ascending ``offsets``, counted incrementally: the whole
    sequence costs O(len(text)), not O(len(text)) per offset."""
    line, prev = 1, 0
    for offset in offsets:
        line += text.count("\n", prev, offset)
        prev = offset
        yield line


def line_counts(text: str, needle: str) -> Iterator[tuple[int, int]]:
    """``(line, matches starting on it)`` for each line where a non-overlapping occurrence
    of ``needle`` starts, ascending; O(len(text)), with Python work per line, not per
    match (a needle without a newline cannot span lines, so ``str.count`` per line is
    exact)."""
    if "\n" in needle:  # each match ends on a later line than it starts: one per line
        for line in iter_lines(text, iter_find(text, needle)):
            yield line, 1
        return
    line, prev = 1, 0
    pos = text.find(needle)
    while pos != -1:
        line += text.count("\n", prev, pos)
        prev = pos
        end = text.find("\n", pos)
        if end < 0:
            end = len(text)
        yield line, text.count(needle, pos, end)
        pos = text.find(needle, end)


def match_lines(text: str, needle: str) -> list[int]:
    """1-based line of each non-overlapping occurrence of ``needle``, in O(len(text))."""
    lines: list[int] = []
    for line, count in line_counts(text, needle):
        lines += [line] * count
    return lines


def _utf8_size(text: str) -> int:
    """The UTF-8 size of ``text``, for projecting an edit's size: a lone surrogate counts
    its three bytes rather than raising (the caller refuses such text as
    ``invalid_arguments`` when it is stored)."""
    return len(text.encode("utf-8", "surrogatepass"))


def apply_edit(raw: str, old: str, new: str, *, replace_all: bool,
               path: str | None = None, max_bytes: int | None = None,
               bom: bool = False, size: int | None = None) -> EditOutcome:
    """Replace ``old`` by ``new`` literally, or raise ``no_match``/``ambiguous_match``.

    With ``max_bytes``, raise ``too_large`` (details ``size``, ``cap``, ``result``) when
    the file would exceed it, before the new text is built: the size is projected from the
    matches.
    ``bom`` says the file carries a BOM, which counts against ``max_bytes``; ``size`` is
    the UTF-8 size of ``raw`` when the caller knows it (the bytes it decoded).
    Costs O(len(raw) + size of the result): for one match, one search through the
    text, the replacement, and counts over the text before the match only (a multi-line
    edit of a file with CRs adds a search for the longest line of ``old``, or two counts
    over the whole text where that line is not unique: :func:`_single_crlf_edit`).
    """
    old_n, new_n = old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
    if not old_n:
        raise fs_error("invalid_arguments", "old_string must not be empty", path=path)
    if "\r" in raw and "\r" not in old_n and "\r" not in new_n:
        done = _single_crlf_edit(raw, old_n, new_n, path, max_bytes, bom, size)
        if done is not None:
            return done
    # Most files hold no CR at all: then the text is its own LF-normalised form.
    m = _CrlfMap(raw) if "\r" in raw else None
    text = raw if m is None else m.normalized
    first = text.find(old_n)
    if first < 0:
        raise _no_match(text, old_n, path)
    # A second match from the end of the first (non-overlapping, as str.replace sees
    # them): with none, the first was the only one and the text was scanned once.
    single = text.find(old_n, first + len(old_n)) < 0
    count = 1 if single else text.count(old_n)
    if count > 1 and not replace_all:
        raise _ambiguous(text, old_n, count, path)

    if m is None or not m.crlf:  # no CRLF: raw is text and each replacement is new_n
        if max_bytes is not None:
            # ASCII (most edits) is as many bytes as characters: no encoding needed.
            growth = (len(new_n) - len(old_n)) if new_n.isascii() and old_n.isascii() \
                else _utf8_size(new_n) - _utf8_size(old_n)
            if size is None:
                size = _utf8_size(raw)
            if size + count * growth + (len(BOM) if bom else 0) > max_bytes:
                _check_size(size + count * growth, bom, max_bytes, path)
        if count == 1:
            # One pass that copies once (slicing and concatenating would copy twice).
            new_text = text.replace(old_n, new_n, 1)
            lines = [text.count("\n", 0, first) + 1]
        else:
            new_text = text.replace(old_n, new_n)
            lines = match_lines(text, old_n)
        return EditOutcome(text=new_text, count=count, lines=lines,
                           first_span=(first, first + len(new_n)))

    assert m is not None
    default_crlf = m.mostly_crlf
    new_crlf = new_n.replace("\n", "\r\n")  # built once, shared by every CRLF span
    starts = find_all(text, old_n)

    def spans() -> Iterator[tuple[int, int, bool]]:
        """(raw start, raw end, CRLF replacement) of each match."""
        for s in starts:
            e = s + len(old_n)
            uses = m.span_uses_crlf(s, e)
            yield m.to_raw(s), m.to_raw(e), default_crlf if uses is None else uses

    if max_bytes is not None:
        new_b, new_crlf_b = _utf8_size(new_n), _utf8_size(new_crlf)
        old_b = _utf8_size(old_n)
        size = _utf8_size(raw)
        for rs, re_, crlf in spans():
            # The raw span is old_n plus one "\r" per CRLF newline inside it.
            size += (new_crlf_b if crlf else new_b) - old_b - (re_ - rs - len(old_n))
        _check_size(size, bom, max_bytes, path)

    pieces: list[str] = []
    prev = 0
    for rs, re_, crlf in spans():
        pieces.append(raw[prev:rs])
        pieces.append(new_crlf if crlf else new_n)
        prev = re_
    pieces.append(raw[prev:])
    # The text before the first match is unchanged, so its offsets hold in the new text.
    first = m.to_raw(starts[0])
    return EditOutcome(text="".join(pieces), count=count, lines=match_lines(text, old_n),
                       first_span=(first, first + len(pieces[1])))


def _single_crlf_edit(raw: str, old_n: str, new_n: str, path: str | None,
                      max_bytes: int | None, bom: bool, size: int | None
                      ) -> EditOutcome | None:
    """:func:`apply_edit`'s answer for the common edits of a file with CRs: no CR in
    ``old_n`` or ``new_n``, and exactly one match, made of the file's CRLFs where
    ``old_n`` has newlines. ``None`` when that is not shown cheaply, and the caller takes
    the general path (which also words the errors).

    The LF-normalised text is ``raw`` with the CR of each CRLF dropped. A string with no
    newline matches there exactly where it matches ``raw``, and goes in as it is.

    Otherwise ``new_n`` goes in with CRLF newlines (``new_r``), where ``old_n`` with
    CRLF newlines (``old_r``) matches ``raw``: such a match is one of ``old_n`` in the
    normalised text, and the general path puts in CRLFs where the replaced newlines were
    CRLFs. What is left to show is that ``old_n`` has no other match there, such as one
    through a bare LF. The lines of ``old_n`` hold no newline or CR, so each of its
    matches holds its longest line verbatim in ``raw`` too: if that line occurs once in
    ``raw``, every match starts at the one place that puts it there (one search of
    ``raw``, where two counts of its newlines would cost four). Failing that, or when
    ``old_n`` has no newline (its match then takes the file's usual ending), two counts
    show whether every newline of ``raw`` is a CRLF, which makes the matches of
    ``old_r`` in ``raw`` exactly those of ``old_n``, and CRLF the usual ending."""
    if "\n" not in old_n and "\n" not in new_n:
        old_r, new_r = old_n, new_n
        first = _only_match(raw, old_r)
    else:
        old_r, new_r = old_n.replace("\n", "\r\n"), new_n.replace("\n", "\r\n")
        first = _only_crlf_match(raw, old_n, old_r)
    if first < 0:
        return None
    if max_bytes is not None:
        if size is None:
            size = _utf8_size(raw)
        _check_size(size + _utf8_size(new_r) - _utf8_size(old_r), bom,
                    max_bytes, path)
    return EditOutcome(text=raw.replace(old_r, new_r, 1), count=1,
                       lines=[raw.count("\n", 0, first) + 1],
                       first_span=(first, first + len(new_r)))


def _only_crlf_match(raw: str, old_n: str, old_r: str) -> int:
    """Where ``old_r`` (``old_n`` with CRLF newlines) matches ``raw``, if that is shown
    to be the only match of ``old_n`` in the normalised text; -1 otherwise."""
    # A match with no newline takes the file's usual ending for new_n's newlines: only
    # the counts tell that. One with newlines takes the CRLFs it is made of.
    line = max(old_n.split("\n"), key=len) if "\n" in old_n else ""
    if line:  # the first longest: old_r.find finds this one
        at = raw.find(line)
        if at < 0:
            return -1
        if raw.find(line, at + 1) < 0:  # once, overlaps included
            first = at - old_r.find(line)  # where a match holding this copy starts
            return first if first >= 0 and raw.startswith(old_r, first) else -1
    newlines = raw.count("\n")
    if not newlines or raw.count("\r\n") != newlines:
        return -1
    return _only_match(raw, old_r)


def _only_match(text: str, needle: str) -> int:
    """Where ``needle`` matches ``text`` if that is its only match (none after it, as
    ``str.replace`` counts them); -1 otherwise."""
    first = text.find(needle)
    if first < 0 or text.find(needle, first + len(needle)) >= 0:
        return -1
    return first


def _check_size(size: int, bom: bool, cap: int, path: str | None) -> None:
    size += len(BOM) if bom else 0
    if size > cap:
        raise fs_error(
            "too_large",
            f"the edit would make {path or 'the file'} {size} bytes, over the {cap}-byte "
            "cap for whole-file edits and writes",
            path=path, details={"size": size, "cap": cap, "result": True})


def _fmt_lines(pairs: Iterable[tuple[int, int]], total: int | None = None) -> str:
    """``(line, count)`` pairs as '1, 3 (2 times), 5', and how many matches ``total``
    leaves unnamed."""
    shown, named = [], 0
    for line, count in pairs:
        shown.append(f"{line} ({count} times)" if count > 1 else str(line))
        named += count
    rest = (total if total is not None else 0) - named
    return ", ".join(shown) + (f", and {rest} more on later lines" if rest > 0 else "")


def _group(lines: Iterable[int]) -> list[tuple[int, int]]:
    """Ascending line numbers as ``(line, repeats)`` pairs."""
    pairs: list[tuple[int, int]] = []
    for line in lines:
        if pairs and pairs[-1][0] == line:
            pairs[-1] = (line, pairs[-1][1] + 1)
        else:
            pairs.append((line, 1))
    return pairs


def _ambiguous(text: str, old: str, count: int, path: str | None) -> FsError:
    """``ambiguous_match`` naming the first lines (bounded work after them, bounded size)."""
    detail: list[int] = []  # line of each of the first MAX_DETAIL_LINES matches
    named: list[tuple[int, int]] = []  # the first MAX_MESSAGE_LINES lines, with counts
    for line, on_line in line_counts(text, old):
        if len(detail) < MAX_DETAIL_LINES:
            detail += [line] * min(on_line, MAX_DETAIL_LINES - len(detail))
        if len(named) < MAX_MESSAGE_LINES:
            named.append((line, on_line))
        elif len(detail) >= MAX_DETAIL_LINES:
            break  # later lines change neither the details nor the message
    plural = "s" if len(named) > 1 else ""
    return fs_error(
        "ambiguous_match",
        f"old_string matches {count} times (line{plural} {_fmt_lines(named, count)}); "
        "add context to make it unique, or set replace_all to true",
        path=path,
        details={"lines": detail, "count": count, "lines_truncated": count > len(detail)})


_WS = re.compile(r"\s+")


def whitespace_matches(text: str, old: str, limit: int = MAX_HINTS) -> list[int]:
    """Offsets of up to ``limit`` non-overlapping spans of ``text`` that equal ``old``
    except for whitespace, in O(len(text) + len(old)).

    A span holds the whitespace-separated tokens of ``old`` in order, whole (file
    whitespace may be added, changed or dropped only where ``old`` has whitespace);
    where ``old`` starts or ends with whitespace, the span must start or end at a token
    boundary of ``text`` (``version = 1\\n`` is not a match inside ``version = 10``).

    Found by ``str.find`` of the whitespace-free ``old`` in the whitespace-free text,
    each candidate mapped back to ``text`` (its span: from its first character to its
    last, whitespace between included) and checked there within that span; each check is
    charged the span's length against a budget proportional to ``len(text)``, so a text
    of many near-misses yields fewer hints, never more work.
    """
    tokens = [t for t in _WS.split(old) if t]
    if not tokens or len(old) > MAX_HINT_OLD:
        return []
    needle = "".join(tokens)
    pattern: re.Pattern[str] | None = None  # compiled for the first candidate
    lead, trail = old[0].isspace(), old[-1].isspace()
    stripped = _WS.sub("", text)
    runs = _WS.finditer(text)  # the whitespace runs of text, in order
    run = next(runs, None)
    removed = 0  # whitespace characters of text before the current candidate
    # The same walk for the candidate's last character (ascending too).
    end_runs = _WS.finditer(text)
    end_run = next(end_runs, None)
    end_removed = 0
    budget = 4 * (len(text) + len(needle)) + 65_536
    found: list[int] = []
    p = stripped.find(needle)
    while p != -1 and len(found) < limit and budget > 0:
        while run is not None and run.start() <= p + removed:
            removed += run.end() - run.start()
            run = next(runs, None)
        start = p + removed  # candidates ascend, so this walk is linear overall
        last = p + len(needle) - 1
        while end_run is not None and end_run.start() <= last + end_removed:
            end_removed += end_run.end() - end_run.start()
            end_run = next(end_runs, None)
        end = last + end_removed + 1  # a match spans exactly [start, end)
        budget -= end - start
        if pattern is None:
            pattern = re.compile(r"\s*".join(re.escape(t) for t in tokens))
        mt = pattern.match(text, start, end)
        if (mt is not None
                and (not lead or start == 0 or text[start - 1].isspace())
                and (not trail or mt.end() == len(text) or text[mt.end()].isspace())):
            found.append(start)
            p = stripped.find(needle, p + len(needle))
        else:
            p = stripped.find(needle, p + 1)
    return found


def _no_match(text: str, old: str, path: str | None) -> FsError:
    """``no_match``, with a hint where a whitespace-insensitive match exists."""
    details: dict[str, object] = {}
    hint = ""
    found = list(iter_lines(text, whitespace_matches(text, old)))
    if found:
        details["similar_lines"] = found
        pairs = _group(found)
        plural = "s" if len(pairs) > 1 else ""
        hint = (f" A match that differs only in whitespace or line endings exists at "
                f"line{plural} {_fmt_lines(pairs)}; it was not used. Read those lines and "
                "copy the text exactly.")
    return fs_error("no_match", "old_string was not found in the file." + hint,
                    path=path, details=details)
