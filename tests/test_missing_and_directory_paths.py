"""Two classes of path answer, for every verb of every adapter, on every backend:

* a missing file is ``not_found`` whatever the verb -- never "read it first", a remedy
  that cannot work for a file that does not exist;
* a trailing ``/`` names the directory: every verb that takes a directory takes ``dir/``
  as ``dir``, and one that needs a file says it is a directory.
"""

from __future__ import annotations

from typing import Any

from tests.backends import Backend
from toolfs.integrations.anthropic import MemoryTool, TextEditor
from toolfs.integrations.deepagents import ToolfsBackend
from toolfs.integrations.openai import apply_patch, apply_patch_text


def _error_code(text: str) -> str:
    assert text.startswith("Error ["), text
    return text[len("Error ["):text.index("]")]


def test_a_missing_file_is_not_found_on_every_verb(sync_backend: Backend) -> None:
    ws = sync_backend.workspace()
    answers: dict[str, str] = {}
    for tool, args in [("read", {"file_path": "nope.txt"}),
                       ("edit", {"file_path": "nope.txt", "old_string": "a",
                                 "new_string": "b"}),
                       ("ls", {"path": "nope"})]:
        answers[f"execute {tool}"] = ws.execute(tool, args).text
    editor, memory = TextEditor(ws), MemoryTool(ws)
    for cmd in ({"command": "view", "path": "nope.txt"},
                {"command": "str_replace", "path": "nope.txt", "old_str": "a", "new_str": "b"},
                {"command": "insert", "path": "nope.txt", "insert_line": 0,
                 "insert_text": "x"}):
        answers[f"editor {cmd['command']}"] = editor.execute(cmd).text
    for cmd in ({"command": "view", "path": "/memories/nope.txt"},
                {"command": "str_replace", "path": "/memories/nope.txt", "old_str": "a",
                 "new_str": "b"},
                {"command": "insert", "path": "/memories/nope.txt", "insert_line": 0,
                 "insert_text": "x"},
                {"command": "delete", "path": "/memories/nope.txt"},
                {"command": "rename", "old_path": "/memories/nope.txt",
                 "new_path": "/memories/other.txt"}):
        answers[f"memory {cmd['command']}"] = memory.execute_input(cmd).text
    for op in ({"type": "delete_file", "path": "nope.txt"},
               {"type": "update_file", "path": "nope.txt", "diff": "@@\n-a\n+b\n"}):
        answers[f"apply_patch {op['type']}"] = apply_patch(ws, op).text
    answers["apply_patch text delete"] = apply_patch_text(
        ws, "*** Begin Patch\n*** Delete File: nope.txt\n*** End Patch\n").text
    for verb, text in answers.items():
        assert _error_code(text) == "not_found", (verb, text)
        assert "before" not in text and "first" not in text.split("\n")[0], (verb, text)
    agent = ToolfsBackend(ws)
    refusals: dict[str, Any] = {
        "read": agent.read("/nope.txt").error, "edit": agent.edit("/nope.txt", "a", "b").error,
        "delete": agent.delete("/nope.txt").error, "ls": agent.ls("/nope").error,
        "download": agent.download_files(["/nope.txt"])[0].error}
    for verb, error in refusals.items():  # Deep Agents' own wording and codes
        assert error is not None and "not found" in error.replace("_", " "), (verb, error)


def test_a_trailing_slash_names_the_directory_on_every_verb(sync_backend: Backend) -> None:
    sync_backend.put("dir/a.txt", b"hello\n")
    sync_backend.put("dir/sub/b.py", b"x = 1\n")
    ws = sync_backend.workspace()
    assert ws.execute("ls", {"path": "dir/"}).text.startswith("a.txt")
    assert ws.execute("glob", {"pattern": "*.txt", "path": "dir/"}).text == "dir/a.txt"
    assert ws.execute("grep", {"pattern": "hello", "path": "dir/"}).text == "dir/a.txt"
    for tool, args in [("read", {"file_path": "dir/"}),
                       ("write", {"file_path": "dir/", "content": "x"}),
                       ("edit", {"file_path": "dir/", "old_string": "a", "new_string": "b"})]:
        assert _error_code(ws.execute(tool, args).text) == "not_a_file", tool
    agent = ToolfsBackend(ws)
    assert [m["path"] for m in agent.glob("*.txt", path="/dir/").matches or []] == \
        ["/dir/a.txt"]
    assert sorted(m["path"] for m in agent.glob("**/*", path="/dir/").matches or []) == \
        ["/dir/a.txt", "/dir/sub/b.py"]
    assert "/dir/a.txt" in {e["path"] for e in agent.ls("/dir/").entries or []}
    assert [m["path"] for m in agent.grep("hello", path="/dir/").matches or []] == \
        ["/dir/a.txt"]
    assert TextEditor(ws).execute({"command": "view", "path": "dir/"}).text.startswith(
        "Here's the files and directories")
    memory = MemoryTool(ws)
    assert "dir/a.txt" in memory.execute_input({"command": "view",
                                                "path": "/memories/dir/"}).text
    ws.read("dir/a.txt")
    ws.read("dir/sub/b.py")
    renamed = memory.execute_input({"command": "rename", "old_path": "/memories/dir/",
                                    "new_path": "/memories/moved/"})
    assert not renamed.is_error, renamed.text
    assert sync_backend.get("moved/sub/b.py") == b"x = 1\n"
    ws.read("moved/a.txt")
    ws.read("moved/sub/b.py")
    deleted = memory.execute_input({"command": "delete", "path": "/memories/moved/"})
    assert not deleted.is_error, deleted.text
    assert not sync_backend.exists("moved/a.txt")
    sync_backend.put("f.txt", b"file\n")
    ws.read("f.txt")
    not_a_dir = memory.execute_input({"command": "delete", "path": "/memories/f.txt/"})
    assert _error_code(not_a_dir.text) == "not_found" and sync_backend.exists("f.txt")
