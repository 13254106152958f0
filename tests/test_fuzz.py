"""Fuzzing the tool boundary: random JSON arguments through ``Workspace.execute`` and the
MCP server. Every call must return a structured result or error, no exception may escape,
and nothing outside the root may be read or written."""

from __future__ import annotations

import asyncio
import hashlib
import os
import pathlib
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

import toolfs

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


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(calls=st.lists(st.tuples(TOOLS, ARGS), min_size=1, max_size=4))
def test_mcp_server_survives_random_json(tmp_path_factory: Any, calls: list[Any]) -> None:
    from mcp import Client

    from toolfs.integrations.mcp_server import ToolfsMCP

    tmp = tmp_path_factory.mktemp("fuzz-mcp")
    root, outside = _sandbox(tmp)

    async def run() -> None:
        async with Client(ToolfsMCP(toolfs.Workspace(str(root))).server) as client:
            for tool, args in calls:
                try:
                    result = await client.call_tool(tool, args)
                except Exception as exc:  # only a protocol-level refusal may raise
                    assert tool not in ("read", "write", "edit") or not isinstance(
                        args, dict), f"{tool} {args!r}: {exc!r}"
                    continue
                text = "".join(getattr(c, "text", "") for c in result.content)
                assert "Traceback" not in text
                assert "do not touch" not in text, "read outside the root"
                if result.is_error:
                    assert text.startswith("Error ["), text

    asyncio.run(run())
    after = {k: v for k, v in _tree(tmp).items() if not k.startswith("root/")}
    assert after == outside, "something outside the root changed"
