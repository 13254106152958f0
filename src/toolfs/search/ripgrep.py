"""ripgrep as local ``grep``'s engine (``grep_engine="ripgrep"``, the default): where an
``rg`` binary is available (the ``ripgrep`` extra installs one, or one on ``PATH``),
ripgrep's answer defines which files of a local directory match.

One ``rg`` run per call, from the workspace's resolved root with the search path
relative to it, its output read in chunks as it comes (never held whole), stopped at the
call's deadline (its process group killed and reaped):

* ``files_with_matches``: ``rg --files-with-matches``, as bare ``rg -l``;
* ``count``: ``rg --count``;
* ``content``: ``rg --line-number --context``, each file's lines grouped.

Only the files that can still be shown are kept (the first ``head_limit + 1`` entries by
path: files, or lines), so memory does not grow with the tree; ``--stats`` gives the
number of files ripgrep searched.

The caller (:mod:`toolfs.tools.search`) turns the answer into a
:class:`~toolfs.results.GrepResult` through the same code as the Python engine, so
the output for the same matches is identical in every mode.

ripgrep runs with what holds for the Python engine: the deny rules as ``--glob !rule``
(and every path it reports is checked against them again), toolfs's temporary files
excluded, ``.gitignore`` only (no ``.ignore``, ``.rgignore``, global or ``.git/info``
rules; none above the root), hidden files skipped, symlinks not followed (no ``-L``),
the size cap as ``--max-filesize``, ``--crlf`` (a CR before a line's LF is not part of
the line), and RE2's meaning of the pattern (:func:`translate`; a pattern ripgrep
reads another way, or refuses, is searched by the Python engine). Differences from the
Python engine are listed in docs/contract.md ("grep engines").
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import signal
import subprocess
import sysconfig
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from toolfs import deadline

_ASCII_CLASSES = {
    "w": "0-9A-Za-z_", "d": "0-9", "s": "\\t\\n\\x0C\\r ",
}
"""RE2's Perl classes are ASCII (``\\s`` without ``\\v``); ripgrep's are Unicode."""

_found_binary: tuple[bool, str | None] = (False, None)
_lock = threading.Lock()

CHUNK = 1 << 18
"""Bytes read from ripgrep's output at a time."""
PIPE_BYTES = 1 << 20
"""The pipe's buffer asked for (ripgrep writes ahead of the parse up to it)."""
BATCH = 2048
"""Files named on one ``rg --line-number`` command line (step 2)."""


class Refused(Exception):
    """ripgrep cannot answer this call exactly (a pattern it refuses or reads another
    way, a search it did not run): the Python engine answers instead."""


def ripgrep_binary() -> str | None:
    """The ``rg`` to run: the one the ``ripgrep`` extra installed next to this Python,
    else one on ``PATH``; ``None`` when there is none (or it is older than ripgrep 13,
    whose ``--crlf`` and ``--stats`` output this module reads). Looked up once per
    process."""
    global _found_binary
    with _lock:
        if _found_binary[0]:
            return _found_binary[1]
        found: str | None = None
        candidates = [os.path.join(sysconfig.get_path("scripts"), "rg"), shutil.which("rg")]
        for candidate in candidates:
            if not candidate or not os.access(candidate, os.X_OK):
                continue
            try:
                out = subprocess.run([candidate, "--version"], capture_output=True,
                                     timeout=10, check=False).stdout
            except (OSError, subprocess.SubprocessError):
                continue
            words = out.split()
            if len(words) > 1 and words[0] == b"ripgrep":
                try:
                    major = int(words[1].split(b".")[0])
                except ValueError:
                    continue
                if major >= 13:
                    found = candidate
                    break
        _found_binary = (True, found)
        return found


_REPEAT = re.compile(r"\{\d+(,\d*)?\}")


def translate(pattern: str) -> str:
    """The pattern for ripgrep, meaning what RE2 means by it on a line of UTF-8 text:
    RE2's ASCII Perl classes (``\\w``, ``\\d``, ``\\s`` and their negations) spelled out
    as ASCII classes, ``\\b``/``\\B`` as ASCII word boundaries, a ``{`` that does not
    start a repetition as a literal (Rust reads ``{,n}`` as one), and inside a class
    ``[``, ``&``, ``~`` escaped (Rust's nested classes and set operations; literals to
    RE2). A class holding ``--`` (a set difference to Rust) raises :class:`Refused`."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    class_start = -1
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            i += 2
            low = e.lower()
            if low in _ASCII_CLASSES:
                body = _ASCII_CLASSES[low]
                if e.islower():
                    out.append(body if in_class else f"[{body}]")
                else:
                    out.append(f"[^{body}]")  # nested inside a class: a union
                continue
            if e in "bB" and not in_class:
                out.append(f"(?-u:\\{e})")
                continue
            out.append("\\" + e)
            continue
        if in_class:
            # `]` right after `[` or `[^` is a literal in RE2 and in Rust's syntax.
            if c == "]" and i > class_start:
                in_class = False
            elif c == "[":
                end = pattern.find(":]", i + 2) if pattern.startswith("[:", i) else -1
                if end > 0:
                    out.append(pattern[i:end + 2])
                    i = end + 2
                    continue
                out.append("\\[")
                i += 1
                continue
            elif c in "&~":
                out.append("\\" + c)
                i += 1
                continue
            elif c == "-" and pattern.startswith("--", i):
                raise Refused("a class with --")
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            class_start = j + 1 if j < n and pattern[j] == "]" else j
            out.append(pattern[i:j])
            i = j
            continue
        if c == "{" and _REPEAT.match(pattern, i) is None:
            out.append("\\{")
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def usable(pattern: str) -> bool:
    """Whether ripgrep can search ``pattern`` with RE2's meaning: not one that names a
    carriage return (ripgrep's ``--crlf`` refuses it; RE2 finds a lone CR)."""
    return "\r" not in pattern and "\\r" not in pattern.replace("\\\\", "")


# -- the process ---------------------------------------------------------------------


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Kill ripgrep's process group (its threads, anything it started) and reap it."""
    if process.poll() is None:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            process.kill()
    with contextlib.suppress(Exception):
        process.wait(timeout=5)
    if process.stdout is not None:
        process.stdout.close()


def stream(args: list[str], cwd: str, consume: Callable[[bytes], bool]) -> int:
    """Run ``args`` in ``cwd`` (its own process group), hand its output to ``consume``
    chunk by chunk (``consume`` returns False to stop it early), and return its exit
    status (``-1`` when stopped early). Past the call's deadline the group is killed
    and ``backend_error`` raised. Never holds more than one chunk of output."""
    process = subprocess.Popen(args, cwd=cwd, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    assert process.stdout is not None
    fd = process.stdout.fileno()
    # A larger pipe lets ripgrep's threads run ahead while this thread parses (64 KiB by
    # default; Linux only, up to its pipe-max-size): what it holds stays bounded.
    with contextlib.suppress(OSError, AttributeError, ImportError):
        import fcntl  # POSIX only, as this engine (toolfs.tools.search checks)

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    try:
        while True:
            left = deadline.remaining()
            if left is not None:
                ready, _, _ = select.select([fd], [], [], max(left, 0.0))
                if not ready:
                    raise deadline.exceeded("list", ".", may_have_changed=False)
            chunk = os.read(fd, CHUNK)
            if not chunk:
                break
            if not consume(chunk):
                return -1
        left = deadline.remaining()
        try:
            return process.wait(timeout=None if left is None else max(left, 0.01))
        except subprocess.TimeoutExpired as exc:
            raise deadline.exceeded("list", ".", may_have_changed=False) from exc
    finally:
        _stop(process)


# -- step 1: which files match -----------------------------------------------------------


@dataclass
class Counted:
    """Step 1's answer: the first matching files by path (each with its number of
    matching lines), enough to fill a result of ``keep`` entries, and ripgrep's count
    of the files it searched (``None`` when it did not say)."""

    files: list[tuple[str, int, str]]
    """``(display path, matching lines, path relative to the root as ripgrep named it)``."""
    searched: int | None
    more: bool
    """Files were dropped past those kept (the result is cut)."""


@dataclass
class _CountParser:
    """Reads ``rg --count --null --stats`` output (``./path\\0N\\n`` per file, every
    path starting with ``./``; then a blank line and the statistics) in chunks, keeping
    the files with the smallest paths whose weights reach ``keep``."""

    keep: int
    weighted: bool
    """Weight a file by its count (``content``: lines) rather than 1 (files, counts)."""
    counted: bool
    """``--count`` output; else ``--files-with-matches`` (``./path\\0`` per file)."""
    accept: Callable[[bytes], str | None]
    """Raw path -> the root-relative display path, or None to leave the file out."""
    files: list[tuple[str, int, str]] = field(default_factory=list)
    more: bool = False
    stats: bytearray = field(default_factory=bytearray)
    _buf: bytes = b""
    _in_stats: bool = False

    def feed(self, chunk: bytes) -> bool:
        if self._in_stats:
            if len(self.stats) < CHUNK:
                self.stats += chunk
            return True
        buf = self._buf + chunk if self._buf else chunk
        pos, n = 0, len(buf)
        while pos < n:
            if buf.startswith(b"\n", pos):  # the statistics follow
                self._in_stats = True
                self.stats += buf[pos:pos + CHUNK]
                self._buf = b""
                return True
            nul = buf.find(b"\0", pos)
            if nul < 0:
                break
            if not self.counted:  # `--files-with-matches`: ./path\0
                raw = buf[pos:nul]
                shown = self.accept(raw)
                if shown is not None:
                    self.files.append((shown, 1, os.fsdecode(raw[2:])))
                pos = nul + 1
                continue
            end = buf.find(b"\n", nul)
            if end < 0:
                break
            with contextlib.suppress(ValueError):
                count = int(buf[nul + 1:end])
                raw = buf[pos:nul]
                shown = self.accept(raw) if count > 0 else None
                if shown is not None:
                    self.files.append((shown, count, os.fsdecode(raw[2:])))
            pos = end + 1
        self._buf = buf[pos:]
        if len(self.files) > 2 * self.keep + 64:
            self._trim()
        return True

    def _trim(self) -> None:
        self.files.sort()
        weight = 0
        for i, (_, count, _raw) in enumerate(self.files):
            weight += count if self.weighted else 1
            if weight >= self.keep:
                if i + 1 < len(self.files):
                    self.more = True
                    del self.files[i + 1:]
                return

    def searched(self) -> int | None:
        found = re.search(rb"\n(\d+) files searched\n", b"\n" + bytes(self.stats))
        return int(found.group(1)) if found else None


def base_args(rg: str, *, regexp: str, ignore_case: bool, size_cap: int) -> list[str]:
    """Flags every run shares: no config file, ``--crlf``, the size cap, the case."""
    return [rg, "--no-config", "--null", "--crlf", "--no-messages", "--color=never",
            f"--max-filesize={size_cap}",
            "--ignore-case" if ignore_case else "--case-sensitive", "--regexp", regexp]


def walk_args(*, start: str, glob: str | None, deny_globs: list[str], fold_case: bool,
              gitignore: bool, ignore_files: list[str]) -> list[str]:
    """The walk's rules (ignore files, the glob, the deny rules) and its start."""
    args: list[str] = []
    if gitignore:
        args += ["--no-ignore-dot", "--no-ignore-global", "--no-ignore-exclude",
                 "--no-ignore-parent", "--no-require-git"]
        args += [f"--ignore-file={f}" for f in ignore_files]
    else:
        args.append("--no-ignore")
    if glob is not None:
        args.append(f"--glob={glob}")
    flag = "--iglob" if fold_case else "--glob"
    args += [f"{flag}=!{g}" for g in deny_globs]  # later globs win: the deny rules last
    return [*args, "--", start]


def count(rg: str, *, cwd: str, start: str, regexp: str, ignore_case: bool,
          size_cap: int, glob: str | None, deny_globs: list[str], fold_case: bool,
          gitignore: bool, ignore_files: list[str], keep: int, weighted: bool,
          counted: bool, accept: Callable[[bytes], str | None]) -> Counted:
    """Step 1 over ``start`` (``./`` or ``./sub/dir``, relative to ``cwd``): see the
    module docstring; ``counted=False`` runs ``--files-with-matches`` instead of
    ``--count`` (each file counts 1; ripgrep stops a file at its first match, as bare
    ``rg -l`` does). Raises :class:`Refused` when ripgrep did not search (it refused
    the pattern, say)."""
    args = base_args(rg, regexp=regexp, ignore_case=ignore_case, size_cap=size_cap)
    args += ["--count" if counted else "--files-with-matches", "--stats"]
    args += walk_args(start=start, glob=glob, deny_globs=deny_globs, fold_case=fold_case,
                      gitignore=gitignore, ignore_files=ignore_files)
    parser = _CountParser(keep=keep, weighted=weighted, counted=counted, accept=accept)
    status = stream(args, cwd, parser.feed)
    searched = parser.searched()
    if status not in (0, 1):
        # 2: ripgrep met an error on the way (a path longer than PATH_MAX, a file it
        # could not open) and left those files out; the Python engine answers in full.
        raise Refused(f"rg exited with {status}")
    parser._trim()
    return Counted(files=sorted(parser.files), searched=searched, more=parser.more)


# -- content: the lines, in one pass ---------------------------------------------------


Line = tuple[int, bool, bytes]
"""``(0-based line number, is context, the line's bytes without its ending)``."""


@dataclass
class Blocks:
    """``content`` mode's answer: the first matching files by path with their lines
    (enough for a result of ``keep`` lines), ripgrep's count of files searched."""

    files: list[tuple[str, list[Line]]]
    searched: int | None
    more: bool


def content(rg: str, *, cwd: str, start: str, regexp: str, ignore_case: bool,
            size_cap: int, glob: str | None, deny_globs: list[str], fold_case: bool,
            gitignore: bool, ignore_files: list[str], keep: int, context: int,
            accept: Callable[[bytes], str | None]) -> Blocks:
    """``rg --line-number --context`` over ``start``, read in chunks: each file's lines
    (at most ``keep``), only the files with the smallest paths whose lines reach
    ``keep`` held (ripgrep prints each file's lines together). Raises :class:`Refused`
    when ripgrep did not search."""
    args = base_args(rg, regexp=regexp, ignore_case=ignore_case, size_cap=size_cap)
    args += ["--line-number", "--with-filename", "--no-heading", "--no-context-separator",
             f"--context={context}", "--stats"]
    args += walk_args(start=start, glob=glob, deny_globs=deny_globs, fold_case=fold_case,
                      gitignore=gitignore, ignore_files=ignore_files)
    parser = _LineParser(keep=keep, accept=accept)
    status = stream(args, cwd, parser.feed)
    parser.switch(b"")
    searched = parser.searched()
    if status not in (0, 1):
        # 2: ripgrep met an error on the way (a path longer than PATH_MAX, a file it
        # could not open) and left those files out; the Python engine answers in full.
        raise Refused(f"rg exited with {status}")
    parser.trim()
    files = sorted(parser.blocks.items())
    return Blocks(files=files, searched=searched, more=parser.more)


@dataclass
class _LineParser:
    """Reads ``rg --line-number --null`` output (``./path\\0N:text\\n`` for a match,
    ``N-text`` for context; every path starts with ``./``; then a blank line and the
    statistics), a chunk's lines at once. A path holding a newline comes as pieces
    without a NUL, joined to the record they precede."""

    keep: int
    accept: Callable[[bytes], str | None]
    blocks: dict[str, list[Line]] = field(default_factory=dict)
    more: bool = False
    stats: bytearray = field(default_factory=bytearray)
    _held: int = 0  # lines in `blocks`
    _cutoff: str | None = None  # once files were dropped: the last path kept
    _buf: bytes = b""
    _piece: bytes | None = None
    _raw: bytes = b""
    _shown: str = ""
    _got: list[Line] | None = None
    _in_stats: bool = False

    def feed(self, chunk: bytes) -> bool:
        buf = self._buf + chunk if self._buf else chunk
        cut = buf.rfind(b"\n") + 1
        self._buf = buf[cut:]
        if self._in_stats:
            if len(self.stats) < CHUNK:
                self.stats += buf[:cut]
            return True
        lines = buf[:cut - 1].split(b"\n") if cut else []
        keep = self.keep
        for i, line in enumerate(lines):
            raw, sep, record = line.partition(b"\0")
            if not sep:
                if not line:  # the statistics follow (a notice may come before)
                    self._in_stats = True
                    self.stats += b"\n".join(lines[i:])[:CHUNK] + b"\n"
                    return True
                self._piece = line if self._piece is None else self._piece + b"\n" + line
                continue
            if self._piece is not None:
                if not raw.startswith(b"./"):
                    raw = self._piece + b"\n" + raw
                self._piece = None
            if raw != self._raw:
                self.switch(raw)
            got = self._got
            if got is not None and len(got) < keep:
                # `N:text` (a match) or `N-text` (context): the first `:` or `-` ends
                # the number (inlined: this runs once per line ripgrep prints).
                colon, dash = record.find(b":"), record.find(b"-")
                at = colon if dash < 0 or 0 <= colon < dash else dash
                if at <= 0:
                    continue
                text = record[at + 1:]
                if text[-1:] == b"\r":
                    text = text[:-1]  # the CR of a CRLF ending
                try:
                    got.append((int(record[:at]) - 1, at == dash, text))
                except ValueError:
                    continue
        return True

    def switch(self, raw: bytes) -> None:
        """The lines that follow are ``raw``'s (``b""``: the output ended)."""
        if self._got is not None:
            self._held += len(self._got)
            if not self._got:
                del self.blocks[self._shown]
        self._raw, self._got = raw, None
        if self._held > self.keep + 1024:  # a trim sorts the names held: not per file
            self.trim()
        if not raw:
            return
        shown = self.accept(raw)
        if shown is None:
            return
        if self._cutoff is not None and shown > self._cutoff:
            self.more = True
            return
        self._shown = shown
        self._got = self.blocks.setdefault(shown, [])

    def trim(self) -> None:
        """Keep the files with the smallest paths whose lines reach ``keep``; a file
        after the last of them cannot be shown (the result is full before it)."""
        held = 0
        names = sorted(self.blocks)
        for i, shown in enumerate(names):
            held += len(self.blocks[shown])
            if held >= self.keep:
                for later in names[i + 1:]:
                    del self.blocks[later]
                    self.more = True
                self._cutoff = shown
                break
        self._held = held

    def searched(self) -> int | None:
        found = re.search(rb"\n(\d+) files searched\n", b"\n" + bytes(self.stats))
        return int(found.group(1)) if found else None


__all__ = ["Blocks", "Counted", "Refused", "content", "count", "ripgrep_binary", "stream",
           "translate", "usable"]
