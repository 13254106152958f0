"""What reaches the model: a character budget, valid Unicode, and texts that say what they
show (edit snippets, empty files, plurals, footers of streamed reads), on every backend."""

from __future__ import annotations

import json
import os
import pathlib

import pytest

import toolfs
from tests.backend_fixtures import Backend
from tests.contract.calls import err, exec_err, local_backend, ok
from toolfs.policy.events import FsEvent
from toolfs.render import number_line

MAX_OUTPUT_CHARS = 100_000  # the documented default budget


def _json(out: toolfs.ToolOutput) -> str:
    return json.dumps(out.to_dict(), ensure_ascii=False)


def _split(text: str) -> tuple[list[str], str]:
    """The numbered lines of a read's text and its footer."""
    body, footer = text.rsplit("\n\n", 1)
    return body.split("\n"), footer


def test_undecodable_names_in_hints_and_events_are_escaped(tmp_path: pathlib.Path) -> None:
    b = local_backend(tmp_path)
    fd = os.open(os.path.join(os.fsencode(b.root), b"caf\xe9.txt"), os.O_CREAT | os.O_WRONLY)
    os.close(fd)
    events: list[FsEvent] = []
    ws = b.workspace(subscribers=[events.append])
    out = exec_err(ws, "read", "not_found", file_path="cafe.txt")
    out.text.encode("utf-8")
    assert "caf\\udce9.txt" in out.text
    for e in events:
        e.model_dump_json()


def test_the_budget_option_is_checked_and_inherited() -> None:
    for bad in (10, 999, "100000", True, None):
        with pytest.raises(toolfs.FsError) as info:
            toolfs.Workspace("memory://toolfs-budget", max_output_chars=bad)
        assert info.value.code == "invalid_arguments"
    ws = toolfs.Workspace("memory://toolfs-budget", max_output_chars=1000)
    assert ws.new_context().max_output_chars == 1000
    aws = toolfs.AsyncWorkspace("memory://toolfs-budget", max_output_chars=1000)
    try:
        assert aws.new_context().sync.max_output_chars == 1000
    finally:
        aws.close()
    assert toolfs.Workspace("memory://toolfs-budget").max_output_chars == MAX_OUTPUT_CHARS
    # The smallest budget still shows a (cut) line and where to continue.
    ws.write("w.txt", "q" * 5000 + "\n" + "r" * 5000 + "\n")
    out = ws.execute("read", {"file_path": "w.txt"})
    assert len(out.text) <= 1000
    assert out.text.startswith("     1\t" + "q" * 500 + "... [line truncated: 500 of 5000")
    assert out.text.endswith("Use offset=2 to continue.)")


def test_tool_output_is_bounded_and_valid_unicode_however_it_is_built() -> None:
    error = toolfs.FsError("not_found", "x")
    out = toolfs.ToolOutput(text="é" * 200_000 + "caf\udce9", value=None, error=error)
    assert len(out.text) <= MAX_OUTPUT_CHARS
    out.text.encode("utf-8")
    out = toolfs.ToolOutput(text="caf\udce9.txt", value=None, error=error)
    assert out.text == "caf\\udce9.txt"


def test_every_cut_listing_footer_pluralises_its_word() -> None:
    """A budget-cut ls says "entries" (it said "entrys"); every word the listings and
    grep count with is spelt right, singular and plural."""
    from toolfs.render import _plural

    words = {"entry": "entries", "file": "files", "line": "lines", "count": "counts",
             "path": "paths", "occurrence": "occurrences", "key": "keys", "day": "days",
             ".gitignore wildcard rule": ".gitignore wildcard rules"}
    for word, plural in words.items():
        assert _plural(1, word) == f"1 {word}" and _plural(0, word) == f"0 {plural}"
        assert _plural(2, word) == f"2 {plural}"
    ws = toolfs.Workspace("memory://plural-entries")
    for i in range(1000):
        ws.write(f"f{i:04d}_" + "x" * 150 + ".txt", "x\n")
    text = ws.execute("ls", {}).text
    assert text.endswith(" of 1000 entries)") and "entrys" not in text
    assert ws.execute("grep", {"pattern": "x", "output_mode": "content"}).text.endswith(
        " of 1000 lines)")


@pytest.mark.parametrize("where", ["memory", "local"])
def test_every_structured_content_fits_a_small_budget_once_escaped(tmp_path: object,
                                                                   where: str) -> None:
    # At the smallest budget, names and messages full of control characters (six JSON
    # characters each): counts, globs, reads of such a path and errors naming one all
    # stay within the budget as JSON, saying when they were cut.
    root = f"memory://ctl-{os.getpid()}-{id(tmp_path)}" if where == "memory" else str(tmp_path)
    ws = toolfs.Workspace(root, max_output_chars=1000)
    for i in range(40):
        ws.write(f"{i:02d}" + "\x01" * 30 + ".txt", "needle \x01\x02 \"quoted\"\n")
    long_name = "\x01" * 200 + ".txt"
    ws.write(long_name, "x\n")
    calls = [("grep", {"pattern": "needle", "output_mode": mode})
             for mode in ("count", "content", "files_with_matches")]
    calls += [("glob", {"pattern": "*"}), ("ls", {}), ("read", {"file_path": long_name}),
              ("read", {"file_path": "\x01" * 900}), ("read", {"file_path": "\x02" * 150})]
    for tool, args in calls:
        out = ws.execute(tool, args)
        data = out.to_dict()
        assert len(json.dumps(data, ensure_ascii=False)) <= 1000, (tool, args)
        if data["ok"] and tool != "read":
            assert data["result"]["truncated"] is True, (tool, args)


class OutputBudget:
    """Tool output within the budget, escaped, pluralised."""

    def test_default_read_of_wide_lines_is_cut_to_the_budget(self, backend: Backend) -> None:
        # 2000 lines of 80 characters: 176k characters of model text uncut.
        lines = [f"{i:06d} " + "w" * 73 for i in range(1, 2001)]
        backend.put("wide.txt", ("\n".join(lines) + "\n").encode())
        ws = backend.workspace()
        out = ok(ws, "read", file_path="wide.txt")
        assert len(out.text) <= MAX_OUTPUT_CHARS
        shown, footer = _split(out.text)
        k = len(shown)
        assert 1000 < k < 2000
        assert shown == [number_line(i, lines[i - 1]) for i in range(1, k + 1)]  # whole lines
        assert footer == (f"(Output truncated at 100000 characters: showing lines 1-{k} of 2000. "
                          f"Use offset={k + 1} to continue.)")
        # The canonical value is whole; the structured content carries what the text shows.
        assert isinstance(out.value, toolfs.ReadResult) and out.value.lines == lines
        result = out.to_dict()["result"]
        assert result["lines"] == lines[:k]
        assert (result["line_count"], result["partial"], result["truncated"]) == (k, True, True)
        assert result["total_lines"] == 2000
        assert len(_json(out)) <= MAX_OUTPUT_CHARS
        # The offset the footer names continues right after the last line shown.
        more = ok(ws, "read", file_path="wide.txt", offset=k + 1)
        assert more.text.startswith(number_line(k + 1, lines[k]) + "\n")

    def test_a_huge_line_is_cut_alike_in_text_and_structured_content(
            self, backend: Backend) -> None:
        backend.put("one.txt", b"z" * 300_000)
        out = ok(backend.workspace(), "read", file_path="one.txt")
        cut = "z" * 2000 + "... [line truncated: 2000 of 300000 characters shown]"
        assert out.text == "     1\t" + cut
        result = out.to_dict()["result"]
        assert result["lines"] == [cut]
        assert (result["line_count"], result["partial"], result["truncated"]) == (1, False, True)
        assert len(_json(out)) < 3000
        assert isinstance(out.value, toolfs.ReadResult) and out.value.lines == ["z" * 300_000]

    def test_a_small_budget_cuts_a_streamed_read_on_whole_lines(self, backend: Backend) -> None:
        lines = [f"row {i:05d} " + "s" * 90 for i in range(1, 301)]
        backend.put("huge.txt", ("\n".join(lines) + "\n").encode())
        ws = backend.workspace(size_cap=4096, first_block=1024, block_size=2048,
                               max_output_chars=2000)
        out = ok(ws, "read", file_path="huge.txt", offset=100, limit=50)
        assert isinstance(out.value, toolfs.ReadResult) and out.value.total_lines is None
        assert len(out.text) <= 2000
        shown, footer = _split(out.text)
        k = len(shown)
        assert 0 < k < 50
        assert shown == [number_line(100 + i, lines[99 + i]) for i in range(k)]
        assert footer == (
            f"(Output truncated at 2000 characters: showing lines 100-{99 + k}; more lines "
            f"follow: the file is {out.value.size} bytes, over the whole-file cap, so they were "
            f"not counted. Use offset={100 + k} to continue.)")
        result = out.to_dict()["result"]
        assert result["lines"] == lines[99:99 + k] and result["truncated"] is True
        assert len(_json(out)) <= 2000

    def test_an_edit_snippet_is_cut_to_the_budget(self, backend: Backend) -> None:
        backend.put("f.txt", b"head\nold\ntail\n")
        ws = backend.workspace(max_output_chars=2000)
        ws.read("f.txt")
        new = "".join(f"new line {i}\n" for i in range(1, 3001))
        out = ok(ws, "edit", file_path="f.txt", old_string="old\n", new_string=new)
        assert len(out.text) <= 2000
        head, intro, *rest = out.text.split("\n")
        assert head == "Edited f.txt: replaced 1 occurrence at line 2."
        *numbered, note = rest
        k = len(numbered)
        assert intro == f"Lines 1-{k} of the edited file:"
        assert numbered == [number_line(1, "head")] + [
            number_line(i + 1, f"new line {i}") for i in range(1, k)]
        assert note == (f"(Snippet cut at 2000 characters; read from offset={k + 1} to see the "
                        "rest of the change.)")
        result = out.to_dict()["result"]
        assert result["snippet"] == ["head"] + [f"new line {i}" for i in range(1, k)]
        assert len(_json(out)) <= 2000
        assert isinstance(out.value, toolfs.EditResult) and len(out.value.snippet) == 3002

    def test_errors_are_bounded(self, backend: Backend) -> None:
        huge_path = "d/" * 100 + "x" * 300_000
        out = backend.workspace().execute("read", {"file_path": huge_path})
        assert out.is_error
        assert len(out.text) <= MAX_OUTPUT_CHARS and len(_json(out)) <= MAX_OUTPUT_CHARS
        ws = backend.workspace(max_output_chars=5000)
        out = ws.execute("read", {"file_path": huge_path})
        assert out.is_error
        assert len(out.text) <= 5000 and len(_json(out)) <= 5000
        out = ws.execute("read", {"file_path": "x", **{f"extra_{i}": 1 for i in range(3000)}})
        assert out.error is not None and out.error.code == "invalid_arguments"
        assert len(out.text) <= 5000 and "characters cut] ..." in out.text
        assert len(_json(out)) <= 5000
        assert out.to_dict()["error"]["details"]["truncated"] is True
        assert len(out.error.details["errors"]) == 3000  # the canonical error is whole

        backend.put("many.txt", b"a\n" * 3000)
        ws.read("many.txt")
        out = err(ws, "edit", "ambiguous_match", file_path="many.txt", old_string="a",
                  new_string="b")
        details = out.to_dict()["error"]["details"]
        assert details["count"] == 3000 and details["lines_truncated"] is True
        assert details["lines"] == list(range(1, len(details["lines"]) + 1))
        assert len(details["lines"]) <= 100
        assert len(_json(out)) <= 5000

    def test_replace_all_lists_at_most_a_hundred_lines(self, backend: Backend) -> None:
        backend.put("many.txt", b"a\n" * 150)
        ws = backend.workspace()
        ws.read("many.txt")
        out = ok(ws, "edit", file_path="many.txt", old_string="a", new_string="b",
                 replace_all=True)
        head = out.text.split("\n", 1)[0]
        assert head == ("Edited many.txt: replaced 150 occurrences at lines "
                        + ", ".join(map(str, range(1, 101))) + ", ... (50 more).")
        assert out.to_dict()["result"]["lines"] == list(range(1, 101))
        assert out.to_dict()["result"]["replacements"] == 150

    def test_an_undecodable_name_is_escaped_in_text_and_structured_content(self,
            backend: Backend) -> None:
        if not backend.capabilities.cheap_listing:
            # No "did you mean" listing here (a declared capability), so no name from a
            # listing can reach the model; the answer is still valid Unicode.
            out = err(backend.workspace(), "read", "not_found", file_path="cafe.txt")
            _json(out).encode("utf-8")
            assert "did_you_mean" not in out.to_dict()["error"]["details"]
            return
        if backend.name == "local":
            os.close(os.open(os.fsencode(backend.key("")) + b"caf\xe9.txt",
                             os.O_CREAT | os.O_WRONLY, 0o644))
        else:
            backend.put("caf\udce9.txt", b"")  # what a listing of such a name holds
        out = err(backend.workspace(), "read", "not_found", file_path="cafe.txt")
        out.text.encode("utf-8")
        _json(out).encode("utf-8")
        assert "Did you mean: caf\\udce9.txt?" in out.text
        assert out.to_dict()["error"]["details"]["did_you_mean"] == ["caf\\udce9.txt"]

    def test_edit_text_shows_a_numbered_snippet(self, backend: Backend) -> None:
        backend.put("ten.txt", "".join(f"l{i}\n" for i in range(1, 11)).encode())
        ws = backend.workspace()
        ws.read("ten.txt")
        out = ok(ws, "edit", file_path="ten.txt", old_string="l5\n", new_string="five\nFIVE\n")
        assert out.text == ("Edited ten.txt: replaced 1 occurrence at line 5.\n"
                            "Lines 2-9 of the edited file:\n"
                            "     2\tl2\n     3\tl3\n     4\tl4\n     5\tfive\n     6\tFIVE\n"
                            "     7\tl6\n     8\tl7\n     9\tl8")
        out = ok(ws, "edit", file_path="ten.txt", old_string="l", new_string="L",
                 replace_all=True)
        assert out.text == ("Edited ten.txt: replaced 9 occurrences at lines 1, 2, 3, 4, 7, 8, 9, "
                            "10, 11.\n"
                            "Lines 1-4 of the edited file, around the first change:\n"
                            "     1\tL1\n     2\tL2\n     3\tL3\n     4\tL4")
        ok(ws, "write", file_path="solo.txt", content="only\n")
        out = ok(ws, "edit", file_path="solo.txt", old_string="only\n", new_string="",
                 replace_all=True)
        assert out.text == ("Edited solo.txt: replaced 1 occurrence at line 1.\n"
                            "(The file is now empty.)")

    def test_a_bom_only_file_is_empty(self, backend: Backend) -> None:
        backend.put("bom.txt", b"\xef\xbb\xbf")
        ws = backend.workspace()
        assert ok(ws, "read", file_path="bom.txt").text == "(File bom.txt is empty: 0 lines.)"
        assert ok(ws, "read", file_path="bom.txt", offset=3).text == (
            "(File bom.txt is empty: 0 lines.)")

    def test_counts_are_pluralised(self, backend: Backend) -> None:
        backend.put("one.txt", b"x\n")
        backend.put("three.txt", b"a\nb\nc\n")
        ws = backend.workspace()
        assert ok(ws, "read", file_path="one.txt", offset=5).text == (
            "(Offset 5 is past the end of one.txt: the file has 1 line. Use offset=1.)")
        assert ok(ws, "read", file_path="three.txt", offset=5).text == (
            "(Offset 5 is past the end of three.txt: the file has 3 lines. "
            "Use an offset between 1 and 3.)")
        assert ok(ws, "read", file_path="three.txt", offset=2, limit=1).text == (
            "     2\tb\n\n(Showing line 2 of 3. Use offset=3 to continue.)")
        assert ok(ws, "read", file_path="three.txt", offset=3).text == (
            "     3\tc\n\n(Showing line 3 of 3.)")

    def test_a_streamed_read_of_the_whole_file_has_no_footer(self, backend: Backend) -> None:
        lines = [f"row {i:05d}" for i in range(1, 3001)]
        backend.put("huge.txt", ("\n".join(lines) + "\n").encode())
        ws = backend.workspace(size_cap=4096, first_block=1024, block_size=2048)
        out = ok(ws, "read", file_path="huge.txt", limit=5000)
        assert isinstance(out.value, toolfs.ReadResult) and out.value.total_lines == 3000
        assert out.text == "\n".join(number_line(i, line) for i, line in enumerate(lines, 1))

    def test_a_streamed_cut_line_tells_its_whole_length(self, backend: Backend) -> None:
        # Over the whole-file cap a read keeps only the start of a long line; the marker
        # still names the whole line's length, not the length of the kept prefix.
        backend.put("long.txt", b"q" * 50_000 + b"\nshort\n")
        out = ok(backend.workspace(size_cap=1000, block_size=4096), "read", file_path="long.txt")
        first = out.text.splitlines()[0]
        assert first.endswith("[line truncated: 2000 of 50000 characters shown]"), first[-80:]
        assert out.text.splitlines()[1] == "     2\tshort"

    @pytest.mark.parametrize("char", ["\t", "\x01", '"'])
    def test_structured_content_stays_within_the_budget_once_escaped(self, backend: Backend,
                                                                     char: str) -> None:
        # JSON writes a tab as 2 characters, a quote as 2 and U+0001 as 6: a read or grep of
        # such text that fits the budget as text would not fit it as JSON.
        backend.put("w.txt", ((char * 1999 + "\n") * 300).encode())
        ws = backend.workspace()
        for tool, args in (("read", {"file_path": "w.txt"}),
                           ("grep", {"pattern": ".", "output_mode": "content", "path": "w.txt"})):
            out = ok(ws, tool, **args)
            assert len(_json(out)) <= MAX_OUTPUT_CHARS, tool
            result = out.to_dict()["result"]
            assert result["truncated"] is True
            if tool == "read":
                assert result["line_count"] == len(result["lines"]) > 0
                assert result["partial"] is True
            else:
                assert result["matches"] and result["files"] == ["w.txt"]
