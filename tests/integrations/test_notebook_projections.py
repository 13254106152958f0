"""Every adapter's file tools see a Jupyter notebook as cells, as ``read``/``edit`` do:
Anthropic's text editor and memory tool (``view``, ``str_replace``, ``create``),
``apply_patch`` (``update_file``, ``create_file``) and Deep Agents (``read_file``,
``edit_file``, ``write_file``). A change within a cell's source leaves every byte outside
that cell as the notebook's writer wrote it; a created notebook must be valid. Each is
driven through the framework's own runner with a scripted model."""

from __future__ import annotations

import json
from typing import Any

import pytest

import toolfs
from tests.backend_fixtures import Backend
from tests.notebook_samples import base_notebook, writers
from toolfs.formats.notebook import parse

WRITERS = writers()
ORIGINAL = WRITERS["nbformat"].encode()
NEW_NOTEBOOK = json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def _only_cell_changed(before: bytes, after: bytes, index: int, source: str) -> None:
    """``after`` is ``before`` with cell ``index``'s source now ``source``, and every byte
    outside that cell as it was."""
    a, b = before.decode("utf-8-sig"), after.decode("utf-8-sig")
    old, new = parse(a).cells[index], parse(b).cells[index]
    assert new.source == source
    assert a[:old.start] == b[:new.start] and a[old.end:] == b[new.end:]
    assert {k: v for k, v in old.value.items() if k != "source"} == \
        {k: v for k, v in new.value.items() if k != "source"}
    assert before[:3] == after[:3]  # a BOM (or none) kept


# -- Anthropic: the text editor and the memory tool, through the tool runner ------------


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_text_editor_views_cells_and_replaces_within_one(mem: Backend, writer: str) -> None:
    from tests.integrations.test_anthropic_text_editor import ScriptedModel, steps
    from toolfs.integrations.anthropic import TextEditor

    original = WRITERS[writer].encode()
    mem.put("nb.ipynb", original)
    ws = mem.workspace()
    old, new = 'print("héllo")', 'print("hello")\nprint("world")'
    edited: list[bytes] = []

    def then(calls: list[Any]) -> Any:  # the bytes after the change before, first
        def turn() -> list[Any]:
            edited.append(mem.get("nb.ipynb"))
            return calls
        return turn

    model = ScriptedModel(steps(
        [("str_replace_based_edit_tool", {"command": "view", "path": "nb.ipynb"})],
        [("str_replace_based_edit_tool", {"command": "str_replace", "path": "nb.ipynb",
                                          "old_str": old, "new_str": new})],
        then([("str_replace_based_edit_tool", {"command": "str_replace", "path": "nb.ipynb",
                                               "old_str": new, "new_str": old})]),
    ))
    model.run([TextEditor(ws)])
    view, change, back = model.texts()
    assert model.errors() == [False, False, False]
    assert view.startswith("nb.ipynb is a Jupyter notebook, shown as its cells")
    handle = parse(WRITERS[writer]).cells[1].handle  # "cell-2" without ids (nbformat 4.4)
    assert f"[cell 2] id={handle} code, execution_count=1" in view
    assert '     3\tprint("héllo")' in view and '"cell_type"' not in view
    assert change.startswith("The file nb.ipynb has been edited. Edited nb.ipynb: replaced "
                             f"1 occurrence in cell 2 (id={handle}, code).")
    _only_cell_changed(original, edited[0], 1, 'import json\npath = "C:\\\\data\\\\x.json"\n'
                       'print("hello")\nprint("world")')
    assert back.startswith("The file nb.ipynb has been edited.")
    assert mem.get("nb.ipynb") == original  # the reverse change gives back every byte


def test_text_editor_refuses_json_matches_line_inserts_and_invalid_creates(
        store: Backend) -> None:
    from tests.integrations.test_anthropic_text_editor import ScriptedModel, steps
    from toolfs.integrations.anthropic import TextEditor

    store.put("nb.ipynb", ORIGINAL)
    tool = "str_replace_based_edit_tool"
    model = ScriptedModel(steps(
        [(tool, {"command": "view", "path": "nb.ipynb", "view_range": [3, 4]})],
        [(tool, {"command": "str_replace", "path": "nb.ipynb", "old_str": '"cell_type"',
                 "new_str": '"kind"'})],
        [(tool, {"command": "str_replace", "path": "nb.ipynb", "old_str": "plot(df)\n1 / 0",
                 "new_str": "x"})],
        [(tool, {"command": "insert", "path": "nb.ipynb", "insert_line": 1,
                 "insert_text": "x = 1\n"})],
        [(tool, {"command": "create", "path": "bad.ipynb", "file_text": '{"cells": ['})],
        [(tool, {"command": "create", "path": "new.ipynb", "file_text": NEW_NOTEBOOK})],
        [(tool, {"command": "str_replace", "path": "nb.ipynb", "old_str": "plot(df)",
                 "new_str": "plot(df, title='sales')"})],
    ))
    model.run([TextEditor(store.workspace())])
    view, json_text, across, insert, bad, good, edit = model.texts()
    assert model.errors() == [False, True, True, True, True, False, False]
    assert "[cell 3] id=plot_1 code" in view and "[cell 4] id=fail code" in view
    assert "image/png, 1x1; not shown: this tool's results are text]" in view
    assert "[cell 2]" not in view and "[cell 5]" not in view
    assert "in the notebook's cell sources" in json_text and "not of a cell's source" in json_text
    assert "runs across two cells (plot_1 and fail)" in across
    assert "insert counts lines of text" in insert
    assert bad.startswith("Error [invalid_arguments]") and not store.exists("bad.ipynb")
    assert good == "File created successfully at: new.ipynb"
    assert store.get("new.ipynb") == NEW_NOTEBOOK.encode()
    assert edit.startswith("The file nb.ipynb has been edited.")
    _only_cell_changed(ORIGINAL, store.get("nb.ipynb"), 2, "plot(df, title='sales')")


def test_memory_tool_views_cells_and_replaces_within_one(mem: Backend) -> None:
    from tests.integrations.test_anthropic_text_editor import ScriptedModel, steps
    from toolfs.integrations.anthropic import MemoryTool

    mem.put("nb.ipynb", ORIGINAL)  # /memories is the root
    path = "/memories/nb.ipynb"
    model = ScriptedModel(steps(
        [("memory", {"command": "view", "path": path})],
        [("memory", {"command": "str_replace", "path": path, "old_str": "- two",
                     "new_str": "- two\n- three"})],
        [("memory", {"command": "create", "path": "/memories/x.ipynb", "file_text": "[]"})],
    ))
    model.run([MemoryTool(mem.workspace())])
    view, change, bad = model.texts()
    assert model.errors() == [False, False, True]
    assert "[cell 6] id=notes markdown" in view and '"source"' not in view
    assert change.startswith("The memory file has been edited. Edited /memories/nb.ipynb: "
                             "replaced 1 occurrence in cell 6 (id=notes, markdown).")
    _only_cell_changed(ORIGINAL, mem.get("nb.ipynb"), 5,
                       "## Notes\n\n- one\n- two\n- three\n")
    assert bad.startswith("Error [invalid_arguments]") and not mem.exists("x.ipynb")


# -- OpenAI: apply_patch through the Agents SDK's Runner ---------------------------------


def test_apply_patch_updates_within_cells_and_creates_valid_notebooks(store: Backend) -> None:
    from agents import Agent, ApplyPatchTool, RunConfig, Runner, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    from tests.integrations.test_openai import _outputs, _patch_call, _update
    from toolfs.integrations.openai import ApplyPatchEditor

    store.put("nb.ipynb", ORIGINAL)
    ws = store.workspace()

    @function_tool
    def read(file_path: str) -> str:
        """Read a file (a notebook as cells)."""
        return ws.execute("read", {"file_path": file_path}).text

    load = ("@@\n import json\n-path = \"C:\\\\data\\\\x.json\"\n+path = \"data.json\"\n"
            " print(\"héllo\")\n")
    across = "@@\n plot(df)\n-1 / 0\n+2 / 1\n"  # the end of one cell, the next cell
    model = ScriptedModel([
        [function_call("read", {"file_path": "nb.ipynb"}, call_id="r1")],
        [_patch_call("p1", _update("nb.ipynb", load))],
        [_patch_call("p2", _update("nb.ipynb", across))],
        [_patch_call("p3", _update("nb.ipynb", "@@\n plot(df)\n+plot(df, title='sales')\n"
                                                "@@ ## Notes\n-- two\n+- two\n+- three\n"))],
        [_patch_call("c1", {"type": "create_file", "path": "bad.ipynb", "diff": "+{}\n"}),
         _patch_call("c2", {"type": "create_file", "path": "new.ipynb",
                            "diff": f"+{NEW_NOTEBOOK}\n"})],
        [assistant_message("done")],
    ])
    agent = Agent(name="coder", model=model, tools=[read, ApplyPatchTool(
        editor=ApplyPatchEditor(ws))])
    Runner.run_sync(agent, "edit the notebook", run_config=RunConfig(tracing_disabled=True))
    seen = _outputs(model)
    assert "[cell 2] id=load-data code" in seen["r1"]
    assert seen["p1"] == "Updated nb.ipynb"
    assert seen["p2"].startswith("Error [no_match]") and "<the next cell>" in seen["p2"]
    assert seen["p3"] == "Updated nb.ipynb"
    assert seen["c1"].startswith("Error [invalid_arguments]") and not store.exists("bad.ipynb")
    assert seen["c2"] == "Created new.ipynb"
    after = store.get("nb.ipynb")
    expected = base_notebook()
    expected["cells"][1]["source"] = ["import json\n", 'path = "data.json"\n',
                                      'print("héllo")']
    expected["cells"][2]["source"] = ["plot(df)\n", "plot(df, title='sales')"]
    expected["cells"][5]["source"] = ["## Notes\n", "\n", "- one\n", "- two\n", "- three\n"]
    assert json.loads(after) == expected
    # Only those three cells' sources changed: the rest is the writer's bytes.
    text, new = ORIGINAL.decode(), after.decode()
    cells, now = parse(text).cells, parse(new).cells
    for i in (0, 3, 4):
        assert text[cells[i].start:cells[i].end] == new[now[i].start:now[i].end]
    assert text[:cells[0].start] == new[:now[0].start] and \
        text[cells[-1].end:] == new[now[-1].end:]


def test_apply_patch_reversed_gives_back_every_byte(mem: Backend) -> None:
    from toolfs.integrations.openai import apply_patch

    for writer, original in sorted(WRITERS.items()):
        mem.put(f"{writer}.ipynb", original.encode())
        ws = mem.workspace()
        ws.read(f"{writer}.ipynb")
        forth = "@@\n-plot(df)\n+plot(df)\n+df.describe()\n"
        back = "@@\n plot(df)\n-df.describe()\n"
        for diff in (forth, back):
            out = apply_patch(ws, {"type": "update_file", "path": f"{writer}.ipynb",
                                   "diff": diff})
            assert not out.is_error, (writer, out.text)
        assert mem.get(f"{writer}.ipynb") == original.encode(), writer


# -- Deep Agents: read_file, edit_file and write_file through create_deep_agent ---------


def test_deep_agents_read_cells_edit_within_one_and_write_valid_notebooks(
        store: Backend) -> None:
    from deepagents import create_deep_agent
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

    from tests.integrations.test_langchain import ScriptedModel, call
    from toolfs.integrations.deepagents import ToolfsBackend

    store.put("nb.ipynb", ORIGINAL)
    script = [call("read_file", file_path="/nb.ipynb"),
              call("edit_file", file_path="/nb.ipynb", old_string="1 / 0",
                   new_string="1 / 1"),
              call("edit_file", file_path="/nb.ipynb", old_string='"execution_count"',
                   new_string='"count"'),
              call("write_file", file_path="/bad.ipynb", content="{"),
              call("write_file", file_path="/new.ipynb", content=NEW_NOTEBOOK)]
    seen: list[ToolMessage] = []

    def turn(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            seen.append(messages[-1])
        return script.pop(0) if script else AIMessage("done")

    graph = create_deep_agent(model=ScriptedModel(turn=turn),
                              backend=ToolfsBackend(toolfs.Workspace(store.fs, root=store.root)))
    graph.invoke({"messages": [{"role": "user", "content": "fix the notebook"}]})
    read, edit, json_edit, bad, good = (str(m.content) for m in seen)
    assert "Notebook /nb.ipynb: 6 cells, python." in read
    assert "[cell 4] id=fail code, execution_count=3" in read
    assert "1 / 0" in read and '"cell_type"' not in read
    assert "Error" not in edit
    assert "String not found in file" in json_edit
    assert "invalid_arguments" in bad and not store.exists("bad.ipynb")
    assert "Error" not in good and store.get("new.ipynb") == NEW_NOTEBOOK.encode()
    _only_cell_changed(ORIGINAL, store.get("nb.ipynb"), 3, "1 / 1")
