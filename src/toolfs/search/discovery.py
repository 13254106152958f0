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
so object stores list only that prefix. ``grep``'s line regex (what a pattern matches
in a file's lines) is :mod:`toolfs.search.line_regex`.

One concept in one module (a little over 700 lines): the three dialects are one matcher
with three front ends, and a cut between them would split the segment compiler each uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import re2

from toolfs.errors import fs_error
from toolfs.schemas import MAX_IGNORE_PATTERNS as MAX_IGNORE_PATTERNS
from toolfs.search.line_regex import (  # grep's line regex; importable from here as before
    MAX_PATTERN_CHARS,
    LineRegex,
    _lines,
    _match_start,
    _options,
    _public_match_start,
    _whole_text,
    compile_regex,
    split_data_lines,
)

MAX_ALTERNATIVES = 256
"""Most patterns one ``{...}`` expansion may produce."""

Dialect = Literal["glob", "override", "gitignore"]
_MAGIC = frozenset("*?[")


# -- braces -------------------------------------------------------------------------


def _brace_pairs(pattern: str, escapes: bool) -> dict[int, int]:
    """Each ``{`` of ``pattern`` that has a matching ``}`` -> the index of that ``}``, in
    one pass (a ``{`` or ``}`` inside a character class or escaped is a literal)."""
    pairs: dict[int, int] = {}
    open_at: list[int] = []
    i, n = 0, len(pattern)
    while i < n:
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
            open_at.append(i)
        elif c == "}" and open_at:
            pairs[open_at.pop()] = i
        i += 1
    return pairs


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
        pairs = _brace_pairs(p, escapes)
        i = 0
        found = False
        while i < len(p):
            c = p[i]
            if escapes and c == "\\":
                i += 2
                continue
            if c == "{":
                end = pairs.get(i, -1)
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
#
# A pattern compiles to one RE2 regex over the whole path: the path's segments each
# followed by "/" ("src/app.py" is matched as "src/app.py/"), so a `**` segment is
# `(?:[^/]*/)*` and every other segment is its regex plus "/". One call per path, linear
# in the path's length whatever the pattern (RE2), instead of a set of states per
# segment and alternative in Python.
#
# The glob dialect's hidden rule (a name starting with "." is matched only by a pattern
# segment starting with "."; `**` never enters one) is compiled in: the path's hidden
# names are marked by replacing their leading "." with NUL (never in a path), which only
# a pattern segment's leading "." produces; `*`, `?` and classes never match it.

_MARK = "\x00"
_NEVER = "[^\\x00-\\x{10ffff}]"


def _class_end(seg: str, i: int) -> int:
    """Index of the ``]`` closing the class opened at ``seg[i] == "["``, or -1."""
    j = i + 1
    if j < len(seg) and seg[j] in "!^":
        j += 1
    if j < len(seg) and seg[j] == "]":
        j += 1
    return seg.find("]", j)  # in C: a pattern of many unclosed `[` stays cheap


def _cp(c: int) -> str:
    return f"\\x{{{c:x}}}"


def _class_regex(body: str, dialect: Dialect, marked: bool) -> str:
    """A class ``[body]`` that never matches ``/`` (nor the hidden mark)."""
    negate = False
    if body[:1] == "!" or (body[:1] == "^" and dialect != "glob"):
        negate, body = True, body[1:]
    chars: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and dialect != "glob" and i + 1 < len(body):
            c = body[i + 1]
            i += 1
        chars.append(c)
        i += 1
    ranges: list[tuple[int, int]] = []
    k = 0
    while k < len(chars):
        lo = ord(chars[k])
        if k + 2 < len(chars) and chars[k + 1] == "-":
            hi = ord(chars[k + 2])
            if lo <= hi:  # a reversed range is empty, as in fnmatch
                ranges.append((lo, hi))
            k += 3
            continue
        ranges.append((lo, lo))
        k += 1
    excluded = [ord("/"), 0] if marked else [ord("/")]
    if negate:
        parts = [_cp(lo) if lo == hi else f"{_cp(lo)}-{_cp(hi)}" for lo, hi in ranges]
        return "[^" + "".join(parts + [_cp(c) for c in excluded]) + "]"
    kept: list[tuple[int, int]] = []
    for lo, hi in ranges:
        pieces = [(lo, hi)]
        for x in excluded:
            pieces = [p for a, b in pieces
                      for p in ((a, min(b, x - 1)), (max(a, x + 1), b)) if p[0] <= p[1]]
        kept.extend(pieces)
    if not kept:
        return _NEVER
    return "[" + "".join(_cp(lo) if lo == hi else f"{_cp(lo)}-{_cp(hi)}"
                         for lo, hi in kept) + "]"


def _literal_regex(c: str, first: bool, marked: bool) -> str:
    if marked and c == _MARK:
        return _NEVER
    if marked and first and c == ".":
        return "\\x00"
    if c.isalnum() or ord(c) > 0x7f:
        return c
    return "\\" + c if c.isprintable() else _cp(ord(c))


def segment_regex(seg: str, dialect: Dialect = "glob") -> str | None:
    """RE2 source matching one whole path segment, or ``None`` when ``seg`` is literal
    (no ``*``, ``?`` or closed ``[...]``)."""
    source, magic = _segment_source(seg, dialect, marked=False)
    return source if magic else None


def _segment_source(seg: str, dialect: Dialect, marked: bool) -> tuple[str, bool]:
    """RE2 source of one segment (on the marked path if ``marked``), and whether the
    segment has any wildcard."""
    out: list[str] = []
    magic = False
    anything = "[^/\\x00]" if marked else "[^/]"
    i = 0
    while i < len(seg):
        c = seg[i]
        first = i == 0
        if c == "\\" and dialect != "glob" and i + 1 < len(seg):
            out.append(_literal_regex(seg[i + 1], first, marked))
            i += 2
            continue
        if c == "*":
            while i + 1 < len(seg) and seg[i + 1] == "*":
                i += 1
            out.append(anything + "*")
            magic = True
        elif c == "?":
            out.append(anything)
            magic = True
        elif c == "[" and (end := _class_end(seg, i)) > 0:
            out.append(_class_regex(seg[i + 1:end], dialect, marked))
            magic = True
            i = end
        else:
            out.append(_literal_regex(c, first, marked))
        i += 1
    return "".join(out), magic


def _unescape(seg: str) -> str:
    out, i = [], 0
    while i < len(seg):
        if seg[i] == "\\" and i + 1 < len(seg):
            i += 1
        out.append(seg[i])
        i += 1
    return "".join(out)


def _segments(pattern: str) -> list[str]:
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
    return squeezed


def path_source(pattern: str, dialect: Dialect) -> str:
    """RE2 source that fully matches ``mark(path) + "/"`` (``mark`` only in the glob
    dialect: see :func:`mark_hidden`) when the brace-free ``pattern`` matches ``path``."""
    marked = dialect == "glob"
    anything = "[^/\\x00]" if marked else "[^/]"
    out: list[str] = []
    for seg in _segments(pattern):
        if seg == "**":
            out.append(f"(?:{anything}*/)*")
        else:
            out.append(_segment_source(seg, dialect, marked)[0] + "/")
    return "".join(out)


def mark_hidden(rel: str) -> str:
    """``rel`` with the leading ``.`` of each name replaced by the hidden mark."""
    return ("/" + rel).replace("/.", "/" + _MARK)[1:]


_BOTH = getattr(getattr(re2, "_Anchor", None), "ANCHOR_BOTH", None)


def full_match(regex: re2._Regexp, text: str) -> bool:
    """Whether ``regex`` matches the whole of ``text``: ``regex.fullmatch(text)``, with
    RE2's engine called directly where the wrapper exposes it (the public call builds a
    generator, offset tables and a match object per call, most of glob's cost per path;
    ``tests/search/test_full_match.py`` checks both give the same answer)."""
    engine = getattr(regex, "_regexp", None)
    if engine is None or _BOTH is None:
        return regex.fullmatch(text) is not None
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the public call decides
        return regex.fullmatch(text) is not None
    spans = engine.Match(_BOTH, data, 0, len(data))
    return bool(spans[0][0] >= 0)


MAX_COMPILED_CHARS = 8 * MAX_PATTERN_CHARS
"""Most characters a pattern's brace alternatives may add up to."""


def _compile_sources(sources: list[str], what: str) -> re2._Regexp:
    source = "|".join(dict.fromkeys(sources))
    try:
        return re2.compile(source, _options())
    except (re2.error, UnicodeError) as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        if "too large" in str(reason) or "too big" in str(reason):
            raise fs_error("invalid_arguments", f"the {what} is too complex to match "
                           "(fewer {...} alternatives or ** segments)") from None
        raise fs_error("invalid_arguments", f"invalid {what}: {str(reason)[:200]}") from None


def _check_expansion(alts: list[str]) -> None:
    if sum(len(a) for a in alts) > MAX_COMPILED_CHARS:
        raise fs_error("invalid_arguments",
                       f"the pattern's {{...}} alternatives add up to more than "
                       f"{MAX_COMPILED_CHARS} characters")


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
    """A ``glob`` tool pattern: one regex for all the alternatives of its braces, and
    their common literal directory prefix (relative to the searched directory)."""

    regex: re2._Regexp
    prefix: str

    def match(self, rel: str) -> bool:
        return full_match(self.regex, mark_hidden(rel) + "/")


def compile_glob(pattern: str) -> GlobPattern:
    """Compile a ``glob`` tool pattern (leading ``/`` and ``./`` are ignored)."""
    _check_length(pattern)
    alts = [a.lstrip("/").removeprefix("./") for a in expand_braces(pattern)]
    _check_expansion(alts)
    return GlobPattern(_compile_sources([path_source(a, "glob") for a in alts], "pattern"),
                       common_prefix([_literal_dirs(a, False) for a in alts]))


# -- ripgrep -g -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Line:
    """One parsed ``-g`` glob or ``.gitignore`` line: its alternatives (brace-expanded
    for ``-g``) and flags."""

    alternatives: tuple[str, ...]
    negate: bool
    dir_only: bool
    anchored: bool


def _parse_line(line: str, dialect: Dialect) -> _Line | None:
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
    return _Line(tuple(alts), negate, dir_only, anchored)


def _rule_source(alt: str, anchored: bool, dialect: Dialect) -> str:
    """RE2 source over ``sub + "/"`` (``sub``: the path below the rule's directory);
    an unanchored rule matches the last name only."""
    source = path_source(alt, dialect)
    return source if anchored else "(?:[^/]*/)*" + source


@dataclass(frozen=True)
class _Rule:
    """A compiled ``-g`` glob: one regex over ``rel + "/"``."""

    regex: re2._Regexp
    negate: bool
    dir_only: bool

    def matches(self, rel: str, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        return full_match(self.regex, rel + "/")


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
        hit = self.rule.matches(rel, is_dir)
        if self.rule.negate:
            return "exclude" if hit else None
        if hit:
            return "include"
        return None if is_dir else "exclude"


def compile_override(glob: str) -> OverrideGlob:
    _check_length(glob)
    line = _parse_line(glob, "override")
    if line is None:
        raise fs_error("invalid_arguments", f"the glob {glob[:100]!r} matches nothing")
    _check_expansion(list(line.alternatives))
    regex = _compile_sources([_rule_source(a, line.anchored, "override")
                              for a in line.alternatives], "glob")
    rule = _Rule(regex, line.negate, line.dir_only)
    prefix = ""
    body = glob.removeprefix("/")
    if not line.negate and line.anchored and not body.startswith("**/"):
        alts = expand_braces(body, escapes=True)
        prefix = common_prefix([_literal_dirs(a, True) for a in alts])
    return OverrideGlob(rule, prefix)


# -- .gitignore -------------------------------------------------------------------------

_CHUNK = 64
"""Wildcard rules tested by one combined regex."""


def _best(table: dict[str, tuple[int, int]], key: str, is_dir: bool) -> int:
    """The index of the last rule under ``key`` that applies (-1: none). Each entry
    holds the last index of a rule for files and directories, and of a ``dir/`` one."""
    hit = table.get(key)
    if hit is None:
        return -1
    return max(hit) if is_dir else hit[0]


def _put(table: dict[str, tuple[int, int]], key: str, index: int, dir_only: bool) -> None:
    any_kind, dirs = table.get(key, (-1, -1))
    table[key] = (any_kind, index) if dir_only else (index, dirs)


class IgnoreRules:
    """The rules of one ``.gitignore``, combined so that matching a path costs a few
    dictionary look-ups and at most ``MAX_IGNORE_PATTERNS / _CHUNK`` regex calls
    (each linear in the path), not one Python call per rule: literal names, literal
    paths, ``*<suffix>`` and ``<prefix>*`` rules are tables keyed by name, path, suffix
    and prefix; the other rules are tried in combined regexes of ``_CHUNK``, the last
    chunk first, and only a matching chunk's own rules one by one. As in git, the last
    matching rule decides."""

    def __init__(self, lines: list[_Line]) -> None:
        self.negate: list[bool] = []
        self.names: dict[str, tuple[int, int]] = {}
        self.paths: dict[str, tuple[int, int]] = {}
        self.suffixes: dict[str, tuple[int, int]] = {}
        self.prefixes: dict[str, tuple[int, int]] = {}
        self.dropped = 0
        """Wildcard rules beyond ``MAX_IGNORE_PATTERNS``, not applied."""
        wild: list[tuple[int, str, bool]] = []
        for index, line in enumerate(lines):
            self.negate.append(line.negate)
            alt = line.alternatives[0]
            segs = _segments(alt)
            literal = all(segment_regex(s, "gitignore") is None and s != "**" for s in segs)
            if literal:
                key = "/".join(_unescape(s) for s in segs)
                _put(self.paths if line.anchored else self.names, key, index,
                     line.dir_only)
                continue
            if not line.anchored and "\\" not in alt:
                if alt.startswith("*") and not any(c in _MAGIC for c in alt[1:]) \
                        and alt[1:]:
                    _put(self.suffixes, alt[1:], index, line.dir_only)
                    continue
                if alt.endswith("*") and not any(c in _MAGIC for c in alt[:-1]) \
                        and alt[:-1]:
                    _put(self.prefixes, alt[:-1], index, line.dir_only)
                    continue
            if len(wild) >= MAX_IGNORE_PATTERNS:
                self.dropped += 1
                continue
            wild.append((index, _rule_source(alt, line.anchored, "gitignore"),
                         line.dir_only))
        self._wild = wild
        self._suffix_lengths = sorted({len(k) for k in self.suffixes})
        self._prefix_lengths = sorted({len(k) for k in self.prefixes})
        self._chunks: list[tuple[re2._Regexp | None, re2._Regexp | None]] = []
        for start in range(0, len(wild), _CHUNK):
            part = wild[start:start + _CHUNK]
            self._chunks.append((_combined([s for _, s, _d in part]),
                                 _combined([s for _, s, d in part if not d])))
        self._one: dict[int, re2._Regexp | None] = {}

    def last_match(self, sub: str, is_dir: bool) -> int:
        """The index of the last rule matching ``sub`` (-1: none)."""
        name = sub.rsplit("/", 1)[-1]
        best = max(_best(self.names, name, is_dir), _best(self.paths, sub, is_dir))
        for n in self._suffix_lengths:  # few distinct lengths (.log, .pyc, ~, ...)
            if n > len(name):
                break
            best = max(best, _best(self.suffixes, name[-n:], is_dir))
        for n in self._prefix_lengths:
            if n > len(name):
                break
            best = max(best, _best(self.prefixes, name[:n], is_dir))
        text = sub + "/"
        for c in range(len(self._chunks) - 1, -1, -1):
            part = self._wild[c * _CHUNK:(c + 1) * _CHUNK]
            if part[-1][0] <= best:
                break
            regex = self._chunks[c][0 if is_dir else 1]
            if regex is None or not full_match(regex, text):
                continue
            for index, source, dir_only in reversed(part):
                if index <= best:
                    break
                if dir_only and not is_dir:
                    continue
                one = self._one.get(index, False)
                if one is False:
                    one = self._one[index] = _combined([source])
                if one is not None and full_match(one, text):
                    best = index
                    break
            break  # a later chunk matched: earlier ones cannot beat it
        return best

    def verdict(self, sub: str, is_dir: bool) -> bool | None:
        """True: ignored; False: re-included by ``!``; None: no rule matches."""
        index = self.last_match(sub, is_dir)
        return None if index < 0 else not self.negate[index]


def _combined(sources: list[str]) -> re2._Regexp | None:
    if not sources:
        return None
    try:
        return re2.compile("|".join(sources), _options())
    except (re2.error, UnicodeError):
        # A chunk RE2 refuses: its rules one by one (an unparsable rule is ignored).
        if len(sources) == 1:
            return None
        good = [s for s in sources if _combined([s]) is not None]
        return _combined(good) if good and len(good) < len(sources) else None


def parse_gitignore(text: str) -> IgnoreRules:
    """The rules of one ``.gitignore`` file (blank lines and ``#`` comments skipped)."""
    lines: list[_Line] = []
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
        parsed = _parse_line(stripped, "gitignore")
        if parsed is not None:
            lines.append(parsed)
    return IgnoreRules(lines)


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
    gitignore: dict[str, IgnoreRules] = field(default_factory=dict)
    """Rules by the root-relative directory of their ``.gitignore`` (``""``: the root)."""
    hidden: bool = True
    _dirs: dict[str, bool] = field(default_factory=dict)
    _order: list[str] = field(default_factory=list)

    def add_gitignore(self, directory: str, text: str) -> None:
        self.gitignore[directory] = parse_gitignore(text)
        self._order = sorted(self.gitignore, key=lambda d: (d.count("/") if d else -1, d))
        self._dirs.clear()

    @property
    def dropped_rules(self) -> int:
        """``.gitignore`` wildcard rules not applied (over ``MAX_IGNORE_PATTERNS``)."""
        return sum(r.dropped for r in self.gitignore.values())

    def _applicable(self, rel: str) -> list[str]:
        """The directories holding a ``.gitignore`` that applies to ``rel``, shallow
        first (a deeper one takes precedence): by the shorter of the list of
        ``.gitignore`` directories and the list of ``rel``'s ancestors."""
        if len(self._order) <= rel.count("/") + 1:
            return [d for d in self._order if not d or rel.startswith(d + "/")]
        out = [""] if "" in self.gitignore else []
        pos = rel.find("/")
        while pos >= 0:
            if rel[:pos] in self.gitignore:
                out.append(rel[:pos])
            pos = rel.find("/", pos + 1)
        return out

    def _ignored(self, rel: str, is_dir: bool) -> bool | None:
        """The last matching ``.gitignore`` rule's verdict (True: ignored, False:
        re-included by ``!``), or None."""
        verdict: bool | None = None
        for directory in self._applicable(rel):
            sub = rel[len(directory) + 1:] if directory else rel
            found = self.gitignore[directory].verdict(sub, is_dir)
            if found is not None:
                verdict = found
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
        """Whether the walk enters the directory ``rel`` (and every one above it).
        Iterative: a tree thousands of directories deep is walked as any other."""
        pending: list[str] = []
        verdict = True
        cur = rel
        while cur and cur != self.base and cur.startswith(self._base_slash):
            cached = self._dirs.get(cur)
            if cached is not None:
                verdict = cached
                break
            pending.append(cur)
            cur = cur.rsplit("/", 1)[0] if "/" in cur else ""
        for d in reversed(pending):
            verdict = verdict and self._visits(d, True)
            self._dirs[d] = verdict
        return verdict

    @property
    def _base_slash(self) -> str:
        return f"{self.base}/" if self.base else ""

    def file_visited(self, rel: str) -> bool:
        """Whether the walk searches the file ``rel``."""
        if rel == self.base:
            return True
        parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
        return self.dir_visited(parent) and self._visits(rel, False)


__all__ = [
    "MAX_PATTERN_CHARS",
    "LineRegex",
    "TreeFilter",
    "_lines",
    "_match_start",
    "_options",
    "_public_match_start",
    "_whole_text",
    "compile_glob",
    "compile_override",
    "compile_regex",
    "parse_gitignore",
    "split_data_lines",
]
