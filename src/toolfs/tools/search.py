"""``glob``, ``grep`` and ``ls``: read-only discovery over a
:class:`~toolfs.policy.PolicyFileSystem`.

They reach the backend only through the policy filesystem's listing methods
(:meth:`~toolfs.policy.PolicyFileSystem.list_files`, ``list_dir``, ``read_many``), so
confinement and deny rules hold as for ``read``; none records an observation. Pattern
logic lives in :mod:`toolfs.search.discovery`.
"""

from __future__ import annotations

import contextlib
import heapq
import math
import os
import stat
from collections import deque
from collections.abc import Iterator
from typing import Any

from toolfs._trusted import trusted
from toolfs.backends.base import Blob
from toolfs.backends.conditions import has_reserved_part
from toolfs.backends.local import LocalStore
from toolfs.errors import FsError
from toolfs.escaping import escape_undecodable
from toolfs.formats.text import BOM, decode, wide_codec
from toolfs.policy.filesystem import Found, PolicyFileSystem
from toolfs.render import MAX_LINE_CHARS
from toolfs.results import GlobResult, GrepMatch, GrepResult, ListEntry, ListResult
from toolfs.schemas import GlobArgs, GrepArgs, LsArgs
from toolfs.search import grep_workers, ripgrep
from toolfs.search.discovery import (
    LineRegex,
    OverrideGlob,
    TreeFilter,
    compile_glob,
    compile_override,
    compile_regex,
    split_data_lines,
)

GREP_LINE_CHARS = 4 * MAX_LINE_CHARS
"""Characters of a matching line a grep result keeps (the model sees ``MAX_LINE_CHARS``);
``GrepMatch.chars`` gives the whole length of a longer one."""
_MATCH_SET = frozenset({"path", "line", "text", "context", "chars"})
GITIGNORE_CAP = 1024 * 1024
"""A ``.gitignore`` larger than this is not read."""


def _search_path(path: str | None) -> str | None:
    if path is None:
        return None
    stripped = path.rstrip("/")
    return stripped or path


def _rel_dir(fs: PolicyFileSystem, path: str | None) -> str:
    target = fs.search_root(path)
    return "" if target.is_root else target.display


# -- glob -----------------------------------------------------------------------------


def glob(fs: PolicyFileSystem, args: GlobArgs) -> GlobResult:
    """Files below ``args.path`` whose path relative to it matches ``args.pattern``,
    newest first (ties, and files without a modification time, by path)."""
    pattern = compile_glob(args.pattern)
    path = _search_path(args.path)

    def key(f: Found) -> tuple[int, float, str]:
        return (0, -f.mtime, f.path) if f.mtime is not None and not math.isnan(f.mtime) \
            else (1, 0.0, f.path)

    matched = (f for f in fs.list_files(path, prefix=pattern.prefix) if pattern.match(f.rel))
    best = heapq.nsmallest(fs.glob_limit + 1, matched, key=key)
    return GlobResult(paths=[f.path for f in best[:fs.glob_limit]],
                      truncated=len(best) > fs.glob_limit)


# -- ls -------------------------------------------------------------------------------


def ls(fs: PolicyFileSystem, args: LsArgs) -> ListResult:
    """The immediate children of a directory, sorted by name (capped at ``ls_limit``)."""
    path = _search_path(args.path)
    target = fs.search_root(path)
    entries = heapq.nsmallest(fs.ls_limit + 1, fs.list_dir(path), key=lambda f: f.rel)
    shown = [ListEntry(name=f.rel, kind=f.kind, size=f.size if f.kind == "file" else None)
             for f in entries[:fs.ls_limit]]
    return ListResult(path=target.display, entries=shown, truncated=len(entries) > fs.ls_limit)


# -- grep -----------------------------------------------------------------------------


class _Search:
    """The state of one grep: what was found, what was skipped, when to stop."""

    def __init__(self, fs: PolicyFileSystem, args: GrepArgs, regex: LineRegex) -> None:
        self.fs, self.args, self.regex = fs, args, regex
        self.mode = args.output_mode
        self.limit = min(args.head_limit or fs.grep_limit, fs.grep_limit)
        self.files: list[str] = []
        self.matches: list[GrepMatch] = []
        self.counts: dict[str, int] = {}
        self.truncated = False
        self.searched = 0
        self.skipped: dict[str, int] = {}
        self.rules_not_applied = 0
        self.skipped_unknown = False

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1

    @property
    def done(self) -> bool:
        return self.truncated

    def search(self, found: Found, blob: Blob) -> None:
        """Search one file's bytes (already within the size cap)."""
        examined = self.examine(blob.data)
        if examined is None:
            self.skip("not_text")
            return
        data, hits = examined
        self.record(found, hits, self.picked_lines(data, hits) if hits else [])

    def examine(self, data: bytes) -> tuple[bytes, list[int]] | None:
        """A file's bytes as searched (BOM dropped, UTF-16/32 with a BOM as UTF-8, CRLF as
        LF) and the 0-based numbers of its matching lines, or ``None`` when it is not text
        (a NUL, or not UTF-8, or not the UTF-16/32 its BOM says).
        Pure: it changes no state of the search, so worker threads may call it."""
        if data.startswith(BOM):
            data = data[len(BOM):]
        elif wide_codec(data) is not None:  # UTF-16/32 with a BOM: searched as text
            try:
                data = decode(data).text.encode("utf-8")
            except FsError:
                return None
        if b"\x00" in data:
            return None
        if not data.isascii():  # ASCII is UTF-8: spares decoding most source files
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                return None
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n")
        return data, self.regex.matching_lines(data)

    def picked_lines(self, data: bytes, hits: list[int],
                     most: int | None = None) -> list[tuple[int, bool, bytes]]:
        """``content`` mode: the matching lines of ``data`` and their context, as
        ``(0-based number, is context, bytes)`` in order, at most ``most`` of them (the
        search never shows more than its limit); nothing in the other modes. Pure."""
        if self.mode != "content":
            return []
        lines = split_data_lines(data)
        context = self.args.context
        picked: list[tuple[int, bool, bytes]] = []
        hit_set = set(hits)
        last = -1
        for h in hits:
            for n in range(max(h - context, last + 1), min(h + context, len(lines) - 1) + 1):
                if most is not None and len(picked) >= most:
                    return picked
                picked.append((n, n not in hit_set, lines[n]))
                last = n
        return picked

    def record(self, found: Found, hits: list[int],
               picked: list[tuple[int, bool, bytes]]) -> None:
        """Count one searched text file, with its matching lines (and, in ``content``
        mode, the lines :meth:`picked_lines` chose)."""
        self.searched += 1
        if not hits:
            return
        if self.mode == "files_with_matches":
            self._add_file(found.path)
        elif self.mode == "count":
            if len(self.counts) >= self.limit:
                self.truncated = True
                return
            self.files.append(found.path)
            self.counts[found.path] = len(hits)
        else:
            self._add_lines(found.path, picked)

    def _add_file(self, path: str) -> None:
        if len(self.files) >= self.limit:
            self.truncated = True
            return
        self.files.append(path)

    def _add_lines(self, path: str, picked: list[tuple[int, bool, bytes]]) -> None:
        self.files.append(path)
        for n, is_context, line in picked:
            if len(self.matches) >= self.limit:
                self.truncated = True
                return
            text = line.decode("utf-8", "replace")  # ripgrep: any bytes
            chars = None
            if len(text) > GREP_LINE_CHARS:
                chars, text = len(text), text[:GREP_LINE_CHARS]
            # Built unvalidated (toolfs._trusted): the fields are right by construction,
            # and validating each of up to grep_limit lines is much of a content search.
            self.matches.append(trusted(GrepMatch, _MATCH_SET, {
                "path": path, "line": n + 1, "text": text, "context": is_context,
                "chars": chars}))

    def result(self) -> GrepResult:
        return GrepResult(
            mode=self.mode, files=self.files, matches=self.matches,
            counts=self.counts if self.mode == "count" else {}, truncated=self.truncated,
            files_searched=self.searched, skipped=dict(sorted(self.skipped.items())),
            ignore_rules_not_applied=self.rules_not_applied,
            skipped_unknown=self.skipped_unknown)


def _filter(fs: PolicyFileSystem, base: str, override: OverrideGlob | None,
            files: list[Found], prefix_dirs: list[str]) -> TreeFilter:
    """The walk filter, with the ``.gitignore`` files that apply: those in the listing,
    and those in the directories from the root down to the listed one; a directory
    the walk does not enter is not read."""
    tree = TreeFilter(base=base, override=override)
    if not fs.gitignore:
        return tree
    by_dir: dict[str, Found] = {}
    for f in files:
        if f.path == ".gitignore" or f.path.endswith("/.gitignore"):
            by_dir[f.path.rpartition("/")[0]] = f
    for d in prefix_dirs:
        if d not in by_dir:
            gi = f"{d}/.gitignore" if d else ".gitignore"
            if fs.visible(gi, fs.jail.join(gi)):
                by_dir[d] = Found(path=gi, rel=gi, backend_path=fs.jail.join(gi),
                                  kind="file", size=None, mtime=None)
    levels: dict[int, list[str]] = {}
    for d in by_dir:
        levels.setdefault(0 if not d else d.count("/") + 1, []).append(d)
    for depth in sorted(levels):
        wanted = [by_dir[d] for d in sorted(levels[depth])
                  if tree.dir_visited(d) and (by_dir[d].size or 0) <= GITIGNORE_CAP]
        for f, outcome in fs.read_many(wanted, length=GITIGNORE_CAP):
            if isinstance(outcome, Blob):
                text = outcome.data.decode("utf-8", "replace")
                tree.add_gitignore(f.path.rpartition("/")[0], text)
    return tree


def grep(fs: PolicyFileSystem, args: GrepArgs) -> GrepResult:
    """Lines matching ``args.pattern`` (RE2) in the text files below ``args.path``."""
    regex = compile_regex(args.pattern, ignore_case=args.ignore_case)
    override = compile_override(args.glob) if args.glob is not None else None
    path = _search_path(args.path)
    base = _rel_dir(fs, path)
    search = _Search(fs, args, regex)

    # The narrowest literal directory: the search path, or the glob's prefix below it.
    prefix = ""
    if override is not None and override.prefix:
        if override.prefix == base or override.prefix.startswith(base + "/") or not base:
            prefix = override.prefix[len(base) + 1:] if base else override.prefix
        elif not base.startswith(override.prefix + "/"):
            return search.result()  # the glob names files outside the searched path
    if fs.grep_engine == "ripgrep" and isinstance(fs.store, LocalStore):
        answered = _grep_ripgrep(fs, args, regex, path, search)
        if answered is not None:
            return answered
    if fs.store.lists_in_order:
        try:
            return _grep_streamed(fs, path, base, prefix, override, search)
        except _Unordered:
            fs.store.lists_in_order = False  # from now on, the whole listing first
            search = _Search(fs, args, regex)
    # Sizes only let a listing skip over-cap files before reading them; where they
    # cost a stat per file (local), the bounded read below finds the same.
    stats: dict[str, int] = {}
    listed = list(fs.list_files(path, prefix=prefix, sizes=False, stats=stats))
    return _grep_listed(fs, path, base, prefix, override, listed, stats, search)


def _grep_ripgrep(fs: PolicyFileSystem, args: GrepArgs, regex: LineRegex,
                  path: str | None, search: _Search) -> GrepResult | None:
    """``grep`` answered by ripgrep (:mod:`toolfs.search.ripgrep`), or ``None`` where the
    Python engine answers: no ``rg``, a pattern ripgrep would read another way, a search
    path that is a file or is reached through a symlink, a ``.gitignore`` between the
    root and the searched directory (ripgrep would not apply it as toolfs does), a deny
    rule ripgrep's globs do not spell alike."""
    rg = ripgrep.ripgrep_binary()
    if rg is None or os.name != "posix" or not regex.whole_text \
            or not ripgrep.usable(args.pattern):
        return None
    try:
        regexp = ripgrep.translate(args.pattern)
    except ripgrep.Refused:
        return None
    if any(not d.strip() or d.strip()[0] in "!#" or "\\" in d for d in fs.deny):
        return None
    target = fs.search_root(path)
    root = fs.jail.real_root
    if target.is_root:
        rel = ""
    else:
        if target.resolved and target.resolved != target.display:
            return None
        rel = os.path.relpath(target.backend_path, fs.jail.root)
        if rel.startswith("..") or rel == "." \
                or os.path.realpath(target.backend_path) != os.path.join(root, rel):
            return None  # reached through a symlink: the Python engine confines it
    directory = os.path.join(root, rel) if rel else root
    try:
        before = os.stat(directory, follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISDIR(before.st_mode):
        return None  # a file (or nothing): the Python engine's one-file search
    ignore_files: list[str] = []
    if fs.gitignore:
        if fs._denied(".gitignore") or fs._denied("d/.gitignore"):
            return None
        parts = rel.split("/") if rel else []
        for i in range(len(parts)):
            d = "/".join(parts[:i])
            if os.path.lexists(os.path.join(root, d, ".gitignore")):
                if d:
                    return None
                ignore_files.append(os.path.join(root, ".gitignore"))
    check = bool(fs.deny)

    def accept(raw: bytes) -> str | None:
        shown = os.fsdecode(raw[2:])
        if not shown.isascii():
            shown = escape_undecodable(shown)
        if has_reserved_part(shown):
            return None
        if check and not fs.visible(shown, os.path.join(root, os.fsdecode(raw[2:]))):
            return None
        return shown

    walk: dict[str, Any] = {
        "cwd": root, "start": "./" + rel if rel else "./", "regexp": regexp,
        "ignore_case": args.ignore_case, "size_cap": fs.size_cap, "glob": args.glob,
        # toolfs's temporary files are hidden (rg skips them) and left out by `accept`
        # where a glob brings them back: no glob of their own, which costs per file.
        "deny_globs": [d.strip() for d in fs.deny],
        "fold_case": fs.store.folds_case, "gitignore": fs.gitignore,
        "ignore_files": ignore_files, "keep": search.limit + 1, "accept": accept}
    try:
        answer: ripgrep.Counted | ripgrep.Blocks
        if search.mode == "content":
            answer = ripgrep.content(rg, context=args.context, **walk)
        else:
            answer = ripgrep.count(rg, weighted=False,
                                   counted=search.mode == "count", **walk)
    except ripgrep.Refused:
        return None
    after = os.stat(directory, follow_symlinks=False)
    if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
        return None  # swapped while searched: the Python engine confines it
    if isinstance(answer, ripgrep.Blocks):
        for shown, picked in answer.files:
            hits = [n for n, is_context, _ in picked if not is_context]
            if hits:
                search.record(_found(shown), hits, picked)
                if search.done:
                    break
    else:
        for shown, n, _ in answer.files:
            search.record(_found(shown), [0] * n, [])
            if search.done:
                break
    if answer.more:
        search.truncated = True
    search.searched = answer.searched or 0
    search.skipped_unknown = True
    return search.result()


def _found(shown: str) -> Found:
    return Found(path=shown, rel=shown, backend_path="", kind="file", size=None,
                 mtime=None)


def _grep_listed(fs: PolicyFileSystem, path: str | None, base: str, prefix: str,
                 override: OverrideGlob | None, listed: list[Found],
                 stats: dict[str, int], search: _Search) -> GrepResult:
    cap = fs.size_cap
    if not stats.get("listed") and base:
        # No file at all below it (denied ones count: a directory of denied files is a
        # directory, with nothing to show, on every backend alike): maybe a file.
        return _grep_one(fs, path, base, search)
    top = f"{base}/{prefix}" if base and prefix else (base or prefix)
    parts = top.split("/") if top else []
    prefix_dirs = ["/".join(parts[:i]) for i in range(len(parts) + 1)]
    tree = _filter(fs, base, override, listed, prefix_dirs)
    search.rules_not_applied = tree.dropped_rules
    candidates: list[Found] = []
    for f in sorted(listed, key=lambda f: f.path):
        if not tree.file_visited(f.path):
            continue
        if f.size is not None and f.size > cap:
            search.skip("too_large")
            continue
        candidates.append(f)
    _run(fs, candidates, search, cap)
    return search.result()


def _run_parallel(fs: PolicyFileSystem, candidates: list[Found], search: _Search,
                  cap: int) -> None:
    """:func:`_run` with the files read and searched by worker threads
    (:mod:`toolfs.search.grep_workers`), counted here in the same order with the same stop."""
    examined_files = grep_workers.examined_in_order(fs, candidates, search, cap,
                                                    lambda: search.done)
    with contextlib.closing(examined_files):
        for examined in examined_files:
            if examined.error is not None:
                if "deadline" in examined.error.details:
                    raise examined.error  # the call ran out of time: no file "vanished"
                search.skip("unreadable")
            elif examined.outcome != "searched":
                search.skip(examined.outcome)
            else:
                search.record(examined.found, examined.hits, examined.picked)


def _take(search: _Search, found: Found, outcome: Blob | FsError, cap: int) -> None:
    """Count one fetched file as unreadable, too large or searched; a read that ran out of
    the call's time ends the call (the file did not vanish)."""
    if isinstance(outcome, FsError):
        if "deadline" in outcome.details:
            raise outcome
        search.skip("unreadable")
    elif outcome.size > cap:
        search.skip("too_large")
    else:
        search.search(found, outcome)


def _run(fs: PolicyFileSystem, candidates: list[Found], search: _Search, cap: int) -> None:
    if isinstance(fs.store, LocalStore) and grep_workers.WORKERS > 1 \
            and len(candidates) > grep_workers.WINDOW:
        _run_parallel(fs, candidates, search, cap)
        return
    outcomes: Iterator[tuple[Found, Blob | FsError]] = fs.read_many(
        candidates, length=cap + 1)
    try:
        for found, outcome in outcomes:
            _take(search, found, outcome, cap)
            if search.done:
                break
    finally:
        close = getattr(outcomes, "close", None)
        if close is not None:
            close()


# -- grep over a listing in path order (object stores) --------------------------------


class _Unordered(Exception):
    """The store listed a path not after the one before: its order cannot be relied on."""


def _grep_streamed(fs: PolicyFileSystem, path: str | None, base: str, prefix: str,
                   override: OverrideGlob | None, search: _Search) -> GrepResult:
    """:func:`_grep_listed` for a store that lists in path order (object stores): the
    files are filtered and searched as the listing's pages come, in that order, which is
    the order ``_grep_listed`` sorts them into, so the result is the same; and once it is
    full (``head_limit``, or the cap) no further page is asked for. Held at any time:
    the read-ahead of :meth:`~toolfs.policy.PolicyFileSystem.read_many`, the files
    waiting for a ``.gitignore`` listed after them (:func:`_visited_in_order`), the
    ``.gitignore`` rules; never the listing.

    Counts are of the files met before the stop: a truncated result's ``skipped`` and
    ``ignore_rules_not_applied`` leave out files and ``.gitignore`` files after it, which
    were never listed."""
    cap = fs.size_cap
    top = f"{base}/{prefix}" if base and prefix else (base or prefix)
    tree = TreeFilter(base=base, override=override)
    stats: dict[str, int] = {}
    listing = fs.list_files(path, prefix=prefix, sizes=False, stats=stats)
    over_cap = [0]  # over-cap files met since the last file handed on to be read
    over_before: deque[int] = deque()  # per file handed on: over-cap files before it

    def readable() -> Iterator[Found]:
        for f in _visited_in_order(fs, listing, tree, top):
            if f.size is not None and f.size > cap:
                over_cap[0] += 1
                continue
            over_before.append(over_cap[0])
            over_cap[0] = 0
            yield f

    def too_large(n: int) -> None:
        if n:
            search.skipped["too_large"] = search.skipped.get("too_large", 0) + n

    outcomes = fs.read_many(readable(), length=cap + 1)
    try:
        for found, outcome in outcomes:
            too_large(over_before.popleft())
            _take(search, found, outcome, cap)
            if search.done:
                break
        else:
            too_large(over_cap[0])
    finally:
        for done_with in (outcomes, listing):  # stops the listing: no further page
            close = getattr(done_with, "close", None)
            if close is not None:
                close()
    search.rules_not_applied = tree.dropped_rules
    if not search.done and not stats.get("listed") and base:
        # No file at all below it (denied ones count, as in `_grep_listed`): maybe a file.
        return _grep_one(fs, path, base, search)
    return search.result()


def _visited_in_order(fs: PolicyFileSystem, listing: Iterator[Found], tree: TreeFilter,
                      top: str) -> Iterator[Found]:
    """The files of ``listing`` (below ``top``, in path order) that the walk visits,
    in that order, with the ``.gitignore`` files that apply read into ``tree`` (those
    of the directories above ``top``, and those listed), as :func:`_filter` reads them.

    A ``.gitignore`` is listed among its directory's files, so a file listed before it
    (``d/-x``, ``d/.env`` sort before ``d/.gitignore``) waits until the listing has
    passed the place of every ``.gitignore`` that would apply to it; files after it
    wait behind it, to keep the order. Raises :class:`_Unordered` on a path not after
    the one before."""
    listed_ignores: dict[str, Found] = {}  # directory -> its .gitignore, where one is
    if fs.gitignore:
        parts = top.split("/") if top else []
        for d in ("/".join(parts[:i]) for i in range(len(parts))):  # above `top`
            gi = f"{d}/.gitignore" if d else ".gitignore"
            if fs.visible(gi, fs.jail.join(gi)):
                listed_ignores[d] = Found(path=gi, rel=gi, backend_path=fs.jail.join(gi),
                                          kind="file", size=None, mtime=None)
    read_ignores: set[str] = set()

    def visited(f: Found) -> bool:
        if listed_ignores:
            # The .gitignore files of its directories, shallow first (whether a
            # directory is visited depends on those above it).
            parent = f.path.rpartition("/")[0]
            dirs = [""] + [parent[:i] for i, c in enumerate(parent) if c == "/"] \
                + ([parent] if parent else [])
            for d in dirs:
                gi = listed_ignores.get(d)
                if gi is None or d in read_ignores:
                    continue
                read_ignores.add(d)
                if not tree.dir_visited(d) or (gi.size or 0) > GITIGNORE_CAP:
                    continue
                for _, outcome in fs.read_many([gi], length=GITIGNORE_CAP):
                    if isinstance(outcome, Blob):
                        tree.add_gitignore(d, outcome.data.decode("utf-8", "replace"))
        return tree.file_visited(f.path)

    waiting: deque[tuple[Found, str]] = deque()  # each with the place it waits for
    last = ""
    first = True
    for f in listing:
        if not first and f.path <= last:
            raise _Unordered(f.path)
        first, last = False, f.path
        wait = ""
        if fs.gitignore:
            if f.path == ".gitignore" or f.path.endswith("/.gitignore"):
                listed_ignores[f.path.rpartition("/")[0]] = f
            wait = _ignore_after(f.path, top)
        waiting.append((f, wait))
        while waiting and waiting[0][1] <= last:
            held = waiting.popleft()[0]
            if visited(held):
                yield held
    for held, _ in waiting:  # the listing ended: every .gitignore is known
        if visited(held):
            yield held


def _ignore_after(path: str, top: str) -> str:
    """The last place in path order of a ``.gitignore`` that would apply to ``path``
    and sorts after it (in ``top`` or a directory between ``top`` and ``path``); ``""``
    if none does."""
    wait = ""
    start = len(top) + 1 if top else 0
    pos = start - 1
    while True:
        d = path[:pos] if pos > 0 else ""
        gi = f"{d}/.gitignore" if d else ".gitignore"
        if gi > path and gi > wait:
            wait = gi
        pos = path.find("/", pos + 1)
        if pos < 0:
            return wait


def _grep_one(fs: PolicyFileSystem, path: str | None, base: str,
              search: _Search) -> GrepResult:
    """``path`` names no directory with files: search it as one file if it is one."""
    target = fs.search_root(path)
    one = Found(path=base, rel=base.rsplit("/", 1)[-1], backend_path=target.backend_path,
                kind="file", size=None, mtime=None)
    for found, outcome in fs.read_many([one], length=fs.size_cap + 1):
        if isinstance(outcome, FsError):
            if outcome.code == "not_found":
                raise fs._not_found(target, outcome)
            if outcome.code == "missing_bucket":
                raise fs._fail(outcome, target, "read")
            return search.result()  # a directory without files
        if outcome.size > fs.size_cap:
            search.skip("too_large")
        else:
            search.search(found, outcome)
    return search.result()


__all__ = ["glob", "grep", "ls"]

