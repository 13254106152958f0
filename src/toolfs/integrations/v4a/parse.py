"""The V4A grammar: an update diff's hunks, a created file's text, and the
``*** Begin Patch`` envelope that names several files (see :mod:`toolfs.integrations.v4a` for the
format and its rules).

Parsing only reads the diff: it never sees the file, so every error here names a line of
the diff (``invalid_arguments``). The values it makes (:class:`Hunk`, :class:`Chunk`,
:class:`FileOperation`) are what :mod:`toolfs.integrations.v4a.apply` locates in a file.
"""

from __future__ import annotations

from collections.abc import Sequence
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
