"""The contract suite: every behaviour of the three tools, on every backend.

Tests talk to ``Workspace.execute`` (the model's door) or the typed methods, and check
both the model text and the canonical values. Differences between backends are
capability flags on the fixture classes in ``tests/backends.py``.
"""

from __future__ import annotations

import pytest

import toolfs
from tests.backends import Backend


def run(ws: toolfs.Workspace, tool: str, **args: object) -> toolfs.ToolOutput:
    return ws.execute(tool, args)


def ok(ws: toolfs.Workspace, tool: str, **args: object) -> toolfs.ToolOutput:
    out = run(ws, tool, **args)
    assert not out.is_error, out.text
    return out


def err(ws: toolfs.Workspace, tool: str, code: str, **args: object) -> toolfs.ToolOutput:
    out = run(ws, tool, **args)
    assert out.is_error, out.text
    assert out.error is not None
    assert out.error.code == code, out.text
    assert f"[{code}]" in out.text
    return out


# -- read ------------------------------------------------------------------------------


def test_read_numbers_lines_cat_n_style(backend: Backend) -> None:
    backend.put("a.txt", b"alpha\nbeta\ngamma\n")
    out = ok(backend.workspace(), "read", file_path="a.txt")
    assert out.text == "     1\talpha\n     2\tbeta\n     3\tgamma"
    v = out.value
    assert isinstance(v, toolfs.ReadResult)
    assert (v.lines, v.start_line, v.line_count, v.total_lines, v.partial) == (
        ["alpha", "beta", "gamma"], 1, 3, 3, False)
    assert v.path == "a.txt"
    assert v.version.kind == backend.version_kind


def test_read_window_and_footer(backend: Backend) -> None:
    backend.put("n.txt", "".join(f"line {i}\n" for i in range(1, 11)).encode())
    out = ok(backend.workspace(), "read", file_path="n.txt", offset=4, limit=3)
    assert out.text.splitlines()[:3] == ["     4\tline 4", "     5\tline 5", "     6\tline 6"]
    assert "Showing lines 4-6 of 10" in out.text
    assert "offset=7" in out.text
    assert isinstance(out.value, toolfs.ReadResult)
    assert out.value.partial and out.value.total_lines == 10


def test_read_default_limit_is_2000(backend: Backend) -> None:
    backend.put("big.txt", b"x\n" * 2500)
    out = ok(backend.workspace(), "read", file_path="big.txt")
    assert isinstance(out.value, toolfs.ReadResult)
    assert out.value.line_count == 2000 and out.value.total_lines == 2500
    assert "offset=2001" in out.text


def test_read_empty_file_and_offset_past_end_say_so(backend: Backend) -> None:
    backend.put("empty.txt", b"")
    ws = backend.workspace()
    assert "empty" in ok(ws, "read", file_path="empty.txt").text
    backend.put("two.txt", b"a\nb\n")
    text = ok(ws, "read", file_path="two.txt", offset=5).text
    assert "past the end" in text and "2 lines" in text


def test_read_long_lines_are_cut_with_marker(backend: Backend) -> None:
    backend.put("long.txt", b"y" * 5000 + b"\nshort\n")
    out = ok(backend.workspace(), "read", file_path="long.txt")
    first = out.text.splitlines()[0]
    assert "line truncated: 2000 of 5000" in first
    assert len(first) < 2200
    assert isinstance(out.value, toolfs.ReadResult)
    assert out.value.lines[0] == "y" * 5000  # canonical value is whole


def test_read_unicode_bom_crlf_show_clean_lines(backend: Backend) -> None:
    backend.put("u.txt", "\ufeff漢字\r\n😀 e\u0301\r\nlast".encode())
    out = ok(backend.workspace(), "read", file_path="u.txt")
    assert isinstance(out.value, toolfs.ReadResult)
    assert out.value.lines == ["漢字", "😀 e\u0301", "last"]


def test_read_not_text_not_found_not_a_file(backend: Backend) -> None:
    ws = backend.workspace()
    backend.put("bin.dat", b"\xff\xfe\x00\x01")
    err(ws, "read", "not_text", file_path="bin.dat")
    backend.put("nul.txt", b"abc\x00def")
    err(ws, "read", "not_text", file_path="nul.txt")
    backend.put("dir/inner.txt", b"x")
    err(ws, "read", "not_found", file_path="missing.txt")
    out = run(ws, "read", file_path="dir")
    assert out.error is not None and out.error.code in ("not_a_file", "not_found")


def test_not_found_suggests_siblings_where_cheap(backend: Backend) -> None:
    backend.put("config.yaml", b"a: 1\n")
    out = err(backend.workspace(), "read", "not_found", file_path="config.yml")
    if backend.name in ("memory", "local"):
        assert out.error is not None
        assert out.error.details["did_you_mean"] == ["config.yaml"]


# -- write -----------------------------------------------------------------------------


def test_write_creates_then_updates_after_observation(backend: Backend) -> None:
    ws = backend.workspace()
    out = ok(ws, "write", file_path="new/deep/f.txt", content="one\n")
    assert isinstance(out.value, toolfs.WriteResult) and out.value.action == "created"
    assert "Created new/deep/f.txt" in out.text
    assert backend.get("new/deep/f.txt") == b"one\n"
    out = ok(ws, "write", file_path="new/deep/f.txt", content="two\n")
    assert isinstance(out.value, toolfs.WriteResult) and out.value.action == "updated"
    assert backend.get("new/deep/f.txt") == b"two\n"


def test_write_result_version_matches_next_read(backend: Backend) -> None:
    ws = backend.workspace()
    w = ws.write("v.txt", "hello\n")
    r = backend.workspace().read("v.txt")
    assert w.version == r.version


def test_write_unicode_roundtrip(backend: Backend) -> None:
    ws = backend.workspace()
    text = "漢字 😀 e\u0301\nzweite Zeile"
    ws.write("u.txt", text)
    assert backend.get("u.txt") == text.encode()


# -- edit ------------------------------------------------------------------------------


def test_edit_replaces_once_and_reports(backend: Backend) -> None:
    backend.put("e.py", b"def f():\n    return 1\n")
    ws = backend.workspace()
    ok(ws, "read", file_path="e.py")
    out = ok(ws, "edit", file_path="e.py", old_string="return 1", new_string="return 2")
    assert isinstance(out.value, toolfs.EditResult)
    assert (out.value.replacements, out.value.replace_all, out.value.lines) == (1, False, [2])
    assert backend.get("e.py") == b"def f():\n    return 2\n"


def test_edit_result_shows_the_new_region_with_context(backend: Backend) -> None:
    backend.put("ten.txt", "".join(f"l{i}\n" for i in range(1, 11)).encode())
    ws = backend.workspace()
    ws.read("ten.txt")
    r = ws.edit("ten.txt", "l5\n", "five\nFIVE\n")
    assert r.snippet_start == 2
    assert r.snippet == ["l2", "l3", "l4", "five", "FIVE", "l6", "l7", "l8"]
    backend.put("crlf.txt", b"a\r\nb\r\nc")
    ws.read("crlf.txt")
    r = ws.edit("crlf.txt", "c", "C")
    assert (r.snippet_start, r.snippet) == (1, ["a", "b", "C"])


def test_edit_ambiguous_lists_lines_and_replace_all_counts(backend: Backend) -> None:
    backend.put("m.txt", b"x = 1\ny = 2\nx = 1\nz\nx = 1\n")
    ws = backend.workspace()
    ws.read("m.txt")
    out = err(ws, "edit", "ambiguous_match", file_path="m.txt", old_string="x = 1",
              new_string="x = 9")
    assert out.error is not None and out.error.details["lines"] == [1, 3, 5]
    assert "1, 3, 5" in out.text
    assert backend.get("m.txt") == b"x = 1\ny = 2\nx = 1\nz\nx = 1\n"
    out = ok(ws, "edit", file_path="m.txt", old_string="x = 1", new_string="x = 9",
             replace_all=True)
    assert isinstance(out.value, toolfs.EditResult) and out.value.replacements == 3
    assert "3 occurrences" in out.text
    assert backend.get("m.txt") == b"x = 9\ny = 2\nx = 9\nz\nx = 9\n"


def test_edit_no_match_with_whitespace_hint_never_writes(backend: Backend) -> None:
    original = b"def f(x):\n\treturn x\n"
    backend.put("w.py", original)
    ws = backend.workspace()
    ws.read("w.py")
    out = err(ws, "edit", "no_match", file_path="w.py", old_string="def f(x):\n    return x",
              new_string="def f(x):\n    return x + 1")
    assert "line 1" in out.text and "whitespace" in out.text
    assert backend.get("w.py") == original
    out = err(ws, "edit", "no_match", file_path="w.py", old_string="nothing like it",
              new_string="y")
    assert "differs only in whitespace" not in out.text


# (file before, old_string, new_string, file after): every byte outside the span is kept.
BYTE_EXACT_EDITS = {
    "deletion": (b"keep\ndrop me\nkeep\n", "drop me\n", "", b"keep\nkeep\n"),
    "crlf": (b"one\r\ntwo\r\nthree\r\n", "two\nthree", "2\n3\n3b",
             b"one\r\n2\r\n3\r\n3b\r\n"),
    "bom-no-final-newline": (b"\xef\xbb\xbfhead\ntail", "tail", "end",
                             b"\xef\xbb\xbfhead\nend"),
    "mixed-endings": (b"a\r\nb\nc\r\nd\n", "c\nd", "C\nD", b"a\r\nb\nC\r\nD\n"),
}


@pytest.mark.parametrize("case", BYTE_EXACT_EDITS)
def test_edit_is_byte_exact(backend: Backend, case: str) -> None:
    before, old, new, after = BYTE_EXACT_EDITS[case]
    backend.put("f.txt", before)
    ws = backend.workspace()
    ws.read("f.txt")
    ok(ws, "edit", file_path="f.txt", old_string=old, new_string=new)
    assert backend.get("f.txt") == after


def test_edit_unicode_cjk_emoji_combining(backend: Backend) -> None:
    backend.put("u.txt", "名前 = '太郎'\nmood = '😀'\ncafe\u0301\n".encode())
    ws = backend.workspace()
    ws.read("u.txt")
    ok(ws, "edit", file_path="u.txt", old_string="'😀'", new_string="'🎉'")
    ok(ws, "edit", file_path="u.txt", old_string="cafe\u0301", new_string="café")
    assert backend.get("u.txt") == "名前 = '太郎'\nmood = '🎉'\ncafé\n".encode()


def test_edit_argument_rules(backend: Backend) -> None:
    backend.put("a.txt", b"abc\n")
    ws = backend.workspace()
    ws.read("a.txt")
    err(ws, "edit", "invalid_arguments", file_path="a.txt", old_string="", new_string="x")
    err(ws, "edit", "invalid_arguments", file_path="a.txt", old_string="a", new_string="a")
    err(ws, "edit", "invalid_arguments", file_path="a.txt", old_string="a")
    err(ws, "edit", "invalid_arguments", file_path="a.txt", old_string="a", new_string="b",
        extra=1)
    assert backend.get("a.txt") == b"abc\n"


def test_too_large_names_the_cap(backend: Backend) -> None:
    ws = backend.workspace(size_cap=1000)
    out = err(ws, "write", "too_large", file_path="big.txt", content="x" * 1001)
    assert "1000" in out.text
    assert not backend.exists("big.txt")
    backend.put("big2.txt", b"line\n" * 400)
    ok(ws, "read", file_path="big2.txt", limit=5)
    out = err(ws, "edit", "too_large", file_path="big2.txt", old_string="line",
              new_string="LINE", replace_all=True)
    assert "1000" in out.text


def test_windowed_read_of_file_over_cap_streams(backend: Backend) -> None:
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


# -- results and errors never leak internals --------------------------------------------


def test_execute_never_raises_on_garbage(backend: Backend) -> None:
    ws = backend.workspace()
    for tool, args in [("read", {}), ("read", {"file_path": 3}), ("nope", {}),
                       ("write", {"file_path": "a", "content": None}),
                       ("read", {"file_path": "a", "offset": 0}),
                       ("read", {"file_path": "a", "limit": -1}),
                       ("read", "not a dict"), ("edit", {"file_path": "a"})]:
        out = ws.execute(tool, args)
        assert out.is_error and out.error is not None
        assert out.error.code == "invalid_arguments", (tool, args, out.text)
        assert "Traceback" not in out.text


# -- names ending in a dot: a declared capability ------------------------------------


def test_trailing_dot_names_follow_the_capability(backend: Backend) -> None:
    """Stored as named where the backend can; refused, never altered, where the service
    would drop the dot (Azure: ``notes.`` would be ``notes``)."""
    backend.put("notes", b"the other file\n")
    ws = backend.workspace()
    for name in ("notes.", "d./x.txt"):
        if backend.capabilities.trailing_dot_names:
            ok(ws, "write", file_path=name, content="dotted\n")
            assert backend.get(name) == b"dotted\n"
        else:
            out = err(ws, "write", "invalid_arguments", file_path=name, content="dotted\n")
            assert "trailing dots" in out.text
            err(ws, "read", "invalid_arguments", file_path=name)
    assert backend.get("notes") == b"the other file\n"
