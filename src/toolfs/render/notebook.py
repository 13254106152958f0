"""What the model reads of a notebook read or a cell edit, within the output budget.

A read shows each cell as a header line (index, id, type, execution count), its source
lines numbered from 1 within the cell, then its outputs indented: the first lines of each
text output (the rest counted), an error's ``ename: evalue``, and a line that names each
image output and says whether it is shown. The fitted images of the cells shown go with
the text (:attr:`ToolOutput.images`), each counted against the budget as its tokens
would be (:func:`~toolfs.render.media.image_cost`), as many of a cell's as fit; the text
says how many were left out. Whole cells are shown while they fit; a cell too long for
what is left shows its first lines and the footer says where to continue.
"""

from __future__ import annotations

import json
from typing import Any

from toolfs.render.lines import MAX_LINE_CHARS, _plural, number_line
from toolfs.render.media import human_size, image_cost
from toolfs.results import NotebookCell, NotebookEditResult, NotebookImage, NotebookReadResult

__all__ = ["notebook_edit_view", "notebook_lines", "notebook_read_view", "render_notebook_edit",
           "render_notebook_read"]

_FOOTER_ROOM = 300
_NOTE_ROOM = 200
_OVER_BUDGET = "over the output budget"
_CAPPED = "a read shows at most"  # how toolfs.tools.notebook says its image limit


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"


def _header(cell: NotebookCell) -> str:
    count = (f", execution_count={cell.execution_count}"
             if cell.execution_count is not None else "")
    return f"[cell {cell.index}] id={cell.cell_id} {cell.cell_type}{count}"


def _image_line(n: int, what: str, image: NotebookImage, shown: bool, why: str | None
                ) -> str:
    head = f"  [output {n}: {what}] [image {image.name}: {image.mime_type}, "
    if image.width is not None and image.height is not None:
        size = f"{image.width}x{image.height}"
    else:
        size = human_size(image.size)
    if shown and image.image is not None:
        w, h = image.image.width, image.image.height
        at = "" if (w, h) == (image.width, image.height) else f" at {w}x{h}"
        return f"{head}{size}, shown{at}]"
    # A fitted image left out here is so because of ``why``; any other says why itself.
    reason = why if image.image is not None else image.not_shown
    return f"{head}{size}; not shown: {reason or 'not in this view'}]"


def _cell_lines(cell: NotebookCell, line_chars: int, shown: frozenset[str] = frozenset(),
                why: str | None = None, *, numbered: bool = True) -> list[str]:
    """The text lines of one cell: header, numbered source, outputs. The images named in
    ``shown`` are said to be shown; any other fitted image is not shown because ``why``.
    ``numbered=False``: the source lines as they are (a caller that numbers lines)."""
    out = [_header(cell)]
    if not cell.source:
        out.append("  (empty)")
    out += ([number_line(n, line, line_chars) for n, line in enumerate(cell.source, 1)]
            if numbered else list(cell.source))
    for n, o in enumerate(cell.outputs, 1):
        what = f"{o.output_type} {o.label}".strip()
        if o.image is not None:
            out.append(_image_line(n, what, o.image, o.image.name in shown, why))
            continue
        if o.output_type == "error":
            tail = f" ({o.more_lines} traceback lines not shown)" if o.more_lines else ""
            first = o.lines[0] if o.lines else ""
            out.append(f"  [output {n}: error] {_clip(first, line_chars)}{tail}")
            continue
        out.append(f"  [output {n}: {what}]")
        out += [f"    {_clip(line, line_chars)}" for line in o.lines]
        if o.more_lines:
            out.append(f"    [... {o.more_lines} more lines not shown]")
    return out


def _fitted_images(cell: NotebookCell) -> list[NotebookImage]:
    return [o.image for o in cell.outputs if o.image is not None and o.image.image is not None]


def _with_images(cell: NotebookCell, shown: frozenset[str]) -> NotebookCell:
    """``cell`` with each fitted image not in ``shown`` marked as left out by the budget."""
    if all(i.name in shown for i in _fitted_images(cell)):
        return cell
    outputs = [o if o.image is None or o.image.image is None or o.image.name in shown
               else o.model_copy(update={"image": o.image.model_copy(update={
                   "image": None, "not_shown": _OVER_BUDGET})})
               for o in cell.outputs]
    return cell.model_copy(update={"outputs": outputs})


def _fit_cell(cell: NotebookCell, line_chars: int, room: int
              ) -> tuple[list[str], int, frozenset[str]]:
    """The lines of ``cell``, what they cost (text, and each shown image as
    :func:`~toolfs.render.media.image_cost`) and the images shown: as many of its fitted
    images, in order, as fit in ``room`` (none if even its text does not fit)."""
    fitted = _fitted_images(cell)
    for k in range(len(fitted), -1, -1):  # at most MAX_NOTEBOOK_IMAGES + 1 tries
        shown = frozenset(i.name for i in fitted[:k])
        lines = _cell_lines(cell, line_chars, shown, _OVER_BUDGET)
        cost = (sum(len(x) + 1 for x in lines)
                + sum(image_cost(i.image) for i in fitted[:k] if i.image is not None))
        if cost <= room or k == 0:
            return lines, cost, shown
    raise AssertionError("unreachable")


def notebook_read_view(r: NotebookReadResult, max_chars: int
                       ) -> tuple[str, NotebookReadResult]:
    """The text of a notebook read and the part of ``r`` it shows (cells the budget left
    out dropped, a cut cell's source cut to the lines shown, long lines clipped)."""
    line_chars = min(MAX_LINE_CHARS, max_chars // 2)
    path = _clip(r.path, min(1000, max_chars // 5))
    lang = f", {r.language}" if r.language else ""
    head = f"Notebook {path}: {r.total_cells} cell{'s' if r.total_cells != 1 else ''}{lang}."
    if r.cell_count == 0:
        if r.total_cells == 0:
            return f"{head}\n(The notebook has no cells.)", r
        return (f"{head}\n(Offset {r.start_cell} is past the last cell: use an offset "
                f"between 1 and {r.total_cells}.)"), r
    room = max_chars - len(head) - _FOOTER_ROOM
    if any(o.image is not None and (o.image.image is not None or (
            o.image.not_shown or "").startswith(_CAPPED)) for c in r.cells for o in c.outputs):
        room -= _NOTE_ROOM  # the note on images left out may follow the footer
    parts: list[str] = [head]
    shown: list[NotebookCell] = []
    used = 0
    cut = False
    left_out = 0  # images fitted but over the budget
    first_left_out: int | None = None
    for cell in r.cells:
        lines, size, images = _fit_cell(cell, line_chars, room - used)
        if used + size <= room:
            parts += lines
            used += size
            dropped = len(_fitted_images(cell)) - len(images)
            if dropped:
                left_out += dropped
                first_left_out = first_left_out or cell.index
            shown.append(_with_images(_clipped(cell, line_chars), images))
            continue
        cut = True
        # The first lines of a cell that does not fit whole, if none was shown yet.
        if not shown:
            keep: list[str] = []
            for line in lines:
                if used + len(line) + 1 > room:
                    break
                keep.append(line)
                used += len(line) + 1
            parts += keep
            n_source = max(0, min(len(cell.source), len(keep) - 1))
            shown.append(_clipped(cell, line_chars).model_copy(update={
                "source": [_clip(x, line_chars) for x in cell.source[:n_source]],
                "outputs": []}))
        break
    end = r.start_cell + len(shown) - 1
    more = end < r.total_cells
    span = f"cell {r.start_cell}" if end == r.start_cell else f"cells {r.start_cell}-{end}"
    if cut:
        # A cell longer than the budget shows its first lines only (a `read` of the
        # notebook cannot show more of it at this budget).
        part = (f" (the first {len(shown[-1].source)} source lines of cell {end})"
                if shown and _partial(shown[-1], r) else "")
        footer = (f"(Output truncated at {max_chars} characters: showing {span} of "
                  f"{r.total_cells}{part}."
                  f"{f' Use offset={end + 1} to continue.' if more else ''})")
    elif r.partial:
        footer = (f"(Showing {span} of {r.total_cells}."
                  f"{f' Use offset={end + 1} to continue.' if end < r.total_cells else ''})")
    else:
        footer = ""
    capped = [(c.index, o.image.not_shown) for c in shown for o in c.outputs
              if o.image is not None and o.image.not_shown is not None
              and o.image.not_shown.startswith(_CAPPED)]
    if left_out or capped:
        n = left_out + len(capped)
        first = min(x for x in (first_left_out, capped[0][0] if capped else None)
                    if x is not None)
        why = " and ".join(x for x in (_OVER_BUDGET if left_out else "",
                                       capped[0][1] if capped else "") if x)
        note = (f"({_plural(n, 'image')} not shown ({why}): read from offset={first} "
                f"with a smaller limit to see {'it' if n == 1 else 'them'}.)")
        footer = f"{footer}\n{note}" if footer else note
    text = "\n".join(parts) + (f"\n\n{footer}" if footer else "")
    view = r.model_copy(update={"path": path, "cells": shown, "cell_count": len(shown),
                                "partial": r.partial or cut, "truncated": cut or any(
                                    a != b for a, b in zip(shown, r.cells, strict=False))})
    return text, view


def _partial(shown: NotebookCell, r: NotebookReadResult) -> bool:
    """Whether ``shown`` holds fewer source lines or outputs than the cell read."""
    whole = r.cells[shown.index - r.start_cell]
    return (len(shown.source), len(shown.outputs)) != (len(whole.source), len(whole.outputs))


def _clipped(cell: NotebookCell, line_chars: int) -> NotebookCell:
    if all(len(x) <= line_chars for x in cell.source):
        return cell
    return cell.model_copy(update={"source": [_clip(x, line_chars) for x in cell.source]})


def notebook_lines(r: NotebookReadResult) -> list[str]:
    """Every cell of ``r`` as lines, with no budget: each cell's header, its source lines
    as they are (unnumbered, for a tool whose caller numbers the lines it shows: Deep
    Agents' ``read_file``) and its outputs summarised, no image shown."""
    out: list[str] = []
    for cell in r.cells:
        out += _cell_lines(cell, MAX_LINE_CHARS, why="images are not shown here",
                           numbered=False)
    return out


def render_notebook_read(r: NotebookReadResult, max_chars: int) -> str:
    return notebook_read_view(r, max_chars)[0]



def notebook_edit_view(r: NotebookEditResult, max_chars: int
                       ) -> tuple[str, NotebookEditResult]:
    """The text of a cell edit and the part of ``r`` it shows."""
    line_chars = min(MAX_LINE_CHARS, max_chars // 2)
    path = _clip(r.path, min(1000, max_chars // 5))
    cell = f"cell {r.index} (id={r.cell_id}, {r.cell_type})"
    if r.action == "edited":
        others = len(r.cells_changed) - 1
        also = (f" and {others} other cell{'s' if others != 1 else ''}" if others > 0 else "")
        occ = "occurrence" if r.replacements == 1 else "occurrences"
        head = f"Edited {path}: replaced {r.replacements} {occ} in {cell}{also}."
    elif r.action == "inserted":
        head = f"Inserted {cell} into {path}; the notebook has {r.total_cells} cells."
    elif r.action == "deleted":
        head = f"Deleted {cell} from {path}; the notebook has {r.total_cells} cells."
    else:
        cleared = "; its outputs and execution count were cleared" if r.outputs_cleared else ""
        head = f"Replaced the source of {cell} in {path}{cleared}."
    if r.merged:
        head += (" The notebook had changed since you read it, in other cells: the change "
                 "was made on its current version.")
    if r.action == "deleted":
        return head, r.model_copy(update={"path": path})
    if not r.source:
        return f"{head}\n(The cell's source is now empty.)", r.model_copy(update={"path": path})
    room = max_chars - len(head) - _FOOTER_ROOM
    lines: list[str] = []
    used = 0
    for n, line in enumerate(r.source, 1):
        shown = number_line(n, line, line_chars)
        if used + len(shown) + 1 > room:
            break
        lines.append(shown)
        used += len(shown) + 1
    text = f"{head}\nThe cell's source now:\n" + "\n".join(lines)
    if len(lines) < len(r.source):
        text += f"\n(Source cut after {len(lines)} lines; read the notebook to see the rest.)"
    view = r.model_copy(update={"path": path, "source": [
        x if len(x) <= line_chars else _clip(x, line_chars) for x in r.source[:len(lines)]]})
    return text, view


def render_notebook_edit(r: NotebookEditResult, max_chars: int) -> str:
    return notebook_edit_view(r, max_chars)[0]


def fit_json(data: dict[str, Any], max_chars: int) -> dict[str, Any]:
    """``data`` (``{"ok": true, "result": ...}`` of a notebook result) within ``max_chars``
    once written as JSON: cells (a read) or source lines (an edit) dropped from the end,
    found by halving, and ``truncated`` set."""
    def size(d: dict[str, Any]) -> int:
        return len(json.dumps(d, ensure_ascii=False))

    if size(data) <= max_chars:
        return data
    result = data["result"]
    key = "cells" if "cells" in result else "source"
    items = result[key]
    lo, hi = 0, len(items)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if size({**data, "result": {**result, key: items[:mid]}}) <= max_chars:
            lo = mid
        else:
            hi = mid - 1
    result = {**result, key: items[:lo], "truncated": True}
    if key == "cells":
        result["cell_count"] = lo
        result["partial"] = True
    else:
        result.pop("truncated")  # an edit result has no such field: the lines say it
    return {**data, "result": result}
