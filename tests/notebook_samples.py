"""Notebooks as different writers save them, for the notebook-cell tests.

Each writer formats the same notebook its own way; the tools must leave every byte a
change does not concern as that writer wrote it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import nbformat

PNG_1PX = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAA"
           "AABJRU5ErkJggg==")


def base_notebook(*, minor: int = 5) -> dict[str, Any]:
    """A notebook with markdown (an attachment), code with stream, image and error
    outputs, non-ASCII text, quotes, backslashes and widget metadata."""
    nb = nbformat.v4.new_notebook()
    nb.nbformat_minor = minor
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python", "version": "3.11.7"},
        "widgets": {"application/vnd.jupyter.widget-state+json": {
            "state": {"a1": {"model_name": "IntSliderModel", "state": {"value": 3}}},
            "version_major": 2, "version_minor": 0}},
    }
    md = nbformat.v4.new_markdown_cell("# Café report\nSee ![chart](attachment:c.png).")
    md.attachments = {"c.png": {"image/png": PNG_1PX}}
    load = nbformat.v4.new_code_cell('import json\npath = "C:\\\\data\\\\x.json"\nprint("héllo")',
                                     execution_count=1)
    load.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                           text="".join(f"row {i}\n" for i in range(25)))]
    plot = nbformat.v4.new_code_cell("plot(df)", execution_count=2)
    plot.metadata = {"tags": ["figure"], "collapsed": False}
    plot.outputs = [nbformat.v4.new_output("display_data",
                                           data={"image/png": PNG_1PX,
                                                 "text/plain": "<Figure size 640x480>"})]
    fail = nbformat.v4.new_code_cell("1 / 0", execution_count=3)
    fail.outputs = [nbformat.v4.new_output(
        "error", ename="ZeroDivisionError", evalue="division by zero",
        traceback=["\x1b[0;31m---\x1b[0m", "ZeroDivisionError: division by zero"])]
    empty = nbformat.v4.new_code_cell("")
    notes = nbformat.v4.new_markdown_cell("## Notes\n\n- one\n- two\n")
    nb.cells = [md, load, plot, fail, empty, notes]
    ids = ["intro", "load-data", "plot_1", "fail", "empty", "notes"]
    data: dict[str, Any] = json.loads(nbformat.writes(nb))
    for cell, cell_id in zip(data["cells"], ids, strict=True):
        if minor >= 5:
            cell["id"] = cell_id
        else:
            cell.pop("id", None)
    return data


def _vscode(cell: dict[str, Any]) -> dict[str, Any]:
    # VS Code's ipynb serializer records each code cell's language in its metadata and
    # writes keys sorted, with the indent it found (one space by default).
    if cell["cell_type"] != "code":
        return cell
    return {**cell, "metadata": {**cell["metadata"], "vscode": {"languageId": "python"}}}


def _own_order(cell: dict[str, Any]) -> dict[str, Any]:
    # A writer with a key order of its own (source first, id last), as hand-rolled
    # tools and some hosted notebooks write them.
    order = ["cell_type", "source", "metadata", "execution_count", "outputs",
             "attachments", "id"]
    return {k: cell[k] for k in order if k in cell}


def writers() -> dict[str, str]:
    """The same notebook as each writer saves it, by writer name."""
    nb = base_notebook()
    string_source = copy.deepcopy(nb)
    for cell in string_source["cells"]:
        cell["source"] = "".join(cell["source"])
    vscode = copy.deepcopy(nb)
    vscode["cells"] = [_vscode(c) for c in vscode["cells"]]
    own = copy.deepcopy(nb)
    own["cells"] = [_own_order(c) for c in own["cells"]]
    own = {"nbformat": 4, "nbformat_minor": 5, "metadata": own["metadata"],
           "cells": own["cells"]}
    nbformat_text = nbformat.writes(nbformat.from_dict(nb))
    return {
        # nbformat's own dump (what Jupyter saves): 1 space, sorted keys, final newline
        "nbformat": nbformat_text,
        # the same without the final newline (a writer that leaves it out)
        "no_final_newline": json.dumps(nb, indent=1, ensure_ascii=False),
        "vscode": json.dumps(vscode, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
        "own_order": json.dumps(own, indent=2, ensure_ascii=False),
        "two_spaces": json.dumps(nb, indent=2, ensure_ascii=False) + "\n",
        "crlf": nbformat_text.replace("\n", "\r\n"),
        "string_source": json.dumps(string_source, indent=1, sort_keys=True,
                                    ensure_ascii=False) + "\n",
        "ascii_escapes": json.dumps(nb, indent=1, sort_keys=True) + "\n",
        "tabs": json.dumps(nb, indent="\t", ensure_ascii=False) + "\n",
        "compact": json.dumps(nb, separators=(",", ":"), ensure_ascii=False),
        "nbformat_4_4": nbformat.writes(nbformat.from_dict(base_notebook(minor=4)),
                                        version=nbformat.NO_CONVERT),
    }


WRITERS = writers()
