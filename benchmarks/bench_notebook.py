"""Notebook cells: read, edit and notebook_edit of a large .ipynb against JSON floors.

Each row times one toolfs call on a memory workspace and two baselines measured in the
same run on the same bytes: ``json.loads`` (the least any cell view must do: parse the
document once) and ``json.loads`` + ``json.dumps`` (a naive edit that re-dumps the whole
notebook, and rewrites every byte). The plain text ``edit`` of the same bytes (as a
``.json`` file) is a third reference: a cell edit costs about what a text edit costs.
The notebook has code cells with stream and PNG outputs, so most of its bytes are
outputs the cell edits never touch.

Usage: ``python benchmarks/bench_notebook.py [--tiny] [--size-mb N]``.
"""

from __future__ import annotations

import argparse
import base64
import json
import time
from collections.abc import Callable

import _common
import toolfs


def notebook(size: int) -> str:
    """A notebook of about ``size`` bytes (a third of each cell an image output)."""
    png = base64.b64encode(bytes(range(256)) * 12).decode()  # ~4 KB of base64
    cells = []
    i = 0
    while sum(len(png) + 600 for _ in range(len(cells))) < size:
        cells.append({
            "cell_type": "code", "execution_count": i, "id": f"c{i}", "metadata": {},
            "outputs": [
                {"name": "stdout", "output_type": "stream",
                 "text": [f"line {j} of cell {i}\n" for j in range(10)]},
                {"data": {"image/png": png, "text/plain": ["<Figure>"]}, "metadata": {},
                 "output_type": "display_data"}],
            "source": [f"x{i} = {i}\n", f"print(x{i} * 2)\n", f"plot(x{i})"]})
        i += 1
    nb = {"cells": cells, "metadata": {"kernelspec": {"language": "python", "name": "python3",
                                                       "display_name": "Python 3"}},
          "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def best_of(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a quick run (CI)")
    parser.add_argument("--size-mb", type=float, default=5.0)
    args = parser.parse_args()
    size = 64 * 1024 if args.tiny else int(args.size_mb * (1 << 20))
    repeat = 2 if args.tiny else 5
    text = notebook(size)
    data = text.encode("utf-8")
    ws = toolfs.Workspace("memory://bench-notebook")
    ws.write("nb.ipynb", text)
    ws.write("nb.json", text)
    middle = len(json.loads(text)["cells"]) // 2

    def loads() -> object:
        return json.loads(data)

    def redump() -> object:
        return json.dumps(json.loads(data), indent=1, ensure_ascii=False).encode("utf-8")

    def edit_cycle() -> None:  # two edits: the file is back as it was after each timing
        ws.edit("nb.ipynb", f"print(x{middle} * 2)", f"print(x{middle} * 3)")
        ws.edit("nb.ipynb", f"print(x{middle} * 3)", f"print(x{middle} * 2)")

    def text_cycle() -> None:
        ws.edit("nb.json", f"print(x{middle} * 2)", f"print(x{middle} * 3)")
        ws.edit("nb.json", f"print(x{middle} * 3)", f"print(x{middle} * 2)")

    def insert_delete() -> None:
        r = ws.notebook_edit("nb.ipynb", f"c{middle}", "y = 1", edit_mode="insert")
        ws.notebook_edit("nb.ipynb", r.cell_id, "", edit_mode="delete")

    def replace() -> object:
        return ws.notebook_edit("nb.ipynb", f"c{middle}", "z = 3")

    floor, naive = best_of(loads, repeat), best_of(redump, repeat)
    cases: list[tuple[str, Callable[[], object], int]] = [
        ("read (first 100 cells)", lambda: ws.read("nb.ipynb"), 1),
        ("edit in a cell, and back", edit_cycle, 2),
        ("text edit of the same bytes, and back", text_cycle, 2),
        ("notebook_edit insert + delete", insert_delete, 2),
        ("notebook_edit replace (clears outputs)", replace, 1),
    ]
    rows: list[list[object]] = []
    for name, fn, calls in cases:
        t = best_of(fn, repeat) / calls
        rows.append([name, _common.fmt_bytes(len(data)), f"{t * 1e3:,.2f}",
                     f"{t / floor:,.1f}x", f"{t / naive:,.2f}x"])
    print(f"### Notebook cells ({len(json.loads(text)['cells'])} cells; json.loads "
          f"{floor * 1e3:,.2f} ms, loads + dumps {naive * 1e3:,.2f} ms)\n")
    print(_common.markdown_table(
        ["call", "notebook", "ms per call", "/ json.loads", "/ loads + dumps"], rows))


if __name__ == "__main__":
    main()
