"""``PolicyFileSystem.mv`` and write handles, on every backend: a move never loses an
update, two names for one file move nothing, and a write handle whose ``with`` block
raises commits nothing, in binary and text mode."""

from __future__ import annotations

import pytest

import toolfs
from tests.backend_fixtures import Backend


class MovesAndHandles:
    """Moves (copy then guarded delete) and write handles."""

    def test_a_move_lands_the_file_at_its_new_name(self, backend: Backend) -> None:
        backend.put("a.txt", b"alpha\n")
        ws = backend.workspace()
        ws.read("a.txt")
        ws.fs.mv("a.txt", "sub/b.txt")
        assert not backend.exists("a.txt")
        assert backend.get("sub/b.txt") == b"alpha\n"

    def test_an_edit_between_the_copy_and_the_delete_is_not_lost(self, backend: Backend) -> None:
        # A parallel call of the same context lands right after the move's copy: the move
        # must refuse (stale), keep the edited source and remove its copy.
        backend.put("src.txt", b"version 0\n")
        ws = backend.workspace()
        ws.read("src.txt")
        answers: list[toolfs.ToolOutput] = []

        def edit_after_the_copy(event: toolfs.FsEvent) -> None:
            if event.type == "fs/written" and event.path.endswith("dst.txt") and not answers:
                answers.append(ws.execute("edit", {"file_path": "src.txt",
                                                   "old_string": "version 0",
                                                   "new_string": "version 1"}))

        ws.subscribe(edit_after_the_copy)
        with pytest.raises(toolfs.FsError) as caught:
            ws.fs.mv("src.txt", "dst.txt")
        assert caught.value.code == "stale"
        assert answers and not answers[0].is_error, answers
        assert backend.get("src.txt") == b"version 1\n"
        assert not backend.exists("dst.txt")

    def test_a_change_by_another_context_between_copy_and_delete_leaves_one_file(self,
            backend: Backend) -> None:
        backend.put("src.txt", b"version 0\n")
        ws, other = backend.workspace(), backend.workspace()
        ws.read("src.txt")
        other.read("src.txt")
        done: list[str] = []

        def other_edits(event: toolfs.FsEvent) -> None:
            if event.type == "fs/written" and event.path.endswith("dst.txt") and not done:
                done.append(other.edit("src.txt", "version 0", "version 9").path)

        ws.subscribe(other_edits)
        with pytest.raises(toolfs.FsError) as caught:
            ws.fs.mv("src.txt", "dst.txt")
        assert caught.value.code == "stale" and done
        assert backend.get("src.txt") == b"version 9\n"
        assert not backend.exists("dst.txt")

    @pytest.mark.parametrize("other_name", ["./notes.md", "notes.md"])
    def test_a_move_onto_the_same_file_moves_nothing(
            self, backend: Backend, other_name: str) -> None:
        backend.put("notes.md", b"precious\n")
        ws = backend.workspace()
        ws.read("notes.md")
        ws.fs.mv("notes.md", other_name)
        assert backend.get("notes.md") == b"precious\n"

    def test_a_move_of_a_missing_file_is_not_found(self, backend: Backend) -> None:
        ws = backend.workspace()
        for target in ("nope.txt", "other.txt"):
            with pytest.raises(toolfs.FsError) as caught:
                ws.fs.mv("nope.txt", target)
            assert caught.value.code == "not_found"
        assert not backend.exists("other.txt")

    @pytest.mark.parametrize("mode", ["wb", "w"])
    def test_a_write_handle_whose_block_raises_commits_nothing(self, backend: Backend,
                                                              mode: str) -> None:
        backend.put("data.csv", b"a,b\n1,2\n")
        ws = backend.workspace()
        ws.read("data.csv")
        first = b"a,b\n" if mode == "wb" else "a,b\n"
        with pytest.raises(RuntimeError), ws.fs.open("data.csv", mode) as f:
            f.write(first)
            raise RuntimeError("the writer failed part-way")
        assert backend.get("data.csv") == b"a,b\n1,2\n"
        # The same handle without the failure commits on close.
        with ws.fs.open("data.csv", mode) as f:
            f.write(first)
        assert backend.get("data.csv") == b"a,b\n"

    def test_a_move_whose_delete_is_vetoed_leaves_one_file(self, backend: Backend) -> None:
        # A refusal known to have changed nothing (here a subscriber's veto of the source's
        # delete) removes the copy, as a stale one does; only an unknown outcome keeps it.
        backend.put("src.txt", b"alpha\n")
        ws = backend.workspace()
        ws.read("src.txt")

        def veto_deletes_of_src(event: toolfs.FsEvent) -> None:
            if event.type == "fs/write-intent" and event.operation == "delete" \
                    and event.path.endswith("src.txt"):
                raise toolfs.Veto("sources stay")

        ws.subscribe(veto_deletes_of_src)
        with pytest.raises(toolfs.FsError) as caught:
            ws.fs.mv("src.txt", "dst.txt")
        assert caught.value.code == "denied"
        assert "copy_kept" not in caught.value.details
        assert backend.get("src.txt") == b"alpha\n"
        assert not backend.exists("dst.txt")

    @pytest.mark.parametrize("how", ["xb", "create mode"])
    def test_an_exclusive_create_of_an_existing_file_says_it_exists(self, backend: Backend,
                                                                    how: str) -> None:
        # Neither "read it first" nor "created by someone else since you saw it absent":
        # no read makes an exclusive create of an existing file succeed.
        backend.put("t.txt", b"there\n")
        reader, stranger = backend.workspace(), backend.workspace()
        reader.read("t.txt")
        for ws in (reader, stranger):
            with pytest.raises(toolfs.FsError) as caught:
                if how == "xb":
                    with ws.fs.open("t.txt", "xb") as f:
                        f.write(b"mine\n")
                else:
                    ws.fs.pipe_file("t.txt", b"mine\n", mode="create")
            assert caught.value.code == "stale"
            assert "already exists" in caught.value.message
            assert caught.value.advice.startswith("The file already exists")
        assert backend.get("t.txt") == b"there\n"
