"""Pattern logic of ``glob`` and ``grep``: pure functions, no I/O.

Three dialects share one matcher, which compares a path segment by segment (``*``, ``?``
and ``[...]`` never cross a ``/``; a ``**`` segment spans any number of segments):

* **glob** (the ``glob`` tool): Python's ``glob.glob(recursive=True,
  include_hidden=False)`` plus ``{a,b}`` alternatives. A name starting with ``.`` is
  matched only by a pattern segment starting with ``.``; ``**`` never enters one.
  Backslash is an ordinary character, as in :mod:`fnmatch`.
* **override** (``grep``'s ``glob``): ripgrep's ``-g``. Relative to the workspace root; a
  glob without ``/`` matches the name at any depth; a leading ``!`` excludes.
* **gitignore**: ``.gitignore`` lines, with negation, ``dir/`` rules, anchoring and
  backslash escapes, matched relative to the directory holding the file.

Segments compile to RE2 (linear time whatever the pattern); literal segments compare as
strings. :func:`literal_prefix` gives the directory a pattern cannot match outside of,
so object stores list only that prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

import re2

from toolfs.errors import fs_error

MAX_ALTERNATIVES = 256
"""Most patterns one ``{...}`` expansion may produce."""
MAX_PATTERN_CHARS = 4096

Dialect = Literal["glob", "override", "gitignore"]
_MAGIC = frozenset("*?[")


def _options() -> re2.Options:
    opts = re2.Options()
    opts.max_mem = 8 << 20
    opts.log_errors = False
    return opts


# -- braces -------------------------------------------------------------------------


def _closing(pattern: str, start: int, escapes: bool) -> int:
    """Index of the ``}`` matching the ``{`` at ``start``, or -1."""
    depth = 0
    i = start
    while i < len(pattern):
        c = pattern[i]
        if escapes and c == "\\":
            i += 2
            continue
        if c == "[":
            end = _class_end(pattern, i)
            if end > 0:
                i = end + 1
                continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _split_top(inner: str, escapes: bool) -> list[str]:
    parts, depth, cur = [], 0, []
    i = 0
    while i < len(inner):
        c = inner[i]
        if escapes and c == "\\" and i + 1 < len(inner):
            cur.append(inner[i:i + 2])
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


def expand_braces(pattern: str, *, escapes: bool = False,
                  limit: int = MAX_ALTERNATIVES) -> list[str]:
    """``a{b,c}d`` -> ``[abd, acd]`` (nested braces too); an unmatched ``{`` is literal.
    More than ``limit`` results is ``invalid_arguments``."""
    out: list[str] = []
    pending = [pattern]
    while pending:
        p = pending.pop()
        i = 0
        found = False
        while i < len(p):
            c = p[i]
            if escapes and c == "\\":
                i += 2
                continue
            if c == "{":
                end = _closing(p, i, escapes)
                if end > 0:
                    head, tail = p[:i], p[end + 1:]
                    alts = _split_top(p[i + 1:end], escapes)
                    pending.extend(head + a + tail for a in reversed(alts))
                    found = True
                    break
            i += 1
        if not found:
            out.append(p)
        if len(out) + len(pending) > limit:
            raise fs_error("invalid_arguments",
                           f"the pattern expands to more than {limit} alternatives")
    return list(dict.fromkeys(out))


# -- segments -----------------------------------------------------------------------


def _class_end(seg: str, i: int) -> int:
    """Index of the ``]`` closing the class opened at ``seg[i] == "["``, or -1."""
    j = i + 1
    if j < len(seg) and seg[j] in "!^":
        j += 1
    if j < len(seg) and seg[j] == "]":
        j += 1
    while j < len(seg) and seg[j] != "]":
        j += 1
    return j if j < len(seg) else -1


def _class_regex(body: str, dialect: Dialect) -> str:
    negate = False
    if body[:1] == "!" or (body[:1] == "^" and dialect != "glob"):
        negate, body = True, body[1:]
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and dialect != "glob" and i + 1 < len(body):
            c = body[i + 1]
            i += 1
        if c == "-" and out and i + 1 < len(body):
            out.append("-")
        elif c.isalnum():
            out.append(c)
        else:
            out.append(f"\\x{{{ord(c):x}}}")
        i += 1
    if not out:
        return "[^/]" if negate else "[^\\x00-\\x{10ffff}]"
    return ("[^" if negate else "[") + "".join(out) + "]"


def segment_regex(seg: str, dialect: Dialect = "glob") -> str | None:
    """RE2 source matching one whole path segment, or ``None`` when ``seg`` is literal."""
    out: list[str] = []
    literal: list[str] = []
    magic = False
    i = 0
    while i < len(seg):
        c = seg[i]
        if c == "\\" and dialect != "glob" and i + 1 < len(seg):
            literal.append(seg[i + 1])
            i += 2
            continue
        if c in _MAGIC:
            end = _class_end(seg, i) if c == "[" else i
            if c == "[" and end < 0:
                literal.append(c)
                i += 1
                continue
            magic = True
            if literal:
                out.append(re2.escape("".join(literal)))
                literal = []
            if c == "*":
                while i + 1 < len(seg) and seg[i + 1] == "*":
                    i += 1
                out.append("[^/]*")
            elif c == "?":
                out.append("[^/]")
            else:
                out.append(_class_regex(seg[i + 1:end], dialect))
                i = end
            i += 1
            continue
        literal.append(c)
        i += 1
    if not magic:
        return None
    if literal:
        out.append(re2.escape("".join(literal)))
    return "".join(out)


def _unescape(seg: str) -> str:
    out, i = [], 0
    while i < len(seg):
        if seg[i] == "\\" and i + 1 < len(seg):
            i += 1
        out.append(seg[i])
        i += 1
    return "".join(out)


@dataclass(frozen=True)
class _Seg:
    globstar: bool = False
    literal: str | None = None
    regex: re2._Regexp | None = None
    dot: bool = False
    """The pattern segment starts with ``.`` (it may match a hidden name)."""

    def matches(self, name: str, hidden_rule: bool) -> bool:
        if hidden_rule and name[:1] == "." and not self.dot:
            return False
        if self.literal is not None:
            return name == self.literal
        assert self.regex is not None
        return self.regex.fullmatch(name) is not None


def _compile_segment(seg: str, dialect: Dialect) -> _Seg:
    if seg == "**":
        return _Seg(globstar=True)
    source = segment_regex(seg, dialect)
    if source is None:
        return _Seg(literal=_unescape(seg) if dialect != "glob" else seg,
                    dot=seg.startswith("."))
    try:
        regex = re2.compile(source, _options())
    except re2.error as exc:
        raise fs_error("invalid_arguments", f"invalid glob segment {seg[:100]!r}: {exc}"
                       ) from None
    return _Seg(regex=regex, dot=seg.startswith("."))


@dataclass(frozen=True)
class SegmentPattern:
    """One brace-free pattern, compiled segment by segment."""

    segs: tuple[_Seg, ...]
    hidden_rule: bool

    def match(self, parts: list[str]) -> bool:
        """Whether the path ``parts`` (its segments) matches the whole pattern."""
        segs, n = self.segs, len(self.segs)

        def closure(states: Iterable[int]) -> set[int]:
            out: set[int] = set()
            stack = list(states)
            while stack:
                i = stack.pop()
                if i not in out:
                    out.add(i)
                    if i < n and segs[i].globstar:
                        stack.append(i + 1)
            return out

        states = closure((0,))
        for part in parts:
            nxt: set[int] = set()
            for i in states:
                if i == n:
                    continue
                s = segs[i]
                if s.globstar:
                    if not (self.hidden_rule and part[:1] == "."):
                        nxt.add(i)
                elif s.matches(part, self.hidden_rule):
                    nxt.add(i + 1)
            if not nxt:
                return False
            states = closure(nxt)
        return n in states


def _compile(pattern: str, dialect: Dialect) -> SegmentPattern:
    parts = pattern.split("/")
    if len(parts) > 1 and parts[-1] == "**":
        # `dir/**` is everything inside dir, never dir itself.
        parts.append("*")
    # Consecutive `**` segments mean one.
    squeezed: list[str] = []
    for p in parts:
        if p == "**" and squeezed and squeezed[-1] == "**":
            continue
        squeezed.append(p)
    return SegmentPattern(tuple(_compile_segment(p, dialect) for p in squeezed),
                          hidden_rule=dialect == "glob")


def _literal_dirs(pattern: str, escapes: bool) -> list[str]:
    parts = pattern.split("/")[:-1]
    out: list[str] = []
    for p in parts:
        if p == "" or p == "." or any(c in _MAGIC for c in p) or (escapes and "\\" in p):
            break
        out.append(p)
    return out


def common_prefix(prefixes: list[list[str]]) -> str:
    if not prefixes:
        return ""
    first = prefixes[0]
    n = len(first)
    for p in prefixes[1:]:
        n = min(n, len(p))
        for i in range(n):
            if p[i] != first[i]:
                n = i
                break
    return "/".join(first[:n])


def _check_length(pattern: str) -> None:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise fs_error("invalid_arguments",
                       f"the pattern is over {MAX_PATTERN_CHARS} characters")


@dataclass(frozen=True)
class GlobPattern:
    """A ``glob`` tool pattern: alternatives from its braces, and their common literal
    directory prefix (relative to the searched directory)."""

    alternatives: tuple[SegmentPattern, ...]
    prefix: str

    def match(self, rel: str) -> bool:
        parts = rel.split("/")
        return any(a.match(parts) for a in self.alternatives)


def compile_glob(pattern: str) -> GlobPattern:
    """Compile a ``glob`` tool pattern (leading ``/`` and ``./`` are ignored)."""
    _check_length(pattern)
    alts = [a.lstrip("/").removeprefix("./") for a in expand_braces(pattern)]
    return GlobPattern(tuple(_compile(a, "glob") for a in alts),
                       common_prefix([_literal_dirs(a, False) for a in alts]))


# -- ripgrep -g -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Rule:
    pattern: tuple[SegmentPattern, ...]
    negate: bool
    dir_only: bool
    anchored: bool

    def matches(self, parts: list[str], is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        target = parts if self.anchored else parts[-1:]
        return any(p.match(target) for p in self.pattern)


def _rule(line: str, dialect: Dialect) -> _Rule | None:
    negate = False
    if line.startswith("!"):
        negate, line = True, line[1:]
    elif line.startswith("\\!") or line.startswith("\\#"):
        line = line[1:]
    dir_only = line.endswith("/") and not line.endswith("\\/")
    line = line.rstrip("/") if dir_only else line
    if not line:
        return None
    anchored = "/" in line
    line = line.removeprefix("/")
    if line.startswith("**/"):
        anchored = True
    alts = expand_braces(line, escapes=True) if dialect == "override" else [line]
    return _Rule(tuple(_compile(a, dialect) for a in alts), negate, dir_only, anchored)


@dataclass(frozen=True)
class OverrideGlob:
    """``grep``'s ``glob`` with ripgrep ``-g`` semantics, matched on root-relative paths.

    :meth:`decide` answers ``"include"`` (a whitelisted entry: hidden and ignore rules
    are not consulted for it), ``"exclude"`` or ``None`` (no opinion: a directory that
    a whitelist glob does not name, which is still walked)."""

    rule: _Rule
    prefix: str
    """Root-relative directory outside which nothing can match (``""``: anywhere)."""

    def decide(self, rel: str, is_dir: bool) -> Literal["include", "exclude"] | None:
        hit = self.rule.matches(rel.split("/"), is_dir)
        if self.rule.negate:
            return "exclude" if hit else None
        if hit:
            return "include"
        return None if is_dir else "exclude"


def compile_override(glob: str) -> OverrideGlob:
    _check_length(glob)
    rule = _rule(glob, "override")
    if rule is None:
        raise fs_error("invalid_arguments", f"the glob {glob[:100]!r} matches nothing")
    prefix = ""
    body = glob.removeprefix("/")
    if not rule.negate and rule.anchored and not body.startswith("**/"):
        alts = expand_braces(body, escapes=True)
        prefix = common_prefix([_literal_dirs(a, True) for a in alts])
    return OverrideGlob(rule, prefix)


# -- .gitignore -------------------------------------------------------------------------


def parse_gitignore(text: str) -> list[_Rule]:
    """The rules of one ``.gitignore`` file (blank lines and ``#`` comments skipped)."""
    rules: list[_Rule] = []
    # Lines end at "\n" only, as git and ripgrep read them (str.splitlines would also
    # break at a lone "\r", "\f", "\x85", ...); CRs before it go, as ripgrep drops them.
    for raw in text.split("\n"):
        line = raw.rstrip("\r")
        if not line or line.startswith("#"):
            continue
        # Trailing spaces are dropped unless escaped with a backslash.
        stripped = line.rstrip(" ")
        if stripped.endswith("\\") and len(stripped) < len(line):
            stripped += " "
        if not stripped or len(stripped) > MAX_PATTERN_CHARS:
            continue
        try:
            rule = _rule(stripped, "gitignore")
        except Exception:  # an unparsable line is ignored, as git does
            continue
        if rule is not None:
            rules.append(rule)
    return rules


@dataclass
class TreeFilter:
    """Which entries a ``grep`` walk below ``base`` visits (ripgrep's order of rules:
    the ``-g`` override, then ``.gitignore`` files, then the hidden rule).

    Paths are root-relative with ``/``; ``base`` is the searched directory (``""``: the
    root). Entries at or above ``base`` are never filtered (ripgrep searches what it is
    given); a file is visited only if every directory between ``base`` and it is.
    """

    base: str = ""
    override: OverrideGlob | None = None
    gitignore: dict[str, list[_Rule]] = field(default_factory=dict)
    """Rules by the root-relative directory of their ``.gitignore`` (``""``: the root)."""
    hidden: bool = True
    _dirs: dict[str, bool] = field(default_factory=dict)

    def add_gitignore(self, directory: str, text: str) -> None:
        self.gitignore[directory] = parse_gitignore(text)
        self._dirs.clear()

    def _ignored(self, rel: str, is_dir: bool) -> bool | None:
        """The last matching ``.gitignore`` rule's verdict (True: ignored, False:
        re-included by ``!``), or None."""
        verdict: bool | None = None
        parts = rel.split("/")
        # Shallow files first: a deeper .gitignore takes precedence.
        for depth in range(len(parts)):
            directory = "/".join(parts[:depth])
            rules = self.gitignore.get(directory)
            if not rules:
                continue
            sub = parts[depth:]
            for rule in rules:
                if rule.matches(sub, is_dir):
                    verdict = not rule.negate
        return verdict

    def _visits(self, rel: str, is_dir: bool) -> bool:
        if self.override is not None:
            decision = self.override.decide(rel, is_dir)
            if decision is not None:
                return decision == "include"
        ignored = self._ignored(rel, is_dir) if self.gitignore else None
        if ignored:
            return False
        name = rel.rsplit("/", 1)[-1]
        return not (self.hidden and ignored is None and name.startswith("."))

    def dir_visited(self, rel: str) -> bool:
        """Whether the walk enters the directory ``rel`` (and every one above it)."""
        if not rel or rel == self.base or not rel.startswith(self._base_slash):
            return True
        cached = self._dirs.get(rel)
        if cached is None:
            parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
            cached = self.dir_visited(parent) and self._visits(rel, True)
            self._dirs[rel] = cached
        return cached

    @property
    def _base_slash(self) -> str:
        return f"{self.base}/" if self.base else ""

    def file_visited(self, rel: str) -> bool:
        """Whether the walk searches the file ``rel``."""
        if rel == self.base:
            return True
        parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
        return self.dir_visited(parent) and self._visits(rel, False)


# -- grep regular expressions -----------------------------------------------------------


@dataclass(frozen=True)
class LineRegex:
    """A ``grep`` pattern compiled with RE2 over UTF-8 bytes (no backtracking).

    Compiled with RE2's ``never_nl``: no match contains a ``\\n`` (``\\s``, ``[^y]``,
    ``\\D``, ``(?s).`` lose it and a literal ``\\n`` never matches), as ripgrep strips the
    line terminator from its patterns. A match in the whole text is then a match inside
    one line, so one left-to-right pass finds every matching line."""

    regex: re2._Regexp
    whole_text: bool
    """Candidates may be found over the whole text at once (the pattern has no
    construct whose meaning differs between a line and a text: ``\\A``, ``\\z``,
    ``(?-m)``)."""
    match_start: Callable[[bytes, int, int], int] = field(init=False, compare=False,
                                                         repr=False)
    """``match_start(data, pos, endpos)``: see :func:`_match_start`."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "match_start", _match_start(self.regex))

    def matching_lines(self, data: bytes) -> list[int]:
        """0-based numbers of the lines of ``data`` (``\\n``-separated, ``\\r\\n``
        already normalised) that hold a match. O(len(data)): each byte is scanned by
        one search (a match never spans a line end, so the search after a matching
        line starts past it), or each line is searched once on its own."""
        out: list[int] = []
        end = len(data)
        found = self.match_start
        if not self.whole_text:
            for i, line in enumerate(_lines(data)):
                if found(line, 0, len(line)) >= 0:
                    out.append(i)
            return out
        pos, line_no = 0, 0
        while pos <= end:
            start = found(data, pos, end)
            if start < 0:
                break
            if start == end and (end == 0 or data[end - 1:end] == b"\n"):
                break  # the empty "line" after a final newline is not a line
            line_no += data.count(b"\n", pos, start)
            out.append(line_no)
            le = data.find(b"\n", start)
            if le < 0:
                break
            pos = le + 1
            line_no += 1
        return out


def _match_start(regex: re2._Regexp) -> Callable[[bytes, int, int], int]:
    """``f(data, pos, endpos)``: where the first match in ``data[pos:endpos]`` starts,
    or -1. Calls RE2's engine directly when the wrapper exposes it: the public
    ``search`` builds a generator and a match object per call, which is most of grep's
    cost on a tree of small files. Both give the same answer
    (``tests/test_discovery.py`` checks the two paths agree)."""
    engine = getattr(regex, "_regexp", None)
    anchor = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)
    if engine is not None and anchor is not None and hasattr(engine, "Match"):
        match = engine.Match

        def direct(data: bytes, pos: int, endpos: int) -> int:
            start: int = match(anchor, data, pos, endpos)[0][0]
            return start

        return direct

    return _public_match_start(regex)


def _public_match_start(regex: re2._Regexp) -> Callable[[bytes, int, int], int]:
    """:func:`_match_start` through the wrapper's public ``search`` only."""

    def public(data: bytes, pos: int, endpos: int) -> int:
        m = regex.search(data, pos, endpos)
        return -1 if m is None else int(m.start())

    return public


def _lines(data: bytes) -> list[bytes]:
    if not data:
        return []
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


def split_data_lines(data: bytes) -> list[bytes]:
    """Lines of normalised bytes, without terminators, no phantom last line."""
    return _lines(data)


def compile_regex(pattern: str, *, ignore_case: bool = False) -> LineRegex:
    """Compile ``pattern`` with RE2 (``invalid_arguments`` with RE2's reason if it is not
    valid RE2 syntax). Never falls back to Python's ``re``."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise fs_error("invalid_arguments",
                       f"the pattern is over {MAX_PATTERN_CHARS} characters")
    opts = _options()
    opts.case_sensitive = not ignore_case
    opts.never_nl = True
    try:
        regex = re2.compile(("(?m)" + pattern).encode("utf-8", "surrogateescape"), opts)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        reason = str(reason).replace("(?m)", "", 1)  # our line-mode prefix, not theirs
        raise fs_error("invalid_arguments",
                       f"invalid regular expression (RE2 syntax): {reason}") from None
    return LineRegex(regex, _whole_text(pattern))


_UNSET_MULTILINE = re2.compile(r"\(\?[a-zA-Z]*-[a-zA-Z]*m")


def _whole_text(pattern: str) -> bool:
    """Whether ``pattern`` finds the same lines in a whole text as in each line alone
    (conservative: a literal ``\\\\A`` also answers False, which is only slower)."""
    return "\\A" not in pattern and "\\z" not in pattern \
        and _UNSET_MULTILINE.search(pattern) is None
