"""Bounded work and memory: edit matching, error details and streamed reads.

No wall-clock assertions: linearity is checked by counting the characters that
``str.count``/``str.find`` scan (a ``str`` subclass tallies them), memory by
tracemalloc peaks, and the pathological no-match inputs are sized so that a quadratic
search would blow pytest's timeout.
"""

from __future__ import annotations

import contextlib
import os
import re
import tracemalloc
import uuid
from typing import Any
from unittest import mock

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

import toolfs
from tests.backend_fixtures import Backend
from tests.contract.calls import err, exec_err, ok, run
from toolfs import tools
from toolfs.errors import FsError
from toolfs.formats.text import (
    BOM,
    MAX_DETAIL_LINES,
    MAX_HINTS,
    MAX_MESSAGE_LINES,
    apply_edit,
    decode,
    whitespace_matches,
)
from toolfs.results import LineCut

CHEAP = pytest.mark.parametrize("backend", ["memory", "local"], indirect=True)


MiB = 1 << 20


def error(exc_info: pytest.ExceptionInfo[FsError]) -> FsError:
    return exc_info.value


class Tally(str):
    """A ``str`` that adds up the characters its ``count`` and ``find`` calls scan."""

    scanned = 0

    def _span(self, start: Any, end: Any) -> int:
        lo = 0 if start is None else start
        hi = len(self) if end is None else end
        return max(0, min(hi, len(self)) - lo)

    def count(self, sub: str, start: Any = None, end: Any = None) -> int:
        Tally.scanned += self._span(start, end)
        return super().count(sub, start, end)

    def find(self, sub: str, start: Any = None, end: Any = None) -> int:
        found = super().find(sub, start, end)
        Tally.scanned += self._span(start, found + len(sub) if found >= 0 else end)
        return found


def scanned(fn: Any) -> int:
    Tally.scanned = 0
    with contextlib.suppress(FsError):
        fn()
    return Tally.scanned


HINT_CASES = [
    # (file, old_string, hint expected)
    ("version = 10\n", "version = 1\n", False),  # old ends with whitespace: token boundary
    ("version = 1\n", "version  = 1 \n", True),
    ("version = 1", "version  = 1\n", True),  # end of text is a boundary
    ("xfoo = 1\n", "\nfoo  = 1", False),  # old starts with whitespace
    ("a\nfoo = 1\n", "\nfoo  = 1", True),
    ("a bcd\n", "ab  cd", False),  # file whitespace inside a token of old
    ("def f(x):\n\treturn x\n", "def f(x):\n    return x", True),
    ("f(a,b)\n", "f(a, b)", True),  # whitespace dropped where old had some
]


def reference_matches(text: str, old: str, limit: int = MAX_HINTS) -> list[int]:
    """Brute force: the tokens regex tried at every offset, boundaries checked."""
    tokens = old.split()
    if not tokens:
        return []
    pattern = re.compile(r"\s*".join(map(re.escape, tokens)))
    found: list[int] = []
    last_end = 0
    for o in range(len(text)):
        mt = pattern.match(text, o)
        if mt is None or o < last_end:
            continue
        if old[0].isspace() and o > 0 and not text[o - 1].isspace():
            continue
        if old[-1].isspace() and mt.end() < len(text) and not text[mt.end()].isspace():
            continue
        found.append(o)
        last_end = mt.end()
        if len(found) == limit:
            break
    return found


WS_TEXT = st.lists(st.sampled_from(["a", "b", "ab", " ", "  ", "\t", "\n", "=", "1", "10"]),
                   max_size=25).map("".join)


def _put_big(backend: Backend, rel: str, line_bytes: int, rest: bytes) -> None:
    """A file of one ``line_bytes``-byte line of "x" then ``rest``, without holding
    two copies at once on local disk (sparse-free: written in blocks)."""
    if backend.name == "local":
        path = backend.key(rel)
        with open(path, "wb") as fh:
            block = b"x" * MiB
            for _ in range(line_bytes // MiB):
                fh.write(block)
            fh.write(b"x" * (line_bytes % MiB) + rest)
    else:
        backend.put(rel, b"x" * line_bytes + rest)


LONG = "é" * 9_000 + "漢" * 3_000  # 12,000 characters, 27,000 bytes


def _stream_ws(backend: Backend) -> toolfs.Workspace:
    """A cap below every file here, so each read streams, in a few requests."""
    return backend.workspace(size_cap=4096, first_block=4096, block_size=16_384)


@pytest.mark.parametrize("replace_all", [False, True])
@pytest.mark.parametrize("layout", ["one letter per line", "one long line"])
def test_edit_scans_the_text_a_bounded_number_of_times(layout: str, replace_all: bool) -> None:
    n = 50_000
    raw = {"one letter per line": "a\n" * n, "one long line": "a" * n}[layout]
    text = Tally(raw)
    work = scanned(lambda: apply_edit(text, "a", "b", replace_all=replace_all))
    # Per-match line counting from offset 0 scanned ~n**2/2 characters here.
    assert work <= 8 * len(raw)


def test_ambiguous_match_details_are_bounded() -> None:
    raw = "a\n" * 400_000  # the 800 KB file of the issue
    with pytest.raises(FsError) as info:
        apply_edit(raw, "a", "b", replace_all=False)
    e = error(info)
    assert e.code == "ambiguous_match"
    assert e.details["count"] == 400_000
    assert e.details["lines"] == list(range(1, MAX_DETAIL_LINES + 1))
    assert e.details["lines_truncated"] is True
    assert len(e.message) < 600
    assert f"{MAX_MESSAGE_LINES}, and {400_000 - MAX_MESSAGE_LINES} more" in e.message


def test_ambiguous_match_names_each_line_once() -> None:
    raw = "x = 1\ny = x = 1; x = 1; x = 1\nz\nx = 1\n"
    with pytest.raises(FsError) as info:
        apply_edit(raw, "x = 1", "x = 2", replace_all=False)
    e = error(info)
    assert "lines 1, 2 (3 times), 4)" in e.message
    assert e.details == {"lines": [1, 2, 2, 2, 4], "count": 5, "lines_truncated": False}
    # Many matches on one line: the line once, with the true count.
    with pytest.raises(FsError) as info:
        apply_edit("ab" * 1000 + "\n", "ab", "c", replace_all=False)
    e = error(info)
    assert "(line 1 (1000 times))" in e.message
    assert e.details["count"] == 1000 and len(e.details["lines"]) == MAX_DETAIL_LINES


def test_replace_all_lines_are_the_lines_of_each_match() -> None:
    raw = "ab ab\r\nx\r\nab\r\n"
    out = apply_edit(raw, "ab", "c", replace_all=True)
    assert out.lines == [1, 1, 3] and out.text == "c c\r\nx\r\nc\r\n"


@pytest.mark.parametrize("case", ["many tokens", "long needle, many near misses"])
def test_no_match_hint_is_linear_on_pathological_inputs(case: str) -> None:
    if case == "many tokens":
        # Tokens joined by \s* tried at every offset: ~1e6 offsets x 49,000 tokens, well
        # over pytest's timeout for the old regex search.
        text, old = "x " * 1_000_000, "x " * 49_000 + "y"
    else:
        # Every offset of the whitespace-free text is a candidate that fails in the file.
        text, old = "a " * 1_000_000, "a" * 50_000
    with pytest.raises(FsError) as info:
        apply_edit(text, old, "z", replace_all=False)
    assert error(info).code == "no_match"
    assert "similar_lines" not in error(info).details


def test_no_match_hint_work_is_bounded_by_the_spans_it_checks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Each candidate of the whitespace-free search is checked by a regex over its span in
    # the file; wide whitespace between the tokens made each check cost far more than
    # the needle it was charged ("a" + 87 spaces, repeated: N^1.5 before). Count the
    # characters every check may look at: at most the hint's budget.
    import re as re_module

    from toolfs.formats import text as text_module

    examined: list[int] = []
    real_compile = re_module.compile

    class Counting:
        def __init__(self, pattern: re_module.Pattern[str]) -> None:
            self.pattern = pattern

        def match(self, string: str, pos: int = 0,
                  endpos: int | None = None) -> re_module.Match[str] | None:
            examined.append((len(string) if endpos is None else endpos) - pos)
            return self.pattern.match(string, pos, len(string) if endpos is None else endpos)

    monkeypatch.setattr(text_module.re, "compile",
                        lambda p, flags=0: Counting(real_compile(p, flags)))
    m = 700
    text = ("a" + " " * (m // 8)) * (2 * m)
    old = "a " * (m - 1) + "aa"
    with pytest.raises(FsError) as info:
        apply_edit(text, old, "x", replace_all=False)
    assert error(info).code == "no_match"
    assert examined, "the hint checked no candidate"
    assert sum(examined) <= 4 * (len(text) + len(old)) + 65_536 + len(text)


@pytest.mark.parametrize(("text", "old", "hint"), HINT_CASES)
def test_no_match_hint_respects_token_boundaries(text: str, old: str, hint: bool) -> None:
    with pytest.raises(FsError) as info:
        apply_edit(text, old, "new", replace_all=False)
    e = error(info)
    assert e.code == "no_match"
    assert ("differs only in whitespace" in e.message) is hint, e.message
    assert ("similar_lines" in e.details) is hint


@settings(max_examples=400, deadline=None)
@given(text=WS_TEXT, old=WS_TEXT)
def test_whitespace_matches_equal_brute_force(text: str, old: str) -> None:
    assert whitespace_matches(text, old) == reference_matches(text, old)


def test_no_match_hint_names_lines_once() -> None:
    text = "f(a,b) f(a,b)\nf(a,b)\n"
    with pytest.raises(FsError) as info:
        apply_edit(text, "f(a, b)", "g", replace_all=False)
    e = error(info)
    assert "lines 1 (2 times), 2;" in e.message
    assert e.details["similar_lines"] == [1, 1, 2]


def test_replace_all_over_cap_raises_before_allocating() -> None:
    raw, new = "x" * 40_000, "y" * 20_000  # would be 800,000,000 bytes
    tracemalloc.start()
    try:
        with pytest.raises(FsError) as info:
            apply_edit(raw, "x", new, replace_all=True, max_bytes=10 * MiB)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    e = error(info)
    assert e.code == "too_large"
    assert e.details == {"size": 800_000_000, "cap": 10 * MiB, "result": True}
    assert str(10 * MiB) in e.message
    assert peak < 4 * MiB


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.text(alphabet="ab\n\r漢😀", max_size=8), min_size=2, max_size=5),
       old=st.sampled_from(["a", "\n", "a\nb", "漢", "\r\n"]),
       new=st.text(alphabet="xy\n😀", max_size=6), bom=st.booleans(),
       replace_all=st.booleans())
def test_projected_size_is_the_size_written(parts: list[str], old: str, new: str, bom: bool,
                                            replace_all: bool) -> None:
    raw = decode((BOM if bom else b"") + old.join(parts).encode()).text
    try:
        outcome = apply_edit(raw, old, new, replace_all=replace_all)
    except FsError:
        return  # no_match / ambiguous: nothing to size
    size = len((BOM if bom else b"") + outcome.text.encode())
    same = apply_edit(raw, old, new, replace_all=replace_all, max_bytes=size, bom=bom)
    assert same == outcome
    with pytest.raises(FsError) as info:
        apply_edit(raw, old, new, replace_all=replace_all, max_bytes=size - 1, bom=bom)
    assert error(info).details == {"size": size, "cap": size - 1, "result": True}


def test_streamed_read_of_a_sparse_file_stops_at_the_first_block(tmp_path: Any) -> None:
    path = os.path.join(str(tmp_path), "sparse.txt")
    with open(path, "wb") as fh:
        fh.truncate(10 * 1024 * MiB)  # 10 GiB of NUL bytes, no disk blocks
    out = run(toolfs.Workspace(str(tmp_path)), "read", file_path="sparse.txt", limit=1)
    assert out.error is not None and out.error.code == "not_text"
    assert out.error.details["byte_offset"] == 0


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(st.text(alphabet="ab漢\r\ufeff", max_size=14), max_size=30),
       bom=st.booleans(), final_newline=st.booleans(), offset=st.integers(1, 32),
       limit=st.integers(1, 32), keep=st.integers(1, 6))
def test_streamed_window_is_the_whole_read_cut(lines: list[str], bom: bool,
                                               final_newline: bool, offset: int,
                                               limit: int, keep: int) -> None:
    body = ("\n".join(lines) + ("\n" if final_newline and lines else "")).encode()
    data = (BOM if bom else b"") + body
    root = f"memory://toolfs-bounds-{uuid.uuid4().hex[:8]}"
    fs = toolfs.Workspace(root).fs.fs
    fs.pipe_file(f"{root.removeprefix('memory://')}/f.txt", data)
    whole = toolfs.Workspace(root).read("f.txt", offset=offset, limit=limit)
    with mock.patch.object(tools, "STREAM_LINE_CHARS", keep):
        streamed = toolfs.Workspace(root, size_cap=8, first_block=8, block_size=5).read(
            "f.txt", offset=offset, limit=limit)
    if len(data) <= 8:
        return  # read whole either way
    assert streamed.lines == [line[:keep] for line in whole.lines]
    expected = {offset + i: LineCut(chars=len(line), bytes=len(line.encode()))
                for i, line in enumerate(whole.lines) if len(line) > keep}
    assert (streamed.cut_lines or {}) == expected
    if streamed.total_lines is not None:
        assert streamed.total_lines == whole.total_lines


def test_bench_text_tiny_prints_a_table() -> None:
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_text.py"
    done = subprocess.run([sys.executable, str(script), "--tiny"], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "| streamed read, limit=1, one long line |" in done.stdout


@CHEAP
def test_ambiguous_match_through_execute_is_bounded(backend: Backend) -> None:
    backend.put("m.txt", b"a\n" * 30_000)
    ws = backend.workspace()
    run(ws, "read", file_path="m.txt", limit=1)
    out = run(ws, "edit", file_path="m.txt", old_string="a", new_string="b")
    assert out.error is not None and out.error.code == "ambiguous_match"
    assert len(out.error.details["lines"]) == MAX_DETAIL_LINES
    assert out.error.details["count"] == 30_000 and out.error.details["lines_truncated"]
    assert len(out.text) < 1000
    ok = run(ws, "edit", file_path="m.txt", old_string="a", new_string="b",
             replace_all=True)
    assert isinstance(ok.value, toolfs.EditResult) and ok.value.replacements == 30_000
    assert backend.get("m.txt") == b"b\n" * 30_000


@CHEAP
def test_edit_over_cap_through_execute_does_not_build_the_text(backend: Backend) -> None:
    backend.put("x.txt", b"x" * 40_000)
    ws = backend.workspace()
    run(ws, "read", file_path="x.txt")
    tracemalloc.start()
    try:
        out = run(ws, "edit", file_path="x.txt", old_string="x", new_string="y" * 2_500,
                  replace_all=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.error is not None and out.error.code == "too_large"
    assert out.error.details["size"] == 100_000_000
    assert peak < 16 * MiB
    assert backend.get("x.txt") == b"x" * 40_000


@CHEAP
@pytest.mark.parametrize("bom", [False, True])
def test_a_large_edit_holds_two_copies_of_the_file_at_a_time(backend: Backend,
                                                             bom: bool) -> None:
    """Beyond the observed bytes (the ledger's copy), an edit holds the old and the new
    text while it replaces, the new text and its bytes while it encodes, and the new
    bytes and the store's read-back while it commits: two copies of the file at a time.
    (The memory store's read-back is its file's own bytes, not a copy.)"""
    size = 4 * MiB
    body = b"".join(b"line %07d of a large file to edit\n" % i for i in range(size // 36))
    backend.put("big.txt", (BOM if bom else b"") + body)
    ws = backend.workspace()
    ws.read("big.txt")
    middle = b"line %07d" % (size // 72)
    tracemalloc.start()
    try:
        ws.edit("big.txt", middle.decode(), "LINE", replace_all=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert backend.get("big.txt") == (BOM if bom else b"") + body.replace(middle, b"LINE")
    assert peak < 2 * len(body) + MiB, peak / len(body)


@CHEAP
@pytest.mark.parametrize("offset", [1, 2])
def test_streamed_read_of_a_100_mib_line_is_bounded(backend: Backend, offset: int) -> None:
    n = 100 * MiB
    _put_big(backend, "one.txt", n, b"\r\nsecond\n")
    # MemoryStore.get hashes the whole file for every block it serves (it holds no
    # version but the content's digest), so large blocks keep that backend's cost down.
    memory = backend.name == "memory"
    block = 8 * MiB if memory else 256 * 1024
    ws = backend.workspace(block_size=block)
    tracemalloc.start()
    try:
        out = run(ws, "read", file_path="one.txt", offset=offset, limit=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    v = out.value
    assert isinstance(v, toolfs.ReadResult), out.text
    # The line is 100 MiB: never held whole, never re-joined block after block.
    # A few copies of a block are in flight (store, ObservedFile, the line's piece and
    # its decoded text); the old scan peaked at over 3 x the line.
    assert peak < 8 * block + 4 * MiB
    if offset == 1:
        assert v.lines == ["x" * tools.STREAM_LINE_CHARS]
        assert v.cut_lines == {1: LineCut(chars=n, bytes=n)}
        assert "line truncated" in out.text
        assert out.to_dict()["result"]["cut_lines"] == {"1": {"chars": n, "bytes": n}}
    else:
        # Lines before the window are only counted.
        assert v.lines == ["second"] and v.cut_lines is None and v.total_lines == 2


class Bounds:
    """Work and memory bounded by the file size and the caps."""

    def test_too_large_names_the_cap(self, backend: Backend) -> None:
        ws = backend.workspace(size_cap=1000)
        out = err(ws, "write", "too_large", file_path="big.txt", content="x" * 1001)
        assert "1000" in out.text
        assert not backend.exists("big.txt")
        backend.put("big2.txt", b"line\n" * 400)
        ok(ws, "read", file_path="big2.txt", limit=5)
        out = err(ws, "edit", "too_large", file_path="big2.txt", old_string="line",
                  new_string="LINE", replace_all=True)
        assert "1000" in out.text

    def test_a_write_over_the_cap_says_to_write_less(self, backend: Backend) -> None:
        ws = backend.workspace(size_cap=1000)
        out = exec_err(ws, "write", "too_large", file_path="big.txt", content="x" * 2000)
        assert "write less" in out.text.lower()
        assert "offset" not in out.error.message  # type: ignore[union-attr]

    def test_streamed_long_lines_are_cut_at_a_character_and_recorded(
            self, backend: Backend) -> None:
        body = f"short\r\n{LONG}\r\nmid\n{LONG}x\ntail".encode()
        backend.put("long.txt", body)
        ws = _stream_ws(backend)
        out = run(ws, "read", file_path="long.txt")
        v = out.value
        assert isinstance(v, toolfs.ReadResult), out.text
        keep = tools.STREAM_LINE_CHARS
        assert v.lines == ["short", LONG[:keep], "mid", LONG[:keep], "tail"]
        n = len(LONG.encode())
        assert v.cut_lines == {2: LineCut(chars=len(LONG), bytes=n),
                               4: LineCut(chars=len(LONG) + 1, bytes=n + 1)}
        assert v.total_lines == 5
        # A window that ends inside the file: only its own lines are recorded.
        out = run(ws, "read", file_path="long.txt", offset=3, limit=2)
        assert isinstance(out.value, toolfs.ReadResult)
        assert out.value.cut_lines == {4: LineCut(chars=len(LONG) + 1, bytes=n + 1)}

    @pytest.mark.parametrize("bad", [b"\x00", b"\xff"])
    @pytest.mark.parametrize("where", ["kept prefix", "dropped tail"])
    def test_streamed_window_line_is_validated_whole(self, backend: Backend, bad: bytes,
                                                     where: str) -> None:
        at = 10 if where == "kept prefix" else 20_000
        line = b"y" * at + bad + b"y" * (30_000 - at)
        backend.put("bad.txt", b"ok\n" + line + b"\nafter\n")
        ws = _stream_ws(backend)
        out = run(ws, "read", file_path="bad.txt", offset=2, limit=1)
        assert out.error is not None and out.error.code == "not_text", out.text
        assert out.error.details["byte_offset"] == 3 + at
        # The line before it is fine to read alone.
        good = run(ws, "read", file_path="bad.txt", limit=1)
        assert isinstance(good.value, toolfs.ReadResult) and good.value.lines == ["ok"]

    def test_streamed_read_keeps_u_feff_inside_the_file(self, backend: Backend) -> None:
        body = BOM + b"first\n" + "\ufeffsecond\n".encode() + b"z" * 5000 + b"\n\xef\xbb\xbf"
        backend.put("bom.txt", body)
        streamed = run(_stream_ws(backend), "read", file_path="bom.txt")
        whole = run(backend.workspace(), "read", file_path="bom.txt")
        assert isinstance(streamed.value, toolfs.ReadResult), streamed.text
        assert isinstance(whole.value, toolfs.ReadResult), whole.text
        assert streamed.value.lines == ["first", "\ufeffsecond", "z" * 5000, "\ufeff"]
        assert streamed.value.lines == whole.value.lines
        offset_two = run(_stream_ws(backend), "read", file_path="bom.txt", offset=2, limit=1)
        assert isinstance(offset_two.value, toolfs.ReadResult)
        assert offset_two.value.lines == ["\ufeffsecond"]
