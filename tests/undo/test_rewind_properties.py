"""Rewind, as a property (hypothesis): a random sequence of this context's writes,
edits, deletes and moves, interleaved with other programs' changes, then
``rewind(cp)``:

* every file only this context touched since ``cp`` has exactly its bytes at ``cp``
  (more precisely: its bytes just before this context's first change since ``cp``);
* a file someone else changed after this context's last change to it is refused, with
  their bytes intact -- and then, all or nothing, nothing at all is restored;
* nothing else differs.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolfs
from tests.backend_fixtures import Backend
from toolfs.errors import FsError

NAMES = ["f0.txt", "f1.txt", "d/f2.txt", "f3.txt"]
_content = st.sampled_from([b"a\n", b"b\nb\n", b"c\n", b"1\n2\n3\n"])
_name = st.sampled_from(range(len(NAMES)))
_op = st.one_of(
    st.tuples(st.just("write"), _name, _content),
    st.tuples(st.just("edit"), _name, _content),
    st.tuples(st.just("delete"), _name, st.just(b"")),
    st.tuples(st.just("move"), _name, _name),
    st.tuples(st.just("other_write"), _name, _content),
    st.tuples(st.just("other_delete"), _name, st.just(b"")),
)


def _raw_state(backend: Backend, root: str) -> dict[str, bytes]:
    out = {}
    for name in NAMES:
        key = f"{root}/{name}"
        if backend.fs.exists(key):
            out[name] = bytes(backend.fs.cat_file(key))
    return out


class _Model:
    """What the property expects: per file, the bytes before this context's first change
    since ``cp``; a conflict is a file whose bytes differ from what this context's last
    change left (versions here are content digests or MD5 ETags: the same bytes are the
    same version)."""

    def __init__(self) -> None:
        self.first: dict[str, bytes | None] = {}  # my first change since cp: bytes before
        self.conflict: set[str] = set()

        self.touched: list[str] = []  # the files the last op of mine changed

    def mine(self, name: str, before: bytes | None) -> None:
        self.first.setdefault(name, before)
        self.touched.append(name)

    def settle(self, left: dict[str, bytes | None], now: dict[str, bytes]) -> None:
        self.conflict = {n for n in self.first if n in left and now.get(n) != left[n]}


def _run_mine(ws: toolfs.Workspace, op: tuple[Any, ...], state: dict[str, bytes],
              model: _Model) -> None:
    kind, i, arg = op
    name = NAMES[i]
    try:
        try:
            ws.read(name)
        except FsError as err:
            if err.code != "not_found":
                raise
        before = state.get(name)
        if kind == "write":
            ws.write(name, arg.decode())
        elif kind == "edit":
            if before is None or before == arg:
                return
            ws.fs.pipe_file(name, arg)
        elif kind == "delete":
            if before is None:
                return
            ws.fs.rm_file(name)
        else:  # move
            dest = NAMES[arg]
            if before is None or dest == name:
                return
            try:
                ws.read(dest)
            except FsError as err:
                if err.code != "not_found":
                    raise
            model.mine(dest, state.get(dest))
            model.mine(name, before)
            ws.fs.mv(name, dest)
            return
        model.mine(name, before)
    except FsError:  # a refusal changes nothing
        return


@pytest.mark.parametrize("backend", ["memory", "local", "s3"], indirect=True)
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(before=st.lists(st.tuples(_name, _content), max_size=4),
       ops=st.lists(_op, min_size=1, max_size=12),
       merge=st.booleans())
def test_rewind_restores_only_this_contexts_work(
        backend: Backend, before: list[tuple[int, bytes]], ops: list[tuple[Any, ...]],
        merge: bool) -> None:
    root = f"{backend.root}/{uuid.uuid4().hex[:8]}"
    backend.fs.makedirs(f"{root}/d", exist_ok=True)
    for i, data in before:
        backend.fs.pipe_file(f"{root}/{NAMES[i]}", data)
    ws = toolfs.Workspace(backend.fs, root=root, policy=toolfs.Policy(
        on_stale="merge" if merge else "refuse"))
    cp = ws.checkpoint()
    model = _Model()
    left: dict[str, bytes | None] = {}  # what my last change to each file left
    for op in ops:
        state = _raw_state(backend, root)
        if op[0].startswith("other_"):
            name = NAMES[op[1]]
            key = f"{root}/{name}"
            if op[0] == "other_write":
                backend.fs.pipe_file(key, op[2])
            elif name in state:
                backend.fs.rm_file(key)
        else:
            model.touched = []
            _run_mine(ws, op, state, model)
            now = _raw_state(backend, root)
            for name in model.touched:
                left[name] = now.get(name)
    model.settle(left, _raw_state(backend, root))
    # A name this context created and deleted again has nothing of it left to restore.
    touched = {c.path for c in ws.changes(since=cp)} | \
        {c.to_path for c in ws.changes(since=cp) if c.to_path}
    # Created and deleted again by this context: nothing of it to restore; whatever is
    # there now is someone else's.
    skipped = {n for n in model.first
               if model.first[n] is None and _last_left_absent(ws, cp, n)}
    before_rewind = _raw_state(backend, root)
    result = ws.rewind(cp)
    after = _raw_state(backend, root)
    for name, err in result.refused.items():
        assert err.code == "stale", (name, err)
    if merge:
        # Merged undos apply only where they do not overlap: every refused file is one
        # someone else changed after this context, and nothing is half done.
        assert set(result.refused) <= model.conflict
        if result.refused:
            assert after == before_rewind
        return
    live = {n for n in model.conflict if n in touched and n not in skipped}
    if live:
        if ws.fs.store.conditions_by_service:
            # Object stores check a file to be re-created by its own conditional create,
            # in the write phase: when another file refused the set first, that one is
            # never reached (and nothing is written either way).
            assert result.refused and set(result.refused) <= live, (result.refused, live)
        else:
            assert set(result.refused) == live, (result.refused, live)
        assert after == before_rewind  # all or nothing: nothing restored
        return
    assert not result.refused, result.refused
    for name in NAMES:
        if name in model.first and name not in skipped:
            expected = model.first[name]
            assert after.get(name) == expected, (name, after.get(name), expected)
        else:
            assert after.get(name) == before_rewind.get(name), name


def _last_left_absent(ws: toolfs.Workspace, cp: toolfs.Checkpoint, name: str) -> bool:
    """Whether this context's last change to ``name`` left it absent (a delete, or the
    source of a move)."""
    left: bool | None = None
    for change in ws.changes(since=cp):
        if change.path == name:
            left = change.kind in ("deleted", "moved")
        if change.to_path == name:
            left = False
    return bool(left)
