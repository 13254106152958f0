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
from toolfs.text import apply_edit, count_lines, decode, split_lines

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
    return ReadResult(
        path=f.path, version=f.version, lines=window, start_line=offset,
        line_count=len(window), total_lines=len(lines), size=f.size,
        partial=len(window) < len(lines))


def _read_stream(f: ObservedFile, offset: int, limit: int) -> ReadResult:
    """Scan a file over the whole-file cap line by line, keeping only the window."""
    window: list[str] = []
    number = 0
    at_eof = False
    while len(window) < limit:
        raw = f.readline()
        if not raw:
            at_eof = True
            break
        number += 1
        if number >= offset:
            # Validate as we go: the window must be text, the rest is never held.
            window.append(split_lines(decode(raw, f.path).text)[0] if raw.strip(b"\r\n")
                          else "")
    if not at_eof and f.tell() >= f.size:
        at_eof = True
    return ReadResult(
        path=f.path, version=f.version, lines=window, start_line=offset,
        line_count=len(window), total_lines=number if at_eof else None, size=f.size,
        partial=True)


def write(fs: PolicyFileSystem, args: WriteArgs) -> WriteResult:
    """Create or replace a file with ``content``."""
    data = args.content.encode("utf-8", "surrogatepass")
    _check_text(data, args.file_path)
    commit = fs.pipe_file(args.file_path, data, operation="write")
    return WriteResult(path=commit.path, action="created" if commit.created else "updated",
                       version=commit.version, size=commit.size)


def edit(fs: PolicyFileSystem, args: EditArgs) -> EditResult:
    """Replace ``old_string`` by ``new_string`` in the file as this context observed it."""
    with fs.open(args.file_path, "rb", intent="edit") as f:
        doc = decode(f.read(), f.path)
        path, version = f.path, f.version
        try:
            outcome = apply_edit(doc.text, args.old_string, args.new_string,
                                 replace_all=args.replace_all, path=path)
        except FsError:
            # The model matched against what it read; if that is outdated, "read it
            # again" is the useful answer, not "no match".
            if f.cached:
                f.verify()
            raise
    data = doc.encode(outcome.text)
    _check_text(data, path)
    commit = fs.pipe_file(args.file_path, data, operation="edit", expected=version)
    new_lines = split_lines(outcome.text)
    first = outcome.lines[0]
    lo = max(1, first - SNIPPET_CONTEXT)
    span = count_lines(args.new_string) if args.new_string else 0
    hi = min(len(new_lines), first + span + SNIPPET_CONTEXT)
    return EditResult(
        path=commit.path, replacements=outcome.count, replace_all=args.replace_all,
        version=commit.version, lines=outcome.lines, snippet=new_lines[lo - 1: hi],
        snippet_start=lo)


def _check_text(data: bytes, path: str) -> None:
    """Refuse content that could not be read back as text (lone surrogates, NUL)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fs_error("invalid_arguments",
                       "content is not valid Unicode text (lone surrogate?)",
                       path=path) from exc
    if b"\x00" in data:
        raise fs_error("invalid_arguments", "content contains a NUL character; only text "
                       "can be written", path=path)
