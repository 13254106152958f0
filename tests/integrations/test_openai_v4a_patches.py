"""An adversarial review of the V4A applier and the apply_patch adapter: diffs the way
GPT-5-class models get them slightly wrong, inputs built to be slow, and races.

Every refusal here must tell the model how to fix its diff (the line that differs, what
was expected); every call must return in bounded time (`_bounded`, never a timing
assertion); every reported success must be in the final bytes.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from agents.apply_diff import apply_diff as sdk_apply_diff

import toolfs
from tests.backend_fixtures import Backend
from toolfs.errors import FsError
from toolfs.integrations.openai import apply_patch, apply_patch_text
from toolfs.integrations.v4a import apply_diff, parse_patch, parse_update

T = TypeVar("T")


def _bounded(fn: Callable[[], T], seconds: float = 30.0) -> T:
    """``fn()``, or a failure if it does not return within ``seconds`` (a hang or a
    quadratic blow-up; a generous bound, not a timing assertion)."""
    box: list[Any] = []
    t = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "the call did not return"
    return box[0]  # type: ignore[no-any-return]


def _err(text: str, diff: str) -> FsError:
    with pytest.raises(FsError) as info:
        apply_diff(text, diff)
    return info.value


def _mem(name: str, **options: Any) -> toolfs.Workspace:
    return toolfs.Workspace(f"memory://{name}-{uuid.uuid4().hex[:8]}", **options)


# -- anchors that were already passed -----------------------------------------------------

THREE = "def f():\n    x = 1\ndef g():\n    x = 1\ndef h():\n    x = 1\n"


def test_a_passed_anchor_of_another_scope_is_refused_not_written_elsewhere() -> None:
    # Hunks out of order: the second names f, which lies above the first hunk. The SDK
    # keeps its cursor and writes the next "x = 1" it finds -- h's. Refuse instead.
    diff = "@@ def g():\n-    x = 1\n+    x = 2\n@@ def f():\n-    x = 1\n+    x = 3\n"
    assert sdk_apply_diff(THREE, diff).endswith("def h():\n    x = 3\n")  # the SDK's guess
    err = _err(THREE, diff)
    assert err.code == "no_match" and err.details["hunk"] == 2
    assert err.details["anchor"] == "def f():" and err.details["anchor_line"] == 1
    assert "hunk 2" in err.message and "line 1" in err.message
    assert "file order" in err.message
    # An anchorless hunk in between does not open a new scope either.
    diff = ("@@ def g():\n-    x = 1\n+    x = 2\n@@\n def h():\n"
            "@@ def f():\n-    x = 1\n+    x = 3\n")
    assert _err(THREE, diff).details["hunk"] == 3


def test_a_passed_anchor_continuing_the_previous_hunks_scope_still_applies() -> None:
    text = "class A:\n    def f(self):\n        a = 1\n        b = 2\n    def g(self):\n" \
           "        b = 2\n"
    # Two hunks under one anchor (the second's is passed: the search stays put).
    diff = ("@@ class A:\n@@     def f(self):\n-        a = 1\n+        a = 10\n"
            "@@     def f(self):\n-        b = 2\n+        b = 20\n")
    want = text.replace("a = 1", "a = 10").replace("b = 2", "b = 20", 1)
    assert apply_diff(text, diff) == want == sdk_apply_diff(text, diff)
    # Stacked anchors sharing their outer one: the outer is passed, the inner found.
    diff = ("@@ class A:\n@@     def f(self):\n-        a = 1\n+        a = 10\n"
            "@@ class A:\n@@     def g(self):\n-        b = 2\n+        b = 30\n")
    want = ("class A:\n    def f(self):\n        a = 10\n        b = 2\n    def g(self):\n"
            "        b = 30\n")
    assert apply_diff(text, diff) == want == sdk_apply_diff(text, diff)
    # Three hunks, one anchor: the scope carries over the hunks that repeat it.
    text = "def f():\n    a\n    b\n    c\n"
    diff = "".join(f"@@ def f():\n-    {c}\n+    {c.upper()}\n" for c in "abc")
    assert apply_diff(text, diff) == "def f():\n    A\n    B\n    C\n"


# -- blank lines the model puts around hunks ----------------------------------------------


def test_blank_lines_before_the_first_hunk_are_not_a_hunk() -> None:
    # "\n@@..." (a diff that starts with a newline): not an empty context line that
    # would match the file's first empty line and push the search past the target.
    text = "a\n\nb\n"
    assert apply_diff(text, "\n\n@@\n-a\n+A\n") == "A\n\nb\n"
    assert apply_diff(text, "\r\n@@\n-b\n+B\n") == "a\n\nB\n"
    # Without a header after them, blank lines are empty context lines (as the SDK).
    assert apply_diff(text, "\n-b\n+B\n") == "a\n\nB\n" == sdk_apply_diff(text, "\n-b\n+B\n")
    # The same inside an envelope, after the file header or the move.
    ws = _mem("v4a-blank")
    ws.write("x.txt", "a\n\nb\n")
    ws.read("x.txt")
    report = apply_patch_text(ws, "*** Begin Patch\n*** Update File: x.txt\n\n@@\n-a\n+A\n"
                                  "*** End Patch\n")
    assert report.text == "Updated x.txt" and ws.fs.cat_file("x.txt") == b"A\n\nb\n"


# -- what a refusal says -------------------------------------------------------------------


def test_no_newline_marker_is_explained() -> None:
    err = _err("a\nb", "@@\n a\n-b\n+c\n\\ No newline at end of file\n")
    assert err.code == "invalid_arguments" and err.details["diff_line"] == 5
    assert "No newline at end of file" in err.message
    assert "leave it out" in err.message and "empty '+' line" in err.message


def test_a_near_miss_quotes_the_files_line_and_the_diffs() -> None:
    # Trailing whitespace the model dropped: the message shows both lines, repr'd, so
    # the difference is visible.
    err = _err("def f():\n    x = 1  \n    return x\n",
               "@@\n def f():\n-    x = 1\n+    x = 2\n     return x\n")
    assert err.details["similar_lines"] == [1]
    assert err.details["differs"] == {"file_line": 2, "file": "'    x = 1  '",
                                      "diff_line": 3, "diff": "'    x = 1'"}
    assert "line 2 of the file is '    x = 1  '" in err.message
    assert "diff line 3 has '    x = 1'" in err.message
    # Tabs against spaces.
    err = _err("\tx = 1\n", "@@\n-    x = 1\n+    x = 2\n")
    assert err.details["differs"]["file"] == "'\\tx = 1'"


def test_a_partial_match_names_the_first_line_that_differs() -> None:
    # Four of five context lines match at line 10; the fifth is what the model
    # misremembered: say which line of the file and which line of the diff.
    lines = [f"line {i}" for i in range(1, 30)]
    text = "\n".join(lines) + "\n"
    diff = "@@\n line 10\n line 11\n-line 12\n+LINE 12\n line 13\n line 14 (edited)\n"
    err = _err(text, diff)
    assert err.code == "no_match"
    assert err.details["partial_match"] == {"file_line": 10, "matched": 4}
    assert err.details["differs"] == {"file_line": 14, "file": "'line 14'",
                                      "diff_line": 7, "diff": "'line 14 (edited)'"}
    assert "the first 4 match at line 10" in err.message, err.message
    assert "line 14 of the file is 'line 14'" in err.message


def test_unicode_and_typographic_near_misses_are_named() -> None:
    # NFC in the file, NFD in the diff; curly quotes in the file, straight in the diff.
    for text, diff in (("caf\u00e9 = 1\n", "@@\n-cafe\u0301 = 1\n+tea = 1\n"),
                       ("print(\u201chi\u201d)\n", "@@\n-print(\"hi\")\n+print(\"yo\")\n"),
                       ("a \u2014 b\n", "@@\n-a - b\n+c\n"),
                       ("x\u00a0= 1\n", "@@\n-x = 1\n+x = 2\n")):
        err = _err(text, diff)
        assert err.code == "no_match" and err.details["similar_lines"] == [1], (text, err)
        # A no-break space is whitespace to Python: named as such, shown as \xa0.
        assert ("Unicode" in err.message or "\\xa0" in err.message), err.message
        assert "differs" in err.details, err.message
        assert apply_diff(text, "@@\n-" + text.rstrip("\n") + "\n+ok\n") == "ok\n"


def test_an_anchor_with_unified_trailing_at_signs_is_explained() -> None:
    err = _err("def f():\n    a\n", "@@ def f(): @@\n-    a\n+    b\n")
    assert err.code == "no_match" and "'@@ def f():'" in err.message, err.message
    err = _err("def f():\n    a\n", "@@ def g():\n-    a\n+    b\n")
    assert "'@@'" in err.message  # says a bare @@ is allowed


@pytest.mark.parametrize(("call", "needle", "not_needle"), [
    (lambda ws: apply_patch(ws, {"type": "create_file", "path": "a\udc80", "diff": "+x"}),
     "path", "Fix the diff"),
    (lambda ws: apply_patch(ws, {"type": "rename_file", "path": "a"}), "create_file",
     "Fix the diff"),
    (lambda ws: apply_patch_text(ws, "*** Update File: a\n@@\n-a\n+b\n"),
     "*** Begin Patch", "Fix the diff: hunks"),
])
def test_advice_fits_the_mistake(call: Callable[[toolfs.Workspace], Any], needle: str,
                                 not_needle: str) -> None:
    out = call(_mem("v4a-advice"))
    assert out.is_error
    advice = out.text.rsplit("\n", 1)[-1]
    assert needle in advice and not_needle not in advice, out.text


# -- files and paths -----------------------------------------------------------------------


def test_deleting_a_directory_says_so() -> None:
    ws = _mem("v4a-dir")
    ws.write("d/f.txt", "x\n")
    out = apply_patch(ws, {"type": "delete_file", "path": "d"})
    assert out.error is not None and out.error.code == "not_a_file", out.text
    assert ws.fs.cat_file("d/f.txt") == b"x\n"


def test_crlf_bom_and_non_utf8_files() -> None:
    ws = _mem("v4a-bytes")
    cases = {
        "crlf.txt": (b"a\r\nb\r\nc\r\n", "@@\n a\n-b\n+B\n+B2\n", b"a\r\nB\r\nB2\r\nc\r\n"),
        "crlf-diff.txt": (b"a\nb\n", "@@\r\n a\r\n-b\r\n+B\r\n", b"a\nB\n"),
        "bom.txt": (b"\xef\xbb\xbfa\nb", "@@\n-a\n+A\n", b"\xef\xbb\xbfA\nb"),
        "mixed.txt": (b"a\r\nb\nc\r\n", "@@\n-b\n+B\n", b"a\r\nB\nc\r\n"),
        "lone-cr.txt": (b"a\rb\nc\n", "@@\n a\rb\n-c\n+C\n", b"a\rb\nC\n"),
    }
    for name, (before, diff, after) in cases.items():
        ws.fs.fs.pipe_file(ws.fs.resolve(name).backend_path, before)
        ws.fs.cat_file(name)
        out = apply_patch(ws, {"type": "update_file", "path": name, "diff": diff})
        assert not out.is_error, out.text
        assert ws.fs.fs.cat_file(ws.fs.resolve(name).backend_path) == after, name
    ws.fs.fs.pipe_file(ws.fs.resolve("latin1.txt").backend_path, b"caf\xe9\n")
    out = apply_patch(ws, {"type": "update_file", "path": "latin1.txt",
                           "diff": "@@\n-caf\u00e9\n+tea\n"}, require_read=False)
    assert out.error is not None and out.error.code == "not_text"
    assert ws.fs.fs.cat_file(ws.fs.resolve("latin1.txt").backend_path) == b"caf\xe9\n"


# -- bounded work --------------------------------------------------------------------------


def test_a_patch_of_many_files_parses_in_linear_time() -> None:
    # One CRLF check per file section used to scan the whole patch: quadratic.
    n = 40_000
    patch = ("*** Begin Patch\n" + "".join(f"*** Add File: d/f{i}.txt\n+x\n" for i in range(n))
             + "*** End Patch\n")
    ops = _bounded(lambda: parse_patch(patch), 20.0)
    assert len(ops) == n and ops[-1].path == f"d/f{n - 1}.txt"


def test_a_whole_patch_report_stays_within_the_output_budget() -> None:
    ws = _mem("v4a-report", max_output_chars=2_000)
    n = 400
    patch = ("*** Begin Patch\n" + "".join(f"*** Add File: f{i}.txt\n+x\n" for i in range(n))
             + "*** Update File: missing.txt\n@@\n-a\n+b\n"
             + "".join(f"*** Add File: later{i}.txt\n+x\n" for i in range(n)) + "*** End Patch\n")
    report = apply_patch_text(ws, patch)
    # All or nothing: the one refusal, and every other file not applied.
    assert report.is_error and len(report.outputs) == 1 and len(report.skipped) == 2 * n
    text = report.text
    assert len(text) <= 2_000, len(text)
    assert text.startswith("Error [not_found]: missing.txt does not exist")
    assert f"{2 * n - 1} more" in text or "more" in text
    assert "f0.txt" in text and "later399.txt" not in text


def test_adversarial_files_stay_linear() -> None:
    # 200k identical lines; a context that matches everywhere but its last line.
    text = "same\n" * 200_000
    diff = "@@\n" + " same\n" * 1_000 + "-other\n+new\n"
    err = _bounded(lambda: _err(text, diff))
    assert err.code == "no_match" and err.details["missing_line"] == "other"
    assert len(err.message) < 3_000
    # ... everywhere but its first line, so every offset is a candidate start.
    diff = "@@\n-other\n" + " same\n" * 1_000 + "+new\n"
    assert _bounded(lambda: _err(text, diff)).code == "no_match"
    # A context that matches everywhere: ambiguous, said once, not 200k times.
    err = _bounded(lambda: _err(text, "@@\n same\n same\n-same\n+new\n"))
    assert err.code == "ambiguous_match" and len(err.details["lines"]) <= 11
    # Near-miss hints over a file of whitespace variants (the hint keys are linear too).
    text = "x = 1 \n" * 100_000
    err = _bounded(lambda: _err(text, "@@\n" + " x = 1\n" * 500 + "-y\n+z\n"))
    assert err.code == "no_match" and len(err.message) < 3_000
    # Thousands of stacked anchors, each one line further on.
    lines = [f"l{i}" for i in range(20_000)]
    diff = "".join(f"@@ l{i}\n" for i in range(0, 20_000, 2)) + "-l19999\n+end\n"
    out = _bounded(lambda: apply_diff("\n".join(lines), diff))
    assert out.endswith("l19998\nend")
    # Many hunks repeating one anchor (all passed): linear, and all applied.
    text = "def f():\n" + "".join(f"    v{i}\n" for i in range(20_000))
    diff = "".join(f"@@ def f():\n-    v{i}\n+    w{i}\n" for i in range(20_000))
    out = _bounded(lambda: apply_diff(text, diff))
    assert out.count("    w") == 20_000


def test_measure_linear_time() -> None:
    """Benchmark-style: the work on doubling inputs (printed with -s; no assertion on
    time, only that each call returns)."""
    for n in (50_000, 100_000, 200_000):
        text = "same\n" * n
        diff = "@@\n" + " same\n" * 1_000 + "-other\n+new\n"
        start = time.perf_counter()
        _bounded(lambda: _err(text, diff))  # noqa: B023
        print(f"{n} identical lines, near-total context: {time.perf_counter() - start:.3f}s")


# -- races ---------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["memory", "local", "s3"], indirect=True)
def test_a_move_racing_edits_never_loses_an_edit(backend: Backend) -> None:
    backend.put("a.txt", b"head\nEND\n")
    results: dict[str, list[str]] = {"edits": [], "moves": []}
    stop = threading.Event()

    def editor() -> None:
        ws = backend.workspace()
        for i in range(30):
            if stop.is_set():
                break
            try:
                ws.read("a.txt")
            except FsError:
                break  # moved away
            out = apply_patch(ws, {"type": "update_file", "path": "a.txt",
                                   "diff": f"@@\n-END\n+<e{i}>\n+END\n"})
            if not out.is_error:
                results["edits"].append(f"<e{i}>")

    def mover() -> None:
        ws = backend.workspace()
        for _ in range(30):
            try:
                ws.read("a.txt")
            except FsError:
                return
            out = apply_patch(ws, {"type": "update_file", "path": "a.txt",
                                   "diff": "@@\n-head\n+HEAD\n", "move_to": "b.txt"})
            if not out.is_error:
                results["moves"].append(out.text)
                stop.set()
                return
            assert out.error is not None and out.error.code in ("stale", "not_found"), out.text

    threads = [threading.Thread(target=editor), threading.Thread(target=mover)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if results["moves"]:
        assert not backend.exists("a.txt")
        final = backend.get("b.txt").decode()
        assert final.startswith("HEAD\n")
    else:
        assert not backend.exists("b.txt")
        final = backend.get("a.txt").decode()
    assert [m for m in results["edits"] if m not in final] == []
    assert final.count("<e") == len(results["edits"])


@pytest.mark.parametrize("backend", ["memory", "local"], indirect=True)
def test_two_moves_of_one_file_leave_one_copy(backend: Backend) -> None:
    backend.put("src.txt", b"x\n")
    outs: dict[str, Any] = {}
    barrier = threading.Barrier(2)

    def move(dest: str) -> None:
        ws = backend.workspace()
        ws.read("src.txt")
        barrier.wait()
        outs[dest] = apply_patch(ws, {"type": "update_file", "path": "src.txt",
                                      "diff": f"@@\n-x\n+{dest}\n", "move_to": dest})

    threads = [threading.Thread(target=move, args=(d,)) for d in ("one.txt", "two.txt")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [d for d, o in outs.items() if not o.is_error]
    assert len(won) == 1, {d: o.text for d, o in outs.items()}
    lost = next(d for d in outs if d not in won)
    assert not backend.exists("src.txt") and not backend.exists(lost)
    assert backend.get(won[0]) == f"{won[0]}\n".encode()


def test_parse_update_is_pure() -> None:
    # The parser keeps no state between calls (the adapter parses every diff twice).
    diff = "@@ def f():\n-a\n+b\n"
    assert parse_update(diff) == parse_update(diff)


def test_overlapping_hunks_are_named_as_such() -> None:
    # The second hunk repeats lines the first one already covers: say "overlaps hunk
    # 1" and "merge", not only "not found".
    text = "a\nb\nc\nd\n"
    err = _err(text, "@@\n a\n-b\n+B\n c\n@@\n c\n-d\n+D\n")
    assert err.code == "no_match" and err.details["hunk"] == 2
    assert err.details["overlaps_hunk"] == 1 and "overlaps hunk 1" in err.message
    assert "one hunk" in err.message
    # Out of order (entirely above the previous hunk) stays "file order".
    err = _err(text, "@@\n-d\n+D\n@@\n-a\n+A\n")
    assert "overlaps_hunk" not in err.details and "order of the file" in err.message


# Diffs as GPT-5-class models send them in apply_patch_call operations: anchors naming
# the enclosing function, 3 lines of context, no final newline on the diff, a diff that
# only adds under an anchor, stacked class/method anchors, *** End of File appends.
MODEL_CASES = [
    ("function main() {\n}\n", "@@ function main() {\n+  console.log(\"hi\");\n }",
     "function main() {\n  console.log(\"hi\");\n}\n"),
    ("import os\n\n\ndef fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1)\n",
     "@@ def fib(n):\n     if n < 2:\n         return n\n-    return fib(n - 1)\n"
     "+    return fib(n - 1) + fib(n - 2)\n",
     "import os\n\n\ndef fib(n):\n    if n < 2:\n        return n\n"
     "    return fib(n - 1) + fib(n - 2)\n"),
    ("class A:\n    def run(self):\n        return 1\n\nclass B:\n    def run(self):\n"
     "        return 1\n",
     "@@ class B:\n@@     def run(self):\n-        return 1\n+        return 2\n",
     "class A:\n    def run(self):\n        return 1\n\nclass B:\n    def run(self):\n"
     "        return 2\n"),
    ("a\nb\n", "@@\n b\n+c\n*** End of File\n", "a\nb\nc\n"),
    ("x = 1\r\ny = 2\r\n", "@@\n x = 1\n-y = 2\n+y = 3\n", "x = 1\r\ny = 3\r\n"),
    # An empty line in the file given as an empty diff line (no leading space).
    ("def f():\n    a = 1\n\n    return a\n", "@@ def f():\n     a = 1\n\n-    return a\n"
     "+    return a + 1\n", "def f():\n    a = 1\n\n    return a + 1\n"),
]


@pytest.mark.parametrize(("text", "diff", "want"), MODEL_CASES)
def test_diffs_as_models_send_them_apply_as_in_the_sdk(text: str, diff: str,
                                                       want: str) -> None:
    assert apply_diff(text, diff) == want == sdk_apply_diff(text, diff)


def test_nested_new_directories_on_every_backend(backend: Backend) -> None:
    ws = backend.workspace()
    run = (lambda op: _run_async(backend, ws, op)) if backend.use_async else (
        lambda op: apply_patch(ws, op))
    out = run({"type": "create_file", "path": "n1/n2/n3/new.txt", "diff": "+hi\n+\n"})
    assert out.text == "Created n1/n2/n3/new.txt", out.text
    assert backend.get("n1/n2/n3/new.txt") == b"hi\n"
    ws.read("n1/n2/n3/new.txt")
    out = run({"type": "update_file", "path": "n1/n2/n3/new.txt", "diff": "@@\n-hi\n+ho\n",
               "move_to": "m1/m2/moved.txt"})
    assert out.text == "Updated n1/n2/n3/new.txt\nMoved n1/n2/n3/new.txt to m1/m2/moved.txt"
    assert backend.get("m1/m2/moved.txt") == b"ho\n" and not backend.exists("n1/n2/n3/new.txt")
    out = run({"type": "create_file", "path": "m1/m2/moved.txt", "diff": "+again\n"})
    assert out.error is not None and "already exists" in out.text
    assert backend.get("m1/m2/moved.txt") == b"ho\n"


def _run_async(backend: Backend, ws: Any, op: dict[str, Any]) -> toolfs.ToolOutput:
    import asyncio

    from toolfs.integrations.openai import apply_patch_async

    aws = toolfs.AsyncWorkspace(ws._sync)
    try:
        return asyncio.run(apply_patch_async(aws, op))
    finally:
        aws.close()


def test_a_passed_anchor_after_an_anchorless_hunk_says_how_to_fix_it() -> None:
    # The SDK would apply this one correctly, but nothing in the diff tells it apart from
    # the out-of-order case above; the refusal says both fixes.
    text = "def f():\n    a = 1\n    b = 2\n"
    diff = "@@\n-    a = 1\n+    a = 10\n@@ def f():\n-    b = 2\n+    b = 20\n"
    err = _err(text, diff)
    assert err.code == "no_match" and "give both the same anchor" in err.message
    fixed = "@@ def f():\n-    a = 1\n+    a = 10\n@@ def f():\n-    b = 2\n+    b = 20\n"
    assert apply_diff(text, fixed) == "def f():\n    a = 10\n    b = 20\n"
    assert apply_diff(text, diff.replace("@@ def f():", "@@")) == apply_diff(text, fixed)


def test_markers_with_trailing_blanks_and_a_whole_patch_as_one_diff() -> None:
    assert apply_diff("a\nb\n", "@@\n a\n-b\n+c\n*** End of File \n") == "a\nc\n"
    assert apply_diff("a\n", "@@\n-a\n+b\n*** End Patch  \n") == "b\n"
    err = _err("a\n", "*** Begin Patch\n*** Update File: x.py\n@@\n-a\n+b\n*** End Patch\n")
    assert err.code == "invalid_arguments" and "holds only the hunks" in err.message
    assert "leave out '*** Begin Patch', '*** Update File:'" in err.message


TWO_CLASSES = ("class A:\n    def f(self):\n        return 1\n"
               "class B:\n    def f(self):\n        return 1\n")


def test_an_anchor_that_occurs_twice_chooses_nothing() -> None:
    # '@@ def f(self):' with two such lines, and the hunk fits after both: the SDK
    # edits the first; refuse, and say how to choose (stack the class).
    diff = "@@     def f(self):\n-        return 1\n+        return 2\n"
    assert sdk_apply_diff(TWO_CLASSES, diff).count("return 2") == 1  # the SDK's pick
    err = _err(TWO_CLASSES, diff)
    assert err.code == "ambiguous_match" and err.details["lines"] == [3, 6]
    assert err.details["anchor_lines"] == [2, 5] and "anchors stack" in err.message
    # Stacked under the class: one place.
    out = apply_diff(TWO_CLASSES, "@@ class B:\n" + diff)
    assert out.endswith("class B:\n    def f(self):\n        return 2\n")
    # The same with a hunk that only adds lines under the anchor.
    err = _err(TWO_CLASSES, "@@     def f(self):\n+        pass\n")
    assert err.code == "ambiguous_match"
    # Twice, but the second occurrence lies past the next hunk: no other reading.
    diff = ("@@     def f(self):\n-        return 1\n+        return 2\n"
            "@@ class B:\n@@     def f(self):\n-        return 1\n+        return 3\n")
    out = apply_diff(TWO_CLASSES, diff)
    assert out == TWO_CLASSES.replace("return 1", "return 2", 1).replace("return 1",
                                                                          "return 3")
    # Twice, but the hunk's context only fits after the first: unique.
    text = "def f():\n    a = 1\ndef f():\n    b = 1\n"
    assert apply_diff(text, "@@ def f():\n-    a = 1\n+    a = 2\n") == text.replace(
        "a = 1", "a = 2")


def test_the_anchor_check_stays_linear() -> None:
    text = "def f():\n    x\n" * 100_000
    err = _bounded(lambda: _err(text, "@@ def f():\n-    x\n+    z\n"))
    assert err.code == "ambiguous_match" and err.details["anchor_lines"] == [1, 3]
    # 2,500 hunks, each anchored on its own line that recurs once, far below: each is
    # checked up to the next hunk only; the last one's second occurrence is a reading.
    lines = [f"a{i}" for i in range(5_000)] + ["pad"] * 50_000 + [f"a{i}" for i in range(5_000)]
    diff = "".join(f"@@ a{i}\n+ins{i}\n" for i in range(0, 5_000, 2))
    err = _bounded(lambda: _err("\n".join(lines), diff))
    assert err.code == "ambiguous_match" and err.details["hunk"] == 2_500
    # An anchor on the last line that also occurs above: after either is a reading.
    assert _err("x\ny\nx", "@@ x\n+z\n").code == "ambiguous_match"


def test_a_passed_anchor_that_also_occurs_ahead_chooses_nothing() -> None:
    # The second hunk's anchor is behind the cursor (hunk 1's scope) and also ahead of
    # it; the hunk fits under both: the SDK stays in hunk 1's scope. Refuse.
    text = "def g():\n    pass\ndef g():\n    pass\n"
    diff = "@@ def g():\n-    pass\n+    return 1\n@@ def g():\n+    # more\n"
    sdk = sdk_apply_diff(text, diff)
    assert sdk == "def g():\n    return 1\n    # more\ndef g():\n    pass\n"  # its pick
    err = _err(text, diff)
    assert err.code == "ambiguous_match" and err.details["hunk"] == 2
    assert "passed already" in err.message and err.details["anchor_lines"] == [3]
    # Only behind: the scope reading is the only one.
    text = "def g():\n    a\n    b\n"
    assert apply_diff(text, "@@ def g():\n-    a\n+    A\n@@ def g():\n-    b\n+    B\n") \
        == "def g():\n    A\n    B\n"


def test_an_added_file_in_a_whole_patch_ends_with_a_newline_as_in_codex() -> None:
    # Codex's grammar (add_line: "+" text LF) and its parser: "+a\n+b\n" is "a\nb\n".
    # A lone create_file operation keeps the Agents SDK's join (no final newline).
    ws = _mem("v4a-add")
    report = apply_patch_text(ws, "*** Begin Patch\n*** Add File: a.txt\n+a\n+b\n"
                                  "*** Add File: blank-end.txt\n+a\n+\n"
                                  "*** Add File: empty.txt\n*** End Patch\n")
    assert not report.is_error, report.text
    assert ws.fs.cat_file("a.txt") == b"a\nb\n"
    assert ws.fs.cat_file("blank-end.txt") == b"a\n\n"
    assert ws.fs.cat_file("empty.txt") == b""
    report = apply_patch_text(ws, "*** Begin Patch\r\n*** Add File: crlf.txt\r\n+a\r\n"
                                  "*** End Patch\r\n")
    assert ws.fs.cat_file("crlf.txt") == b"a\r\n", report.text
    out = apply_patch(ws, {"type": "create_file", "path": "lone.txt", "diff": "+a\n+b\n"})
    assert not out.is_error and ws.fs.cat_file("lone.txt") == b"a\nb"
