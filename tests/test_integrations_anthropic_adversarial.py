"""toolfs.integrations.anthropic probed as a demanding user and an attacker would.

Each test pins one finding of the review: the texts the models were trained on (the
reference implementations' own strings, cited in the adapter), inputs that used to reach
the model as the wrong error, outputs that could trap the model, and races between the
parallel calls of one agent. The SDK's own tool runner drives the tools where it matters.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic", reason="the anthropic extra is not installed")
pytest.importorskip("httpx2", reason="the anthropic SDK's HTTP client is missing")

import toolfs  # noqa: E402
from tests import test_integrations_anthropic as base  # noqa: E402
from tests.backends import Backend, LocalBackend, MemoryBackend  # noqa: E402
from tests.test_integrations_anthropic import EDITOR, ScriptedModel, steps  # noqa: E402
from toolfs.integrations.anthropic import MemoryTool, TextEditor, beta_tools  # noqa: E402

# The backends of the main adapter tests: memory, local, S3 (moto), GCS (fake-gcs-server).
store = base.store
mem = base.mem

# -- the text editor's reference strings (anthropic-quickstarts computer-use-demo
#    tools/edit.py, EditTool20250728) -------------------------------------------------


def test_editor_texts_are_the_reference_editors(mem: Backend) -> None:
    mem.put("a.txt", b"one\ntwo\nthree\n")
    mem.put("d/x.txt", b"x\n")
    mem.put("d/e/y.txt", b"y\n")
    mem.put("d/e/f/z.txt", b"z\n")
    mem.put("d/.hidden", b"h\n")
    ws = mem.workspace()
    ed = TextEditor(ws)

    def text(**command: Any) -> str:
        return ed.execute(command).text

    created = TextEditor(ws.new_context()).execute(
        {"command": "create", "path": "a.txt", "file_text": "x"}).text
    assert created.startswith("Error [not_observed]: File already exists at: a.txt. "
                              "Cannot overwrite files using command `create`.\n"), created
    assert text(command="view", path="a.txt") == (
        "Here's the result of running `cat -n` on a.txt:\n"
        "     1\tone\n     2\ttwo\n     3\tthree")
    # A directory: `find PATH -maxdepth 2 -not -path '*/\.*'`, the path itself first.
    assert text(command="view", path="d") == (
        "Here's the files and directories up to 2 levels deep in d, excluding hidden "
        "items:\nd\nd/e\nd/e/f\nd/e/y.txt\nd/x.txt")
    for command in ({"command": "create", "path": "d", "file_text": "x"},
                    {"command": "str_replace", "path": "d", "old_str": "x", "new_str": "y"},
                    {"command": "insert", "path": "d", "insert_line": 0, "new_str": "y"}):
        out = ed.execute(command)
        assert out.text.startswith("Error [not_a_file]: The path d is a directory and only "
                                   "the `view` command can be used on directories\n"), out.text
    text(command="view", path="a.txt")
    assert text(command="str_replace", path="a.txt", old_str="t", new_str="T").startswith(
        "Error [ambiguous_match]: No replacement was performed. Multiple occurrences of "
        "old_str `t` in lines [2, 3]. Please ensure it is unique\n")
    assert text(command="insert", path="a.txt", insert_line=9, new_str="x").startswith(
        "Error [invalid_arguments]: Invalid `insert_line` parameter: 9. It should be "
        "within the range of lines of the file: [0, 3]\n")
    assert text(command="undo_edit", path="a.txt").startswith(
        "Error [invalid_arguments]: Unrecognized command undo_edit. The allowed commands "
        "for the str_replace_based_edit_tool tool are: view, create, str_replace, insert\n")
    assert mem.get("a.txt") == b"one\ntwo\nthree\n"


# -- the memory tool's reference strings (the memory tool docs' "Tool commands" and the
#    SDK's BetaLocalFilesystemMemoryTool) -----------------------------------------------


def test_memory_directory_view_is_the_documented_listing(store: Backend) -> None:
    memory = MemoryTool(store.workspace())
    assert memory.call({"command": "view", "path": "/memories"}) == (
        "Here're the files and directories up to 2 levels deep in /memories, excluding "
        "hidden items and node_modules:\n0B\t/memories")
    store.put("notes.md", b"x" * 1536)
    store.put("d/a.md", b"a" * 100)
    store.put("d/e/b.md", b"b" * 24)
    store.put("node_modules/pkg/index.js", b"js\n")
    store.put(".hidden", b"h\n")
    listing = memory.call({"command": "view", "path": "/memories"})
    # Every row is SIZE<TAB>PATH; a directory's size is the total of the files below it.
    assert listing.splitlines()[1:] == [
        "1.6K\t/memories",
        "124B\t/memories/d/",
        "100B\t/memories/d/a.md",
        "24B\t/memories/d/e/",
        "1.5K\t/memories/notes.md",
    ], listing


def test_memory_error_texts_are_the_documented_ones(mem: Backend) -> None:
    mem.put("a.md", b"one\ntwo\n")
    mem.put("d/x.md", b"x\n")
    memory = MemoryTool(mem.workspace())

    def error(**command: Any) -> str:
        with pytest.raises(anthropic.lib.tools.ToolError) as caught:
            memory.call(command)
        return str(caught.value)

    assert error(command="create", path="/memories/a.md", file_text="x").startswith(
        "Error [not_observed]: File /memories/a.md already exists\n")
    memory.call({"command": "view", "path": "/memories/a.md"})
    assert error(command="insert", path="/memories/a.md", insert_line=3,
                 insert_text="x").startswith(
        "Error [invalid_arguments]: Invalid `insert_line` parameter: 3. It should be "
        "within the range of lines of the file: [0, 2]\n")
    for command in ("str_replace", "insert"):
        args = ({"old_str": "x", "new_str": "y"} if command == "str_replace"
                else {"insert_line": 0, "insert_text": "y"})
        assert error(command=command, path="/memories/d", **args).startswith(
            "Error [not_a_file]: The path /memories/d is not a file.\n")
    # A path through a file names the file as the model knows it (/memories/...).
    assert error(command="create", path="/memories/a.md/x", file_text="x").startswith(
        "Error [not_a_file]: /memories/a.md is a file, not a directory, so "
        "/memories/a.md/x cannot be below it\n")
    assert error(command="bogus", path="/memories/a.md").startswith(
        "Error [invalid_arguments]: Unrecognized command bogus. The allowed commands for "
        "the memory tool are: view, create, str_replace, insert, delete, rename\n")


def test_rename_onto_an_empty_directory_names_the_destination(tmp_path: Any) -> None:
    """Local disk keeps empty directories: a rename onto one used to fail creating the
    file there, with an error naming the source ("/memories/a.md is not a file")."""
    b = LocalBackend(str(tmp_path))
    b.setup()
    b.put("a.md", b"a\n")
    os.makedirs(b.key("empty"))
    memory = MemoryTool(b.workspace())
    with pytest.raises(anthropic.lib.tools.ToolError) as caught:
        memory.call({"command": "rename", "old_path": "/memories/a.md",
                     "new_path": "/memories/empty"})
    assert str(caught.value).startswith(
        "Error [invalid_arguments]: The destination /memories/empty already exists\n")
    assert b.get("a.md") == b"a\n" and os.path.isdir(b.key("empty"))


# -- outputs that could trap the model -------------------------------------------------


def test_a_view_always_shows_at_least_one_line(mem: Backend) -> None:
    """A first line longer than max_characters used to come back as "showing lines 1-0
    ... use view_range [1, -1]": the same call again, forever."""
    mem.put("long.txt", b"y" * 50_000 + b"\nsecond\n")
    ed = TextEditor(mem.workspace(), max_characters=500)
    out = ed.execute({"command": "view", "path": "long.txt"})
    assert not out.is_error
    assert len(out.text) <= 500, len(out.text)
    assert "     1\tyyy" in out.text, out.text
    assert "lines 1-0" not in out.text
    assert "view_range [2, -1]" in out.text, out.text


def test_the_snippet_of_a_huge_change_stays_within_the_budget(mem: Backend) -> None:
    """The snippet after str_replace/insert shows every changed line; a change of
    thousands of lines used to be echoed whole (cut only by the generic output limit,
    which also cut the closing note)."""
    mem.put("a.txt", b"one\ntwo\n")
    big = "".join(f"new line {i}\n" for i in range(5_000))
    ws = mem.workspace()
    ed = TextEditor(ws, max_characters=2_000)
    memory = MemoryTool(ws)
    ed.execute({"command": "view", "path": "a.txt"})
    for out in (ed.execute({"command": "insert", "path": "a.txt", "insert_line": 1,
                            "insert_text": big}),
                ed.execute({"command": "str_replace", "path": "a.txt", "old_str": "two\n",
                            "new_str": big + "y" * 50_000 + "\n"})):
        assert not out.is_error, out.text
        assert len(out.text) <= 2_000, len(out.text)
        assert "(Snippet truncated: lines " in out.text
        assert out.text.endswith("Edit the file again if necessary.")
    memory.call({"command": "view", "path": "/memories/a.txt"})
    text = memory.call({"command": "str_replace", "path": "/memories/a.txt",
                        "old_str": "one\n", "new_str": big * 10})
    assert len(text) <= ws.max_output_chars and "(Snippet truncated: lines " in text


def test_editor_root_and_slash_paths(tmp_path: Any) -> None:
    """"/" is not the workspace root (an absolute path must lie inside the root), and
    a listing of the root shows paths the model can use as they are."""
    b = LocalBackend(str(tmp_path))
    b.setup()
    b.put("a.txt", b"one\n")
    ed = TextEditor(b.workspace())
    slash = ed.execute({"command": "view", "path": "/"})
    assert slash.is_error and slash.error is not None
    assert slash.error.code == "outside_root", slash.text
    for root in ("", "."):
        listing = ed.execute({"command": "view", "path": root}).text
        names = listing.splitlines()[1:]
        for name in names:
            out = ed.execute({"command": "view", "path": name})
            assert not out.is_error, (root, name, out.text)
    absolute = b.key("").rstrip("/")
    listing = ed.execute({"command": "view", "path": absolute}).text
    assert f"{absolute}/a.txt" in listing.splitlines(), listing


@pytest.mark.parametrize("field", ["old_str", "new_str"])
def test_lone_surrogates_are_invalid_arguments_not_backend_errors(mem: Backend,
                                                                   field: str) -> None:
    mem.put("a.txt", b"one\n")
    ed = TextEditor(mem.workspace())
    ed.execute({"command": "view", "path": "a.txt"})
    args = {"command": "str_replace", "path": "a.txt", "old_str": "one", "new_str": "two"}
    args[field] = "o\ud800"
    out = ed.execute(args)
    assert out.is_error and out.error is not None
    assert out.error.code == "invalid_arguments", out.text
    assert "ValidationError" not in out.text and "UnicodeEncodeError" not in out.text
    assert "retrying later" not in out.text
    assert mem.get("a.txt") == b"one\n"


def test_beta_tools_answer_a_non_object_input_with_toolfs_text(mem: Backend) -> None:
    """The SDK's function tools raise TypeError on a non-object input; the runner would
    hand the model that repr, with no code and no advice."""
    ws = mem.workspace()
    for tool in beta_tools(ws):
        with pytest.raises(anthropic.lib.tools.ToolError) as caught:
            tool.call(["x"])
        assert str(caught.value).startswith("Error [invalid_arguments]: "), caught.value
    aws = toolfs.AsyncWorkspace(ws)
    try:
        for atool in beta_tools(aws):
            with pytest.raises(anthropic.lib.tools.ToolError) as caught:
                asyncio.run(atool.call(["x"]))
            assert str(caught.value).startswith("Error [invalid_arguments]: ")
    finally:
        aws.close()


def test_async_tools_run_on_the_async_workspaces_threads(mem: Backend) -> None:
    """With an AsyncWorkspace, the async editor and memory tool run their commands on its
    bounded worker pool (not on the event loop's default executor)."""
    import threading

    from toolfs.integrations.anthropic import AsyncMemoryTool, AsyncTextEditor

    mem.put("a.md", b"a\n")
    aws = toolfs.AsyncWorkspace(mem.workspace())
    seen: list[str] = []
    aws.sync.subscribe(lambda event: seen.append(threading.current_thread().name))

    async def main() -> None:
        await AsyncTextEditor(aws).execute({"command": "view", "path": "a.md"})
        await AsyncMemoryTool(aws).call({"command": "view", "path": "/memories/a.md"})
    try:
        asyncio.run(main())
    finally:
        aws.close()
    assert seen and all(name.startswith("toolfs") for name in seen), seen


# -- one agent's parallel calls: a rename and an edit of the same file ------------------


def test_parallel_rename_and_edit_of_one_agent_lose_nothing(store: Backend) -> None:
    """A model sends `rename` and `str_replace` of one file in the same turn; the calls
    run at once. Whatever the order, the file is in exactly one place and holds the edit
    if the edit was reported done."""
    for attempt in range(3):
        old, new = f"n{attempt}.md", f"m{attempt}.md"
        store.put(old, b"START\nEND\n")
        memory = MemoryTool(store.workspace())
        memory.call({"command": "view", "path": f"/memories/{old}"})
        calls = [{"command": "rename", "old_path": f"/memories/{old}",
                  "new_path": f"/memories/{new}"},
                 {"command": "str_replace", "path": f"/memories/{old}", "old_str": "END",
                  "new_str": "edited\nEND"}]
        with ThreadPoolExecutor(2) as pool:
            outs = list(pool.map(memory.execute_input, calls))
        where = [p for p in (old, new) if store.exists(p)]
        assert len(where) == 1, (where, [o.text for o in outs])
        renamed, edited = (not o.is_error for o in outs)
        assert (where[0] == new) == renamed, [o.text for o in outs]
        assert (b"edited\n" in store.get(where[0])) == edited, [o.text for o in outs]


def test_directory_rename_racing_with_an_edit_inside(store: Backend) -> None:
    """Another agent edits a file of a directory being renamed: the edit is in the final
    bytes wherever the file ended up, and no file is in two places."""
    for name in ("a", "b", "c"):
        store.put(f"dir/{name}.md", f"{name}\n".encode())
    ws = store.workspace()
    editor = MemoryTool(ws.new_context())
    editor.call({"command": "view", "path": "/memories/dir/b.md"})
    mover = MemoryTool(ws.new_context())
    with ThreadPoolExecutor(2) as pool:
        moving = pool.submit(mover.execute_input, {
            "command": "rename", "old_path": "/memories/dir", "new_path": "/memories/moved"})
        editing = pool.submit(editor.execute_input, {
            "command": "str_replace", "path": "/memories/dir/b.md", "old_str": "b",
            "new_str": "B"})
        moved, edited = moving.result(), editing.result()
    for name in ("a", "b", "c"):
        places = [d for d in ("dir", "moved") if store.exists(f"{d}/{name}.md")]
        assert len(places) == 1, (name, places, moved.text, edited.text)
    b_place = "dir" if store.exists("dir/b.md") else "moved"
    assert (store.get(f"{b_place}/b.md") == b"B\n") == (not edited.is_error), (
        moved.text, edited.text)
    if not moved.is_error:
        assert not any(store.exists(f"dir/{n}.md") for n in "ac")


def test_a_rename_whose_delete_has_an_unknown_outcome_keeps_the_copy(
        mem: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """The delete of the source fails in a way that does not say whether it happened
    (a timeout after the store applied it): removing the copy then, as the undo of a
    refused delete does, would lose the file."""
    mem.put("n.md", b"keep me\n")
    ws = mem.workspace()
    real = ws.fs.rm_file

    def delete_then_time_out(path: str, **kwargs: Any) -> None:
        real(path, **kwargs)
        if path == "n.md":
            raise toolfs.FsError("backend_error", "the request timed out", path=path)
    monkeypatch.setattr(ws.fs, "rm_file", delete_then_time_out)
    out = MemoryTool(ws).execute_input({"command": "rename", "old_path": "/memories/n.md",
                                        "new_path": "/memories/m.md"})
    assert out.is_error and out.error is not None and out.error.code == "backend_error"
    assert "both may exist now" in out.text, out.text
    assert mem.get("m.md") == b"keep me\n"  # the only copy left is kept


def test_directory_delete_racing_with_an_edit_inside(store: Backend) -> None:
    """An agent deletes a directory it has viewed while another edits one of its files:
    a reported edit is never deleted, and a reported delete removed every file."""
    for name in ("a", "b", "c"):
        store.put(f"dir/{name}.md", f"{name}\n".encode())
    ws = store.workspace()
    deleter, editor = MemoryTool(ws.new_context()), MemoryTool(ws.new_context())
    for name in ("a", "b", "c"):
        deleter.call({"command": "view", "path": f"/memories/dir/{name}.md"})
    editor.call({"command": "view", "path": "/memories/dir/b.md"})
    with ThreadPoolExecutor(2) as pool:
        deleting = pool.submit(deleter.execute_input,
                               {"command": "delete", "path": "/memories/dir"})
        editing = pool.submit(editor.execute_input, {
            "command": "str_replace", "path": "/memories/dir/b.md", "old_str": "b",
            "new_str": "B"})
        deleted, edited = deleting.result(), editing.result()
    if not edited.is_error:
        assert store.exists("dir/b.md") and store.get("dir/b.md") == b"B\n", deleted.text
        assert deleted.is_error, deleted.text
    if not deleted.is_error:
        assert not any(store.exists(f"dir/{n}.md") for n in "abc")


# -- directory delete and rename: denied directories, symlinks, the root by another name --

# The empty directories a fresh `git init` makes, and its one file (no git binary needed).
GIT_DIRS = (".git", ".git/refs", ".git/refs/heads", ".git/refs/tags", ".git/objects",
            ".git/objects/info", ".git/objects/pack", ".git/branches", ".git/hooks")


@pytest.fixture(params=["memory", "local"])
def dirs_store(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    """A backend that keeps empty directories (memory's pseudo-directories, local disk)."""
    b: Backend = MemoryBackend() if request.param == "memory" else LocalBackend(str(tmp_path))
    b.setup()
    try:
        yield b
    finally:
        b.teardown()


def _git_project(b: Backend) -> None:
    """proj/ with a file, a fake fresh git repository, an empty directory the `secrets/`
    rule denies, and an ordinary empty directory tree."""
    b.put("proj/notes.md", b"hello\n")
    b.put("proj/.git/HEAD", b"ref: refs/heads/main\n")
    for d in GIT_DIRS:
        b.fs.makedirs(b.key(f"proj/{d}"), exist_ok=True)
    b.fs.makedirs(b.key("proj/secrets/keep_me"), exist_ok=True)
    b.fs.makedirs(b.key("proj/empty/inner"), exist_ok=True)


@pytest.mark.parametrize("command", ["delete", "rename"])
def test_directory_delete_and_rename_leave_denied_directories_alone(
        dirs_store: Backend, command: str) -> None:
    """Deleting (or renaming) a directory removes the empty directories it leaves, but
    never one inside a denied subtree: `.git/**` used to lose 7 of its 9 empty
    directories (refs/, objects/...), which stops it being a git repository."""
    b = dirs_store
    _git_project(b)
    memory = MemoryTool(b.workspace(deny=[".git/**", "secrets/"]))
    memory.call({"command": "view", "path": "/memories/proj/notes.md"})
    if command == "delete":
        out = memory.execute_input({"command": "delete", "path": "/memories/proj"})
    else:
        out = memory.execute_input({"command": "rename", "old_path": "/memories/proj",
                                    "new_path": "/memories/moved"})
        assert b.get("moved/notes.md") == b"hello\n"
    assert not out.is_error, out.text
    assert not b.exists("proj/notes.md")
    for d in GIT_DIRS:
        assert b.fs.isdir(b.key(f"proj/{d}")), d
    assert b.get("proj/.git/HEAD") == b"ref: refs/heads/main\n"
    assert b.fs.isdir(b.key("proj/secrets/keep_me"))
    # The ordinary empty directories still go, as before.
    assert not b.fs.exists(b.key("proj/empty/inner"))
    assert not b.fs.exists(b.key("proj/empty"))


def test_directory_delete_never_walks_through_a_symlinked_directory(tmp_path: Any) -> None:
    """An empty directory reached through a symlinked directory inside the deleted one
    is not the deleted directory's: it stays, and so does the link."""
    b = LocalBackend(str(tmp_path))
    b.setup()
    b.put("proj/notes.md", b"hello\n")
    os.makedirs(b.key("other/empty_inner"))
    os.makedirs(str(tmp_path / "outside" / "empty_outer"))
    os.symlink("../other", b.key("proj/to_other"))
    memory = MemoryTool(b.workspace())
    memory.call({"command": "view", "path": "/memories/proj/notes.md"})
    out = memory.execute_input({"command": "delete", "path": "/memories/proj"})
    assert not out.is_error, out.text
    assert os.path.isdir(b.key("other/empty_inner"))
    assert os.path.islink(b.key("proj/to_other"))
    assert os.path.isdir(str(tmp_path / "outside" / "empty_outer"))


def _root_aliases(tmp_path: Any) -> tuple[LocalBackend, list[str]]:
    b = LocalBackend(str(tmp_path))
    b.setup()
    b.put("a.md", b"a\n")
    b.put("docs/b.md", b"b\n")
    b.put(".git/HEAD", b"ref: refs/heads/main\n")
    os.makedirs(b.key(".git/refs/heads"))
    os.makedirs(b.key("docs/drafts"))
    os.symlink(".", b.key("self"))
    os.symlink("..", b.key("docs/up"))
    return b, ["/memories/self", "/memories/docs/up", "/memories/self/docs/up"]


def _tree(root: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(dp, n), root)
                  for dp, dn, fn in os.walk(root) for n in dn + fn)


def test_a_symlink_to_the_memory_root_is_the_root(tmp_path: Any) -> None:
    """`self -> .` and `docs/up -> ..` lead to /memories itself: deleting or renaming
    them is refused as for /memories (they used to delete or move every file), a rename
    into the source through such a link is refused, and viewing one lists the root."""
    b, aliases = _root_aliases(tmp_path)
    before = _tree(b.root)
    memory = MemoryTool(b.workspace(deny=[".git/**"]))
    for p in ("/memories/a.md", "/memories/docs/b.md"):
        memory.call({"command": "view", "path": p})
    for alias in aliases:
        out = memory.execute_input({"command": "delete", "path": alias})
        assert out.is_error and out.error is not None and out.error.code == "denied", out.text
        assert out.text.startswith(
            "Error [denied]: Cannot delete the /memories directory itself\n"), out.text
        out = memory.execute_input({"command": "rename", "old_path": alias,
                                    "new_path": "/memories/moved"})
        assert out.is_error and out.error is not None and out.error.code == "denied", out.text
        assert out.text.startswith(
            "Error [denied]: Cannot rename the /memories directory itself\n"), out.text
        out = memory.execute_input({"command": "rename", "old_path": "/memories/a.md",
                                    "new_path": alias})
        assert out.is_error and out.error is not None, out.text
        assert out.error.code == "invalid_arguments", out.text
        assert "already exists" in out.text
        view = memory.execute_input({"command": "view", "path": alias})
        assert not view.is_error, view.text
        assert f"{alias}/docs/" in view.text and f"{alias}/a.md" in view.text
    # Into itself, by way of a link: /memories/self/docs/sub is /memories/docs/sub.
    out = memory.execute_input({"command": "rename", "old_path": "/memories/docs",
                                "new_path": "/memories/self/docs/sub"})
    assert out.is_error and out.error is not None, out.text
    assert out.error.code == "invalid_arguments" and "into itself" in out.text, out.text
    assert _tree(b.root) == before


def test_file_commands_on_a_symlink_to_the_root_say_it_is_a_directory(
        tmp_path: Any) -> None:
    """The text editor's and the memory tool's file commands on a link to the root: the
    answer for a directory (not_a_file), as for the root itself, not outside_root."""
    b, _ = _root_aliases(tmp_path)
    before = _tree(b.root)
    editor, memory = TextEditor(b.workspace()), MemoryTool(b.workspace())
    for path in ("self", "docs/up"):
        for command in ({"command": "create", "path": path, "file_text": "x"},
                        {"command": "str_replace", "path": path, "old_str": "a",
                         "new_str": "b"},
                        {"command": "insert", "path": path, "insert_line": 0,
                         "new_str": "x"}):
            out = editor.execute(command)
            assert out.error is not None and out.error.code == "not_a_file", out.text
            out = memory.execute_input({**command, "path": f"/memories/{path}"})
            assert out.error is not None and out.error.code == "not_a_file", out.text
    assert _tree(b.root) == before


# -- the runner: every refusal reaches the model as a tool_result with is_error ---------


def test_runner_results_for_adversarial_paths(mem: Backend) -> None:
    mem.put("a.md", b"one\n")
    ws = mem.workspace()
    # (Lone surrogates and non-object inputs cannot travel: the SDK cannot encode the
    # request that echoes them; the tests above cover them without the transport.)
    hostile = ["/memories/../etc/passwd", "/memories/%2e%2e/x", "/memories/..%2f..%2fx",
               "/memories/d\\..\\..\\x", "/memories/a\x00.md", "/memoriesX/a.md",
               "memories/a.md", "/etc/passwd"]
    model = ScriptedModel(steps(
        [("memory", {"command": "view", "path": p}) for p in hostile],
        [(EDITOR, {"command": "view", "path": p}) for p in ("../x", "/", "a\\b", "a\x00")],
    ))
    model.run([MemoryTool(ws), TextEditor(ws), *beta_tools(ws)])
    for text, error in zip(model.texts(), model.errors(), strict=True):
        assert error, text
        assert text.startswith("Error ["), text
        code = text[len("Error ["):text.index("]")]
        assert code in toolfs.ERROR_CODES and code != "backend_error", text


# -- numbers too large to print, and a change too large for the cap ------------------------


def test_line_numbers_too_large_to_print_are_invalid(mem: Backend) -> None:
    # Line numbers are echoed in answers; Python refuses to print an int of more than
    # 4,300 digits, which surfaced as backend_error ("retrying later may help").
    mem.put("a.txt", b"one\ntwo\n")
    ws = mem.workspace()
    big = 10**5000
    editor, memory = TextEditor(ws), MemoryTool(ws)
    for out in (editor.execute({"command": "view", "path": "a.txt", "view_range": [big, -1]}),
                editor.execute({"command": "view", "path": "a.txt", "view_range": [-big, 3]}),
                editor.execute({"command": "insert", "path": "a.txt", "insert_line": big,
                                "new_str": "x"}),
                memory.execute_input({"command": "view", "path": "/memories/a.txt",
                                      "view_range": [big, -1]})):
        assert out.error is not None and out.error.code == "invalid_arguments", out.text
    assert mem.get("a.txt") == b"one\ntwo\n"


def test_a_change_over_the_cap_names_the_result_and_advises_a_smaller_change(
        mem: Backend) -> None:
    mem.put("a.txt", b"one\ntwo\n")
    ws = mem.workspace(size_cap=1000)
    editor = TextEditor(ws)
    editor.execute({"command": "view", "path": "a.txt"})
    out = editor.execute({"command": "insert", "path": "a.txt", "insert_line": 1,
                          "new_str": "x" * 5000})
    assert out.error is not None and out.error.code == "too_large", out.text
    assert "would make a.txt" in out.text and "smaller" in out.text, out.text
    assert "view_range" not in out.text  # the file is 8 bytes: nothing to view in windows
    out = editor.execute({"command": "create", "path": "c.txt", "file_text": "y" * 5000})
    assert out.error is not None and out.error.code == "too_large", out.text
    assert "Write less" in out.text and "view_range" not in out.text, out.text
    core = ws.execute("edit", {"file_path": "a.txt", "old_string": "one",
                               "new_string": "z" * 5000})
    assert core.error is not None and "smaller" in core.text and "offset" not in core.text
    assert mem.get("a.txt") == b"one\ntwo\n"
