"""Random sequences of cell edits on every writer's notebook, checked against nbformat.

After each step the file is a valid notebook as nbformat parses it, holds exactly the
cells a model of the change predicts (untouched cells equal, member for member), keeps
the notebook's metadata, and differs from the previous bytes only inside the touched
cell (or, for an insert or a delete, by that cell and one separator).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.contract.test_notebook_cells import NB, cell_span, changed_span, loaded, raw, setup_ws
from tests.notebook_samples import WRITERS

# Any text a cell may hold: quotes, backslashes, control characters, CR, U+2028,
# non-ASCII and astral characters (no NUL and no lone surrogates, which are refused).
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
               max_size=30)
OPS = st.lists(st.tuples(
    st.sampled_from(["replace", "insert", "delete", "edit", "retype"]),
    st.integers(min_value=0, max_value=20),
    TEXT,
    st.sampled_from(["code", "markdown"])), min_size=1, max_size=6)


def _src(cell: dict[str, Any]) -> str:
    s = cell["source"]
    return s if isinstance(s, str) else "".join(s)


def _handle(cells: list[dict[str, Any]], i: int) -> str:
    return str(cells[i]["id"]) if "id" in cells[i] else f"cell-{i + 1}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(writer=st.sampled_from(sorted(WRITERS)), ops=OPS)
def test_random_cell_edits_stay_valid_and_local(writer: str, ops: list[Any]) -> None:
    ws = setup_ws(WRITERS[writer])
    ws.read(NB)
    text = WRITERS[writer]
    for op, pick, new, kind in ops:
        before = loaded(text)
        cells = before["cells"]
        expected = json.loads(json.dumps(before))
        touched: int | None = None
        if op == "insert":
            at = pick % (len(cells) + 1)  # 0: the top
            r = ws.notebook_edit(NB, "" if at == 0 else _handle(cells, at - 1), new, kind,
                                 "insert")
            assert r.index == at + 1
            after = loaded(raw(ws))
            cell = after["cells"][at]
            assert (cell["cell_type"], _src(cell)) == (kind, new)
            expected["cells"].insert(at, cell)
        elif not cells:
            continue
        elif op == "delete":
            touched = pick % len(cells)
            ws.notebook_edit(NB, _handle(cells, touched), "", edit_mode="delete")
            del expected["cells"][touched]
        elif op in ("replace", "retype"):
            touched = pick % len(cells)
            cell = expected["cells"][touched]
            retype = op == "retype" and kind != cell["cell_type"]
            ws.notebook_edit(NB, _handle(cells, touched), new,
                             kind if op == "retype" else None, "replace")
            if retype:  # checked below, member by member
                expected["cells"][touched] = loaded(raw(ws))["cells"][touched]
                assert expected["cells"][touched]["cell_type"] == kind
            else:
                cell["source"] = new if isinstance(cell["source"], str) else _lines(new)
                if cell["cell_type"] == "code":
                    cell["outputs"], cell["execution_count"] = [], None
        else:  # edit: the whole source of a cell whose source is unique
            touched = pick % len(cells)
            old = _src(cells[touched])
            if not old or old == new or sum(_src(c).count(old) for c in cells) != 1:
                continue
            ws.edit(NB, old, new)
            cell = expected["cells"][touched]
            cell["source"] = new if isinstance(cell["source"], str) else _lines(new)
        after_text = raw(ws)
        after = loaded(after_text)  # nbformat parses and validates it
        assert after == expected
        if touched is not None and op != "delete" and after_text != text:
            start, old_end, _ = changed_span(text, after_text)
            lo, hi = cell_span(text, touched)
            assert lo <= start and old_end <= hi, (op, writer)
        text = after_text


def _lines(text: str) -> list[str]:
    if not text:
        return []
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(writer=st.sampled_from(sorted(WRITERS)), cut=st.integers(min_value=0),
       junk=st.text(max_size=3), data=st.data())
def test_damaged_notebooks_get_structured_answers(writer: str, cut: int, junk: str,
                                                  data: st.DataObject) -> None:
    """A notebook damaged anywhere (a span replaced by junk) is read as cells or as text,
    and every call answers with a result or a tool error of its own: never a
    ``backend_error`` (an exception that escaped)."""
    original = WRITERS[writer]
    at = cut % (len(original) + 1)
    end = data.draw(st.integers(min_value=at, max_value=min(len(original), at + 40)))
    damaged = original[:at] + junk + original[end:]
    ws = setup_ws(damaged)
    outcomes = [ws.execute("read", {"file_path": NB}),
                ws.execute("read", {"file_path": NB, "offset": 2, "limit": 1}),
                ws.execute("edit", {"file_path": NB, "old_string": "plot", "new_string": "p"}),
                ws.execute("notebook_edit", {"file_path": NB, "cell_id": "plot_1",
                                             "new_source": "x"}),
                ws.execute("notebook_edit", {"file_path": NB, "cell_id": "", "new_source": "y",
                                             "edit_mode": "insert"}),
                ws.execute("notebook_edit", {"file_path": NB, "cell_id": "cell-2",
                                             "new_source": "", "edit_mode": "delete"})]
    for out in outcomes:
        assert out.error is None or out.error.code != "backend_error", out.text
        json.dumps(out.to_dict())
    try:
        json.loads(damaged)
    except ValueError:
        return
    json.loads(raw(ws))  # changes to valid JSON keep it valid JSON
