"""Reading: numbered lines, windows, footers, cuts, not-found hints, on every backend."""

from __future__ import annotations

import os
import pathlib
import uuid
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

import toolfs
from tests.backend_fixtures import Backend
from tests.contract.calls import err, exec_err, local_backend, ok, run


def test_did_you_mean_in_a_huge_directory_is_bounded(tmp_path: pathlib.Path) -> None:
    b = local_backend(tmp_path)
    root = pathlib.Path(b.root)
    for i in range(5000):
        (root / f"file_{i:05d}.txt").touch()
    (root / "Target.TXT").touch()
    ws = b.workspace()
    calls: list[int] = []
    import difflib
    real = difflib.get_close_matches

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(len(args[1]))
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(difflib, "get_close_matches", counting)
        out = exec_err(ws, "read", "not_found", file_path="target.txt")
    assert "Target.TXT" in out.text  # the case-insensitive match is still offered
    assert not calls  # no fuzzy comparison against 5,000 names


def test_a_read_that_answers_eagain_is_read_again_blocking(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No POSIX filesystem answers EAGAIN to a regular file's read, so the local store
    keeps the O_NONBLOCK it opens files with (FIFOs must not block the open); one that
    did would get the same bytes through a blocking read, on read, edit and windowed
    read alike."""
    from toolfs.backends import local

    real = os.pread
    refused: list[int] = []

    def pread(fd: int, length: int, offset: int) -> bytes:
        if os.get_blocking(fd) is False:
            refused.append(fd)
            raise BlockingIOError(11, "Resource temporarily unavailable")
        return real(fd, length, offset)

    text = "".join(f"line {i}\n" for i in range(50))
    (tmp_path / "f.txt").write_text(text)
    ws = toolfs.Workspace(str(tmp_path), size_cap=64)  # over the cap: windowed reads too
    small = toolfs.Workspace(str(tmp_path))
    monkeypatch.setattr(local.os, "pread", pread)
    assert small.read("f.txt").lines == text.splitlines()
    small.edit("f.txt", "line 7\n", "line seven\n")
    assert (tmp_path / "f.txt").read_text() == text.replace("line 7\n", "line seven\n")
    assert ws.read("f.txt", offset=3, limit=2).lines == ["line 2", "line 3"]
    assert len(refused) >= 3  # each kind of read met the refusal once


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(st.text(alphabet="ab漢\r", max_size=12), max_size=40),
       final_newline=st.booleans(), offset=st.integers(1, 45), limit=st.integers(1, 45))
def test_streamed_window_equals_whole_read(lines: list[str], final_newline: bool,
                                           offset: int, limit: int) -> None:
    body = "\n".join(lines) + ("\n" if final_newline and lines else "")
    root = f"memory://toolfs-stream-{uuid.uuid4().hex[:8]}"
    whole_ws = toolfs.Workspace(root)
    whole_ws.write("f.txt", body)
    whole = whole_ws.read("f.txt", offset=offset, limit=limit)
    # A cap below the file size forces the block-by-block scan, with tiny blocks.
    streamed = toolfs.Workspace(root, size_cap=8, first_block=8, block_size=5).read(
        "f.txt", offset=offset, limit=limit)
    if len(body.encode()) <= 8:
        return  # small enough to be read whole either way
    assert streamed.lines == whole.lines
    if streamed.total_lines is not None:
        assert streamed.total_lines == whole.total_lines
    else:
        assert whole.total_lines is not None and whole.total_lines > offset + limit - 2


class Reading:
    """Reads through ``execute`` and the typed methods."""

    def test_read_numbers_lines_cat_n_style(self, backend: Backend) -> None:
        backend.put("a.txt", b"alpha\nbeta\ngamma\n")
        out = ok(backend.workspace(), "read", file_path="a.txt")
        assert out.text == "     1\talpha\n     2\tbeta\n     3\tgamma"
        v = out.value
        assert isinstance(v, toolfs.ReadResult)
        assert (v.lines, v.start_line, v.line_count, v.total_lines, v.partial) == (
            ["alpha", "beta", "gamma"], 1, 3, 3, False)
        assert v.path == "a.txt"
        assert v.version.kind == backend.version_kind

    def test_read_window_and_footer(self, backend: Backend) -> None:
        backend.put("n.txt", "".join(f"line {i}\n" for i in range(1, 11)).encode())
        out = ok(backend.workspace(), "read", file_path="n.txt", offset=4, limit=3)
        assert out.text.splitlines()[:3] == ["     4\tline 4", "     5\tline 5", "     6\tline 6"]
        assert "Showing lines 4-6 of 10" in out.text
        assert "offset=7" in out.text
        assert isinstance(out.value, toolfs.ReadResult)
        assert out.value.partial and out.value.total_lines == 10

    def test_read_default_limit_is_2000(self, backend: Backend) -> None:
        backend.put("big.txt", b"x\n" * 2500)
        out = ok(backend.workspace(), "read", file_path="big.txt")
        assert isinstance(out.value, toolfs.ReadResult)
        assert out.value.line_count == 2000 and out.value.total_lines == 2500
        assert "offset=2001" in out.text

    def test_read_empty_file_and_offset_past_end_say_so(self, backend: Backend) -> None:
        backend.put("empty.txt", b"")
        ws = backend.workspace()
        assert "empty" in ok(ws, "read", file_path="empty.txt").text
        backend.put("two.txt", b"a\nb\n")
        text = ok(ws, "read", file_path="two.txt", offset=5).text
        assert "past the end" in text and "2 lines" in text

    def test_read_long_lines_are_cut_with_marker(self, backend: Backend) -> None:
        backend.put("long.txt", b"y" * 5000 + b"\nshort\n")
        out = ok(backend.workspace(), "read", file_path="long.txt")
        first = out.text.splitlines()[0]
        assert "line truncated: 2000 of 5000" in first
        assert len(first) < 2200
        assert isinstance(out.value, toolfs.ReadResult)
        assert out.value.lines[0] == "y" * 5000  # canonical value is whole

    def test_read_unicode_bom_crlf_show_clean_lines(self, backend: Backend) -> None:
        backend.put("u.txt", "\ufeff漢字\r\n😀 e\u0301\r\nlast".encode())
        out = ok(backend.workspace(), "read", file_path="u.txt")
        assert isinstance(out.value, toolfs.ReadResult)
        assert out.value.lines == ["漢字", "😀 e\u0301", "last"]

    def test_read_not_text_not_found_not_a_file(self, backend: Backend) -> None:
        ws = backend.workspace()
        backend.put("bin.dat", b"\xff\xfe\x00\xd8")
        err(ws, "read", "not_text", file_path="bin.dat")
        backend.put("nul.txt", b"abc\x00def")
        err(ws, "read", "not_text", file_path="nul.txt")
        backend.put("dir/inner.txt", b"x")
        err(ws, "read", "not_found", file_path="missing.txt")
        out = run(ws, "read", file_path="dir")
        assert out.error is not None and out.error.code in ("not_a_file", "not_found")

    def test_not_found_suggests_siblings_where_cheap(self, backend: Backend) -> None:
        backend.put("config.yaml", b"a: 1\n")
        out = err(backend.workspace(), "read", "not_found", file_path="config.yml")
        if backend.name in ("memory", "local"):
            assert out.error is not None
            assert out.error.details["did_you_mean"] == ["config.yaml"]

    def test_windowed_read_of_file_over_cap_streams(self, backend: Backend) -> None:
        lines = [f"row {i:05d}" for i in range(1, 3001)]
        backend.put("huge.txt", ("\n".join(lines) + "\n").encode())
        ws = backend.workspace(size_cap=4096, first_block=1024, block_size=2048)
        out = ok(ws, "read", file_path="huge.txt", offset=1500, limit=3)
        assert isinstance(out.value, toolfs.ReadResult)
        assert out.value.lines == ["row 01500", "row 01501", "row 01502"]
        assert out.value.total_lines is None  # not counted: the scan stopped at the window
        size = out.value.size
        assert out.text.endswith(
            f"\n\n(Showing lines 1500-1502; more lines follow: the file is {size} bytes, over "
            "the whole-file cap, so they were not counted. Use offset=1503 to continue.)")
        tail = ok(ws, "read", file_path="huge.txt", offset=2999, limit=10)
        assert isinstance(tail.value, toolfs.ReadResult)
        assert tail.value.lines == ["row 02999", "row 03000"]
        assert tail.value.total_lines == 3000  # reached the end, so the count is known
        assert tail.text.endswith("\n\n(Showing lines 2999-3000 of 3000.)")

    def test_did_you_mean_is_case_insensitive(self, backend: Backend) -> None:
        backend.put("README.md", b"# hi\n")
        out = exec_err(backend.workspace(), "read", "not_found", file_path="readme.md")
        if backend.capabilities.cheap_listing:
            assert "README.md" in out.text
            assert out.error.details["did_you_mean"][0] == "README.md"  # type: ignore[union-attr]
