"""``toolfs.FsError(code, message, path, details)``, next to the per-code subclasses."""

from __future__ import annotations

import pickle

import pytest

import toolfs
from toolfs.errors import (
    _BY_CODE,
    ERROR_CODES,
    BackendError,
    NotFound,
    Stale,
    fs_error,
)

BUILTIN_BASE = {
    "invalid_arguments": ValueError, "not_found": FileNotFoundError,
    "missing_bucket": FileNotFoundError,
    "not_a_file": IsADirectoryError, "not_text": ValueError, "too_large": ValueError,
    "not_observed": PermissionError, "stale": PermissionError, "no_match": ValueError,
    "ambiguous_match": ValueError, "outside_root": PermissionError,
    "denied": PermissionError, "backend_error": OSError, "unsupported": NotImplementedError,
}


def test_positional_form() -> None:
    err = toolfs.FsError("stale", "msg", "a.txt", {"k": 1})
    assert (err.code, err.message, err.path, err.details) == ("stale", "msg", "a.txt", {"k": 1})
    assert err.to_dict() == {"code": "stale", "message": "msg", "path": "a.txt",
                             "details": {"k": 1}}
    assert str(err) == "[stale] msg" and err.args == ("msg",)


def test_keyword_form() -> None:
    err = toolfs.FsError(code="stale", message="msg")
    assert (err.code, err.message, err.path, err.details) == ("stale", "msg", None, {})
    mixed = toolfs.FsError("not_found", "gone", details={"did_you_mean": ["a"]}, path="b")
    assert (mixed.path, mixed.details) == ("b", {"did_you_mean": ["a"]})


@pytest.mark.parametrize("code", sorted(ERROR_CODES))
def test_the_base_form_builds_the_subclass_of_its_code(code: str) -> None:
    err = toolfs.FsError(code, "m", "p")  # type: ignore[arg-type]
    assert type(err) is _BY_CODE[code]
    assert isinstance(err, toolfs.FsError) and isinstance(err, BUILTIN_BASE[code])
    with pytest.raises(BUILTIN_BASE[code]):
        raise err


def test_subclass_and_fs_error_forms_keep_working() -> None:
    stale = Stale("msg", path="a.txt", details={"k": 1})
    assert (stale.code, stale.path, stale.details) == ("stale", "a.txt", {"k": 1})
    assert isinstance(stale, PermissionError)
    built = fs_error("not_found", "gone", path="b.txt")
    assert type(built) is NotFound and isinstance(built, FileNotFoundError)
    assert built.path == "b.txt"
    assert Stale("m", code="stale").code == "stale"
    with pytest.raises(ValueError, match="Stale has code 'stale'"):
        Stale("m", code="denied")
    # Builtin bases do not reinterpret the arguments (OSError would read errno, strerror).
    backend = BackendError("boom", path="c")
    assert (backend.errno, backend.strerror, backend.filename) == (None, None, None)


def test_unknown_code_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown error code 'nope'"):
        toolfs.FsError("nope", "m")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        toolfs.FsError("stale")  # type: ignore[call-arg]


@pytest.mark.parametrize("err", [
    toolfs.FsError("stale", "msg", "a.txt", {"k": 1}),
    toolfs.FsError(code="denied", message="no"),
    Stale("msg", path="x"),
    fs_error("backend_error", "boom", details={"attempts": 3}),
], ids=repr)
def test_pickling_keeps_class_and_fields(err: toolfs.FsError) -> None:
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is type(err)
    assert again.to_dict() == err.to_dict() and again.args == err.args


def test_workspace_run_gives_the_tools_error_guarantee() -> None:
    """``Workspace.run``: what an adapter's composed operation raises leaves as an
    ``FsError`` (a foreign exception as ``backend_error``, its cause kept); the async
    twin runs it on a worker thread with the same result."""
    import asyncio

    ws = toolfs.Workspace("memory://run-guard")
    ws.write("a.txt", "one\n")
    assert ws.run(lambda fs: fs.open_for_edit("a.txt").read()) == b"one\n"

    def boom(fs: object) -> None:
        raise RuntimeError("the client library failed")

    with pytest.raises(toolfs.FsError) as info:
        ws.run(boom)
    assert info.value.code == "backend_error"
    assert isinstance(info.value.__cause__, RuntimeError)
    assert "the client library failed" in info.value.message
    with pytest.raises(toolfs.FsError) as missing:
        ws.run(lambda fs: fs.open_for_edit("nope.txt"))
    assert missing.value.code == "not_found"

    aws = toolfs.AsyncWorkspace(ws)
    try:
        assert asyncio.run(aws.run(lambda fs: fs.cat_file("a.txt"))) == b"one\n"
        assert asyncio.run(aws.call(lambda a, b: a + b, 2, 3)) == 5
    finally:
        aws.close()
