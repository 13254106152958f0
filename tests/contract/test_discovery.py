"""glob, grep and ls: the contract on every backend, comparisons with Python's glob and
ripgrep on local disk, ReDoS and concurrency."""

from __future__ import annotations

import glob as pyglob
import os
import pathlib
import random
import re
import shutil
import subprocess
import threading
from typing import Any

import pytest

import toolfs
from tests.backend_fixtures import Backend, LocalBackend
from toolfs.search import ripgrep
from toolfs.search.discovery import TreeFilter, compile_glob, compile_override, compile_regex

CAP = 4096


DENY = ["secrets/**", "*.pem"]


TREE: dict[str, bytes] = {
    "README.md": b"# Project\nhello world\n",
    "setup.py": b"from setuptools import setup\nsetup(name='demo')\n",
    "src/app.py": b"import os\n\ndef main():\n    print('hello')\n    return 0\n",
    "src/util.py": b"def helper():\n    return 'Hello'\n",
    "src/types.pyi": b"def helper() -> str: ...\n",
    "src/deep/er/mod.py": b"x = 1\nhello = x\ny = 2\nz = 3\nhello again\n",
    "src/.cache/tmp.py": b"hello hidden\n",
    "docs/guide.txt": b"line one\nline two\nhello docs\nline four\n",
    "docs/crlf.txt": b"first\r\nhello crlf\r\nlast\r\n",
    "docs/bom.txt": b"\xef\xbb\xbfhello bom\nsecond\n",
    "data/blob.bin": b"hello\x00\x01\x02",
    "data/latin1.txt": b"hello caf\xe9\n",
    "data/big.txt": b"hello big\n" * 1000,
    ".env": b"SECRET=hello\n",
    ".github/ci.yml": b"run: hello\n",
    "secrets/key.txt": b"hello secret\n",
    "id.pem": b"hello pem\n",
    ".gitignore": b"build/\n*.log\n!keep.log\n",
    "build/out.txt": b"hello build\n",
    "app.log": b"hello log\n",
    "keep.log": b"hello keep\n",
    "src/.gitignore": b"generated.py\n",
    "src/generated.py": b"hello generated\n",
    "empty.txt": b"",
}


def _populate(b: Backend) -> None:
    for rel, data in TREE.items():
        b.put(rel, data)


def _ws(b: Backend, **kw: Any) -> Any:
    return b.workspace(deny=DENY, size_cap=CAP, **kw)


def _tree(root: pathlib.Path, n: int, seed: int = 7) -> list[str]:
    rnd = random.Random(seed)
    dirs = ["", "a", "a/b", "a/b/c", "b", ".h", "a/.h2", "lib", "lib/x_y", "a/b/.d/e"]
    names = ["x", "y", "test_z", "main", ".dot", "a-b", "café", "X1"]
    exts = [".py", ".pyi", ".txt", ".md", "", ".tar.gz"]
    made = set()
    while len(made) < n:
        rel = "/".join(filter(None, [rnd.choice(dirs),
                                     rnd.choice(names) + str(rnd.randint(0, 9))
                                     + rnd.choice(exts)]))
        made.add(rel)
    for rel in made:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x\n")
    return sorted(made)


def _expand(pattern: str) -> list[str]:
    """Brace expansion written independently of toolfs (no nesting)."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    return [e for alt in m.group(1).split(",")
            for e in _expand(pattern[:m.start()] + alt + pattern[m.end():])]


GLOBS = ["*", "*.py", "**/*.py", "**/*", "a/**", "a/**/*.txt", "**/b/*", "a/*/*",
         "**/.*", ".h/*", "**/.h2/*", "*.{py,md}", "**/test_*.{py,pyi}", "a/b/**/c/*",
         "**/[xy]?.*", "**/[!x]*.py", "lib/*_*/*", "**/*.tar.gz", "**/café*", "?1*",
         "a/**/.d/*", "**/X1*", "a/{b,.h2}/*"]


def _grep_tree(root: pathlib.Path) -> None:
    rnd = random.Random(11)
    words = ["alpha", "beta", "Gamma", "delta", "foo_bar", "TODO", "fixme", "x=1", "end"]
    for i in range(80):
        d = rnd.choice(["", "src", "src/pkg", "docs", "build", "logs", ".hidden", "src/.cfg"])
        ext = rnd.choice([".py", ".txt", ".md", ".log"])
        lines = [" ".join(rnd.choice(words) for _ in range(rnd.randint(0, 5)))
                 for _ in range(rnd.randint(0, 12))]
        p = root / d / f"f{i}{ext}"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("\n".join(lines) + ("\n" if rnd.random() < 0.8 else ""))
    (root / ".gitignore").write_text("build/\n*.log\n!keep*.log\n")
    (root / "src" / ".gitignore").write_text("/pkg/f1*.py\n")
    (root / "logs" / "keep1.log").write_text("alpha keep\n")
    (root / "bin.dat").write_bytes(b"alpha\x00beta\n")


def _reference_grep(root: pathlib.Path, pattern: str, glob: str | None, icase: bool,
                    base: str = "") -> dict[str, list[int]]:
    """An independent reference: os.walk, Python's re (trusted test patterns only) and
    toolfs's pure TreeFilter for the ignore rules."""
    tree = TreeFilter(base=base, override=compile_override(glob) if glob else None)
    for gi in root.rglob(".gitignore"):
        rel = gi.parent.relative_to(root).as_posix()
        tree.add_gitignore("" if rel == "." else rel, gi.read_text())
    rx = re.compile(pattern, re.IGNORECASE if icase else 0)
    out: dict[str, list[int]] = {}
    for dirpath, _dirs, files in os.walk(root / base if base else root):
        for name in files:
            rel = (pathlib.Path(dirpath) / name).relative_to(root).as_posix()
            if not tree.file_visited(rel):
                continue
            data = (root / rel).read_bytes()
            if b"\x00" in data:
                continue
            lines = data.decode().split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            hits = [i + 1 for i, line in enumerate(lines) if rx.search(line)]
            if hits:
                out[rel] = hits
    return dict(sorted(out.items()))


def _rg(root: pathlib.Path, args: list[str]) -> str:
    cmd = ["rg", "--no-config", "--no-require-git",
           "--no-ignore-global", "--sort", "path", "--color", "never", *args]
    return subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False).stdout


GREPS = [("alpha", None, False, ""), ("^beta", None, False, ""), ("gamma", None, True, ""),
         ("fo+_bar$", "*.py", False, ""), ("TODO|fixme", "src/**", False, ""),
         ("delta", "!*.md", False, ""), ("alpha", None, False, "src"),
         ("x=1", "*.log", False, ""), ("end$", None, False, ".hidden")]


def _bounded(fn: Any, seconds: float = 20.0) -> Any:
    box: list[Any] = []
    t = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "the call did not return"
    return box[0]


_LINE_PATTERNS = [r"\bfoo\b", r"^foo", r"foo$", r"^$", r"o+", r"\d{2,}", r"é", r"(?i)FOO",
                  r"\Afoo", r"bar\z", r"^\s*$", r"[^a-z]", r"x*", r"foo\nbar",
                  # classes that hold "\n": a match must still stay within one line
                  r"\s+bar", r"o[^y]*b", r"\D+bar", r"foo\s*$", r"[\x00-\x7f]+2",
                  r"(?s)o.b", r"\W+b", r"(?-m)^foo", r"(?i)O\s+B", r"\S+\s+\S+"]


# Patterns whose classes hold "\n" (\s, [^y], \D, (?s).): ripgrep removes the line
# terminator from them, so a match never spans lines.
_TRICKY = [r"\s+return", r"a[^y]*z", r"\s*$", r"^\s+", r"\W+b", r"(?s)a.b", r"\D+",
           r"[\x00-\x7f]+z", r"(?-m)^a", r"\Aa", r"(?s:.)z", r"[^a]z", r"(?i)A\s+Z",
           r"\S+\s*$", r"[[:space:]]+return", r"\pC+z", r"b\s\S*$"]


_TRICKY_TEXT = (b"a\n\n\n    return 1\nreturn\nx\n  \nb z\naz\na\nz\n12\nab\n"
                b"A \t Z\n\t\nend b\nb \n\n\n")


def _counted(compiled: Any) -> tuple[Any, list[int]]:
    """``compiled`` with a ``match_start`` that tallies, per RE2 call, the bytes RE2 must
    read at least: from ``pos`` to the end of the match it reports (to ``endpos`` when
    there is none)."""
    from toolfs.search import discovery

    work = [0, 0]
    lr = discovery.LineRegex(compiled.regex, compiled.whole_text)

    def start(data: bytes, pos: int, endpos: int) -> int:
        m = compiled.regex.search(data, pos, endpos)
        work[0] += 1
        work[1] += (m.end() if m is not None else endpos) - pos
        return -1 if m is None else int(m.start())

    object.__setattr__(lr, "match_start", start)
    return lr, work


_LINEAR = [(r"\s+return", b"\n", b"    return 1\n"), (r"a[^y]*z", b"a\n", b"z\n"),
           (r"\D*9", b"x\n", b"9\n"), (r"(?s)a.*z", b"a\n", b"z\n"),
           (r"\s*return", b"return\n", b""), (r"\Areturn", b"\n", b"return\n"),
           (r"[^#]+#", b"code\n", b"#\n")]


def _ignore_tree(root: pathlib.Path, rnd: random.Random) -> None:
    kinds = [
        lambda k: f"n{k}", lambda k: f"n{k}/", lambda k: f"*.e{k}", lambda k: f"p{k}*",
        lambda k: f"/d1/n{k}", lambda k: f"d1/n{k}", lambda k: f"n?{k}",
        lambda k: f"[mn]{k}.txt", lambda k: f"**/d2/n{k}", lambda k: f"d1/**/x{k}",
        lambda k: f"x{k}[0-4]", lambda k: f"*{k}*", lambda k: f"d{k % 4}/", lambda k: "*~",
        lambda k: f"/p{k}?", lambda k: f"\\!n{k}", lambda k: f"m{k}.t?t/",
    ]
    rules = []
    for _ in range(700):
        rule = rnd.choice(kinds)(rnd.randrange(40))
        rules.append(("!" if rnd.random() < 0.25 else "") + rule)
    (root / ".gitignore").write_text("\n".join(rules) + "\n")
    sub = [("!" if rnd.random() < 0.4 else "") + rnd.choice(kinds)(rnd.randrange(12))
           for _ in range(60)]
    (root / "d1").mkdir()
    (root / "d1" / ".gitignore").write_text("\n".join(sub) + "\n")
    names = [lambda k: f"n{k}", lambda k: f"n{k}.e{k % 5}", lambda k: f"p{k}x",
             lambda k: f"m{k}.txt", lambda k: f"x{k}", lambda k: f"x{k}3", lambda k: f"nn{k}",
             lambda k: f"!n{k}", lambda k: f"a{k}b~", lambda k: f"q{k}"]
    dirs = ["", "d1", "d2", "d1/d2", "d3", "d1/d3/d2", "n3", "d1/n4", "m2.txt", "d0/x"]
    for _ in range(400):
        d = rnd.choice(dirs)
        name = rnd.choice(names)(rnd.randrange(12))
        p = root / d / name
        if (root / d).is_file() or p.is_dir():
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("hit\n")


def _git_not_ignored(root: pathlib.Path) -> list[str]:
    """The files under ``root`` that git's own ignore rules keep (hidden files aside, as
    grep skips them), from a throwaway repository."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "--others",
                             "--exclude-standard"], check=True, capture_output=True,
                            text=True, env=env).stdout.split("\n")
    return [p for p in listed if p and not any(part.startswith(".")
                                               for part in p.split("/"))]


def _count_regex_calls() -> Any:
    """A patch of RE2's ``fullmatch`` and of ``discovery.full_match`` (which calls RE2's
    engine directly) that counts whole-path matches (``calls[0]``)."""
    import contextlib
    from unittest import mock

    import re2

    from toolfs.search import discovery

    calls = [0]
    real = re2._Regexp.fullmatch
    real_full = discovery.full_match

    def counted(self: Any, *args: Any, **kw: Any) -> Any:
        calls[0] += 1
        return real(self, *args, **kw)

    def counted_full(regex: Any, text: str) -> bool:
        calls[0] += 1
        return real_full(regex, text)

    patches = contextlib.ExitStack()
    patches.enter_context(mock.patch.object(re2._Regexp, "fullmatch", counted))
    patches.enter_context(mock.patch.object(discovery, "full_match", counted_full))
    return calls, patches


_BIG_GLOB = "**/a/" * 800 + "{a,b}" * 3 + "*.py"


@pytest.mark.parametrize("pattern", GLOBS)
def test_glob_matches_python_glob(tmp_path: pathlib.Path, pattern: str) -> None:
    b = LocalBackend(str(tmp_path))
    b.setup()
    root = pathlib.Path(b.root)
    _tree(root, 300)
    ws = b.workspace(glob_limit=10_000)
    want = set()
    for alt in _expand(pattern):
        for p in pyglob.glob(alt, root_dir=root, recursive=True, include_hidden=False):
            if (root / p).is_file():
                want.add(p)
    got = set(ws.glob(pattern).paths)
    assert got == want


def test_glob_pure_matcher_against_fnmatch() -> None:
    import fnmatch

    rnd = random.Random(3)
    alphabet = "ab.*?[]!-_"
    for _ in range(2000):
        pat = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 6)))
        name = "".join(rnd.choice("ab.-_[]!") for _ in range(rnd.randint(1, 6)))
        want = fnmatch.fnmatchcase(name, pat) and (not name.startswith(".")
                                                   or pat.startswith("."))
        if "{" in pat:
            continue
        assert compile_glob(pat).match(name) == want, (pat, name)


def test_gitignore_lines_end_at_newlines_only(tmp_path: pathlib.Path) -> None:
    """A .gitignore is read as git and ripgrep read it: lines end at LF (less the CRs
    before it), so a lone CR, a form feed or a NEL is part of a pattern, not a break."""
    b = LocalBackend(str(tmp_path))
    b.setup()
    root = pathlib.Path(b.root)
    (root / ".gitignore").write_bytes(
        "a.log\rb.log\nc.log\fd.log\ne.log\r\nf.log\x85g.log\nh.log\r\r\n".encode())
    for name in "abcdefgh":
        (root / f"{name}.log").write_text("hit\n")
    ws = b.workspace()
    found = sorted(ws.grep("hit").files)
    assert found == ["a.log", "b.log", "c.log", "d.log", "f.log", "g.log"]
    if shutil.which("rg"):
        assert sorted(_rg(root, ["-l", "hit"]).split()) == found


@pytest.mark.parametrize(("pattern", "glob", "icase", "base"), GREPS)
def test_grep_matches_ripgrep(tmp_path: pathlib.Path, pattern: str, glob: str | None,
                              icase: bool, base: str) -> None:
    b = LocalBackend(str(tmp_path))
    b.setup()
    root = pathlib.Path(b.root)
    _grep_tree(root)
    ws = b.workspace(grep_limit=100_000, max_output_chars=10**7)
    kw: dict[str, Any] = {"glob": glob, "ignore_case": icase, "path": base or None}
    counts = ws.execute("grep", {"pattern": pattern, "output_mode": "count",
                                 **{k: v for k, v in kw.items() if v}}).text
    files = ws.grep(pattern, **kw).files
    content = ws.execute("grep", {"pattern": pattern, "output_mode": "content",
                                  **{k: v for k, v in kw.items() if v}}).text
    ctx = ws.execute("grep", {"pattern": pattern, "output_mode": "content", "context": 2,
                              **{k: v for k, v in kw.items() if v}}).text
    counts, content, ctx = (t.split("\n\n(Skipped")[0] for t in (counts, content, ctx))
    if shutil.which("rg"):
        flags = (["-i"] if icase else []) + (["-g", glob] if glob else [])
        where = [base] if base else []
        rg_files = _rg(root, ["-l", *flags, pattern, *where]).split()
        assert files == rg_files
        assert counts == _rg(root, ["-c", *flags, pattern, *where]).rstrip("\n") or \
            counts.startswith("No matches")
        rg_content = _rg(root, ["-n", "-H", *flags, pattern, *where]).rstrip("\n")
        assert content == rg_content or (not rg_content and content.startswith("No match"))
        rg_ctx = _rg(root, ["-n", "-H", "-C", "2", *flags, pattern, *where]).rstrip("\n")
        assert ctx == rg_ctx or (not rg_ctx and ctx.startswith("No match"))
    else:  # CI without ripgrep: the same facts from an independent reference
        ref = _reference_grep(root, pattern, glob, icase, base)
        assert files == list(ref)
        want = "\n".join(f"{p}:{len(v)}" for p, v in ref.items())
        assert counts == want or (not ref and counts.startswith("No matches"))
        lines = ws.grep(pattern, output_mode="content", **kw).matches
        assert {(m.path, m.line) for m in lines} == {(p, n) for p, v in ref.items()
                                                      for n in v}


def test_redos_pattern_returns(tmp_path: pathlib.Path) -> None:
    b = LocalBackend(str(tmp_path))
    b.setup()
    b.put("evil.txt", b"a" * 100_000 + b"!\n")
    ws = b.workspace()
    r = _bounded(lambda: ws.grep("(a+)+$", output_mode="content"))
    assert r.matches == []
    r = _bounded(lambda: ws.grep("(a|aa)+!", output_mode="count"))
    assert r.counts == {"evil.txt": 1}
    assert _bounded(lambda: compile_regex("(x+x+)+y").matching_lines(b"x" * 100_000)) == []


@pytest.mark.parametrize("pattern", _LINE_PATTERNS)
def test_matching_lines_agrees_with_a_per_line_search(pattern: str) -> None:
    """RE2's engine called directly (the fast path) and the public ``search`` find the
    same lines, and both equal a search of each line on its own: a match never counts
    across a line end, and ``^``/``$``/``\\b`` see each line's own edges."""
    import re2

    from toolfs.search import discovery

    rng = random.Random(pattern)
    words = ["foo", "bar", "", " ", "é", "12", "foo bar", "xfoo", "foox", "\t"]
    for _ in range(40):
        lines = [" ".join(rng.choice(words) for _ in range(rng.randrange(4)))
                 for _ in range(rng.randrange(1, 8))]
        data = "\n".join(lines).encode() + (b"\n" if rng.random() < 0.5 else b"")
        compiled = compile_regex(pattern)
        plain = re2.compile(("(?m)" + pattern).encode())
        expected = [i for i, line in enumerate(discovery.split_data_lines(data))
                    if plain.search(line) is not None]
        assert compiled.matching_lines(data) == expected, (pattern, data)
        slow = discovery.LineRegex(compiled.regex, compiled.whole_text)
        object.__setattr__(slow, "match_start", discovery._public_match_start(compiled.regex))
        assert slow.matching_lines(data) == expected, (pattern, data)


@pytest.mark.parametrize("pattern", _TRICKY)
def test_grep_never_matches_across_lines_as_ripgrep(tmp_path: pathlib.Path,
                                                     pattern: str) -> None:
    b = LocalBackend(str(tmp_path))
    b.setup()
    root = pathlib.Path(b.root)
    (root / "t.txt").write_bytes(_TRICKY_TEXT)
    (root / "u.txt").write_bytes(_TRICKY_TEXT.rstrip(b"\n"))
    ws = b.workspace()
    got = ws.execute("grep", {"pattern": pattern, "output_mode": "content"}).text
    lines = _TRICKY_TEXT.decode().split("\n")[:-1]
    import re2

    rx = re2.compile("(?m)" + pattern)  # RE2 on each line alone
    want_t = [f"t.txt:{i + 1}:{line}" for i, line in enumerate(lines) if rx.search(line)]
    last = _TRICKY_TEXT.rstrip(b"\n").decode().split("\n")
    want_u = [f"u.txt:{i + 1}:{line}" for i, line in enumerate(last) if rx.search(line)]
    want = "\n".join(want_t + want_u)
    assert got == want or (not want and got.startswith("No matches"))
    if shutil.which("rg"):
        assert got == _rg(root, ["-n", "-H", pattern]).rstrip("\n") or \
            (not want and got.startswith("No matches"))


@pytest.mark.parametrize(("pattern", "line", "tail"), _LINEAR)
def test_grep_regex_work_is_linear_in_the_text(pattern: str, line: bytes,
                                               tail: bytes) -> None:
    """A match that could run over many lines (\\s over blank lines, [^y] over every
    line) is cut at the line end: RE2 reads each byte a bounded number of times. The old
    search restarted after each cross-line candidate and read the rest of the text
    again: ~n**2/2 bytes here."""
    n = 20_000
    data = line * n + tail
    lr, work = _counted(compile_regex(pattern))
    hits = lr.matching_lines(data)
    assert hits == compile_regex(pattern).matching_lines(data)
    assert work[0] <= len(hits) + n + 2
    assert work[1] <= 2 * len(data) + 2 * work[0]


@pytest.mark.parametrize("seed", range(4))
def test_gitignore_with_many_rules_and_negations_matches_ripgrep(tmp_path: pathlib.Path,
                                                                   seed: int) -> None:
    """Hundreds of rules of every kind (literal names and paths, *.ext, prefix*,
    wildcards, classes, **, dir/ rules, ! negations, in a nested .gitignore too): the
    combined matchers give ripgrep's answer (git's, where ripgrep is not installed:
    ripgrep follows git's rules)."""
    b = LocalBackend(str(tmp_path))
    b.setup()
    root = pathlib.Path(b.root)
    _ignore_tree(root, random.Random(seed))
    ws = b.workspace(grep_limit=100_000, max_output_chars=10**7)
    got = ws.grep("hit").files
    rg = shutil.which("rg")
    expected = _rg(root, ["-l", "hit"]).split() if rg else _git_not_ignored(root)
    # (sorted here: ripgrep orders "n3/x" before "n3.e3", toolfs by the path string)
    assert sorted(got) == sorted(expected)
    everything = [str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and p.name != ".gitignore"]
    assert 10 < len(got) < len(everything) - 20, (len(got), len(everything))


@pytest.mark.parametrize("kind", ["literal", "wildcard"])
def test_gitignore_work_per_path_does_not_grow_with_the_rules(kind: str) -> None:
    """100,000 rules (a 1 MiB .gitignore a model could write) cost per path what 2,000
    do: literal rules are table look-ups, wildcard rules combined regexes, and wildcard
    rules over MAX_IGNORE_PATTERNS are not applied (and counted). The old matcher made
    one Python call per rule per path."""
    from toolfs.search.discovery import _CHUNK, MAX_IGNORE_PATTERNS

    rule = {"literal": "n{}", "wildcard": "*n{}?"}[kind]
    paths = [f"d{i % 7}/sub/f{i}.txt" for i in range(300)]
    paths.append({"literal": "d1/n5", "wildcard": "d2/xn7y"}[kind])
    per_path = []
    for n in (2_000, 100_000):
        tree = TreeFilter()
        tree.add_gitignore("", "".join(rule.format(i) + "\n" for i in range(n)))
        calls, patch = _count_regex_calls()
        with patch:
            seen = [tree.file_visited(p) for p in paths]
        assert all(seen[:-1]) and not seen[-1]
        per_path.append(calls[0] / len(paths))
        if kind == "wildcard":
            assert tree.dropped_rules == n - MAX_IGNORE_PATTERNS
        else:
            assert tree.dropped_rules == 0 and calls[0] == 0
    # Each directory and file: the chunks, then one chunk's rules at most.
    bound = 2 * (MAX_IGNORE_PATTERNS // _CHUNK + _CHUNK)
    assert per_path[1] <= bound and per_path[1] <= per_path[0] + 1


def test_grep_reports_gitignore_rules_not_applied() -> None:
    from toolfs.search.discovery import MAX_IGNORE_PATTERNS

    ws = toolfs.Workspace("memory://gi-over")
    rules = [f"*n{i}?" for i in range(MAX_IGNORE_PATTERNS + 10)] + ["!*n5x", "*.log"]
    ws.write(".gitignore", "\n".join(rules) + "\n")
    for name in ("a.txt", "n5x", "n7x", f"n{MAX_IGNORE_PATTERNS + 5}x", "b.log"):
        ws.write(name, "hello\n")
    r = ws.grep("hello")
    # n7x: rule 7; n5x: re-included by the last ! rule; the rule for the 5th name is over
    # the limit, so its file is searched; *.log is a table rule and always applies.
    assert r.files == ["a.txt", f"n{MAX_IGNORE_PATTERNS + 5}x", "n5x"]
    assert r.ignore_rules_not_applied == 10
    text = ws.execute("grep", {"pattern": "hello"}).text
    assert text.endswith(f"(10 .gitignore wildcard rules over the limit of "
                         f"{MAX_IGNORE_PATTERNS} per file not applied.)")


@pytest.mark.parametrize("pattern", [_BIG_GLOB, "**/*.py", "{x,a/**}/{[ab],?,**}/*.{py,pyi}"])
def test_glob_costs_one_regex_call_per_path(pattern: str) -> None:
    """Braces and ** compile into one RE2 regex: one call per listed path, linear in the
    path, however many alternatives and ** segments (the old matcher ran a set of
    states per segment per alternative in Python: ~7 ms per path for this 4 KB
    pattern)."""
    assert len(_BIG_GLOB) <= 4096
    paths = ["a/" * 8 + f"f{i}.txt" for i in range(200)] + ["a/" * 801 + "aba.py"]
    compiled = compile_glob(pattern)
    override = compile_override(pattern)
    calls, patch = _count_regex_calls()
    with patch:
        hits = [compiled.match(p) for p in paths]
        decided = [override.decide(p, False) for p in paths]
    assert calls[0] == 2 * len(paths)
    assert hits[-1] and not any(hits[:-1])
    assert decided[-1] == "include" and set(decided[:-1]) == {"exclude"}


@pytest.mark.parametrize("pattern", ["**/a/" * 800 + "{a,b}" * 8 + "*.py",
                                     "{a,b}" * 8 + "/x" * 100])
def test_glob_alternatives_over_the_limit_are_invalid_arguments(pattern: str) -> None:
    from toolfs.errors import FsError

    for compile_ in (compile_glob, compile_override):
        with pytest.raises(FsError) as info:
            compile_(pattern)
        assert info.value.code == "invalid_arguments"
    ws = toolfs.Workspace(f"memory://glob-over-{len(pattern)}")
    ws.write("a.py", "x\n")
    for tool, args in (("glob", {"pattern": pattern}),
                       ("grep", {"pattern": "x", "glob": pattern})):
        out = ws.execute(tool, args)
        assert out.error is not None and out.error.code == "invalid_arguments"


def test_grep_walks_a_tree_thousands_of_directories_deep(tmp_path: pathlib.Path) -> None:
    """The directory filter is iterative: a 1,000-level tree (within PATH_MAX) is
    searched as glob and read reach it, with .gitignore files on the way."""
    b = LocalBackend(str(tmp_path))
    b.setup()
    root = pathlib.Path(b.root)
    (root / "top.txt").write_text("hello\n")
    deep = "/".join(["a"] * 1000)
    d = str(root)
    for _ in range(1000):  # (pathlib's mkdir(parents=True) recurses per level)
        d = os.path.join(d, "a")
        os.mkdir(d)
    (root / deep / "f.txt").write_text("hello\n")
    (root / deep / "g.log").write_text("hello\n")
    (root / "a" / "a" / ".gitignore").write_text("*.log\n")
    ws = b.workspace()
    try:
        for path in (None, "a", "/".join(["a"] * 500)):
            r = ws.grep("hello", path=path)
            want = [f"{deep}/f.txt"] + (["top.txt"] if path is None else [])
            assert r.files == want
    finally:
        # pytest's clean-up of old temp dirs (shutil.rmtree) recurses per level
        subprocess.run(["rm", "-rf", str(root / "a")], check=True)
    tree = TreeFilter(override=compile_override("*.txt"))
    tree.add_gitignore("a", "b/\n")
    rel = "/".join(["a"] * 5000)
    assert tree.file_visited(rel + "/x.txt") and not tree.file_visited(rel + "/b/x.txt")


def test_brace_matching_is_one_pass_per_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    """Braces are matched in one pass over the pattern: a pattern of unmatched ``{`` and
    unclosed ``[`` (4,096 characters, the limit) costs one class lookup per ``[``, where
    each ``{`` used to rescan the rest of the pattern and each ``[`` in it to its end
    (about 200 s of CPU for 1,000 ``{`` and 3,096 ``[``)."""
    from toolfs.search import discovery

    calls = [0]
    real = discovery._class_end

    def counted(seg: str, i: int) -> int:
        calls[0] += 1
        return real(seg, i)

    monkeypatch.setattr(discovery, "_class_end", counted)
    pattern = "{" * 1000 + "[" * 3096
    assert discovery.expand_braces(pattern) == [pattern]
    assert calls[0] <= 3096
    assert discovery.expand_braces("a{b,[}]c}d") == ["abd", "a[}]cd"]


@pytest.mark.parametrize("pattern", [r"a\Cb", r"\Cb", r"a\C*b", r"x\\\Cy"])
def test_grep_refuses_the_any_byte_escape(pattern: str) -> None:
    # \C matches any byte, a newline too, whatever never_nl says: a match could span
    # lines ("a\nb" matched as line 1). ripgrep refuses it; so does toolfs.
    ws = toolfs.Workspace("memory://anybyte-" + str(abs(hash(pattern))))
    ws.write("t.txt", "a\nb\n")
    out = ws.execute("grep", {"pattern": pattern, "output_mode": "content"})
    assert out.error is not None and out.error.code == "invalid_arguments", out.text
    assert ws.execute("grep", {"pattern": r"a\\Cb"}).error is None  # an escaped backslash


def test_leftover_temp_files_are_never_listed(tmp_path: pathlib.Path) -> None:
    (tmp_path / "notes.md").write_text("x\n")
    (tmp_path / ".notes.md.toolfs-tmp-0123456789ab").write_text("half a write")
    ws = toolfs.Workspace(str(tmp_path))
    assert [e.name for e in ws.ls().entries] == ["notes.md"]
    assert ws.glob(".*").paths == []
    assert ws.grep("half", glob=".*").files == []


def test_ls_of_a_file_advises_a_directory() -> None:
    ws = toolfs.Workspace("memory://toolfs-disc-ls-file")
    ws.write("a.txt", "x\n")
    out = ws.execute("ls", {"path": "a.txt"})
    assert out.error is not None and out.error.code == "not_a_file"
    assert out.text.endswith("Give the path of a directory; use read for a file.")


def test_an_invalid_regex_is_explained_in_plain_text() -> None:
    ws = toolfs.Workspace("memory://toolfs-disc-regex")
    out = ws.execute("grep", {"pattern": "(a+"})
    assert out.error is not None and out.error.code == "invalid_arguments"
    assert out.error.message == "invalid regular expression (RE2 syntax): missing ): (a+"


class Discovery:
    """glob, grep and ls."""

    def test_glob(self, backend: Backend) -> None:
        _populate(backend)
        ws = _ws(backend)
        assert sorted(ws.glob("**/*.py").paths) == [
            "setup.py", "src/app.py", "src/deep/er/mod.py", "src/generated.py", "src/util.py"]
        assert sorted(ws.glob("*.py", path="src").paths) == [
            "src/app.py", "src/generated.py", "src/util.py"]
        assert sorted(ws.glob("src/**/*.{py,pyi}").paths) == [
            "src/app.py", "src/deep/er/mod.py", "src/generated.py", "src/types.pyi",
            "src/util.py"]
        # hidden names only through a segment that starts with "."; .gitignore does not filter
        assert sorted(ws.glob(".*").paths) == [".env", ".gitignore"]
        assert ws.glob(".github/*.yml").paths == [".github/ci.yml"]
        assert sorted(ws.glob("**/.*/*.py").paths) == ["src/.cache/tmp.py"]
        assert ws.glob("build/*").paths == ["build/out.txt"]
        # denied never appear
        everything = ws.glob("**/*").paths + ws.glob("**/.*").paths + ws.glob("*").paths
        assert not [p for p in everything if p.startswith("secrets") or p.endswith(".pem")]
        assert ws.glob("secrets/*").paths == []
        assert ws.glob("nothing/**").paths == []
        out = ws.execute("glob", {"pattern": "*.md"})
        assert out.text == "README.md" and not out.value.truncated
        assert ws.execute("glob", {"pattern": "*.zzz"}).text == "No files found."

    def test_glob_newest_first_and_limit(self, backend: Backend) -> None:
        _populate(backend)
        ws = _ws(backend, glob_limit=3)
        r = ws.glob("**/*.txt")
        assert r.truncated and len(r.paths) == 3
        out = ws.execute("glob", {"pattern": "**/*.txt"})
        assert "more matched. Narrow the pattern or pass a path" in out.text
        assert out.to_dict()["result"]["truncated"] is True
        full = _ws(backend).glob("**/*.txt").paths
        assert r.paths == full[:3]

    def test_grep_files_with_matches(self, backend: Backend) -> None:
        _populate(backend)
        # The Python engine's answer, on every backend (local: ripgrep's engine differs
        # by design, checked below and in test_grep_ripgrep.py).
        ws = _ws(backend, grep_engine="python")
        if backend.name == "local" and ripgrep.ripgrep_binary() is not None:
            got = _ws(backend).grep("hello")
            assert got.files == ["README.md", "data/latin1.txt", "docs/bom.txt",
                                 "docs/crlf.txt", "docs/guide.txt", "keep.log",
                                 "src/app.py", "src/deep/er/mod.py"]
            assert got.skipped == {} and got.skipped_unknown
        r = ws.grep("hello")
        assert r.files == ["README.md", "docs/bom.txt", "docs/crlf.txt", "docs/guide.txt",
                           "keep.log", "src/app.py", "src/deep/er/mod.py"]
        assert r.skipped == {"not_text": 2, "too_large": 1}
        out = ws.execute("grep", {"pattern": "hello"})
        assert out.text == "\n".join(r.files) + (
            "\n\n(Skipped 3 files: 2 not text (binary or not UTF-8), 1 over the size cap.)")
        # ignore_case, path, path naming a hidden dir or one file, glob filter
        assert ws.grep("hello", path="src", ignore_case=True).files == [
            "src/app.py", "src/deep/er/mod.py", "src/util.py"]
        assert ws.grep("hello", path=".github").files == [".github/ci.yml"]
        assert ws.grep("hello", path="src/generated.py").files == ["src/generated.py"]
        assert ws.grep("hello", path="build").files == ["build/out.txt"]
        assert ws.grep("hello", glob="*.txt").files == [
            "docs/bom.txt", "docs/crlf.txt", "docs/guide.txt"]
        # a whitelisting glob also re-includes a .gitignored file (ripgrep -g)
        assert ws.grep("hello", glob="src/**/*.py").files == [
            "src/app.py", "src/deep/er/mod.py", "src/generated.py"]
        assert ws.grep("hello", glob="!*.txt").files == [
            "README.md", "keep.log", "src/app.py", "src/deep/er/mod.py"]
        # a whitelisting glob includes an ignored or hidden *file* (as ripgrep -g does)
        assert ws.grep("hello", glob="*.log").files == ["app.log", "keep.log"]
        assert ws.grep("hello", glob=".env").files == [".env"]

    def test_grep_content_and_context(self, backend: Backend) -> None:
        _populate(backend)
        ws = _ws(backend)
        out = ws.execute("grep", {"pattern": "hello", "path": "docs", "output_mode": "content"})
        assert out.text == ("docs/bom.txt:1:hello bom\ndocs/crlf.txt:2:hello crlf\n"
                            "docs/guide.txt:3:hello docs")
        out = ws.execute("grep", {"pattern": "^hello", "path": "src/deep",
                                  "output_mode": "content", "context": 1})
        assert out.text == ("src/deep/er/mod.py-1-x = 1\nsrc/deep/er/mod.py:2:hello = x\n"
                            "src/deep/er/mod.py-3-y = 2\nsrc/deep/er/mod.py-4-z = 3\n"
                            "src/deep/er/mod.py:5:hello again")
        out = ws.execute("grep", {"pattern": "^hello$|^x", "path": "src/deep",
                                  "output_mode": "content", "context": 0})
        assert out.text == "src/deep/er/mod.py:1:x = 1"
        out = ws.execute("grep", {"pattern": "^x|again", "path": "src/deep",
                                  "output_mode": "content", "context": 1})
        assert out.text == ("src/deep/er/mod.py:1:x = 1\nsrc/deep/er/mod.py-2-hello = x\n--\n"
                            "src/deep/er/mod.py-4-z = 3\nsrc/deep/er/mod.py:5:hello again")
        r = ws.grep("hello", path="docs", output_mode="content", context=1)
        assert [(m.path, m.line, m.context) for m in r.matches][:3] == [
            ("docs/bom.txt", 1, False), ("docs/bom.txt", 2, True), ("docs/crlf.txt", 1, True)]
        assert "--\ndocs/crlf.txt-1-first" in ws.execute(
            "grep", {"pattern": "hello", "path": "docs", "output_mode": "content",
                     "context": 1}).text
        # head_limit caps the lines
        r = ws.grep("hello", output_mode="content", head_limit=2)
        assert len(r.matches) == 2 and r.truncated
        text = ws.execute("grep", {"pattern": "hello", "output_mode": "content",
                                   "head_limit": 2}).text
        assert "Showing the first 2 lines (by path); more matched" in text

    def test_grep_count_and_head_limit(self, backend: Backend) -> None:
        _populate(backend)
        ws = _ws(backend, grep_engine="python")  # the corpus's Latin-1 file: see above
        out = ws.execute("grep", {"pattern": "hello", "output_mode": "count", "path": "src"})
        assert out.text == "src/app.py:1\nsrc/deep/er/mod.py:2"
        r = ws.grep("hello", head_limit=2)
        assert r.files == ["README.md", "docs/bom.txt"] and r.truncated
        out = ws.execute("grep", {"pattern": "hello", "head_limit": 2})
        assert "Showing the first 2 files (by path); more matched" in out.text
        r = ws.grep("hello", output_mode="count", head_limit=1)
        assert r.counts == {"README.md": 1} and r.truncated
        assert ws.execute("grep", {"pattern": "zzz"}).text.startswith("No matches found in ")

    def test_grep_errors_and_denied(self, backend: Backend) -> None:
        _populate(backend)
        ws = _ws(backend)
        for args, code in [({"pattern": "(unclosed"}, "invalid_arguments"),
                           ({"pattern": "(?=x)"}, "invalid_arguments"),
                           ({"pattern": "x", "path": "../etc"}, "outside_root"),
                           ({"pattern": "x", "path": "secrets/key.txt"}, "denied"),
                           ({"pattern": "x", "path": "id.pem"}, "denied"),
                           ({"pattern": "x", "path": "missing/dir"}, "not_found")]:
            out = ws.execute("grep", args)
            assert out.error is not None and out.error.code == code, (args, out.text)
        for mode in ("files_with_matches", "content", "count"):
            text = ws.execute("grep", {"pattern": "secret|pem", "output_mode": mode,
                                       "ignore_case": True}).text
            assert "secrets/" not in text and "id.pem" not in text and "hello pem" not in text

    def test_ls(self, backend: Backend) -> None:
        _populate(backend)
        ws = _ws(backend)
        r = ws.ls()
        names = [(e.name, e.kind) for e in r.entries]
        assert ("src", "dir") in names and ("README.md", "file") in names
        assert ("secrets", "dir") not in names and ("id.pem", "file") not in names
        assert names == sorted(names)
        out = ws.execute("ls", {"path": "src/deep"})
        assert out.text == "er/"
        out = ws.execute("ls", {"path": "docs"})
        assert out.text == "\n".join(
            f"{n}  ({len(TREE['docs/' + n])} bytes)" for n in ("bom.txt", "crlf.txt", "guide.txt"))
        assert ws.execute("ls", {"path": "README.md"}).error.code == "not_a_file"
        assert ws.execute("ls", {"path": "nope"}).error.code == "not_found"
        assert ws.execute("ls", {"path": "../x"}).error.code == "outside_root"
        small = _ws(backend, ls_limit=2).execute("ls", {})
        assert small.value.truncated and "the directory has more" in small.text

    def test_read_only_and_no_observation(self, backend: Backend) -> None:
        _populate(backend)
        ws = _ws(backend, read_only=True)
        assert ws.grep("hello").files and ws.glob("*.md").paths and ws.ls().entries
        rw = _ws(backend)
        rw.grep("hello", output_mode="content")
        rw.glob("**/*")
        rw.ls()
        out = rw.execute("edit", {"file_path": "README.md", "old_string": "hello",
                                  "new_string": "bye"})
        assert out.error is not None and out.error.code == "not_observed"

    def test_output_budget(self, backend: Backend) -> None:
        for i in range(60):
            backend.put(f"many/file{i:03}.txt", b"hello " + b"x" * 100 + b"\n")
        ws = backend.workspace(max_output_chars=1000)
        for tool, args in [("grep", {"pattern": "hello", "output_mode": "content"}),
                           ("grep", {"pattern": "hello"}), ("glob", {"pattern": "**/*"}),
                           ("ls", {"path": "many"})]:
            out = ws.execute(tool, args)
            assert len(out.text) <= 1000 and "Output truncated at 1000 characters" in out.text
            assert out.to_dict()["result"]["truncated"] is True

    def test_discovery_while_another_context_writes(self, backend: Backend) -> None:
        backend.put("w/f.txt", b"v0 hello\n")
        ws, writer = backend.workspace(), backend.workspace()
        writer.read("w/f.txt")
        errors: list[BaseException] = []
        seen: list[Any] = []
        stop = threading.Event()

        def write() -> None:
            try:
                for i in range(1, 8):
                    writer.write("w/f.txt", f"v{i} hello\n")
                    writer.write(f"w/new{i}.txt", "hello new\n")
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
            finally:
                stop.set()

        t = threading.Thread(target=write)
        t.start()
        while not stop.is_set() or not seen:
            seen.append((ws.grep("hello", path="w", output_mode="content"),
                         ws.glob("w/*.txt"), ws.ls("w")))
        t.join()
        assert not errors
        states = {f"v{i} hello" for i in range(8)}
        for grep_r, glob_r, ls_r in seen:
            assert "w/f.txt" in glob_r.paths
            for m in grep_r.matches:
                assert m.text in states | {"hello new"}
            assert {e.name for e in ls_r.entries} >= {"f.txt"}
