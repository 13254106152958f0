"""Notebooks as cells: read shows cells, edit and notebook_edit change one cell's bytes.

Every writer's notebook (tests/notebook_samples.py) goes through read, edit and the
three notebook_edit modes; each result is checked against nbformat's parse, and its
bytes against the original: only the touched cell's span differs, and an edit undone
gives back the original bytes exactly.
"""

from __future__ import annotations

import base64
import difflib
import itertools
import json
import sys
import threading
from typing import Any

import nbformat
import pytest

import toolfs
from tests.backend_fixtures import Backend
from tests.notebook_samples import WRITERS, base_notebook
from toolfs.formats.notebook import parse
from toolfs.policy.rules import Policy
from toolfs.results import NotebookEditResult, NotebookReadResult

NB = "work/report.ipynb"


def loaded(data: bytes | str) -> dict[str, Any]:
    """The notebook as nbformat parses it, validated."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    nb = nbformat.reads(text, as_version=nbformat.NO_CONVERT)
    nbformat.validate(nb)
    return json.loads(text)  # type: ignore[no-any-return]


def changed_span(old: str, new: str) -> tuple[int, int, int]:
    """``(start, old_end, new_end)``: old[start:old_end] became new[start:new_end], the
    rest being a common prefix and suffix."""
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end = 0
    while end < limit - start and old[-1 - end] == new[-1 - end]:
        end += 1
    return start, len(old) - end, len(new) - end


def cell_span(text: str, index: int, key: str | None = None) -> tuple[int, int]:
    """Where cell ``index`` (or its ``key`` member's value) sits in ``text``."""
    cell = parse(text).cells[index]
    if key is None:
        return cell.start, cell.end
    member = cell.members[key]
    return member.value_start, member.value_end


_roots = itertools.count()


def setup_ws(text: str) -> toolfs.Workspace:
    """A workspace on a fresh memory root holding ``text`` as the notebook ``NB``."""
    ws = toolfs.Workspace(f"memory://nbcells-{next(_roots)}")
    ws.fs.fs.pipe_file(ws.fs.jail.root + "/" + NB, text.encode("utf-8"))
    return ws


def raw(ws: toolfs.Workspace) -> str:
    return ws.fs.cat_file(NB).decode("utf-8")  # type: ignore[no-any-return]


PNG_SNIPPET = "iVBORw0KGgo"


@pytest.fixture(params=["s3", "gcs", "azure"])
def cloud(request: pytest.FixtureRequest) -> Any:
    b: Backend = request.getfixturevalue(f"{request.param}_backend")
    b.setup()
    return b


def _two_agents() -> tuple[toolfs.Workspace, toolfs.Workspace]:
    a = setup_ws(WRITERS["nbformat"])
    b = a.new_context()
    a.read(NB)
    b.read(NB)
    return a, b


def _merging_agents() -> tuple[toolfs.Workspace, toolfs.Workspace]:
    first = setup_ws(WRITERS["nbformat"])
    a = toolfs.Workspace(first.fs.fs, root=first.fs.jail.root,
                         policy=Policy(on_stale="merge"))
    b = a.new_context()
    a.read(NB)
    b.read(NB)
    return a, b


def test_read_shows_cells_not_json() -> None:
    ws = setup_ws(WRITERS["nbformat"])
    out = ws.execute("read", {"file_path": NB})
    text = out.text
    assert isinstance(out.value, NotebookReadResult)
    assert text.startswith("Notebook work/report.ipynb: 6 cells, python.")
    assert "[cell 1] id=intro markdown\n     1\t# Café report\n" in text
    assert "[cell 2] id=load-data code, execution_count=1\n     1\timport json\n" in text
    assert '     2\tpath = "C:\\\\data\\\\x.json"' in text  # the source, not JSON escapes
    # outputs: a stream cut to its first lines and marked, an image named, an error
    assert "    row 9\n    [... 15 more lines not shown]" in text and "row 10" not in text
    assert ("[output 1: display_data image/png] [image cell-3-output-1.png: image/png, "
            "1x1, shown]") in text
    assert "[output 1: error] ZeroDivisionError: division by zero (2 traceback lines" in text
    assert "[cell 5] id=empty code\n  (empty)" in text
    assert PNG_SNIPPET not in text and '"cell_type"' not in text
    assert "Showing" not in text  # every cell shown: no footer
    from toolfs.integrations.display import html, markdown

    assert markdown(out.value).startswith("**read** `work/report.ipynb` · version")
    assert "[cell 1] id=intro markdown" in html(out.value)
    data = out.to_dict()["result"]
    assert [c["cell_id"] for c in data["cells"]] == [
        "intro", "load-data", "plot_1", "fail", "empty", "notes"]
    assert data["cells"][2]["outputs"][0]["image"]["name"] == "cell-3-output-1.png"


def test_offset_and_limit_count_cells_and_the_footer_continues() -> None:
    ws = setup_ws(WRITERS["nbformat"])
    out = ws.execute("read", {"file_path": NB, "offset": 2, "limit": 2})
    assert "[cell 2]" in out.text and "[cell 3]" in out.text and "[cell 4]" not in out.text
    assert out.text.endswith("(Showing cells 2-3 of 6. Use offset=4 to continue.)")
    past = ws.execute("read", {"file_path": NB, "offset": 9})
    assert "Offset 9 is past the last cell: use an offset between 1 and 6." in past.text
    r = ws.read(NB, offset=6)
    assert isinstance(r, NotebookReadResult)
    assert (r.start_cell, r.cell_count, r.total_cells, r.partial) == (6, 1, 6, True)


def test_a_read_cut_by_the_budget_shows_whole_cells_and_where_to_continue() -> None:
    nb = base_notebook()
    nb["cells"] = [{"cell_type": "markdown", "id": f"c{i}", "metadata": {},
                    "source": [f"line {j} of cell {i}\n" for j in range(40)]}
                   for i in range(30)]
    ws = setup_ws(json.dumps(nb, indent=1))
    ws.max_output_chars = 5_000
    out = ws.execute("read", {"file_path": NB})
    assert len(out.text) <= 5_000
    assert "Output truncated at 5000 characters: showing cells 1-" in out.text
    shown = out.to_dict()["result"]
    n = shown["cell_count"]
    assert out.text.endswith(f"Use offset={n + 1} to continue.)")
    assert shown["truncated"] and len(json.dumps(shown)) <= 5_000


def test_a_cell_longer_than_the_budget_shows_its_first_lines() -> None:
    nb = base_notebook()
    nb["cells"] = [{"cell_type": "code", "execution_count": None, "id": "big", "metadata": {},
                    "outputs": [], "source": [f"x{i} = {i}\n" for i in range(3000)]},
                   {"cell_type": "markdown", "id": "next", "metadata": {}, "source": ["n"]}]
    ws = setup_ws(json.dumps(nb, indent=1))
    ws.max_output_chars = 2_000
    out = ws.execute("read", {"file_path": NB})
    assert len(out.text) <= 2_000 and "[cell 1] id=big code\n     1\tx0 = 0\n" in out.text
    shown = out.to_dict()["result"]["cells"][0]["source"]
    assert 10 < len(shown) < 3000 and out.text.endswith(
        f"showing cell 1 of 2 (the first {len(shown)} source lines of cell 1). "
        "Use offset=2 to continue.)")


def test_a_broken_notebook_is_read_and_repaired_as_text() -> None:
    ws = setup_ws('{"cells": [ {"cell_type": "code", \n')
    r = ws.read(NB)
    assert not isinstance(r, NotebookReadResult) and r.lines[0].startswith('{"cells"')
    ws.edit(NB, '"code", \n', '"code"}], "metadata": {}, "nbformat": 4}')
    assert json.loads(raw(ws))["nbformat"] == 4


@pytest.mark.parametrize("writer", list(WRITERS))
def test_edit_rewrites_only_that_cell_source_and_undoes_exactly(writer: str) -> None:
    original = WRITERS[writer]
    ws = setup_ws(original)
    ws.read(NB)
    r = ws.edit(NB, 'print("héllo")', 'print("bye \\"x\\"\\n\t")  # é')
    assert isinstance(r, NotebookEditResult)
    assert (r.action, r.cell_id, r.index, r.replacements) == (
        "edited", "load-data" if writer != "nbformat_4_4" else "cell-2", 2, 1)
    after = raw(ws)
    start, old_end, _ = changed_span(original, after)
    lo, hi = cell_span(original, 1, "source")
    assert lo <= start and old_end <= hi, "bytes outside the cell's source changed"
    before, now = loaded(original), loaded(after)
    assert "".join(now["cells"][1]["source"]) == (
        'import json\npath = "C:\\\\data\\\\x.json"\nprint("bye \\"x\\"\\n\t")  # é')
    now["cells"][1]["source"] = before["cells"][1]["source"]
    assert now == before
    if writer == "ascii_escapes":
        assert "\\u00e9" in after[start:] and "é" not in after
    # The reverse edit gives back the very bytes the writer wrote.
    ws.edit(NB, 'print("bye \\"x\\"\\n\t")  # é', 'print("héllo")')
    assert raw(ws) == original


@pytest.mark.parametrize("writer", ["nbformat", "crlf", "string_source", "compact"])
def test_a_multi_line_edit_keeps_the_layout(writer: str) -> None:
    original = WRITERS[writer]
    ws = setup_ws(original)
    ws.read(NB)
    ws.edit(NB, "- one\n- two\n", "- one\n- one and a half\n- two\n- three\n")
    after = raw(ws)
    assert loaded(after)["cells"][5]["source"] in (
        ["## Notes\n", "\n", "- one\n", "- one and a half\n", "- two\n", "- three\n"],
        "## Notes\n\n- one\n- one and a half\n- two\n- three\n")
    diff = [line for line in difflib.unified_diff(original.splitlines(), after.splitlines(),
                                                  lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    if writer == "compact":
        assert len(diff) == 2  # one line each way: the file is one line
    else:  # as git diff shows it: only lines of the cell's old and new source
        def items(nb: dict[str, Any]) -> set[str]:
            src = nb["cells"][5]["source"]
            return {json.dumps(x, ensure_ascii=False)
                    for x in ([src] if isinstance(src, str) else src)}

        old_items, new_items = items(loaded(original)), items(loaded(after))
        for line in diff:
            body = line[1:].strip().rstrip(",").removeprefix('"source": ')
            assert body in (old_items if line[0] == "-" else new_items), line
    if writer == "crlf":
        assert "\n" not in after.replace("\r\n", "")


def test_edit_matches_are_per_cell() -> None:
    ws = setup_ws(WRITERS["nbformat"])
    ws.read(NB)
    across = ws.execute("edit", {"file_path": NB, "old_string": "1 / 0\n", "new_string": "x"})
    assert across.error is not None and across.error.code == "no_match"
    across = ws.execute("edit", {"file_path": NB, "old_string": "plot(df)\n1 / 0",
                                 "new_string": "x"})
    assert across.error is not None and across.error.code == "no_match"
    assert "runs across two cells (plot_1 and fail)" in across.text
    assert across.error.details["cells"] == ["plot_1", "fail"]
    twice = ws.execute("edit", {"file_path": NB, "old_string": "#", "new_string": "%"})
    assert twice.error is not None and twice.error.code == "ambiguous_match"
    assert twice.error.details["cells"] == ["intro", "notes"]
    # JSON's own text is not matched: only the sources are
    json_text = ws.execute("edit", {"file_path": NB, "old_string": '"cell_type"',
                                    "new_string": '"x"'})
    assert json_text.error is not None and json_text.error.code == "no_match"
    assert "text of the file's JSON" in json_text.text
    r = ws.edit(NB, "#", "%", replace_all=True)
    assert isinstance(r, NotebookEditResult)
    assert (r.replacements, r.cells_changed) == (3, ["intro", "notes"])
    assert loaded(raw(ws))["cells"][5]["source"][0] == "%% Notes\n"


@pytest.mark.parametrize("writer", list(WRITERS))
def test_replace_clears_a_code_cells_outputs_only(writer: str) -> None:
    original = WRITERS[writer]
    ws = setup_ws(original)
    ws.read(NB)
    cid = "plot_1" if writer != "nbformat_4_4" else "cell-3"
    r = ws.notebook_edit(NB, cid, "plot(df2)\nshow()")
    assert r.outputs_cleared and r.action == "replaced"
    after = raw(ws)
    start, old_end, _ = changed_span(original, after)
    lo, hi = cell_span(original, 2)
    assert lo <= start and old_end <= hi
    before, now = loaded(original), loaded(after)
    cell = now["cells"][2]
    assert (cell["outputs"], cell["execution_count"]) == ([], None)
    assert "".join(cell["source"]) == "plot(df2)\nshow()"
    assert cell["metadata"] == before["cells"][2]["metadata"]
    now["cells"][2] = before["cells"][2]
    assert now == before
    # markdown: only the source
    md = "notes" if writer != "nbformat_4_4" else "cell-6"
    done = ws.notebook_edit(NB, md, "## Notes\n\n- one\n- two\n")
    assert not done.outputs_cleared and raw(ws) == after


@pytest.mark.parametrize("writer", list(WRITERS))
def test_insert_then_delete_gives_back_the_original_bytes(writer: str) -> None:
    original = WRITERS[writer]
    ws = setup_ws(original)
    ws.read(NB)
    for after_id, index in (("", 0), ("fail", 4), ("notes", 6)):
        if writer == "nbformat_4_4" and after_id:
            after_id = f"cell-{index}"
        r = ws.notebook_edit(NB, after_id, "## Inserted\nwith 'quotes' and é",
                             cell_type="markdown", edit_mode="insert")
        assert r.action == "inserted" and r.index == index + 1 and r.total_cells == 7
        inserted = raw(ws)
        start, old_end, _ = changed_span(original, inserted)
        assert old_end == start or original[start:old_end].isspace() or \
            original[start:old_end] in (",",)  # a pure insertion (up to a separator)
        nb = loaded(inserted)
        cell = nb["cells"][index]
        assert "".join(cell["source"]) == "## Inserted\nwith 'quotes' and é"
        if writer == "nbformat_4_4":
            assert "id" not in cell and r.cell_id == f"cell-{index + 1}"
        else:
            assert cell["id"] == r.cell_id and len(r.cell_id) == 8
        del nb["cells"][index]
        assert nb == loaded(original)
        ws.notebook_edit(NB, r.cell_id, "", edit_mode="delete")
        assert raw(ws) == original, "insert + delete is not the identity"
    code = ws.notebook_edit(NB, "", "x = 1", edit_mode="insert")
    assert code.cell_type == "code"
    cell = loaded(raw(ws))["cells"][0]
    assert (cell["cell_type"], cell["outputs"], cell["execution_count"]) == ("code", [], None)


@pytest.mark.parametrize("writer", ["nbformat", "vscode", "string_source", "compact",
                                    "nbformat_4_4"])
def test_changing_a_cells_type_keeps_it_valid(writer: str) -> None:
    ws = setup_ws(WRITERS[writer])
    ws.read(NB)
    first, fail = ("intro", "fail") if writer != "nbformat_4_4" else ("cell-1", "cell-4")
    ws.notebook_edit(NB, first, "print('was markdown')", cell_type="code")
    ws.notebook_edit(NB, fail, "Was code", cell_type="markdown")
    nb = loaded(raw(ws))
    assert nb["cells"][0]["cell_type"] == "code" and "attachments" not in nb["cells"][0]
    assert nb["cells"][3]["cell_type"] == "markdown" and "outputs" not in nb["cells"][3]
    if writer != "nbformat_4_4":
        assert [c["id"] for c in nb["cells"]][:4] == ["intro", "load-data", "plot_1", "fail"]


def test_delete_every_cell_then_insert_into_the_empty_notebook() -> None:
    original = WRITERS["nbformat"]
    ws = setup_ws(original)
    ws.read(NB)
    for cid in ("intro", "load-data", "plot_1", "fail", "empty", "notes"):
        ws.notebook_edit(NB, cid, "", edit_mode="delete")
    assert '"cells": [],' in raw(ws) and loaded(raw(ws))["cells"] == []
    r = ws.notebook_edit(NB, "", "# again", cell_type="markdown", edit_mode="insert")
    nb = loaded(raw(ws))
    assert [c["id"] for c in nb["cells"]] == [r.cell_id]
    assert raw(ws).startswith('{\n "cells": [\n  {\n   "cell_type": "markdown",')


def test_unknown_cell_ids_and_wrong_files_are_refused_clearly() -> None:
    ws = setup_ws(WRITERS["nbformat"])
    ws.read(NB)
    out = ws.execute("notebook_edit", {"file_path": NB, "cell_id": "plot-1",
                                       "new_source": "x"})
    assert out.error is not None and out.error.code == "not_found"
    assert "no cell with id 'plot-1'" in out.text and "plot_1" in out.text
    assert out.error.details["nearby"][0] == "plot_1"
    assert "Read the notebook to see its cells" in out.text  # the advice, not "the path"
    missing = ws.execute("notebook_edit", {"file_path": NB, "cell_id": "",
                                           "new_source": "x"})
    assert missing.error is not None and missing.error.code == "invalid_arguments"
    ws.write("a.py", "x = 1\n")
    other = ws.execute("notebook_edit", {"file_path": "a.py", "cell_id": "x",
                                         "new_source": "y"})
    assert other.error is not None and other.error.code == "invalid_arguments"
    bad = ws.execute("notebook_edit", {"file_path": NB, "cell_id": "fail",
                                       "new_source": "y", "edit_mode": "move"})
    assert bad.error is not None and "edit_mode" in bad.text
    extra = ws.execute("notebook_edit", {"file_path": NB, "cell_id": "fail",
                                         "new_source": "y", "index": 3})
    assert extra.error is not None and "unknown argument 'index'" in extra.text
    unread = ws.new_context().execute("notebook_edit", {"file_path": NB, "cell_id": "fail",
                                                        "new_source": "y"})
    assert unread.error is not None and unread.error.code == "not_observed"


def test_write_of_a_notebook_must_be_valid_and_is_stored_as_given() -> None:
    ws = toolfs.Workspace("memory://nbcells-write")
    for content, reason in (
            ("{not json", "not valid JSON"),
            ('{"nbformat": 3, "cells": []}', "nbformat must be 4"),
            ('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": '
             '[{"cell_type": "code", "metadata": {}, "source": "x"}]}', "outputs"),
            (json.dumps({**base_notebook(), "cells": [{"cell_type": "markdown", "id": "a b",
                                                        "metadata": {}, "source": ""}]}),
             "id")):
        out = ws.execute("write", {"file_path": "n.ipynb", "content": content})
        assert out.error is not None and out.error.code == "invalid_arguments", content
        assert "not a valid Jupyter notebook" in out.text and reason in out.text, out.text
        assert not ws.fs.exists("n.ipynb")
    for text in WRITERS.values():
        ws.write("n.ipynb", text)
        assert ws.fs.cat_file("n.ipynb") == text.encode("utf-8")


def test_without_nbformat_write_applies_a_structural_check(
        monkeypatch: pytest.MonkeyPatch) -> None:
    nb = base_notebook()
    monkeypatch.setitem(sys.modules, "nbformat", None)  # the notebook extra not installed
    ws = toolfs.Workspace("memory://nbcells-structural")
    for broken, reason in (
            ({**nb, "nbformat": 3}, "nbformat must be 4"),
            ({**nb, "metadata": []}, "'metadata' is missing or not a dict"),
            ({**nb, "cells": [{"cell_type": "code", "metadata": {}, "source": ""}]},
             "a code cell needs an 'outputs' list"),
            ({**nb, "cells": [{"cell_type": "markdown", "metadata": {}, "source": [1]}]},
             "'source' must be a string or a list of strings"),
            ({**nb, "cells": [{"cell_type": "markdown", "metadata": {}, "source": "",
                               "id": "a b"}]}, "id must be")):
        out = ws.execute("write", {"file_path": "n.ipynb", "content": json.dumps(broken)})
        assert out.error is not None and reason in out.text, out.text
    ws.write("n.ipynb", WRITERS["vscode"])
    assert ws.fs.cat_file("n.ipynb") == WRITERS["vscode"].encode()


def test_image_outputs_are_named_and_their_bytes_found() -> None:
    from tests.notebook_samples import PNG_1PX
    from toolfs.tools.notebook import image_bytes

    nb = parse(WRITERS["nbformat"])
    assert image_bytes(nb.cells[2], 1) == ("image/png", base64.b64decode(PNG_1PX))
    assert image_bytes(nb.cells[1], 1) is None and image_bytes(nb.cells[2], 2) is None
    r = setup_ws(WRITERS["nbformat"]).read(NB)
    assert isinstance(r, NotebookReadResult)
    image = r.cells[2].outputs[0].image
    assert image is not None and (image.name, image.mime_type, image.size) == (
        "cell-3-output-1.png", "image/png", len(base64.b64decode(PNG_1PX)))


def test_notebook_edit_is_pinned_but_not_offered_by_default() -> None:
    from toolfs.schemas import ALL_TOOLS, DEFAULT_TOOLS, NotebookEditArgs

    assert toolfs.ALL_TOOLS == ALL_TOOLS == (*DEFAULT_TOOLS, "notebook_edit")
    assert "notebook_edit" not in [d["name"] for d in toolfs.tool_definitions()]
    schema = toolfs.tool_definitions("json_schema", ["notebook_edit"])[0]["input_schema"]
    assert schema == {
        "type": "object", "additionalProperties": False,
        "required": ["file_path", "cell_id", "new_source"],
        "properties": {
            "file_path": {"type": "string", "description": schema["properties"]["file_path"]
                          ["description"]},
            "cell_id": {"type": "string",
                        "description": schema["properties"]["cell_id"]["description"]},
            "new_source": {"type": "string", "description": schema["properties"]
                           ["new_source"]["description"]},
            "cell_type": {"enum": ["code", "markdown"], "type": "string",
                          "description": schema["properties"]["cell_type"]["description"]},
            "edit_mode": {"enum": ["replace", "insert", "delete"], "type": "string",
                          "default": "replace",
                          "description": schema["properties"]["edit_mode"]["description"]}}}
    assert NotebookEditArgs.model_config["extra"] == "forbid"
    for fmt in ("openai", "openai_responses", "anthropic", "mcp", "json_schema"):
        for strict in (False, True):
            (d,) = toolfs.tool_definitions(fmt, ["notebook_edit"], strict=strict)
            assert "clears its outputs and execution count" in json.dumps(d)
    (mcp,) = toolfs.tool_definitions("mcp", ["notebook_edit"])
    assert mcp["annotations"] == {"title": "Edit notebook cell", "readOnlyHint": False,
                                  "destructiveHint": True, "idempotentHint": False,
                                  "openWorldHint": False}
    assert len(toolfs.tool_definitions("openai", list(ALL_TOOLS))) == 7


def test_every_adapter_offers_notebook_edit_when_named() -> None:
    from toolfs.integrations import langchain, openai_agents, pydantic_ai
    from toolfs.integrations.cli import _tool_list
    from toolfs.integrations.mcp_server import ToolfsMCP, output_schema

    ws = toolfs.Workspace("memory://nbcells-adapters")
    assert "notebook_edit" not in [t.name for t in langchain.tools(ws)]
    assert [t.name for t in langchain.tools(ws, tools=toolfs.ALL_TOOLS)][-1] == "notebook_edit"
    assert [t.name for t in openai_agents.function_tools(ws, tools=["notebook_edit"])] == [
        "notebook_edit"]
    assert "notebook_edit" in pydantic_ai.toolset(ws, tools=toolfs.ALL_TOOLS).tools
    assert "notebook_edit" not in pydantic_ai.toolset(ws).tools
    assert _tool_list("read,notebook_edit") == ("read", "notebook_edit")
    from toolfs.integrations.anthropic import beta_tools

    assert [t.name for t in beta_tools(ws, tools=toolfs.ALL_TOOLS)][-1] == "notebook_edit"
    assert "notebook_edit" not in [t.name for t in beta_tools(ws)]
    server = ToolfsMCP(ws, tools=["read", "notebook_edit"])
    assert [t.name for t in server.tools] == ["read", "notebook_edit"]
    assert "notebook_edit" not in [t.name for t in ToolfsMCP(ws).tools]
    # The structured content of a notebook read and a cell edit meets the output schemas.
    jsonschema = pytest.importorskip("jsonschema")
    nbws = setup_ws(WRITERS["nbformat"])
    jsonschema.validate(nbws.execute("read", {"file_path": NB}).to_dict(),
                        output_schema("read"))
    jsonschema.validate(nbws.execute("read", {"file_path": "missing.txt"}).to_dict(),
                        output_schema("read"))
    edit = nbws.execute("edit", {"file_path": NB, "old_string": "1 / 0", "new_string": "1"})
    jsonschema.validate(edit.to_dict(), output_schema("edit"))
    cell = nbws.execute("notebook_edit", {"file_path": NB, "cell_id": "fail",
                                          "new_source": "2"})
    jsonschema.validate(cell.to_dict(), output_schema("notebook_edit"))


@pytest.mark.anyio
async def test_async_workspace_notebook_edit() -> None:
    aws = toolfs.AsyncWorkspace(setup_ws(WRITERS["nbformat"]))
    try:
        r = await aws.read(NB)
        assert isinstance(r, NotebookReadResult)
        done = await aws.notebook_edit(NB, "notes", "## Done", None, "replace")
        assert done.action == "replaced"
        out = await aws.execute("notebook_edit", {"file_path": NB, "cell_id": "notes",
                                                  "new_source": "", "cell_type": None,
                                                  "edit_mode": "delete"})
        assert out.text.startswith("Deleted cell 6 (id=notes, markdown)")
    finally:
        aws.close()


def test_one_request_per_call_on_object_stores(cloud: Any) -> None:
    cloud.put(NB, WRITERS["nbformat"].encode("utf-8"))
    ws = cloud.workspace()

    def requests(call: Any) -> list[str]:
        cloud.emulator.clear_requests()
        call()
        return [r.method for r in cloud.emulator.requests()
                if not r.path.startswith("/_toolfs")]

    assert requests(lambda: ws.read(NB)) == ["GET"]
    assert len(requests(lambda: ws.notebook_edit(NB, "fail", "1 / 2"))) == 1
    assert len(requests(lambda: ws.edit(NB, "1 / 2", "1 / 3"))) == 1
    assert len(requests(lambda: ws.notebook_edit(NB, "", "# top", "markdown",
                                                 "insert"))) == 1
    assert len(requests(lambda: ws.notebook_edit(NB, "fail", "", edit_mode="delete"))) == 1


def test_two_agents_on_the_same_cell_one_is_stale() -> None:
    a, b = _two_agents()
    a.notebook_edit(NB, "plot_1", "mine")
    out = b.execute("notebook_edit", {"file_path": NB, "cell_id": "plot_1",
                                      "new_source": "theirs"})
    assert out.error is not None and out.error.code == "stale"
    assert "".join(loaded(raw(a))["cells"][2]["source"]) == "mine"


def test_two_agents_on_different_cells_refuse_mode_the_second_is_stale() -> None:
    a, b = _two_agents()
    a.notebook_edit(NB, "intro", "# A")
    out = b.execute("edit", {"file_path": NB, "old_string": "1 / 0", "new_string": "1"})
    assert out.error is not None and out.error.code == "stale"
    b.read(NB)
    b.edit(NB, "1 / 0", "1")  # after reading again, it lands
    nb = loaded(raw(a))
    assert nb["cells"][0]["source"] == ["# A"] and nb["cells"][3]["source"] == ["1"]


def test_two_agents_on_different_cells_merge_mode_both_land() -> None:
    """With merge mode, two agents' changes to different cells of one notebook both land
    (each mode, and edit), and the result is still a valid notebook."""
    a, b = _merging_agents()
    a.notebook_edit(NB, "intro", "# A")
    out = b.execute("notebook_edit", {"file_path": NB, "cell_id": "fail",
                                      "new_source": "1 / 1"})
    assert isinstance(out.value, NotebookEditResult), out.text
    assert out.value.merged and out.value.outputs_cleared
    assert "had changed since you read it, in other cells" in out.text
    inserted = a.notebook_edit(NB, "notes", "# end", "markdown", "insert")
    deleted = b.notebook_edit(NB, "empty", "", edit_mode="delete")
    edited = a.edit(NB, "plot(df)", "plot(df2)")
    nb = loaded(raw(a))
    assert [c["id"] for c in nb["cells"]] == [
        "intro", "load-data", "plot_1", "fail", "notes", inserted.cell_id]
    assert nb["cells"][0]["source"] == ["# A"] and nb["cells"][2]["source"] == ["plot(df2)"]
    assert nb["cells"][3]["source"] == ["1 / 1"] and nb["cells"][3]["outputs"] == []
    assert deleted.action == "deleted" and isinstance(edited, NotebookEditResult)


def test_merge_mode_refuses_a_change_to_a_cell_changed_since() -> None:
    a, b = _merging_agents()
    a.notebook_edit(NB, "plot_1", "mine")
    for call in ({"file_path": NB, "cell_id": "plot_1", "new_source": "theirs"},
                 {"file_path": NB, "cell_id": "plot_1", "new_source": "",
                  "edit_mode": "delete"}):
        out = b.execute("notebook_edit", call)
        assert out.error is not None and out.error.code == "stale", out.text
        b.read(NB)  # (a refusal with the whole diff also counts as a read)
        a.notebook_edit(NB, "plot_1", f"mine again {len(call)}")
    out = b.execute("edit", {"file_path": NB, "old_string": "mine again", "new_string": "x"})
    assert out.error is not None and out.error.code == "stale"
    assert "".join(loaded(raw(a))["cells"][2]["source"]) == "mine again 4"


def test_parallel_calls_of_one_context_never_lose_an_update() -> None:
    ws = setup_ws(WRITERS["nbformat"])
    ws.read(NB)
    outcomes: list[str] = []
    barrier = threading.Barrier(4)

    def change(cid: str) -> None:
        barrier.wait()
        out = ws.execute("notebook_edit", {"file_path": NB, "cell_id": cid,
                                           "new_source": f"by {cid}"})
        outcomes.append("ok" if out.error is None else out.error.code)

    threads = [threading.Thread(target=change, args=(c,))
               for c in ("intro", "load-data", "fail", "notes")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    nb = loaded(raw(ws))
    landed = [c["id"] for c in nb["cells"] if "".join(c["source"]) == f"by {c['id']}"]
    assert outcomes.count("ok") == len(landed) >= 1
    assert set(outcomes) <= {"ok", "stale"}


def test_an_edited_notebook_still_runs_in_a_kernel() -> None:
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = base_notebook()
    nb["cells"] = [
        {"cell_type": "code", "execution_count": None, "id": "a", "metadata": {},
         "outputs": [], "source": ["x = 1\n", "print(x)"]},
        {"cell_type": "markdown", "id": "m", "metadata": {}, "source": ["# notes"]},
        {"cell_type": "code", "execution_count": None, "id": "b", "metadata": {},
         "outputs": [], "source": ["1 / 0"]},
    ]
    ws = setup_ws(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    ws.read(NB)
    ws.edit(NB, "x = 1", 'x = "tab\\there"  # é')
    ws.notebook_edit(NB, "b", "y = x.upper()\nprint(y)")
    ws.notebook_edit(NB, "a", "import math\nprint(math.pi > 3)", edit_mode="insert")
    ws.notebook_edit(NB, "m", "", edit_mode="delete")
    run = nbformat.reads(raw(ws), as_version=4)
    nbclient.NotebookClient(run, kernel_name="python3", timeout=120,
                            record_timing=False).execute()
    texts = ["".join(o.get("text", "")) for c in run.cells for o in c.get("outputs", [])]
    assert texts == ["tab\there\n", "True\n", "TAB\tHERE\n"]


class SyncNotebookCells:
    """Notebooks read and edited by cell on every backend."""

    def test_notebooks_on_every_backend(self, backend: Backend) -> None:
        original = WRITERS["vscode"]
        backend.put(NB, original.encode("utf-8"))
        ws = backend.workspace()
        r = ws.read(NB)
        assert isinstance(r, NotebookReadResult) and r.total_cells == 6
        ws.edit(NB, "1 / 0", "1 / 1")
        ws.notebook_edit(NB, "plot_1", "plot(df)\nplt.show()")
        inserted = ws.notebook_edit(NB, "load-data", "df = load()", edit_mode="insert")
        ws.notebook_edit(NB, "empty", "", edit_mode="delete")
        stored = backend.get(NB).decode("utf-8")
        nb = loaded(stored)
        assert [c.get("id") for c in nb["cells"]] == [
            "intro", "load-data", inserted.cell_id, "plot_1", "fail", "notes"]
        assert nb["cells"][3]["outputs"] == [] and nb["cells"][4]["source"] == ["1 / 1"]
        assert nb["metadata"] == loaded(original)["metadata"]
        # the stale refusal: another agent changed a cell since this one read
        other = backend.workspace()
        other.read(NB)
        other.notebook_edit(NB, "notes", "changed by the other agent", cell_type="markdown")
        out = ws.execute("notebook_edit", {"file_path": NB, "cell_id": "intro",
                                           "new_source": "mine"})
        assert out.error is not None and out.error.code == "stale"
        assert loaded(backend.get(NB))["cells"][0]["source"] == nb["cells"][0]["source"]
        # with merge mode, two agents' changes to different cells both land
        a = backend.workspace(policy=Policy(on_stale="merge"))
        b = a.new_context()
        a.read(NB)
        b.read(NB)
        a.notebook_edit(NB, "intro", "# A")
        assert b.notebook_edit(NB, "fail", "1 / 3").merged
        nb = loaded(backend.get(NB))
        assert nb["cells"][0]["source"] == ["# A"] and nb["cells"][4]["source"] == ["1 / 3"]

    def test_every_writers_round_trips_on_every_backend(self, backend: Backend) -> None:
        """On each backend, for each writer: an edit and its reverse, and an insert and the
        delete of that cell, give back the writer's bytes; in between, the diff of the file
        is only the touched cell's lines."""
        ws = backend.workspace()
        for n, (writer, original) in enumerate(WRITERS.items()):
            path = f"w{n}.ipynb"
            backend.put(path, original.encode("utf-8"))
            ws.read(path)
            ws.edit(path, "plot(df)", "plot(df, kind='bar')")
            edited = backend.get(path).decode("utf-8")
            start, old_end, _ = changed_span(original, edited)
            lo, hi = cell_span(original, 2, "source")
            assert lo <= start and old_end <= hi, writer
            ws.edit(path, "plot(df, kind='bar')", "plot(df)")
            assert backend.get(path).decode("utf-8") == original, writer
            after = "notes" if writer != "nbformat_4_4" else "cell-6"
            r = ws.notebook_edit(path, after, "# the end", "markdown", "insert")
            assert loaded(backend.get(path))["cells"][-1]["source"] in (["# the end"], "# the end")
            ws.notebook_edit(path, r.cell_id, "", edit_mode="delete")
            assert backend.get(path).decode("utf-8") == original, writer
