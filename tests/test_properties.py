"""Property tests: edit semantics against a reference model, and a stateful policy model."""

from __future__ import annotations

import uuid

import hypothesis.strategies as st
from hypothesis import HealthCheck, assume, given, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import toolfs
from toolfs.text import BOM, apply_edit, decode

ALPHABET = st.sampled_from(["a", "b", "ab", " ", "\t", "\n", "漢", "😀", "e\u0301", "x = 1",
                            "\u00e9"])
TEXT = st.lists(ALPHABET, max_size=30).map("".join)
NEEDLE = st.lists(st.sampled_from(["a", "b", "ab", " ", "\n", "漢", "😀", "x = 1"]),
                  min_size=1, max_size=4).map("".join)


def reference(raw: str, old: str, new: str) -> str | None:
    """Python string operations on LF-normalised text, re-encoded with the file's ending."""
    crlf = "\r\n" in raw
    lf = raw.replace("\r\n", "\n")
    old_n, new_n = old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
    if old_n not in lf:
        return None
    out = lf.replace(old_n, new_n)
    return out.replace("\n", "\r\n") if crlf else out


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(TEXT, min_size=2, max_size=4), old=NEEDLE, new=TEXT, crlf=st.booleans(),
       bom=st.booleans())
def test_replace_all_equals_reference(parts: list[str], old: str, new: str, crlf: bool,
                                      bom: bool) -> None:
    assume(old != new)
    lf = old.join(parts)  # at least one occurrence, often several
    raw = lf.replace("\n", "\r\n") if crlf else lf
    # The model sends LF, or CRLF copied from somewhere: both mean the same.
    sent_old = old.replace("\n", "\r\n") if crlf and "\n" in old else old
    expected = reference(raw, sent_old, new)
    assert expected is not None
    data = (BOM if bom else b"") + raw.encode()
    doc = decode(data)
    outcome = apply_edit(doc.text, sent_old, new, replace_all=True)
    assert outcome.text == expected
    assert doc.encode(outcome.text) == (BOM if bom else b"") + expected.encode()
    assert outcome.count == lf.count(old)


@settings(max_examples=300, deadline=None)
@given(prefix=TEXT, suffix=TEXT, old=NEEDLE, new=TEXT)
def test_unique_edit_changes_only_the_span(prefix: str, suffix: str, old: str,
                                           new: str) -> None:
    raw = prefix + old + suffix
    assume(old != new and raw.find(old) == len(prefix)
           and raw.find(old, len(prefix) + 1) == -1)
    out = apply_edit(raw, old, new, replace_all=False).text
    assert out == prefix + new + suffix


# -- a stateful model of several contexts over a few files --------------------------------


class PolicyMachine(RuleBasedStateMachine):
    """Contexts read, write and edit; each outcome must match a model of observations."""

    def __init__(self) -> None:
        super().__init__()
        self.root = f"memory://toolfs-sm-{uuid.uuid4().hex[:8]}"
        self.contexts: list[toolfs.Workspace] = []
        self.files: dict[str, str] = {}  # the truth
        self.seen: list[dict[str, str | None]] = []  # per context: content observed

    @initialize()
    def setup(self) -> None:
        first = toolfs.Workspace(self.root)
        self.contexts = [first, first.new_context(), first.new_context()]
        self.seen = [{}, {}, {}]

    @rule(c=st.integers(0, 2), f=st.sampled_from(["a.txt", "b.txt"]))
    def read(self, c: int, f: str) -> None:
        out = self.contexts[c].execute("read", {"file_path": f})
        if f in self.files:
            assert not out.is_error, out.text
            assert isinstance(out.value, toolfs.ReadResult)
            assert "\n".join(out.value.lines) == self.files[f].rstrip("\n")
            self.seen[c][f] = self.files[f]
        else:
            assert out.error is not None and out.error.code == "not_found"
            self.seen[c][f] = None

    @rule(c=st.integers(0, 2), f=st.sampled_from(["a.txt", "b.txt"]),
          body=st.sampled_from(["one\n", "two\n", "one\ntwo\n", "three\n"]))
    def write(self, c: int, f: str, body: str) -> None:
        out = self.contexts[c].execute("write", {"file_path": f, "content": body})
        expected = self._expected_write_error(c, f)
        if expected is None:
            assert not out.is_error, out.text
            self.files[f] = body
            self.seen[c][f] = body
        else:
            assert out.error is not None and out.error.code == expected, out.text
            self._refused(c, f, expected)

    @rule(c=st.integers(0, 2), f=st.sampled_from(["a.txt", "b.txt"]),
          old=st.sampled_from(["one", "two"]), new=st.sampled_from(["1", "2"]))
    def edit(self, c: int, f: str, old: str, new: str) -> None:
        out = self.contexts[c].execute(
            "edit", {"file_path": f, "old_string": old, "new_string": new})
        if f not in self.files:
            assert out.error is not None
            assert out.error.code == ("not_found" if self.seen[c].get(f) is None
                                      else "stale"), out.text
            return
        expected = self._expected_write_error(c, f)
        if expected is not None:
            assert out.error is not None and out.error.code == expected, out.text
            self._refused(c, f, expected)
            return
        count = self.files[f].count(old)
        if count != 1:
            assert out.error is not None
            assert out.error.code == ("no_match" if count == 0 else "ambiguous_match")
            return
        assert not out.is_error, out.text
        self.files[f] = self.files[f].replace(old, new)
        self.seen[c][f] = self.files[f]

    def _refused(self, c: int, f: str, code: str) -> None:
        """A stale refusal shows the whole (small) change: it counts as a read."""
        if code == "stale":
            self.seen[c][f] = self.files.get(f)

    def _expected_write_error(self, c: int, f: str) -> str | None:
        if f not in self.seen[c]:
            return "not_observed" if f in self.files else None
        seen = self.seen[c][f]
        current = self.files.get(f)
        if seen is None:
            return "stale" if current is not None else None
        return None if seen == current else "stale"

    @invariant()
    def storage_matches_model(self) -> None:
        if not self.contexts:
            return
        fs = self.contexts[0].fs.fs
        for f, body in self.files.items():
            assert fs.cat_file(f"{self.contexts[0].fs.jail.root}/{f}") == body.encode()


TestPolicyMachine = PolicyMachine.TestCase
TestPolicyMachine.settings = settings(max_examples=60, stateful_step_count=25, deadline=None,
                                      suppress_health_check=[HealthCheck.too_slow])


@settings(max_examples=300, deadline=None)
@given(text=TEXT, a=st.integers(0, 200), b=st.integers(0, 200), context=st.integers(0, 3))
def test_lines_around_is_a_slice_of_the_lines(text: str, a: int, b: int,
                                              context: int) -> None:
    from toolfs.text import line_of, lines_around, split_lines

    start, end = sorted((min(a, len(text)), min(b, len(text))))
    first, lines = lines_around(text, start, end, context)
    every = split_lines(text)
    assert lines == every[first - 1: first - 1 + len(lines)]
    if text and start < len(text):
        assert first <= line_of(text, start) and first >= line_of(text, start) - context


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


@settings(max_examples=1000, deadline=None)
@given(text=st.lists(st.sampled_from(["a", "漢", "\r", "\n", "\r\n", "\r\r\n", "\n\r",
                                      "\v", "\f", "\x1c", "\x85", "\u2028"]),
                     max_size=20).map("".join))
def test_split_lines_is_the_per_line_definition(text: str) -> None:
    """``split_lines`` splits LF, CRLF and mixed text in bulk; line by line it means: split
    at each ``\\n``, drop an empty last piece, drop one ``\\r`` that ends each line. The
    other characters ``str.splitlines`` breaks at are text here."""
    from toolfs.text import split_lines

    pieces = text.split("\n") if text else []
    if pieces and pieces[-1] == "":
        pieces.pop()
    assert split_lines(text) == [p[:-1] if p.endswith("\r") else p for p in pieces]


@settings(max_examples=1000, deadline=None)
@given(text=st.lists(st.sampled_from(["a", "漢", "\r", "\n", "\r\n", "\r\r\n", "\n\r"]),
                     max_size=20).map("".join))
def test_crlf_map_is_the_per_match_definition(text: str) -> None:
    """An edit's map of a CRLF file is made in bulk; match by match it means: each
    ``\\r\\n`` (left to right, not overlapping) becomes ``\\n``, at its position less the
    ``\\r`` dropped before it, and offsets map back by adding those."""
    from toolfs.text import _CrlfMap

    crlf, removed, pos = [], 0, text.find("\r\n")
    while pos != -1:
        crlf.append(pos - removed)
        removed += 1
        pos = text.find("\r\n", pos + 2)
    m = _CrlfMap(text)
    assert (m.crlf, m.normalized) == (crlf, text.replace("\r\n", "\n"))
    for i in range(len(m.normalized) + 1):
        assert text[:m.to_raw(i)].replace("\r\n", "\n") == m.normalized[:i]


CRLF_TEXT = st.lists(st.sampled_from(["a", "b", "ab", "漢", "\n", "\r", "x = 1"]),
                     max_size=12).map("".join)


def _occurrences(text: str, part: str) -> int:
    """Occurrences of ``part`` in ``text``, overlapping ones included."""
    return sum(text.startswith(part, i) for i in range(len(text)))


@settings(max_examples=1000, deadline=None)
@given(before=CRLF_TEXT, after=CRLF_TEXT, old=NEEDLE, new=CRLF_TEXT,
       endings=st.sampled_from(["crlf", "mixed", "scattered", "lf"]),
       bare=st.lists(st.booleans(), min_size=1, max_size=8), bom=st.booleans(),
       replace_all=st.booleans())
def test_a_crlf_file_edited_in_place_matches_the_general_path(
        before: str, after: str, old: str, new: str, endings: str, bare: list[bool],
        bom: bool, replace_all: bool) -> None:
    """The edit of a file with CRs made on the raw text (``_single_crlf_edit``: strings
    without a newline on any file; an ``old`` with a newline whose longest line occurs
    once in the file, whatever its endings; any strings on a file whose every newline
    is a CRLF) gives what the general path, through the map of its CRLFs, gives: the
    same text, count, lines and span, or the same error, cap included."""
    from unittest import mock

    from toolfs.errors import FsError
    from toolfs.text import _single_crlf_edit

    lf = before + old + after
    raw = lf.replace("\n", "\r\n")
    if endings == "mixed":  # the last newline bare
        cut = raw.rfind("\r\n")
        raw = raw if cut < 0 else raw[:cut] + raw[cut + 1:]
    elif endings == "scattered":  # the i-th newline bare where bare[i % len(bare)]
        pieces = lf.split("\n")
        raw = pieces[0] + "".join(("\n" if bare[i % len(bare)] else "\r\n") + piece
                                  for i, piece in enumerate(pieces[1:]))
    elif endings == "lf":
        raw = lf
    size = len(raw.encode("utf-8", "surrogatepass"))

    def outcome(*, general: bool, cap: int | None) -> object:
        try:
            if general:
                with mock.patch("toolfs.text._single_crlf_edit", return_value=None):
                    return apply_edit(raw, old, new, replace_all=replace_all,
                                      max_bytes=cap, bom=bom, size=size)
            return apply_edit(raw, old, new, replace_all=replace_all, max_bytes=cap,
                              bom=bom, size=size)
        except FsError as err:
            return (err.code, err.message, err.details)

    for cap in (None, size, size + 2):
        assert outcome(general=False, cap=cap) == outcome(general=True, cap=cap)
    fast = _single_crlf_edit(raw, old.replace("\r\n", "\n"), new.replace("\r\n", "\n"),
                             None, None, bom, size)
    old_r = old.replace("\n", "\r\n")
    one_line = "\n" not in old + new and raw.count(old) == 1
    crlf_file = endings == "crlf" and "\n" in raw and raw.count(old_r) == 1
    line = max(old.split("\n"), key=len)
    unique_line = "\n" in old and line != "" and _occurrences(raw, line) == 1 \
        and raw.count(old_r) == 1
    if "\r" not in old + new and (one_line or crlf_file or unique_line):
        assert fast is not None  # the cases it is for do take it
