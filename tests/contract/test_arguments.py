"""Arguments at the tool door: what the schemas refuse is ``invalid_arguments`` on every
backend, typed methods agree with the validated tools, execute never raises."""

from __future__ import annotations

import hashlib
import os
import pathlib
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

import toolfs
from tests.backend_fixtures import Backend
from tests.contract.calls import exec_err
from toolfs import tools
from toolfs.errors import FsError
from toolfs.schemas import EditArgs, ReadArgs, WriteArgs
from toolfs.tools import MAX_OFFSET
from toolfs.workspace import _validate


class _Str(str):
    pass


BAD_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read", {"file_path": 3}),
    ("read", {"file_path": "f.txt", "offset": 0}),
    ("read", {"file_path": "f.txt", "offset": True}),
    ("read", {"file_path": "f.txt", "limit": -1}),
    ("read", {"file_path": "f.txt", "limit": 2.0}),
    ("write", {"file_path": None, "content": "x"}),
    ("write", {"file_path": "f.txt", "content": b"x"}),
    ("edit", {"file_path": "f.txt", "old_string": "", "new_string": "x"}),
    ("edit", {"file_path": "f.txt", "old_string": "a", "new_string": "a"}),
    ("edit", {"file_path": "f.txt", "old_string": "a", "new_string": "b",
              "replace_all": 1}),
    ("edit", {"file_path": "f.txt", "old_string": 1, "new_string": "b"}),
    ("edit", {"file_path": "f.txt", "old_string": "a", "new_string": None}),
]


MODELS = {"read": ReadArgs, "write": WriteArgs, "edit": EditArgs}


def _same_as_validated(model: Any) -> None:
    """``model`` equals, dumps and reports its set fields as the validated model made
    from the same given fields does."""
    cls = type(model)
    given = {k: getattr(model, k) for k in model.model_fields_set}
    validated = cls(**given)  # a time stamp (`at`) is a default, made anew here
    assert model.model_fields_set == validated.model_fields_set
    assert model.model_dump(exclude_unset=True) == validated.model_dump(exclude_unset=True)
    again = cls(**given) if "at" not in cls.model_fields else cls(**given, at=model.at)
    assert model == again
    assert model.model_dump() == again.model_dump()
    assert repr(model) == repr(again)
    assert cls.model_validate(model.model_dump()) == model
    if cls.model_config.get("frozen"):
        with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen-instance error
            setattr(model, next(iter(cls.model_fields)), None)


PATHS = st.one_of(
    st.sampled_from([
        "a.txt", "sub/b.txt", "../outside/secret.txt", "/etc/passwd", "..", ".", "",
        "sub/../../outside/secret.txt", "sub//b.txt", "s3://x/y", "file:///etc/passwd",
        "%2e%2e/outside/secret.txt", "\uff0e\uff0e/outside/secret.txt", "a\x00b",
        "sub\\..\\..\\outside", "root-evil/x.txt", "../root-evil/x.txt", "sub/", "~/.ssh/id",
        "a" * 300, "\u202e.txt", "e\u0301.txt", "CON", "sub/./b.txt",
    ]),
    st.text(max_size=40),
)


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                    st.floats(allow_nan=True), st.text(max_size=50),
                    st.sampled_from(["x" * 100_000, "\x00", "\ud800", "a\r\nb", "漢字😀"]))


JSON = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=10), inner, max_size=3)),
    max_leaves=6)


FIELDS = ["file_path", "offset", "limit", "content", "old_string", "new_string",
          "replace_all", "extra"]


ARGS = st.one_of(
    st.dictionaries(st.sampled_from(FIELDS), st.one_of(PATHS, SCALARS), max_size=5),
    st.fixed_dictionaries({"file_path": PATHS}, optional={
        "content": st.text(max_size=30), "old_string": st.text(max_size=5),
        "new_string": st.text(max_size=5), "offset": st.integers(-3, 5),
        "limit": st.integers(-3, 5), "replace_all": st.booleans()}),
    JSON,
)


TOOLS = st.one_of(st.sampled_from(["read", "write", "edit"]), st.text(max_size=8))


def _tree(base: pathlib.Path) -> dict[str, str]:
    """Every file under ``base`` with a digest of its bytes."""
    out: dict[str, str] = {}
    for dirpath, _dirs, files in os.walk(base):
        for name in files:
            p = pathlib.Path(dirpath, name)
            out[str(p.relative_to(base))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _sandbox(tmp: pathlib.Path) -> tuple[pathlib.Path, dict[str, str]]:
    root = tmp / "root"
    (root / "sub").mkdir(parents=True, exist_ok=True)
    (root / "a.txt").write_text("alpha\n")
    (root / "sub" / "b.txt").write_text("beta\n")
    for sibling in ("outside", "root-evil"):
        (tmp / sibling).mkdir(exist_ok=True)
        (tmp / sibling / "secret.txt").write_text("do not touch\n")
    (tmp / "root-evil" / "x.txt").write_text("evil\n")
    if not (root / "link-out").exists():
        os.symlink(tmp / "outside", root / "link-out", target_is_directory=True)
    outside = {k: v for k, v in _tree(tmp).items() if not k.startswith("root/")}
    return root, outside


def _check(out: toolfs.ToolOutput) -> None:
    assert isinstance(out, toolfs.ToolOutput)
    assert isinstance(out.text, str) and out.text
    assert "Traceback" not in out.text
    if out.is_error:
        assert out.error is not None and out.error.code in toolfs.ERROR_CODES
        assert out.value is None
    else:
        assert out.value is not None
    assert "do not touch" not in out.text, "read outside the root"
    out.to_dict()


@pytest.mark.parametrize(("tool", "args"), BAD_CALLS)
def test_typed_methods_refuse_what_the_schema_refuses(tmp_path: pathlib.Path, tool: str,
                                                      args: dict[str, Any]) -> None:
    ws = toolfs.Workspace(str(tmp_path))
    ws.write("f.txt", "a\n")
    ws.read("f.txt")
    with pytest.raises(FsError) as typed:
        getattr(ws, tool)(**args)
    given = {k: v for k, v in args.items() if not (v is None and k in ("offset", "limit"))}
    with pytest.raises(FsError) as validated:
        _validate(MODELS[tool], given)
    assert typed.value.code == "invalid_arguments"
    assert typed.value.message == validated.value.message
    assert (tmp_path / "f.txt").read_text() == "a\n"


def test_typed_methods_match_the_validated_tools(tmp_path: pathlib.Path) -> None:
    """The same calls through the typed methods and through the tools with validated
    arguments, on two identical trees: the same results and the same bytes."""
    fast_root, slow_root = tmp_path / "fast", tmp_path / "slow"
    fast_root.mkdir()
    slow_root.mkdir()
    fast, slow = toolfs.Workspace(str(fast_root)), toolfs.Workspace(str(slow_root))
    text = "one\r\ntwo\r\nthree two\r\n"
    calls: list[tuple[str, dict[str, Any]]] = [
        ("write", {"file_path": "d/f.txt", "content": text}),
        ("read", {"file_path": "d/f.txt"}),
        ("read", {"file_path": "d/f.txt", "offset": 2, "limit": 1}),
        ("edit", {"file_path": "d/f.txt", "old_string": "one", "new_string": "1"}),
        ("edit", {"file_path": "./d/f.txt", "old_string": "two", "new_string": "2\n2",
                  "replace_all": True}),
        ("write", {"file_path": "d/f.txt", "content": "\ufeffbom\n"}),
        ("edit", {"file_path": "d/f.txt", "old_string": "bom", "new_string": "b"}),
    ]
    for tool, args in calls:
        a = getattr(fast, tool)(**args)
        b = getattr(tools, tool)(slow.fs, MODELS[tool].model_validate(args))
        assert a == b, (tool, args)
    assert (fast_root / "d" / "f.txt").read_bytes() == (slow_root / "d" / "f.txt").read_bytes()
    # A str subclass is not taken as it is, but the schema accepts it: the same answer.
    assert fast.read(_Str("d/f.txt")) == fast.read("d/f.txt")
    # Refusals of the tools themselves are the same too.
    for ws in (fast, slow):
        with pytest.raises(FsError) as exc:
            ws.edit("d/f.txt", "absent", "x")
        assert exc.value.code == "no_match"


def test_trusted_models_are_the_validated_ones(tmp_path: pathlib.Path) -> None:
    from toolfs.versions import FileVersion

    ws = toolfs.Workspace(str(tmp_path))
    results = [ws.write("f.txt", "one\ntwo\n"), ws.read("f.txt"), ws.read("f.txt", 2, 1),
               ws.edit("f.txt", "one", "1"), ws.write("f.txt", "three\n")]
    for result in results:
        _same_as_validated(result)
        _same_as_validated(result.version)
    ws.write("g.txt", "x" * 50_000 + " three\nfour\n")
    for engine in ("ripgrep", "python"):
        grep = ws.new_context(grep_engine=engine).grep("three", output_mode="content",
                                                       context=1)
        assert len(grep.matches) == 3 and any(m.chars for m in grep.matches)
        for match in grep.matches:
            _same_as_validated(match)
    events = list(ws.audit.events)
    assert {e.type for e in events} == {"fs/read", "fs/write-intent", "fs/written"}
    for event in events:
        _same_as_validated(event)
    snap = ws.snapshot()
    for obs in snap.observations.values():
        _same_as_validated(obs)
    assert type(snap).model_validate_json(snap.model_dump_json()) == snap
    v = FileVersion.of_bytes(b"x")
    assert v == FileVersion(kind="sha256", value=v.value)
    assert hash(v) == hash(FileVersion(kind="sha256", value=v.value))
    assert v.model_fields_set == {"kind", "value"}


def test_events_with_values_the_schema_refuses_are_still_refused(
        tmp_path: pathlib.Path) -> None:
    """Only values made by toolfs skip validation: an operation name a caller made up
    is checked as before."""
    from pydantic import ValidationError

    ws = toolfs.Workspace(str(tmp_path))
    with pytest.raises(ValidationError):
        ws.fs.pipe_file("f.txt", b"x", operation="bogus")  # type: ignore[arg-type]
    assert not (tmp_path / "f.txt").exists()


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(calls=st.lists(st.tuples(TOOLS, ARGS), min_size=1, max_size=6))
def test_execute_survives_random_json(tmp_path_factory: Any, calls: list[Any]) -> None:
    tmp = tmp_path_factory.mktemp("fuzz")
    root, outside = _sandbox(tmp)
    ws = toolfs.Workspace(str(root))
    for tool, args in calls:
        _check(ws.execute(tool, args))
    after = {k: v for k, v in _tree(tmp).items() if not k.startswith("root/")}
    assert after == outside, "something outside the root changed"


class Arguments:
    """Arguments at the edge of what the schemas let through."""

    def test_execute_never_raises_on_garbage(self, backend: Backend) -> None:
        ws = backend.workspace()
        for tool, args in [("read", {}), ("read", {"file_path": 3}), ("nope", {}),
                           ("write", {"file_path": "a", "content": None}),
                           ("read", {"file_path": "a", "offset": 0}),
                           ("read", {"file_path": "a", "limit": -1}),
                           ("read", "not a dict"), ("edit", {"file_path": "a"})]:
            out = ws.execute(tool, args)
            assert out.is_error and out.error is not None
            assert out.error.code == "invalid_arguments", (tool, args, out.text)
            assert "Traceback" not in out.text

    def test_execute_argument_door(self, backend: Backend) -> None:
        ws = backend.workspace()
        out = exec_err(ws, "read", "invalid_arguments", model="x", file_path="a.txt")
        assert "unknown argument 'model'" in out.text
        assert "Value error" not in out.text and "arguments: arguments" not in out.text
        out = exec_err(ws, "edit", "invalid_arguments", file_path="a.txt", old_string="s",
                  new_string="s")
        assert "old_string and new_string must differ" in out.text
        assert "Value error" not in out.text
        assert ws.execute("read", {1: "x"}).error.code == "invalid_arguments"  # type: ignore[dict-item, union-attr]
        out = ws.execute("write", '{"file_path": "j.txt", "content": "from json\\n"}')
        assert out.error is None, out.text
        assert backend.get("j.txt") == b"from json\n"
        for bad in ('["file_path"]', "{oops", '"text"'):
            assert ws.execute("read", bad).error.code == "invalid_arguments"  # type: ignore[union-attr]
        out = exec_err(ws, "write", "invalid_arguments", file_path="m.txt")
        assert "missing required argument 'content'" in out.text

    @pytest.mark.parametrize("offset", [10**5000, MAX_OFFSET + 1], ids=["5001 digits", "max+1"])
    def test_an_offset_past_any_file_is_invalid(self, backend: Backend, offset: int) -> None:
        backend.put("a.txt", b"one\ntwo\n")
        ws = backend.workspace()
        out = ws.execute("read", {"file_path": "a.txt", "offset": offset})
        assert out.error is not None and out.error.code == "invalid_arguments", out.text
        assert str(MAX_OFFSET) in out.text
        with pytest.raises(toolfs.FsError) as caught:
            ws.read("a.txt", offset=offset)
        assert caught.value.code == "invalid_arguments"

    def test_the_largest_offset_is_past_the_end(self, backend: Backend) -> None:
        backend.put("a.txt", b"one\ntwo\n")
        out = backend.workspace().execute("read", {"file_path": "a.txt", "offset": MAX_OFFSET})
        assert out.error is None, out.text
        assert "past the end" in out.text

    @pytest.mark.parametrize("content", [b"one\ntwo\n", b"one\r\ntwo\r\n"])
    @pytest.mark.parametrize(("old", "new", "replace_all"), [
        ("one", "\ud800", False), ("o", "x\udcff", True), ("one\ntwo", "a\ud800\nb", False)])
    def test_an_edit_to_text_with_a_lone_surrogate_is_invalid(self,
            backend: Backend, content: bytes, old: str, new: str, replace_all: bool) -> None:
        backend.put("a.txt", content)
        ws = backend.workspace()
        ws.read("a.txt")
        out = ws.execute("edit", {"file_path": "a.txt", "old_string": old, "new_string": new,
                                  "replace_all": replace_all})
        assert out.error is not None and out.error.code == "invalid_arguments", out.text
        assert "surrogate" in out.text
        assert backend.get("a.txt") == content
