"""Local grep's engines answer alike: the Python engine's worker threads
(:mod:`toolfs.search.grep_workers`) against the single-threaded loop they replace -- the whole
result (files, lines, counts, files searched, skipped, truncation) -- and ripgrep's engine
(``grep_engine="ripgrep"``, the default where ``rg`` is available) against the Python
engine: the same files, lines, counts and truncation, but for the differences
docs/contract.md lists -- on generated adversarial trees, in every output mode with
``head_limit``, ``context``, ``glob``, ``path`` and ``ignore_case``."""

from __future__ import annotations

import contextlib
import os
import pathlib
import random
import threading
from collections.abc import Iterator
from typing import Any

import fsspec
import pytest

import toolfs
from toolfs import deadline
from toolfs.backends.base import Blob
from toolfs.policy.filesystem import Found
from toolfs.search import grep_workers, ripgrep

CAP = 20_000
DENY = ["secret/**", "*.key"]
MODES = ("files_with_matches", "count", "content")
PATTERNS = ["hello", r"\bcaf", "(?i)straße", "(?i)\u017f", "^$", r"\s$", "zzz",
            r"[^\W\d]+$"]

_LINES = ["hello world", "café au lait", "STRASSE straße", "\u017f long s", "", "x  ",
          "tab\there", "1234 numbers", "Hello again", "zz z", "ünïcödé hello"]


def _text(rnd: random.Random, n: int) -> str:
    return "\n".join(rnd.choice(_LINES) for _ in range(n)) + "\n"


DIFFERENT = ("latin1.txt", "crlf.txt", "d1/link.txt")
"""Where the engines differ by design (docs/contract.md, "grep engines"): ripgrep
searches text that is not UTF-8, matches no lone CR, follows no symlink."""


def _tree(root: pathlib.Path, seed: int, *, leave_out: tuple[str, ...] = ()) -> None:
    """Files of every kind the rules treat apart, spread over enough files that the
    worker threads get many windows (``leave_out``: files not made)."""
    rnd = random.Random(seed)
    special: dict[str, bytes] = {
        "latin1.txt": "caf\xe9 hello\n".encode("latin-1"),
        "crlf.txt": b"hello\r\nworld \r\nlone\rcr hello\r\n",
        "bom.txt": b"\xef\xbb\xbfhello bom\n",
        "utf16.txt": "hello utf16\n".encode("utf-16"),
        "nul_early.txt": b"\x00hello\n",
        "nul_late.txt": b"hello\n" + b"x" * 3000 + b"\x00\n",
        "big.txt": b"hello\n" * (CAP // 6 + 10),
        "exactly_cap.txt": (b"hello\n" * CAP)[:CAP],
        "empty.txt": b"",
        "no_newline.txt": b"hello at the end",
        "long.txt": b"hello " + b"y" * 9000 + b"\n",
        "many.txt": b"hello\n" * 40,
        "fffd.txt": "hello \ufffd\n".encode(),
        ".hidden.txt": b"hello hidden\n",
        ".hdir/h.txt": b"hello in hidden dir\n",
        "secret/s.txt": b"hello secret\n",
        "keys/a.key": b"hello key\n",
        "ign/ignored.txt": b"hello ignored\n",
        "ign/kept.txt": b"hello kept\n",
        "ign/deeper/x.log": b"hello log\n",
        ".gitignore": b"ign/*\n!ign/kept.txt\n*.log\n",
        "sub/.gitignore": b"*.md\n!keep.md\n",
        "sub/a.md": b"hello md\n",
        "sub/keep.md": b"hello keep md\n",
    }
    for i in range(90):
        d = f"d{i % 7}/e{i % 3}"
        special[f"{d}/f{i:03}.txt"] = _text(rnd, rnd.randint(0, 12)).encode()
        if i % 11 == 0:
            special[f"{d}/g{i:03}.md"] = _text(rnd, 3).encode()
    for rel, data in special.items():
        if rel in leave_out:
            continue
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    (root / "d1").mkdir(exist_ok=True)
    if "d1/link.txt" not in leave_out:
        (root / "d1" / "link.txt").symlink_to(root / "many.txt")
    (root / "d1" / "linkdir").symlink_to(root / "d2")
    (root / "d1" / "to_secret.txt").symlink_to(root / "secret" / "s.txt")
    (root / "d1" / "dangling.txt").symlink_to(root / "nowhere")
    outside = root.parent / f"outside{seed}.txt"
    outside.write_bytes(b"hello from outside\n")
    (root / "d1" / "outside.txt").symlink_to(outside)
    os.mkfifo(root / "d3" / "fifo.txt")  # never opened: a read would block


@contextlib.contextmanager
def _window(size: int) -> Iterator[None]:
    """Windows of ``size`` files (a huge one: the single-threaded loop)."""
    before = grep_workers.WINDOW
    grep_workers.WINDOW = size
    try:
        yield
    finally:
        grep_workers.WINDOW = before


def _workspace(root: pathlib.Path, **kw: Any) -> Any:
    kw.setdefault("grep_engine", "python")
    return toolfs.Workspace(fsspec.filesystem("file"), root=str(root), deny=DENY,
                            size_cap=CAP, **kw)


def _calls() -> Iterator[dict[str, Any]]:
    for mode in MODES:
        for extra in ({}, {"head_limit": 1}, {"head_limit": 7},
                      {"context": 1, "head_limit": 5}, {"glob": "!*.md", "path": "d1"},
                      {"ignore_case": True}):
            yield {"output_mode": mode, **extra}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("engine") / "tree"
    root.mkdir()
    _tree(root, 0)
    return root


def test_worker_threads_answer_as_the_single_thread(tree: pathlib.Path) -> None:
    ws = _workspace(tree)
    for pattern in PATTERNS:
        for call in _calls():
            with _window(10**9):
                serial = ws.grep(pattern, **call)
            with _window(3):
                assert ws.grep(pattern, **call) == serial, (pattern, call)


@pytest.fixture(scope="module")
def alike_tree(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("alike") / "tree"
    root.mkdir()
    _tree(root, 1, leave_out=DIFFERENT)
    return root


def _matches(r: Any) -> tuple[Any, ...]:
    return (r.mode, r.files, r.matches, r.counts, r.truncated)


def test_ripgrep_engine_answers_as_the_python_engine(alike_tree: pathlib.Path) -> None:
    """On a tree without the files the engines treat apart by design, ripgrep's engine
    gives the Python engine's files, lines, counts and truncation in every mode; its
    ``files_searched`` (untruncated) is the Python engine's plus the binary files it
    gave up on; its skipped counts are unknown (said, not guessed)."""
    if ripgrep.ripgrep_binary() is None:
        pytest.skip("no rg: the ripgrep extra installs it")
    python = _workspace(alike_tree)
    engine = _workspace(alike_tree, grep_engine="ripgrep")
    for pattern in PATTERNS:
        for call in _calls():
            expected = python.grep(pattern, **call)
            got = engine.grep(pattern, **call)
            assert _matches(got) == _matches(expected), (pattern, call)
            assert got.skipped == {} and got.skipped_unknown
            assert not expected.skipped_unknown
            if not expected.truncated:
                binary = 2 if "path" not in call else 0  # nul_early, nul_late
                assert got.files_searched == expected.files_searched + binary, \
                    (pattern, call)


@pytest.mark.parametrize("engine", ["python", "ripgrep"])
def test_what_the_rules_keep_out_stays_out(tree: pathlib.Path, engine: str) -> None:
    """The guarantees the engines share, checked on their answer: denied, hidden,
    ignored and outside files are never searched, nor a symlink to a denied file;
    binary and over-cap files are skipped; UTF-16 with a BOM is text to both. Apart by
    design: the Python engine searches
    a symlink to an in-root file under its own name, skips text that is not UTF-8 and
    counts what it skipped; ripgrep's does not follow the link, searches the Latin-1
    file, and does not count what it skipped."""
    if engine == "ripgrep" and ripgrep.ripgrep_binary() is None:
        pytest.skip("no rg: the ripgrep extra installs it")
    ws = _workspace(tree, grep_engine=engine)
    with _window(2):
        found = ws.grep("hello", output_mode="content", head_limit=10_000)
    files = set(found.files)
    for never in ("secret/s.txt", "keys/a.key", "d1/to_secret.txt", ".hidden.txt",
                  ".hdir/h.txt", "ign/ignored.txt", "ign/deeper/x.log", "sub/a.md",
                  "d1/outside.txt", "nul_late.txt", "big.txt",
                  "d1/linkdir/e2/f002.txt"):
        assert never not in files, never
    for kept in ("ign/kept.txt", "sub/keep.md", "crlf.txt", "bom.txt", "utf16.txt",
                 "exactly_cap.txt", "no_newline.txt", "fffd.txt"):
        assert kept in files, kept
    assert not any("outside" in m.text for m in found.matches)
    if engine == "python":
        assert "d1/link.txt" in files and "latin1.txt" not in files
        assert found.skipped == {"not_text": 3, "too_large": 1}
    else:
        assert "d1/link.txt" not in files and "latin1.txt" in files
        latin1 = [m.text for m in found.matches if m.path == "latin1.txt"]
        assert latin1 == ["caf\ufffd hello"]  # shown with U+FFFD for the bad byte
        assert found.skipped == {} and found.skipped_unknown
    assert any(m.chars == 9006 for m in found.matches if m.path == "long.txt")
    crlf = [m.text for m in found.matches if m.path == "crlf.txt"]
    assert crlf == ["hello", "lone\rcr hello"]


def test_a_stop_drops_what_the_workers_read_ahead(tree: pathlib.Path) -> None:
    """``files_searched`` counts the files before the stop only, as the single loop."""
    ws = _workspace(tree)
    with _window(10**9):
        serial = ws.grep(r"\w", head_limit=3)
    with _window(4):
        threaded = ws.grep(r"\w", head_limit=3)
    assert threaded == serial and threaded.truncated
    assert threaded.files_searched < ws.grep("zzz").files_searched


class _FakeFs:
    """``read_many`` over in-memory bytes, recording the deadline each call saw."""

    def __init__(self, data: dict[str, bytes]) -> None:
        self.data = data
        self.seen: list[float | None] = []
        self.threads: set[str] = set()

    def read_many(self, found: list[Found], *, length: int) -> Iterator[tuple[Found, Any]]:
        self.seen.append(deadline.remaining())
        self.threads.add(threading.current_thread().name)
        for f in found:
            data = self.data[f.path]
            yield f, Blob(data=data[:length], version=None,  # type: ignore[arg-type]
                          size=len(data))


class _Searcher:
    def __init__(self, limit: int) -> None:
        self.limit = limit

    def examine(self, data: bytes) -> tuple[bytes, list[int]] | None:
        lines = data.split(b"\n")[:-1]
        return data, [i for i, line in enumerate(lines) if b"hit" in line]

    def picked_lines(self, data: bytes, hits: list[int],
                     most: int | None = None) -> list[tuple[int, bool, bytes]]:
        lines = data.split(b"\n")
        return [(h, False, lines[h]) for h in hits][:most]


def _found(path: str) -> Found:
    return Found(path=path, rel=path, backend_path=path, kind="file", size=None,
                 mtime=None)


def test_workers_carry_the_deadline_and_bound_what_they_keep() -> None:
    data = {f"f{i}": b"hit\n" * 50 for i in range(40)}
    fs = _FakeFs(data)
    files = [_found(p) for p in data]
    with deadline.scope(30):
        got = list(grep_workers.examined_in_order(
            fs, files, _Searcher(limit=10), 10_000, lambda: False))  # type: ignore[arg-type]
    assert fs.seen and all(s is not None and 0 < s <= 30 for s in fs.seen)
    assert all(name.startswith("toolfs-grep") for name in fs.threads)
    # Each window keeps at most limit + 1 lines, and stops reading once it has them.
    per_window = [got[i:i + grep_workers.WINDOW]
                  for i in range(0, len(got), grep_workers.WINDOW)]
    assert all(sum(len(e.picked) for e in w) <= 11 for w in per_window)
    assert len(got) < len(files)
