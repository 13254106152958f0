"""ripgrep as a prefilter for local ``grep`` (``grep_engine="ripgrep"``): it says which
files cannot match.

toolfs's own engine (:mod:`toolfs.tools.search`) stays the judge of every answer.
ripgrep (the ``rg`` binary: the optional extra ``ripgrep`` installs it, or one on
``PATH``) walks the searched directory in parallel while toolfs lists it, and reports,
for each file it searched, how many lines match a translation of the pattern. Then, in
path order, a file toolfs lists is

* **counted as searched, without a read**, when ripgrep searched it and found no line
  (the translation matches every line RE2 matches on UTF-8 text, see
  :func:`translate`);
* **read and searched by toolfs's engine** otherwise: ripgrep found a line (the lines,
  counts and text checks are toolfs's own), or did not search it at all (binary by its
  NUL rule, over the size cap, unreadable, a symlink toolfs follows, a file its walk
  rules left out).

So the files, lines and counts are exactly those of the Python engine, and the walk
(confinement, deny rules, symlinks, ``.gitignore``, hidden files) is toolfs's own listing:
what ripgrep reports outside it is ignored. ripgrep's output never reaches the model.

Text that is not UTF-8 (Latin-1, say) is decoded by ripgrep with U+FFFD for each bad
sequence, and the pattern ripgrep runs also matches U+FFFD, so such a file always counts
as "found a line" and is read, and skipped as not text, by toolfs. One difference
remains, in a count only: a file starting with a UTF-16 byte-order mark that ripgrep
(which decodes UTF-16 then) finds no line in is counted as searched, where the Python
engine counts it as skipped (not text); its files and lines are the same (none).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sysconfig
import threading
from dataclasses import dataclass

from toolfs import deadline

_ASCII_CLASSES = {
    "w": "0-9A-Za-z_", "d": "0-9", "s": "\\t\\n\\x0C\\r ",
}
"""RE2's Perl classes are ASCII (``\\s`` without ``\\v``); ripgrep's are Unicode."""

_found_binary: tuple[bool, str | None] = (False, None)
_lock = threading.Lock()


def ripgrep_binary() -> str | None:
    """The ``rg`` to run: the one the ``ripgrep`` extra installed next to this Python,
    else one on ``PATH``; ``None`` when there is none (or it is too old: ``--include-zero``
    came with ripgrep 12). Looked up once per process."""
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
                if major >= 12:
                    found = candidate
                    break
        _found_binary = (True, found)
        return found


def translate(pattern: str) -> str:
    """The pattern for ripgrep: RE2's ASCII Perl classes (``\\w``, ``\\d``, ``\\s`` and
    their negations) spelled out as ASCII classes, ``\\b``/``\\B`` as ASCII word
    boundaries, and ``$`` (outside a class) as ``\\r?$``, since toolfs searches lines
    with a CRLF's CR removed. On UTF-8 text the result matches at least the lines RE2
    matches (more is harmless: those files are searched again by RE2). Anything ripgrep
    does not accept makes it fail, and the Python engine answers alone."""
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
            elif c == "[" and pattern.startswith("[:", i):
                end = pattern.find(":]", i + 2)
                if end > 0:
                    out.append(pattern[i:end + 2])
                    i = end + 2
                    continue
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
        if c == "$":
            out.append("(?:\\r?$)")
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


@dataclass
class Prefilter:
    """A running ripgrep over one directory; :meth:`counts` waits for it."""

    process: subprocess.Popen[bytes]

    def counts(self) -> dict[str, int] | None:
        """``{absolute path: 0 or 1}`` (no line found, or some) of every file ripgrep
        searched, or ``None`` if it failed (a pattern it refuses, say). Waits no longer
        than the call's deadline (:mod:`toolfs.deadline`): past it ripgrep is stopped and
        the search ends with ``backend_error``."""
        left = deadline.remaining()
        try:
            out, _ = self.process.communicate(
                timeout=None if left is None else max(left, 0.01))
        except subprocess.TimeoutExpired as exc:
            self.close()
            raise deadline.exceeded("list", ".", may_have_changed=False) from exc
        except BaseException:
            self.close()
            raise
        if self.process.returncode not in (0, 1):
            return None
        return parse_counts(out)

    def close(self) -> None:
        """Stop ripgrep if it still runs."""
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.process.kill()
            with contextlib.suppress(Exception):
                self.process.communicate()


def parse_counts(out: bytes) -> dict[str, int]:
    """``rg --count --include-zero --null`` output (``path\\0count\\n`` per file; a path
    may hold a newline, a count never does) as a dict."""
    counts: dict[str, int] = {}
    parts = out.split(b"\0")
    path = parts[0]
    for chunk in parts[1:]:
        number, _, rest = chunk.partition(b"\n")
        with contextlib.suppress(ValueError):
            counts[os.fsdecode(path)] = int(number)
        path = rest
    return counts


def start(directory: str, pattern: str, *, ignore_case: bool, glob: str | None,
          gitignore: bool, size_cap: int) -> Prefilter | None:
    """Start ripgrep over ``directory`` (absolute), or ``None`` when there is no usable
    ``rg``. Its walk rules are at most as strict as toolfs's (ignore files other than
    ``.gitignore`` and those above the directory are off), so that it leaves out as
    few files as it can; what it leaves out is searched by toolfs anyway."""
    rg = ripgrep_binary()
    if rg is None:
        return None
    # Only "no line" or "some line" is used: --max-count=1 stops a file at its first.
    # (A NUL after it goes unseen by ripgrep; the file is read by toolfs anyway.)
    args = [rg, "--no-config", "--count", "--max-count=1", "--include-zero", "--null",
            "--no-messages",
            "--no-mmap", "--no-ignore-dot", "--no-ignore-global", "--no-ignore-exclude",
            "--no-ignore-parent", "--no-require-git", f"--max-filesize={size_cap}"]
    if not gitignore:
        args.append("--no-ignore")
    if ignore_case:
        args.append("--ignore-case")
    if glob is not None:
        args.append(f"--glob={glob}")
    # Not UTF-8 decodes to U+FFFD: matching it sends such a file to toolfs's text check.
    args += ["--encoding=utf-8", "--regexp", f"(?:{translate(pattern)})|\\x{{FFFD}}",
             "--", directory]
    try:
        process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL)
    except OSError:
        return None
    return Prefilter(process)


__all__ = ["Prefilter", "parse_counts", "ripgrep_binary", "start", "translate"]
