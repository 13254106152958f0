"""Every code block in README.md and docs/*.md runs, unless it is marked illustrative.

A fenced block's info string decides: ``python`` blocks are executed here (each file's
blocks in order, sharing one namespace); blocks whose info string contains
``illustrative`` (commands, sketches) and ``text``/``json`` output samples are not.
"""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
NOT_CODE = {"text", "json", "console-output", "output"}


def blocks(path: pathlib.Path) -> list[tuple[str, str]]:
    return [(m.group(1).strip(), m.group(2)) for m in FENCE.finditer(path.read_text())]


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_doc_blocks_run_or_are_marked(path: pathlib.Path) -> None:
    namespace: dict[str, object] = {"__name__": f"doc_{path.stem}"}
    for info, code in blocks(path):
        words = info.split()
        if "illustrative" in words or (words and words[0] in NOT_CODE):
            continue
        assert words and words[0] == "python", (
            f"{path.name}: a ```{info} block is neither python nor marked illustrative")
        exec(compile(code, f"{path.name}:block", "exec"), namespace)
