"""Anthropic's memory tool over toolfs: the memories root, create/delete/rename, their
conditions and races, directory views and the documented texts."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic", reason="the anthropic extra is not installed")
httpx2 = pytest.importorskip("httpx2", reason="the anthropic SDK's HTTP client is missing")

import toolfs  # noqa: E402
from tests.backend_fixtures import (  # noqa: E402
    Backend,
    LocalBackend,
    MemoryBackend,
)
from tests.integrations.test_anthropic import AGENTS, _racing_agent  # noqa: E402
from tests.integrations.test_anthropic_text_editor import Call, Policy, ScriptedModel, steps  # noqa: E402
from toolfs.integrations.anthropic import (  # noqa: E402
    MemoryTool,
    TextEditor,
)

ESCAPES = ["/etc/passwd", "/memoriesX/a.md", "memories/a.md", "/memories/../a.md",
           "/memories/a/../../b.md", "/memories/%2e%2e/x.md", "/memories/a\\..\\..\\b.md",
           "/memories/./../x.md", "../memories/a.md", ""]


"""(before, after) file versions replayed from this repository's own history."""


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


def test_memory_tool_loop(store: Backend) -> None:
    store.put("notes.md", b"- likes tea\n- lives in Oslo\n")
    ws = store.workspace()
    path = "/memories/notes.md"

    def outside_change() -> list[Call]:
        store.put("notes.md", b"- likes coffee\n- lives in Oslo\n- has a cat\n")
        return [("memory", {"command": "str_replace", "path": path,
                            "old_str": "lives in Oslo", "new_str": "lives in Bergen"})]

    model = ScriptedModel(steps(
        [("memory", {"command": "view", "path": "/memories"})],
        [("memory", {"command": "view", "path": path})],
        [("memory", {"command": "str_replace", "path": path, "old_str": "likes tea",
                     "new_str": "likes coffee"})],
        outside_change,
        [("memory", {"command": "view", "path": path})],
        [("memory", {"command": "insert", "path": path, "insert_line": 3,
                     "insert_text": "- lives in Bergen\n"})],
        [("memory", {"command": "str_replace", "path": path,
                     "old_str": "- lives in Oslo\n", "new_str": ""})],
    ))
    model.run([MemoryTool(ws)])
    texts, errors = model.texts(), model.errors()
    assert errors == [False, False, False, True, False, False, False]
    assert texts[0].startswith("Here're the files and directories up to 2 levels deep in "
                               "/memories, excluding hidden items and node_modules:\n")
    assert "28B\t/memories/notes.md" in texts[0]
    assert texts[1] == ("Here's the content of /memories/notes.md with line numbers:\n"
                        "     1\t- likes tea\n     2\t- lives in Oslo")
    assert texts[2].startswith("The memory file has been edited. Here is the snippet "
                               "showing the change (with line numbers):\n")
    assert texts[3].startswith("Error [stale]: /memories/notes.md changed since you last "
                               "viewed it")
    assert texts[5] == "The file /memories/notes.md has been edited."
    assert store.get("notes.md") == b"- likes coffee\n- has a cat\n- lives in Bergen\n"


@pytest.mark.parametrize("path", ESCAPES)
def test_memory_paths_cannot_leave_memories(tmp_path: Any, path: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "a.md").write_text("outside\n")
    memory = MemoryTool(toolfs.Workspace(str(root)))
    for command in ({"command": "view", "path": path},
                    {"command": "create", "path": path, "file_text": "x"},
                    {"command": "delete", "path": path},
                    {"command": "rename", "old_path": "/memories/in.md", "new_path": path}):
        out = memory.execute_input(command)
        assert out.is_error, (command, out.text)
        assert out.error is not None and out.error.code in ("outside_root", "not_found")
        if path.startswith("/memories/") and "\\" not in path:
            assert "would escape /memories directory" in out.text or \
                "does not exist" in out.text, out.text
        elif not path.startswith("/memories"):
            assert "Path must start with /memories, got: " in out.text
    assert sorted(os.listdir(tmp_path)) == ["a.md", "root"]
    assert (tmp_path / "a.md").read_text() == "outside\n"
    assert os.listdir(root) == []


def test_memory_symlink_out_of_the_root_is_refused(tmp_path: Any) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", root / "link")
    memory = MemoryTool(toolfs.Workspace(str(root)))
    out = memory.execute_input({"command": "create", "path": "/memories/link/x.md",
                                "file_text": "x"})
    assert out.is_error and "would escape /memories directory" in out.text
    assert os.listdir(tmp_path / "outside") == []


def test_memory_create_delete_rename(store: Backend) -> None:
    ws = store.workspace()
    memory = MemoryTool(ws)
    assert memory.call({"command": "create", "path": "/memories/a.md",
                        "file_text": "A\n"}) == "File created successfully at: /memories/a.md"
    other = MemoryTool(ws.new_context())
    with pytest.raises(anthropic.lib.tools.ToolError) as caught:
        other.call({"command": "create", "path": "/memories/a.md", "file_text": "mine\n"})
    assert str(caught.value).startswith("Error [not_observed]: File /memories/a.md already "
                                        "exists\n")
    with pytest.raises(anthropic.lib.tools.ToolError) as caught:
        other.call({"command": "delete", "path": "/memories/a.md"})
    assert "Cannot delete /memories/a.md: view it first" in str(caught.value)
    # Rename needs no view: it moves exactly the bytes it reads.
    assert other.call({"command": "rename", "old_path": "/memories/a.md",
                       "new_path": "/memories/sub/b.md"}) == \
        "Successfully renamed /memories/a.md to /memories/sub/b.md"
    assert store.get("sub/b.md") == b"A\n" and not store.exists("a.md")
    memory.call({"command": "create", "path": "/memories/c.md", "file_text": "C\n"})
    with pytest.raises(anthropic.lib.tools.ToolError) as caught:
        memory.call({"command": "rename", "old_path": "/memories/c.md",
                     "new_path": "/memories/sub/b.md"})
    assert str(caught.value).startswith("Error [invalid_arguments]: The destination "
                                        "/memories/sub/b.md already exists\n")
    assert store.get("c.md") == b"C\n" and store.get("sub/b.md") == b"A\n"
    # Directories: rename moves every file; delete needs every file viewed.
    assert memory.call({"command": "rename", "old_path": "/memories/sub",
                        "new_path": "/memories/moved"}).startswith("Successfully renamed")
    assert store.get("moved/b.md") == b"A\n" and not store.exists("sub/b.md")
    third = MemoryTool(ws.new_context())  # the mover wrote moved/b.md; this one did not
    with pytest.raises(anthropic.lib.tools.ToolError) as caught:
        third.call({"command": "delete", "path": "/memories/moved"})
    assert "view its files first (/memories/moved/b.md not viewed)" in str(caught.value)
    third.call({"command": "view", "path": "/memories/moved/b.md"})
    assert third.call({"command": "delete", "path": "/memories/moved"}) == \
        "Successfully deleted /memories/moved"
    assert not store.exists("moved/b.md")
    with pytest.raises(anthropic.lib.tools.ToolError) as caught:
        memory.call({"command": "delete", "path": "/memories"})
    assert "Cannot delete the /memories directory itself" in str(caught.value)
    with pytest.raises(anthropic.lib.tools.ToolError) as caught:
        memory.call({"command": "view", "path": "/memories/nope.md"})
    assert "The path /memories/nope.md does not exist. Please provide a valid path." in \
        str(caught.value)


def test_memory_delete_is_conditional(store: Backend) -> None:
    store.put("n.md", b"v1\n")
    memory = MemoryTool(store.workspace())
    memory.call({"command": "view", "path": "/memories/n.md"})
    store.put("n.md", b"v2 by another agent\n")
    with pytest.raises(anthropic.lib.tools.ToolError) as caught:
        memory.call({"command": "delete", "path": "/memories/n.md"})
    assert str(caught.value).startswith("Error [stale]: /memories/n.md changed since you "
                                        "last viewed it; it was not deleted")
    assert store.get("n.md") == b"v2 by another agent\n"


def test_rename_never_loses_an_update_made_during_the_move(store: Backend) -> None:
    """An edit that lands between the copy and the delete of a rename: the delete is
    conditional on the copied version, so it fails, the copy is removed, and the edit
    stays (at the old path)."""
    store.put("n.md", b"v1\n")
    ws = store.workspace()
    editor = MemoryTool(ws.new_context())
    editor.call({"command": "view", "path": "/memories/n.md"})
    mover_ws = ws.new_context()
    landed: list[str] = []

    def edit_during_move(event: toolfs.FsEvent) -> None:
        if event.type == "fs/written" and event.path == "m.md" and not landed:
            landed.append(editor.call({"command": "str_replace", "path": "/memories/n.md",
                                       "old_str": "v1", "new_str": "v2"}))
    mover_ws.subscribe(edit_during_move)
    mover = MemoryTool(mover_ws)
    with pytest.raises(anthropic.lib.tools.ToolError) as caught:
        mover.call({"command": "rename", "old_path": "/memories/n.md",
                    "new_path": "/memories/m.md"})
    assert landed and landed[0].startswith("The memory file has been edited.")
    assert str(caught.value).startswith("Error [stale]: /memories/n.md changed while it was "
                                        "being renamed; nothing was renamed")
    assert store.get("n.md") == b"v2\n"
    assert not store.exists("m.md")


def test_rename_racing_with_edits(store: Backend) -> None:
    """One agent renames a memory file while others edit it: the file ends up in
    exactly one place, holding every edit that was reported done."""
    store.put("n.md", b"START\nEND\n")
    ws = store.workspace()
    start = threading.Barrier(AGENTS + 1)
    agents = [_racing_agent("memory", ws.new_context(), f"agent {i}", start)
              for i in range(AGENTS)]
    for model, _, _ in agents:  # the editors work on n.md
        original = model.policy

        def policy(results: list[dict[str, Any]], original: Policy = original
                   ) -> list[Call] | None:
            calls = original(results)
            return None if calls is None else [
                (name, {**args, "path": "/memories/n.md"}) for name, args in calls]
        model.policy = policy
    def rename() -> list[Call]:
        start.wait()
        return [("memory", {"command": "rename", "old_path": "/memories/n.md",
                            "new_path": "/memories/m.md"})]
    mover = ScriptedModel(steps(rename))
    with ThreadPoolExecutor(AGENTS + 1) as pool:
        futures = [pool.submit(model.run, tools) for model, tools, _ in agents]
        futures.append(pool.submit(mover.run, [MemoryTool(ws.new_context())]))
        for f in futures:
            f.result()
    where = [p for p in ("n.md", "m.md") if store.exists(p)]
    assert len(where) == 1, where
    final = store.get(where[0]).decode()
    renamed = not mover.errors()[0]
    assert (where[0] == "m.md") == renamed, mover.texts()
    for i, (_, _, reported) in enumerate(agents):
        if reported:
            assert f"agent {i}\n" in final, (i, final)


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
