"""Every code block in README.md and docs/*.md runs on its own, unless it is marked
illustrative.

A fenced block's info string decides: ``python`` blocks are executed here, each in a
fresh namespace, so a reader can copy any one of them and run it as it is (imports
included). A block whose info string is ``python continued`` runs in the namespace of
the block before it, for the rare page that must build on one example; prefer
self-contained blocks. Blocks whose info string contains ``illustrative`` (commands,
sketches) and ``text``/``json`` output samples are not run.
"""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
NOT_CODE = {"text", "json", "console-output", "output"}


def blocks(path: pathlib.Path) -> list[tuple[str, str, int]]:
    """(info string, code, line of the fence) of every fenced block."""
    text = path.read_text()
    return [(m.group(1).strip(), m.group(2), text.count("\n", 0, m.start()) + 1)
            for m in FENCE.finditer(text)]


def python_blocks(path: pathlib.Path) -> list[tuple[str, str, bool]]:
    """(id, code, continues the block before) of every block to run."""
    found = []
    for info, code, line in blocks(path):
        words = info.split()
        if "illustrative" in words or (words and words[0] in NOT_CODE):
            continue
        assert words and words[0] == "python" and words[1:] in ([], ["continued"]), (
            f"{path.name}:{line}: a ```{info} block is neither python (or python continued) "
            "nor marked illustrative")
        found.append((f"{path.stem}:{line}", code, words[1:] == ["continued"]))
    return found


CASES = [(path, i) for path in DOCS for i in range(len(python_blocks(path)))]


@pytest.mark.parametrize(("path", "index"), CASES,
                         ids=[python_blocks(p)[i][0] for p, i in CASES])
def test_doc_block_runs_on_its_own(path: pathlib.Path, index: int) -> None:
    chain = python_blocks(path)[: index + 1]
    start = index
    while chain[start][2]:  # a continuation runs after the blocks it continues
        assert start > 0, f"{chain[start][0]}: the first python block cannot continue"
        start -= 1
    namespace: dict[str, object] = {"__name__": f"doc_{path.stem}_{index}"}
    for block_id, code, _ in chain[start:]:
        exec(compile(code, block_id, "exec"), namespace)


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_doc_blocks_are_python_or_marked(path: pathlib.Path) -> None:
    python_blocks(path)  # asserts on any unmarked block
