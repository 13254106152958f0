"""Local grep with ripgrep as its engine (``grep_engine="ripgrep"``, the default where
``rg`` is available) against the Python engine (``grep_engine="python"``, and what
answers where ``rg`` is missing): the same files, lines, counts and truncation in every
output mode, on the discovery corpus (deny rules, hidden files, .gitignore, binary, BOM,
UTF-16, CRLF, over the size cap), on random trees and for patterns where RE2 and Rust's
regex syntax differ; and ripgrep's engine holds confinement, deny rules, the caps and
the call's deadline. The differences by design (docs/contract.md, "grep engines") are
checked as such."""

from __future__ import annotations

import os
import pathlib
import random
import stat
import time
from typing import Any

import fsspec
import pytest

from tests.backend_fixtures import LocalBackend
from tests.contract.test_discovery import (
    _LINE_PATTERNS,
    _TRICKY,
    CAP,
    DENY,
    GREPS,
    TREE,
    _grep_tree,
    _ignore_tree,
)
from toolfs import deadline
from toolfs.errors import FsError
from toolfs.render import render_grep
from toolfs.search import ripgrep

PATTERNS = sorted({*_LINE_PATTERNS, *_TRICKY, *(g[0] for g in GREPS), "hello", "zzz",
                   r"\w+é", r"caf\W", r"\bhello\b", r"[\w-]+\.txt", r"[^\W\d]+$",
                   r"(?i)HELLO\s+\S+$", r"hello\s*$", r"\Qa.b\E", r"\x{FFFD}", r"é|\pL+\d",
                   "(?i)\u017f", r"[[:alpha:]]+\s", "^$", "x*", r"\$", r"[$]", "crlf$",
                   # RE2 reads these literally where Rust's syntax would not:
                   r"[a&&b]", r"[[a]]", r"x{,3}", r"a{", r"[~~x]", r"\r"})

DIFFERENT = ("data/latin1.txt",)
"""The corpus's file the engines treat apart by design: text that is not UTF-8."""


@pytest.fixture(scope="module")
def rg_present() -> str:
    """The ``ripgrep`` binary (the test extra installs the ``ripgrep`` wheel)."""
    found = ripgrep.ripgrep_binary()
    if found is None:
        pytest.skip("no rg: install the ripgrep extra (pip install -e '.[test]')")
    return found


def _corpus(root: pathlib.Path, *, leave_out: tuple[str, ...] = DIFFERENT) -> None:
    for rel, data in TREE.items():
        if rel in leave_out:
            continue
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    extra = {
        "more/fffd.txt": "hello \ufffd real\n".encode(),
        "more/nul_late.txt": b"hello\n" + b"x" * 3000 + b"\x00\n",
        "more/vt.txt": b"hello\x0bworld\n",
        "more/utf16.txt": "hello utf16\r\nzz crlf\r\n".encode("utf-16"),
        "more/utf16be.txt": b"\xfe\xff" + "hello be\n".encode("utf-16-be"),
        "more/.hidden_dir/h.txt": b"hello\n",
        "more/.x.toolfs-tmp-0123456789ab": b"hello leftover\n",
        "more/amp.txt": b"a&b [a]] x{,3} a{ ~x a-b\n",
        "more/new\nline.txt": b"hello in a name with a newline\nx\n",
    }
    for rel, data in extra.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    (root / "more" / "outside.txt").symlink_to("/etc/hostname")
    (root / "more" / "outdir").symlink_to("/etc")


def _pair(root: pathlib.Path, **kw: Any) -> tuple[Any, Any]:
    b = LocalBackend(str(root))
    b.fs = fsspec.filesystem("file")
    b.root = str(root)
    engine = b.workspace(grep_engine="ripgrep", **kw)
    python = b.workspace(grep_engine="python", **kw)
    return engine, python


def _key(r: Any) -> tuple[Any, ...]:
    return (r.mode, r.files, r.matches, r.counts, r.truncated)


def _same(engine: Any, python: Any, pattern: str, **kw: Any) -> None:
    for mode in ("files_with_matches", "content", "count"):
        a = engine.grep(pattern, output_mode=mode, **kw)
        p = python.grep(pattern, output_mode=mode, **kw)
        assert _key(a) == _key(p), (pattern, mode, kw)
        # The model's text is the same, but for what is said of skipped files.
        if not p.skipped:
            assert render_grep(a) == render_grep(p) or not a.files
    a = engine.grep(pattern, output_mode="content", context=1, **kw)
    assert _key(a) == _key(python.grep(pattern, output_mode="content", context=1, **kw))


def test_equal_on_the_discovery_corpus(tmp_path: pathlib.Path, rg_present: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "c"
    root.mkdir()
    _corpus(root)
    engine, python = _pair(root, deny=DENY, size_cap=CAP)
    # ripgrep answers: no file is read through toolfs for it.
    reads: list[int] = []
    original = type(engine.fs).read_many

    def counting(self: Any, found: Any, **kw: Any) -> Any:
        found = list(found)
        if self is engine.fs:
            reads.append(len(found))
        return original(self, found, **kw)

    monkeypatch.setattr(type(engine.fs), "read_many", counting)
    for pattern in PATTERNS:
        _same(engine, python, pattern)
        _same(engine, python, pattern, ignore_case=True)
    for pattern in ("hello", r"\w+$", "zzz"):
        for kw in ({"path": "more"}, {"glob": "*.txt"}, {"path": "src", "glob": "!*.pyi"},
                   {"path": "src/deep"}, {"glob": "more/**"}):
            _same(engine, python, pattern, **kw)
    reads.clear()
    got = engine.grep("hello")
    assert reads == [] and got.skipped_unknown and got.skipped == {}
    assert "more/utf16.txt" in got.files and "more/utf16be.txt" in got.files
    # Files searched: the Python engine's text files, plus the binary ones ripgrep
    # opened and gave up on (it does not open those over the size cap).
    expected = python.grep("hello")
    assert got.files_searched == expected.files_searched + expected.skipped["not_text"]


def test_the_differences_by_design(tmp_path: pathlib.Path, rg_present: str) -> None:
    """docs/contract.md, "grep engines": ripgrep searches text that is not UTF-8 (its
    bad bytes shown as U+FFFD), matches nothing at a lone CR, follows no symlink, does
    not decode UTF-32."""
    root = tmp_path / "d"
    root.mkdir()
    (root / "latin1.txt").write_bytes("caf\xe9 hello\n".encode("latin-1"))
    (root / "lone_cr.txt").write_bytes(b"a\rb\n")
    (root / "real.txt").write_bytes(b"hello link\n")
    (root / "link.txt").symlink_to(root / "real.txt")
    (root / "utf32.txt").write_bytes("hello 32\n".encode("utf-32"))
    engine, python = _pair(root)
    assert engine.grep("hello").files == ["latin1.txt", "real.txt"]
    assert python.grep("hello").files == ["link.txt", "real.txt", "utf32.txt"]
    shown = engine.grep("hello", output_mode="content").matches[0]
    assert (shown.path, shown.text) == ("latin1.txt", "caf\ufffd hello")
    assert engine.grep("a.b").files == [] and python.grep("a.b").files == ["lone_cr.txt"]


def test_equal_with_head_limit_and_the_early_stop(tmp_path: pathlib.Path,
                                                  rg_present: str) -> None:
    root = tmp_path / "h"
    root.mkdir()
    for i in range(60):
        (root / f"f{i:02}.txt").write_text("x\n" + ("hit\nhit too\n" if i % 5 == 0 else "y\n"))
    engine, python = _pair(root, grep_limit=7)
    for limit in (1, 2, 5, 100):
        _same(engine, python, "hit", head_limit=limit)
    # ripgrep searched every file; the Python engine stopped at the limit.
    assert engine.grep("hit", head_limit=1).files_searched == 60


@pytest.mark.parametrize("seed", range(2))
def test_equal_on_random_trees(tmp_path: pathlib.Path, rg_present: str, seed: int) -> None:
    root = tmp_path / "g"
    root.mkdir()
    _grep_tree(root)
    (root / "ign").mkdir()
    _ignore_tree(root / "ign", random.Random(seed))
    engine, python = _pair(root, grep_limit=100_000)
    for pattern, glob, icase, base in GREPS:
        _same(engine, python, pattern, glob=glob, ignore_case=icase, path=base or None)
    _same(engine, python, "hit")
    _same(engine, python, "hit", path="ign/d1")  # .gitignore files above: Python answers
    _same(engine, python, "hit", path="ign")


def test_without_ripgrep_the_python_engine_answers(tmp_path: pathlib.Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "n"
    root.mkdir()
    _corpus(root)
    engine, python = _pair(root, deny=DENY, size_cap=CAP)
    monkeypatch.setattr(ripgrep, "_found_binary", (True, None))
    for pattern in ("hello", r"\w+$"):
        for mode in ("files_with_matches", "content", "count"):
            got = engine.grep(pattern, output_mode=mode)
            assert got == python.grep(pattern, output_mode=mode)
            assert not got.skipped_unknown


def test_deny_rules_confinement_and_caps(tmp_path: pathlib.Path, rg_present: str) -> None:
    """Denied files are neither shown nor searched (ripgrep is given the rules as globs);
    no symlink leads it out of the root; the size cap, head_limit, grep_limit and the
    output budget hold."""
    base = tmp_path / "w"
    root = base / "root"
    (root / "secrets").mkdir(parents=True)
    (root / "secrets" / "k.txt").write_bytes(b"needle\n")
    (root / "id.pem").write_bytes(b"needle\n")
    (root / "sub").mkdir()
    (root / "sub" / "id.pem").write_bytes(b"needle\n")
    (root / "ok.txt").write_bytes(b"needle\n" * 50)
    (root / "big.txt").write_bytes(b"needle\n" * 1000)  # over the cap below
    (root / "wide.txt").write_bytes((b"needle " + b"w" * 300 + b"\n") * 3)
    outside = base / "outside"
    outside.mkdir()
    (outside / "o.txt").write_bytes(b"needle outside\n")
    (root / "out").symlink_to(outside)
    (root / "o.txt").symlink_to(outside / "o.txt")
    engine, python = _pair(root, deny=["secrets/", "*.pem"], size_cap=1000, grep_limit=20)
    for mode in ("files_with_matches", "content", "count"):
        got = engine.grep("needle", output_mode=mode)
        assert set(got.files) <= {"ok.txt", "wide.txt"} and got.files[0] == "ok.txt", got
        assert _key(got) == _key(python.grep("needle", output_mode=mode))
    assert engine.grep("needle").files_searched == 2  # denied files were not searched
    content = engine.grep("needle", output_mode="content")
    assert len(content.matches) == 20 and content.truncated
    assert len(engine.grep("needle", output_mode="content", head_limit=3).matches) == 3
    small = LocalBackend(str(root))
    small.fs, small.root = fsspec.filesystem("file"), str(root)
    budget = small.workspace(grep_engine="ripgrep", max_output_chars=1000, size_cap=1000)
    out = budget.execute("grep", {"pattern": "needle", "output_mode": "content"})
    assert out.error is None and len(out.text) <= 1000 and "Output truncated" in out.text
    with pytest.raises(FsError) as err:
        engine.grep("needle", path="out")
    assert err.value.code == "outside_root"


def _stuck_rg(tmp_path: pathlib.Path) -> tuple[str, pathlib.Path]:
    """An ``rg`` that never answers and starts a child: records both process ids."""
    pids = tmp_path / "pids"
    script = tmp_path / "rg"
    script.write_text(f"#!/bin/sh\nsleep 60 &\necho $$ $! > {pids}\nwait\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script), pids


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is dead
        return f.read().split(") ")[-1][:1] != "Z"


def test_ripgrep_is_stopped_at_the_deadline(tmp_path: pathlib.Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A ripgrep that does not finish is killed, with its process group, when the call's
    deadline passes: the call ends with backend_error, nothing left running."""
    fake, pids = _stuck_rg(tmp_path)
    root = tmp_path / "s"
    root.mkdir()
    (root / "a.txt").write_bytes(b"x\n")
    engine, _ = _pair(root)
    monkeypatch.setattr(ripgrep, "_found_binary", (True, fake))
    started = time.monotonic()
    with deadline.scope(0.5), pytest.raises(FsError) as err:
        engine.grep("x")
    assert time.monotonic() - started < 5
    assert err.value.code == "backend_error" and "nothing was changed" in err.value.message
    shell, child = (int(p) for p in pids.read_text().split())
    for _ in range(50):
        if not _alive(shell) and not _alive(child):
            break
        time.sleep(0.05)
    assert not _alive(shell) and not _alive(child)


def test_translate() -> None:
    t = ripgrep.translate
    assert t(r"\w+") == "[0-9A-Za-z_]+"
    assert t(r"[\w-]") == r"[0-9A-Za-z_-]"
    assert t(r"[^\W\d]") == r"[^[^0-9A-Za-z_]0-9]"
    assert t(r"\s\S") == r"[\t\n\x0C\r ][^\t\n\x0C\r ]"
    assert t(r"\bx\B") == r"(?-u:\b)x(?-u:\B)"
    assert t(r"a$") == r"a$"
    assert t(r"[]$]") == r"[]$]" and t(r"[^]$]x$") == r"[^]$]x$"
    assert t(r"[[:alpha:]$]") == r"[[:alpha:]$]"
    assert t(r"[a&&b]") == r"[a\&\&b]" and t(r"[[a]]") == r"[\[a]]" and t("[~~]") == r"[\~\~]"
    assert t(r"x{,3}") == r"x\{,3}" and t(r"x{2,3}") == r"x{2,3}" and t("a{") == r"a\{"
    with pytest.raises(ripgrep.Refused):
        t(r"[a--b]")
    assert not ripgrep.usable(r"a\r") and ripgrep.usable(r"a\\r")
    assert os.path.basename(ripgrep.ripgrep_binary() or "rg") == "rg"


def test_what_is_held_is_bounded_by_the_result() -> None:
    """ripgrep's output is read in chunks and only the files the result can show are
    held, whatever the tree: 5,000 files of 3 matching lines each, for a result of 10."""
    rnd = random.Random(5)
    names = [f"d{i % 7}/f{i:05}.txt" for i in range(5000)]
    rnd.shuffle(names)  # rg's parallel order
    out = b"".join(b"".join(f"./{n}\0{k}:line {k}\n".encode() for k in (1, 2, 3))
                   for n in names) + b"\n3 matches\n5000 files searched\n"
    lines = ripgrep._LineParser(keep=11, accept=lambda raw: raw[2:].decode())
    most = 0
    for at in range(0, len(out), 4096):
        lines.feed(out[at:at + 4096])
        most = max(most, sum(len(v) for v in lines.blocks.values()))
    lines.switch(b"")
    lines.trim()
    assert most <= 11 + 1024 + 3 and lines.more and lines.searched() == 5000
    assert sorted(lines.blocks) == sorted(names)[:4]
    counts = b"".join(f"./{n}\0{3}\n".encode() for n in names) + b"\n5000 files searched\n"
    counted = ripgrep._CountParser(keep=11, weighted=False, counted=True,
                                   accept=lambda raw: raw[2:].decode())
    for at in range(0, len(counts), 4096):
        counted.feed(counts[at:at + 4096])
        assert len(counted.files) <= 2 * 11 + 64 + 4096 // 20
    counted._trim()
    assert [f[0] for f in sorted(counted.files)] == sorted(names)[:11]
    assert counted.more and counted.searched() == 5000
