"""Local grep with ripgrep as a prefilter (``grep_engine="ripgrep"``) answers exactly what the
Python engine answers (``grep_engine="python"``): the whole result -- files, lines,
counts, files searched, skipped -- on the discovery test corpus (deny rules, hidden
files, .gitignore, binary, not UTF-8, BOM, CRLF, over the size cap, symlinks,
leftovers), on random trees, and for patterns where RE2 and ripgrep's regex differ."""

from __future__ import annotations

import os
import pathlib
import random
import subprocess
import sys
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
from toolfs.search import ripgrep

PATTERNS = sorted({*_LINE_PATTERNS, *_TRICKY, *(g[0] for g in GREPS), "hello", "zzz",
                   r"\w+é", r"caf\W", r"\bhello\b", r"[\w-]+\.txt", r"[^\W\d]+$",
                   r"(?i)HELLO\s+\S+$", r"hello\s*$", r"\Qa.b\E", r"\x{FFFD}", r"é|\pL+\d",
                   "(?i)\u017f", r"[[:alpha:]]+\s", "^$", "x*", r"\$", r"[$]", "crlf$"})


@pytest.fixture(scope="module")
def rg_present() -> str:
    """The ``ripgrep`` binary (the test extra installs the ``ripgrep`` wheel)."""
    found = ripgrep.ripgrep_binary()
    assert found is not None, "install the ripgrep extra: pip install -e '.[test]'"
    return found


def _corpus(root: pathlib.Path) -> None:
    for rel, data in TREE.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    extra = {
        "more/fffd.txt": "hello \ufffd real\n".encode(),
        "more/nul_late.txt": b"hello\n" + b"x" * 3000 + b"\x00\n",
        "more/lone_cr.txt": b"a\rb hello\r\nhello\rcrlf\n",
        "more/vt.txt": b"hello\x0bworld\n",
        "more/.hidden_dir/h.txt": b"hello\n",
        "more/.x.toolfs-tmp-0123456789ab": b"hello leftover\n",
    }
    for rel, data in extra.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    (root / "more" / "link.txt").symlink_to(root / "src" / "app.py")
    (root / "more" / "linkdir").symlink_to(root / "docs")
    (root / "more" / "outside.txt").symlink_to("/etc/hostname")


def _pair(root: pathlib.Path, **kw: Any) -> tuple[Any, Any]:
    b = LocalBackend(str(root))
    b.fs = fsspec.filesystem("file")
    b.root = str(root)
    auto = b.workspace(grep_engine="ripgrep", **kw)
    python = b.workspace(grep_engine="python", **kw)
    return auto, python


def _same(auto: Any, python: Any, pattern: str, **kw: Any) -> None:
    for mode in ("files_with_matches", "content", "count"):
        a = auto.grep(pattern, output_mode=mode, **kw)
        p = python.grep(pattern, output_mode=mode, **kw)
        assert a == p, (pattern, mode, kw)
    a = auto.grep(pattern, output_mode="content", context=1, **kw)
    assert a == python.grep(pattern, output_mode="content", context=1, **kw)


def test_equal_on_the_discovery_corpus(tmp_path: pathlib.Path, rg_present: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "c"
    root.mkdir()
    _corpus(root)
    auto, python = _pair(root, deny=DENY, size_cap=CAP)
    # The prefilter runs and spares reads: count the files the engine reads.
    reads: list[int] = []
    original = type(auto.fs).read_many

    def counting(self: Any, found: Any, **kw: Any) -> Any:
        found = list(found)
        if self is auto.fs:
            reads.append(len(found))
        return original(self, found, **kw)

    monkeypatch.setattr(type(auto.fs), "read_many", counting)
    for pattern in PATTERNS:
        _same(auto, python, pattern)
        _same(auto, python, pattern, ignore_case=True)
    for pattern in ("hello", r"\w+$", "zzz"):
        for kw in ({"path": "more"}, {"glob": "*.txt"}, {"path": "src", "glob": "!*.pyi"},
                   {"path": "more/linkdir"}):
            _same(auto, python, pattern, **kw)
    reads.clear()
    auto.grep("zzz")
    # Only the files ripgrep could not vouch for are read (the two .gitignore files,
    # then: NUL, not UTF-8, U+FFFD, the symlink); the Python engine reads all 19.
    searched = python.grep("zzz").files_searched
    assert sum(reads) <= 2 + 6 and searched == 15, (reads, searched)


def test_equal_with_head_limit_and_the_early_stop(tmp_path: pathlib.Path,
                                                  rg_present: str) -> None:
    root = tmp_path / "h"
    root.mkdir()
    for i in range(60):
        (root / f"f{i:02}.txt").write_text("x\n" + ("hit\n" if i % 5 == 0 else "y\n"))
    auto, python = _pair(root)
    for limit in (1, 2, 5, 100):
        _same(auto, python, "hit", head_limit=limit)


@pytest.mark.parametrize("seed", range(2))
def test_equal_on_random_trees(tmp_path: pathlib.Path, rg_present: str, seed: int) -> None:
    root = tmp_path / "g"
    root.mkdir()
    _grep_tree(root)
    (root / "ign").mkdir()
    _ignore_tree(root / "ign", random.Random(seed))
    auto, python = _pair(root, grep_limit=100_000)
    for pattern, glob, icase, base in GREPS:
        _same(auto, python, pattern, glob=glob, ignore_case=icase, path=base or None)
    _same(auto, python, "hit")
    _same(auto, python, "hit", path="ign/d1")


def test_utf16_with_a_bom_differs_in_the_counts_only(tmp_path: pathlib.Path,
                                                     rg_present: str) -> None:
    """The one documented difference (see toolfs.search.ripgrep): ripgrep decodes a file that
    starts with a UTF-16 byte-order mark, so where it finds no line the file counts as
    searched instead of skipped as not text. Files and lines are the same (none)."""
    root = tmp_path / "u"
    root.mkdir()
    (root / "utf16.txt").write_bytes("hello utf16\n".encode("utf-16"))
    (root / "plain.txt").write_bytes(b"hello\n")
    auto, python = _pair(root)
    _same(auto, python, "hello")  # ripgrep finds the line: toolfs reads and skips it
    a, p = auto.grep("zzz"), python.grep("zzz")
    assert a.files == p.files == [] and p.skipped == {"not_text": 1}
    assert (a.files_searched, a.skipped) == (2, {})


def test_without_ripgrep_the_python_engine_answers(tmp_path: pathlib.Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "n"
    root.mkdir()
    _corpus(root)
    auto, python = _pair(root, deny=DENY, size_cap=CAP)
    monkeypatch.setattr(ripgrep, "_found_binary", (True, None))
    assert ripgrep.start(str(root), "x", ignore_case=False, glob=None, gitignore=True,
                         size_cap=CAP) is None
    _same(auto, python, "hello")


def test_translate() -> None:
    t = ripgrep.translate
    assert t(r"\w+") == "[0-9A-Za-z_]+"
    assert t(r"[\w-]") == r"[0-9A-Za-z_-]"
    assert t(r"[^\W\d]") == r"[^[^0-9A-Za-z_]0-9]"
    assert t(r"\s\S") == r"[\t\n\x0C\r ][^\t\n\x0C\r ]"
    assert t(r"\bx\B") == r"(?-u:\b)x(?-u:\B)"
    assert t(r"a$") == r"a(?:\r?$)"
    assert t(r"[$]\$") == r"[$]\$"
    assert t(r"[]$]") == r"[]$]" and t(r"[^]$]x$") == r"[^]$]x(?:\r?$)"
    assert t(r"[[:alpha:]$]") == r"[[:alpha:]$]"
    assert ripgrep.parse_counts(b"a\0" + b"3\nb\nc\0" + b"0\n") == {"a": 3, "b\nc": 0}
    assert os.path.basename(ripgrep.ripgrep_binary() or "rg") == "rg"


def test_the_prefilter_stops_at_the_deadline() -> None:
    """A ripgrep that does not finish is stopped when the call's deadline passes: the
    search ends with backend_error and no process is left running."""
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    stuck = ripgrep.Prefilter(subprocess.Popen(sleeper, stdout=subprocess.PIPE))
    with deadline.scope(0.3), pytest.raises(FsError) as err:
        stuck.counts()
    assert err.value.code == "backend_error" and "nothing was changed" in err.value.message
    assert stuck.process.poll() is not None  # stopped, not left behind
