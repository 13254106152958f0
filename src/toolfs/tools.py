"""The three tools as plain functions over a :class:`~toolfs.policy.PolicyFileSystem`.

The tools import no backend: they call ``open``/``pipe_file`` on the policy filesystem,
whose contract (see :mod:`toolfs.policy.filesystem`) supplies versions and enforces the
rules. Each returns a canonical result or raises :class:`~toolfs.errors.FsError`.
"""

from __future__ import annotations

from toolfs.errors import FsError, fs_error
from toolfs.policy.filesystem import ObservedFile, PolicyFileSystem
from toolfs.results import EditResult, ReadResult, WriteResult
from toolfs.schemas import DEFAULT_LIMIT, EditArgs, ReadArgs, WriteArgs
from toolfs.text import apply_edit, decode, lines_around, split_lines

SNIPPET_CONTEXT = 3


def read(fs: PolicyFileSystem, args: ReadArgs) -> ReadResult:
    """Numbered lines ``offset .. offset+limit-1`` of a UTF-8 file."""
    offset = args.offset or 1
    limit = args.limit or DEFAULT_LIMIT
    with fs.open(args.file_path, "rb") as f:
        if f.complete:
            return _read_whole(f, offset, limit)
        return _read_stream(f, offset, limit)


def _read_whole(f: ObservedFile, offset: int, limit: int) -> ReadResult:
    doc = decode(f.read(), f.path)
    lines = split_lines(doc.text)
    window = lines[offset - 1: offset - 1 + limit]
    # Trusted values built here: skip re-validating a list of up to `limit` lines.
    return ReadResult.model_construct(
        path=f.path, version=f.version, lines=window, start_line=offset,
        line_count=len(window), total_lines=len(lines), size=f.size,
        partial=len(window) < len(lines))


def _read_stream(f: ObservedFile, offset: int, limit: int) -> ReadResult:
    """Scan a file over the whole-file cap block by block, keeping only the window.

    Lines before the window are only counted (``bytes.count``), never kept; the scan stops
    once the window is complete, so the total is known only if it reached the end.
    """
    window: list[str] = []
    number = 0  # lines completed so far
    carry = b""  # the unfinished last line of the previous block
    skipped_partial = False  # an unfinished line before the window was dropped, not kept
    more = True
    while len(window) < limit:
        chunk = f.read(f.block_size)
        if not chunk:
            more = False
            if carry or skipped_partial:  # a last line without a final newline
                number += 1
                if carry and number >= offset:
                    window.append(_line(carry, f.path))
                carry = b""
            break
        buf = carry + chunk
        newlines = buf.count(b"\n")
        if number + newlines + 1 < offset:
            # Everything here, the unfinished line included, lies before the window.
            number += newlines
            carry = b""
            skipped_partial = not buf.endswith(b"\n")
            continue
        skipped_partial = False
        *complete, carry = buf.split(b"\n")
        for i, raw in enumerate(complete):
            number += 1
            if number >= offset:
                window.append(_line(raw, f.path))
                if len(window) == limit:
                    more = i + 1 < len(complete) or bool(carry) or f.tell() < f.size
                    break
    return ReadResult.model_construct(
        path=f.path, version=f.version, lines=window, start_line=offset,
        line_count=len(window), total_lines=None if more else number, size=f.size,
        partial=True)


def _line(raw: bytes, path: str) -> str:
    """One line of a streamed file, validated as text (the rest is never decoded)."""
    text = decode(raw, path).text
    return text[:-1] if text.endswith("\r") else text


def write(fs: PolicyFileSystem, args: WriteArgs) -> WriteResult:
    """Create or replace a file with ``content``, on the condition observed as it starts."""
    pending = fs.prepare_write(args.file_path, operation="write")
    _check_text(args.content, pending.path)
    commit = pending.commit(args.content.encode("utf-8"))
    return WriteResult(
        path=commit.path, action="created" if commit.created else "updated",
        version=commit.version, size=commit.size)


def edit(fs: PolicyFileSystem, args: EditArgs) -> EditResult:
    """Replace ``old_string`` by ``new_string`` in the file as this context observed it.

    The result is committed through the handle it was computed from, so it lands only on
    the version those bytes have; a parallel change (even by this context) makes it stale.
    """
    with fs.open(args.file_path, "rb", intent="edit") as f:
        doc = decode(f.read(), f.path)
        try:
            outcome = apply_edit(doc.text, args.old_string, args.new_string,
                                 replace_all=args.replace_all, path=f.path)
        except FsError:
            # The model matched against what it read; if that is outdated, "read it
            # again" is the useful answer, not "no match".
            if f.cached:
                f.verify()
            raise
        # The rest of the file was valid text when read; only new_string is new.
        _check_text(args.new_string, f.path)
        commit = f.commit(doc.encode(outcome.text), operation="edit")
    start, snippet = lines_around(outcome.text, *outcome.first_span, SNIPPET_CONTEXT)
    return EditResult.model_construct(
        path=commit.path, replacements=outcome.count, replace_all=args.replace_all,
        version=commit.version, lines=outcome.lines, snippet=snippet, snippet_start=start)


def _check_text(text: str, path: str) -> None:
    """Refuse text that could not be stored and read back (lone surrogates, NUL)."""
    if "\x00" in text:
        raise fs_error("invalid_arguments", "the text contains a NUL character; only text "
                       "can be written", path=path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise fs_error("invalid_arguments",
                       "the text is not valid Unicode (a lone surrogate)", path=path) from exc
