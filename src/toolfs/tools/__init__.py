"""``read``, ``write`` and ``edit`` as plain functions over a
:class:`~toolfs.policy.PolicyFileSystem` (the other three of the six tools, ``glob``,
``grep`` and ``ls``, are in :mod:`toolfs.tools.search`).

The tools import no backend: they call ``open``/``pipe_file`` on the policy filesystem,
whose contract (see :mod:`toolfs.policy.filesystem`) supplies versions and enforces the
rules. Each returns a canonical result or raises :class:`~toolfs.errors.FsError`.
"""

from __future__ import annotations

from toolfs._trusted import trusted
from toolfs.backends import Create
from toolfs.errors import FsError, fs_error
from toolfs.formats.media import SNIFF_BYTES, MediaType, read_media, sniff
from toolfs.formats.merge import Rebased, merge_edit
from toolfs.formats.text import (
    BOM,
    Document,
    EditOutcome,
    LineDecoder,
    apply_edit,
    decode,
    lines_around,
    split_lines,
    wide_codec,
)
from toolfs.policy.filesystem import ObservedFile, PolicyFileSystem
from toolfs.render import MAX_LINE_CHARS
from toolfs.results import EditResult, LineCut, MediaResult, ReadResult, WriteResult
from toolfs.schemas import DEFAULT_LIMIT, EditArgs, ReadArgs, WriteArgs

SNIPPET_CONTEXT = 3
STREAM_LINE_CHARS = 4 * MAX_LINE_CHARS
"""Characters of each line a streamed read keeps (display shows ``MAX_LINE_CHARS``)."""
# The fields each result is built with (see toolfs._trusted): the values are made here.
_READ_SET = frozenset({"path", "version", "lines", "start_line", "line_count",
                       "total_lines", "size", "partial"})
_MERGE_FIELDS = frozenset({"merged", "merged_lines"})  # at their defaults unless merged
_WRITE_SET = frozenset(WriteResult.model_fields) - _MERGE_FIELDS
_EDIT_SET = frozenset(EditResult.model_fields) - _MERGE_FIELDS


def read(fs: PolicyFileSystem, args: ReadArgs) -> ReadResult | MediaResult:
    """Numbered lines ``offset .. offset+limit-1`` of a UTF-8 file; an image, or pages
    ``offset .. offset+limit-1`` of a PDF (see :mod:`toolfs.formats.media`)."""
    return read_file(fs, args.file_path, args.offset, args.limit)


MAX_OFFSET = 2**63 - 1
"""The largest ``offset`` a read accepts (more lines than any file can hold)."""


def read_file(fs: PolicyFileSystem, file_path: str, offset: int | None = None,
              limit: int | None = None) -> ReadResult | MediaResult:
    """:func:`read` with the arguments given one by one, already valid."""
    return _read(fs, file_path, offset, limit, media=True)


def read_text(fs: PolicyFileSystem, file_path: str, offset: int | None = None,
              limit: int | None = None) -> ReadResult:
    """:func:`read_file` of text only: an image or a PDF is ``not_text`` (for tools whose
    results are text alone, such as Anthropic's text editor)."""
    result = _read(fs, file_path, offset, limit, media=False)
    assert isinstance(result, ReadResult)
    return result


def _read(fs: PolicyFileSystem, file_path: str, offset: int | None, limit: int | None, *,
          media: bool) -> ReadResult | MediaResult:
    asked_limit = limit
    offset = offset or 1
    limit = limit or DEFAULT_LIMIT
    if offset > MAX_OFFSET:
        # It is shown back (`start_line`), and Python refuses to print an int of more
        # than 4,300 digits: no file has this many lines anyway.
        raise fs_error("invalid_arguments", f"offset must be at most {MAX_OFFSET}",
                       details={"argument": "offset", "maximum": MAX_OFFSET})
    with fs.open(file_path, "rb") as f:
        # The first bytes are in the buffer already (the first block: no request, and a
        # file over the cap stays streamed): an image or a PDF is told by them before
        # any text decoding.
        if media:
            kind = sniff(f.read(min(SNIFF_BYTES, fs.first_block)))
            f.seek(0)
            if kind is not None:
                return _read_media(fs, f, kind, offset, asked_limit)
        if f.complete:
            return _read_whole(f, offset, limit, fs)
        wide = wide_codec(f.read(4))
        f.seek(0)
        if wide is not None:
            raise fs_error(
                "too_large", f"{f.path} is {wide.upper()} text of {f.size} bytes, over the "
                f"{fs.size_cap}-byte cap for reading UTF-16/32 text (read whole only)",
                path=f.path, details={"size": f.size, "cap": fs.size_cap,
                                      "operation": "read"})
        return _read_stream(f, offset, limit)


def _read_media(fs: PolicyFileSystem, f: ObservedFile, media: MediaType, offset: int,
                limit: int | None) -> MediaResult:
    if not f.complete:  # over the size cap: an image or a PDF is only read whole
        raise fs_error(
            "too_large", f"{f.path} is a {media.format} file of {f.size} bytes, over the "
            f"{fs.size_cap}-byte cap for reading images and PDFs", path=f.path,
            details={"size": f.size, "cap": fs.size_cap, "operation": "read_media"})
    return read_media(f.read(), media, path=f.path, version=f.version, size=f.size,
                      offset=offset, limit=limit)


def _note_codec(fs: PolicyFileSystem, path: str, codec: str) -> None:
    """Remember (or forget) that ``path`` is UTF-16/32 text, for a later ``write``."""
    if codec != "utf-8":
        if len(fs.text_codecs) >= 10_000:  # bounded: the oldest go
            del fs.text_codecs[next(iter(fs.text_codecs))]
        fs.text_codecs[path] = codec
    elif fs.text_codecs:
        fs.text_codecs.pop(path, None)


def _read_whole(f: ObservedFile, offset: int, limit: int,
                fs: PolicyFileSystem | None = None) -> ReadResult:
    doc = decode(f.read(), f.path)
    if fs is not None:
        _note_codec(fs, f.path, doc.codec)
    lines = split_lines(doc.text)
    window = lines[offset - 1: offset - 1 + limit]
    # Trusted values built here: skip re-validating a list of up to `limit` lines.
    return trusted(ReadResult, _READ_SET, {
        "path": f.path, "version": f.version, "lines": window, "start_line": offset,
        "line_count": len(window), "total_lines": len(lines), "size": f.size,
        "partial": len(window) < len(lines), "truncated": False, "cut_lines": None})


def _read_stream(f: ObservedFile, offset: int, limit: int) -> ReadResult:
    """Scan a file over the whole-file cap block by block, keeping only the window.

    O(file size) time and O(block + window) memory: lines before the window are only
    counted (``bytes.count``), never kept or decoded; each window line is validated
    whole but only its first :data:`STREAM_LINE_CHARS` characters are kept (the cut is
    recorded in ``ReadResult.cut_lines``). The scan stops once the window is complete,
    so the total is known only if it reached the end.
    """
    window: list[str] = []
    cuts: dict[int, LineCut] = {}
    number = 0  # lines completed so far
    pending = False  # bytes of an unfinished line were seen (kept in `line` if in window)
    line: LineDecoder | None = None  # the window line being decoded
    more = True
    while len(window) < limit:
        base = f.tell()
        chunk = f.read(f.block_size)
        if not chunk:
            more = False
            if pending:  # a last line without a final newline
                number += 1
                if line is not None:
                    _keep(window, cuts, number, line)
            break
        i, n = 0, len(chunk)
        if number + 1 < offset:  # still before the window: count lines, keep nothing
            skip = offset - 1 - number  # newlines to pass
            newlines = chunk.count(b"\n")
            if newlines < skip:
                number += newlines
                pending = chunk[-1:] != b"\n"
                continue
            for _ in range(skip):
                i = chunk.index(b"\n", i) + 1
            number, pending = number + skip, False
        while i < n:
            if line is None:
                line = LineDecoder(STREAM_LINE_CHARS, offset=base + i,
                                   at_file_start=base + i == 0, path=f.path)
            nl = chunk.find(b"\n", i)
            line.feed(chunk[i:n if nl < 0 else nl])
            if nl < 0:
                pending = True
                break
            number, pending, i = number + 1, False, nl + 1
            _keep(window, cuts, number, line)
            line = None
            if len(window) == limit:
                more = i < n or f.tell() < f.size
                break
    return trusted(ReadResult, _READ_SET | {"cut_lines"}, {
        "path": f.path, "version": f.version, "lines": window, "start_line": offset,
        "line_count": len(window), "total_lines": None if more else number,
        "size": f.size, "partial": True, "truncated": False, "cut_lines": cuts or None})


def _keep(window: list[str], cuts: dict[int, LineCut], number: int,
          line: LineDecoder) -> None:
    """Append a finished window line, recording its full size if only a prefix is kept."""
    text, chars, nbytes = line.finish()
    if len(text) < chars:
        cuts[number] = LineCut(chars=chars, bytes=nbytes)
    window.append(text)


def write(fs: PolicyFileSystem, args: WriteArgs) -> WriteResult:
    """Create or replace a file with ``content``, on the condition observed as it starts."""
    return write_file(fs, args.file_path, args.content)


def write_file(fs: PolicyFileSystem, file_path: str, content: str) -> WriteResult:
    """:func:`write` with the arguments given one by one, already valid."""
    pending = fs.prepare_write(file_path, operation="write")
    data = _check_text(content, pending.path)
    # A UTF-16/32 file this context read as such stays in its encoding, behind its BOM
    # (known from that read: no request); a new file is UTF-8.
    codec = None if isinstance(pending.mode, Create) else fs.text_codecs.get(pending.path)
    if codec is not None:
        data = Document(content, bom=True, codec=codec).encode()
    commit = pending.commit(data)
    if commit.merged:
        return WriteResult(path=commit.path, action="updated", version=commit.version,
                           size=commit.size, merged=True, merged_lines=list(commit.theirs))
    return trusted(WriteResult, _WRITE_SET, {
        "path": commit.path, "action": "created" if commit.created else "updated",
        "version": commit.version, "size": commit.size, "merged": False,
        "merged_lines": None})


def edit(fs: PolicyFileSystem, args: EditArgs) -> EditResult:
    """Replace ``old_string`` by ``new_string`` in the file as this context observed it.

    The result is committed through the handle it was computed from, so it lands only on
    the version those bytes have; a parallel change (even by this context) makes it stale.
    """
    return edit_file(fs, args.file_path, args.old_string, args.new_string, args.replace_all)


def edit_file(fs: PolicyFileSystem, file_path: str, old_string: str, new_string: str,
              replace_all: bool = False) -> EditResult:
    """:func:`edit` with the arguments given one by one, already valid."""
    with fs.open(file_path, "rb", intent="edit") as f:
        data = f.read()
        doc = decode(data, f.path)
        _note_codec(fs, f.path, doc.codec)
        try:
            # The cap is checked on the projected size, before the new text is built.
            outcome = apply_edit(doc.text, old_string, new_string,
                                 replace_all=replace_all, path=f.path,
                                 max_bytes=fs.size_cap, bom=doc.bom,
                                 size=len(data) - (len(BOM) if doc.bom else 0)
                                 if doc.codec == "utf-8" else None)
        except FsError:
            # The model matched against what it read; if that is outdated, "read it
            # again" is the useful answer, not "no match".
            if f.cached:
                f.verify()
            raise
        # The rest of the file was valid text when read; only new_string is new.
        _check_text(new_string, f.path)
        # The text before the first change is unchanged: its line is the first match's.
        start, snippet = lines_around(outcome.text, *outcome.first_span, SNIPPET_CONTEXT,
                                      start_line=outcome.lines[0])
        # Each text is a whole file's worth of memory: the old one goes before the new
        # bytes are made, the new one before the store reads the file back to check it,
        # so that an edit holds two copies of the file at a time, not four (hence
        # Document.encode written out: it would keep the old text alive).
        count, lines, mark, text = outcome.count, outcome.lines, doc.mark, outcome.text
        codec = doc.codec  # UTF-16/32 with a BOM: written back in it (toolfs.formats.text)
        del doc, outcome
        new_data = text.encode(codec)  # valid: checked text around checked new_string
        del text
        if mark:
            new_data = mark + new_data
        # Only if the file changed since it was read and the policy merges: the same
        # edit on the current text, when the lines it matched were left untouched.
        merged: list[EditOutcome] = []

        def rebase(current: bytes) -> Rebased | None:
            done = merge_edit(decode(data).text, current, old_string, new_string,
                              replace_all=replace_all, path=f.path, max_bytes=fs.size_cap)
            if done is None:
                return None
            merged[:] = [done[0]]
            return done[1]

        commit = f.commit(new_data, operation="edit", rebase=rebase)
    if commit.merged:
        on = merged[0]
        start, snippet = lines_around(on.text, *on.first_span, SNIPPET_CONTEXT,
                                      start_line=on.lines[0])
        return EditResult(path=commit.path, replacements=on.count, replace_all=replace_all,
                          version=commit.version, lines=on.lines, snippet=snippet,
                          snippet_start=start, merged=True, merged_lines=list(commit.theirs))
    return trusted(EditResult, _EDIT_SET, {
        "path": commit.path, "replacements": count, "replace_all": replace_all,
        "version": commit.version, "lines": lines, "snippet": snippet,
        "snippet_start": start, "merged": False, "merged_lines": None})


def _check_text(text: str, path: str) -> bytes:
    """Refuse text that could not be stored and read back (lone surrogates, NUL); its
    UTF-8 bytes otherwise (a write stores them: the text is encoded once)."""
    if "\x00" in text:
        raise fs_error("invalid_arguments", "the text contains a NUL character; only text "
                       "can be written", path=path)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise fs_error("invalid_arguments",
                       "the text is not valid Unicode (a lone surrogate)", path=path) from exc
