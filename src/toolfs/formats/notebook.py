"""Jupyter notebooks (``.ipynb``) as cells: parsing with byte spans, and byte-stable edits.

A notebook is JSON, and every writer formats it its own way (Jupyter and nbformat: one
space of indent, sorted keys, ``ensure_ascii=False``; VS Code: its own key order; other
tools: two spaces, CRLF, compact). An edit of one cell must leave every other byte of the
file as it was, so the file is never re-dumped: :func:`parse` walks the document once
(each cell decoded by :mod:`json`'s C scanner in one call) and records where each cell
sits in the text, and, for the cells a change touches, where each of their members sits;
an edit replaces only those spans, writing the new values in the style the file already
uses (indent, newline, separators, escapes).

Pure functions over text: no I/O, no policy (see :mod:`toolfs.tools.notebook`). nbformat
(the ``notebook`` extra) is used, when installed, only to validate a notebook given whole
to ``write``; without it a structural check of our own applies.
"""

from __future__ import annotations

import functools
import json
import re
import secrets
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from toolfs.errors import FsError, fs_error

__all__ = ["Cell", "Notebook", "NotebookStyle", "is_notebook_path", "parse", "source_text",
           "validate_notebook_text"]

CellType = Literal["code", "markdown"]

_WS_RUN = re.compile(r"[ \t\n\r]*")
_decoder = json.JSONDecoder()
# json's string scanner (C), which returns where the string ends.
_scanstring: Any = json.decoder.scanstring  # type: ignore[attr-defined]
# An escape of a character past ASCII (`\u00e9`): a writer that escapes them
# (`ensure_ascii=True`) made the file, and new text is written the same way.
_NON_ASCII_ESCAPE = re.compile(r"\\u(?:00[89a-fA-F]|0[1-9a-fA-F][0-9a-fA-F]|[1-9a-fA-F])")
_ID_CHARS = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_POSITIONAL_ID = re.compile(r"cell-([1-9][0-9]{0,8})")


def is_notebook_path(path: str) -> bool:
    """Whether ``path`` names a Jupyter notebook (by its ``.ipynb`` suffix)."""
    return path.lower().endswith(".ipynb")


class NotANotebook(ValueError):
    """The text is not a notebook toolfs can work on as cells (not JSON, not nbformat 4,
    a cell that is not an object ...); the message says what."""


@dataclass(frozen=True)
class Member:
    """One ``"key": value`` of a JSON object: the value and where it sits in the text."""

    key: str
    key_start: int
    value_start: int
    value_end: int
    value: Any


@dataclass(frozen=True)
class Cell:
    """One cell as the file holds it."""

    index: int
    """0-based position in ``cells``."""
    start: int
    """Offset of the cell's ``{`` in the text."""
    end: int
    """Offset just past its ``}``."""
    value: dict[str, Any]
    """The cell as ``json.loads`` decodes it (keys in file order)."""
    text: str = field(repr=False)
    """The whole notebook's text (the members' spans are found in it on demand)."""

    @functools.cached_property
    def members(self) -> dict[str, Member]:
        """Its members by key, with their spans (the last of duplicate keys, as
        ``json.loads`` keeps); found when a change needs them, not for every cell."""
        members, _ = _members(self.text, self.start)
        return {m.key: m for m in members}

    @property
    def order(self) -> list[str]:
        """Its keys in file order."""
        return list(self.value)

    @property
    def cell_type(self) -> str:
        return str(self.value["cell_type"])

    @property
    def id(self) -> str | None:
        """The nbformat id (4.5+), ``None`` for a cell without one."""
        value = self.value.get("id")
        return value if isinstance(value, str) else None

    @property
    def handle(self) -> str:
        """The ``cell_id`` the tools show and accept: the id, or ``cell-N`` (1-based)
        for a cell without one (nbformat before 4.5)."""
        return self.id if self.id is not None else f"cell-{self.index + 1}"

    @property
    def source(self) -> str:
        return source_text(self.value["source"])


@dataclass(frozen=True)
class NotebookStyle:
    """How the file writes JSON, so that new values look like the old ones."""

    newline: str
    """``"\\n"``, ``"\\r\\n"``, or ``""`` for a file on one line (no indentation)."""
    indent: str
    """One level of indentation (``" "`` for Jupyter, ``"  "`` ...)."""
    key_separator: str
    """Between a key and its value (``": "``)."""
    item_separator: str
    """Between two items on one line (``","`` or ``", "``), for a compact file."""
    ensure_ascii: bool
    """Characters past ASCII are written as ``\\uXXXX`` escapes."""


@dataclass
class Notebook:
    """A parsed notebook: its cells with their spans, and the file's JSON style."""

    text: str
    cells: list[Cell]
    top: dict[str, Member]
    cells_member: Member
    style: NotebookStyle
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def language(self) -> str | None:
        """The kernel's language, as the metadata names it."""
        for key, field_name in (("language_info", "name"), ("kernelspec", "language")):
            info = self.metadata.get(key)
            name = info.get(field_name) if isinstance(info, dict) else None
            if isinstance(name, str):
                return name
        return None

    @property
    def minor(self) -> int:
        member = self.top.get("nbformat_minor")
        value = member.value if member is not None else None
        return value if type(value) is int else 0

    @property
    def uses_ids(self) -> bool:
        """Cells carry ids: nbformat 4.5 or later, or a cell already has one."""
        return self.minor >= 5 or any(c.id is not None for c in self.cells)

    def find(self, cell_id: str) -> Cell | None:
        """The cell ``cell_id`` names: an id, else ``cell-N`` for an id-less cell."""
        for cell in self.cells:
            if cell.id == cell_id:
                return cell
        m = _POSITIONAL_ID.fullmatch(cell_id)
        if m is not None:
            n = int(m.group(1))
            if n <= len(self.cells) and self.cells[n - 1].id is None:
                return self.cells[n - 1]
        return None


def source_text(source: Any) -> str:
    """A cell's (or output's) multiline string: nbformat stores it as one string or as a
    list of lines to be joined."""
    if isinstance(source, str):
        return source
    if isinstance(source, list):
        return "".join(s for s in source if isinstance(s, str))
    return ""


# -- parsing --------------------------------------------------------------------------


def _skip(text: str, i: int) -> int:
    """The offset of the first non-whitespace character from ``i`` (one C match, none
    when ``text[i]`` is already a token, as between a value and its comma)."""
    if i < len(text) and text[i] not in " \t\n\r":
        return i
    return _WS_RUN.match(text, i).end()  # type: ignore[union-attr]  # always matches


# A value decoded in a special way: (text, offset of the value) -> (value, end).
_Expand = Callable[[str, int], tuple[Any, int]]


def _members(text: str, start: int, expand: dict[str, _Expand] | None = None
             ) -> tuple[list[Member], int]:
    """The members of the object whose ``{`` is at ``start``, and the offset past ``}``.
    Each value is decoded by json's scanner (C), so a large output costs one C pass;
    a key in ``expand`` has its value walked by that function instead."""
    assert text[start] == "{"
    out: list[Member] = []
    i = _skip(text, start + 1)
    if i < len(text) and text[i] == "}":
        return out, i + 1
    while True:
        if i >= len(text) or text[i] != '"':
            raise NotANotebook(f"expected a key at offset {i}")
        key, i_after = _scanstring(text, i + 1)
        j = _skip(text, i_after)
        if j >= len(text) or text[j] != ":":
            raise NotANotebook(f"expected ':' at offset {j}")
        v = _skip(text, j + 1)
        walk = expand.get(key) if expand else None
        value, end = walk(text, v) if walk is not None else _decoder.raw_decode(text, v)
        out.append(Member(key, i, v, end, value))
        i = _skip(text, end)
        if i < len(text) and text[i] == ",":
            i = _skip(text, i + 1)
            continue
        if i < len(text) and text[i] == "}":
            return out, i + 1
        raise NotANotebook(f"expected ',' or '}}' at offset {i}")


def _items(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The ``(start, end)`` spans of the items of the array ``text[start:end]``."""
    assert text[start] == "["
    spans: list[tuple[int, int]] = []
    i = _skip(text, start + 1)
    if text[i] == "]":
        return spans
    while True:
        _, e = _decoder.raw_decode(text, i)
        spans.append((i, e))
        i = _skip(text, e)
        if text[i] == ",":
            i = _skip(text, i + 1)
            continue
        assert text[i] == "]" and i == end - 1
        return spans


def _cell_objects(text: str, start: int) -> Iterator[tuple[int, int, Any]]:
    """``(start, end, value)`` of each item of the array whose ``[`` is at ``start``,
    each decoded by json's scanner (C) in one call."""
    i = _skip(text, start + 1)
    if text[i] == "]":
        return
    while True:
        value, end = _decoder.raw_decode(text, i)
        yield i, end, value
        i = _skip(text, end)
        if text[i] == ",":
            i = _skip(text, i + 1)
            continue
        if text[i] == "]":
            return
        raise NotANotebook(f"expected ',' or ']' at offset {i}")


def parse(text: str) -> Notebook:
    """The notebook in ``text`` with the spans of its cells; :class:`NotANotebook` when
    it is not an nbformat 4 notebook whose cells toolfs can address."""
    try:
        return _parse(text)
    except NotANotebook:
        raise
    except RecursionError:
        raise NotANotebook("the JSON is nested too deeply") from None
    except ValueError as exc:  # json's own errors (JSONDecodeError)
        raise NotANotebook(f"not valid JSON: {exc}") from None
    except (IndexError, AssertionError):
        raise NotANotebook("not valid JSON: it ends early") from None


def _parse(text: str) -> Notebook:
    i = _skip(text, 0)
    if i >= len(text) or text[i] != "{":
        raise NotANotebook("a notebook is a JSON object")
    walked: list[tuple[int, int, Any]] = []

    def cells_array(text: str, v: int) -> tuple[Any, int]:
        """The cells, each with its span (decoded once, item by item)."""
        if text[v] != "[":
            return _decoder.raw_decode(text, v)
        walked.clear()
        walked.extend(_cell_objects(text, v))
        end = _skip(text, walked[-1][1] if walked else v + 1) + 1
        return [value for _, _, value in walked], end

    top_list, end = _members(text, i, {"cells": cells_array})
    if _skip(text, end) != len(text):
        raise NotANotebook(f"extra data after the JSON object at offset {_skip(text, end)}")
    top = {m.key: m for m in top_list}
    if "nbformat" not in top or top["nbformat"].value != 4:
        raise NotANotebook("only nbformat 4 notebooks are read as cells (nbformat is "
                           f"{top['nbformat'].value if 'nbformat' in top else 'missing'})")
    cells_member = top.get("cells")
    if cells_member is None or not isinstance(cells_member.value, list):
        raise NotANotebook("'cells' is missing or not a list")
    cells: list[Cell] = []
    for n, (s, e, value) in enumerate(walked):
        if not isinstance(value, dict):
            raise NotANotebook(f"cell {n + 1} is not a JSON object")
        if not isinstance(value.get("cell_type"), str):
            raise NotANotebook(f"cell {n + 1} has no cell_type")
        src = value.get("source")
        if not (isinstance(src, str) or (
                isinstance(src, list) and all(isinstance(x, str) for x in src))):
            raise NotANotebook(f"cell {n + 1} has no source string or list of strings")
        cells.append(Cell(n, s, e, value, text))
    metadata = top.get("metadata")
    return Notebook(text, cells, top, cells_member, _style(text, top_list),
                    metadata.value if metadata and isinstance(metadata.value, dict) else {})


def _style(text: str, top: list[Member]) -> NotebookStyle:
    """The file's JSON style, from the top-level object (every writer formats it as the
    rest)."""
    first = top[0] if top else None
    lead = text[text.index("{") + 1:first.key_start] if first else ""
    if "\n" in lead:
        newline = "\r\n" if "\r\n" in lead else "\n"
        indent = lead[lead.rindex("\n") + 1:]
    else:
        newline, indent = "", ""
    key_sep = ": "
    item_sep = ", "
    if first is not None:
        key_sep = text[_key_end(text, first.key_start):first.value_start]
        if len(top) > 1:
            between = text[first.value_end:top[1].key_start]
            item_sep = between if "\n" not in between else ","
    ensure_ascii = text.isascii() and _NON_ASCII_ESCAPE.search(text) is not None
    return NotebookStyle(newline, indent or (" " if newline else ""), key_sep, item_sep,
                         ensure_ascii)


def _key_end(text: str, key_start: int) -> int:
    end: int = _scanstring(text, key_start + 1)[1]
    return end


# -- writing values in the file's style -----------------------------------------------


def _line_indent(text: str, pos: int) -> str:
    """The whitespace from the start of ``pos``'s line up to ``pos``."""
    line_start = text.rfind("\n", 0, pos) + 1
    lead = text[line_start:pos]
    return lead if not lead.strip() else ""


def _dump_string(s: str, style: NotebookStyle) -> str:
    return json.dumps(s, ensure_ascii=style.ensure_ascii)


def dump_value(value: Any, style: NotebookStyle, base: str) -> str:
    """``value`` as JSON in ``style``, its nested lines indented from ``base`` (the
    indentation of the line the value starts on), as Python's ``json.dumps(indent=)``
    and JavaScript's ``JSON.stringify`` write it."""
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = base + style.indent
        parts = [f"{_dump_string(k, style)}{style.key_separator}"
                 f"{dump_value(v, style, inner)}" for k, v in value.items()]
        if not style.newline:
            return "{" + style.item_separator.join(parts) + "}"
        nl = style.newline
        return "{" + nl + inner + ("," + nl + inner).join(parts) + nl + base + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        inner = base + style.indent
        parts = [dump_value(v, style, inner) for v in value]
        if not style.newline:
            return "[" + style.item_separator.join(parts) + "]"
        nl = style.newline
        return "[" + nl + inner + ("," + nl + inner).join(parts) + nl + base + "]"
    if isinstance(value, str):
        return _dump_string(value, style)
    return json.dumps(value)


def split_source(text: str) -> list[str]:
    """Source text as nbformat's list of lines, each but the last ending with ``\\n``."""
    if not text:
        return []
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def _dump_source(nb: Notebook, member: Member, new: str) -> str:
    """The new ``source`` value in the form and layout of the one it replaces."""
    text, style = nb.text, nb.style
    if isinstance(member.value, str):
        return _dump_string(new, style)
    lines = split_source(new)
    if not lines:
        return "[]"
    spans = _items(text, member.value_start, member.value_end)
    if spans:  # the layout of the list as it is
        opening = text[member.value_start + 1:spans[0][0]]
        closing = text[spans[-1][1]:member.value_end - 1]
        if len(spans) > 1:
            between = text[spans[0][1]:spans[1][0]]
        else:
            between = "," + opening if "\n" in opening else style.item_separator
        return ("[" + opening + between.join(_dump_string(s, style) for s in lines)
                + closing + "]")
    base = _line_indent(text, member.key_start)
    return dump_value(lines, style, base)


# -- edits ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Splice:
    """Replace ``text[start:end]`` by ``new``."""

    start: int
    end: int
    new: str


def apply_splices(text: str, splices: list[Splice]) -> str:
    """``text`` with non-overlapping ``splices`` applied (one join)."""
    pieces: list[str] = []
    prev = 0
    for s in sorted(splices, key=lambda s: s.start):
        assert s.start >= prev, "splices overlap"
        pieces.append(text[prev:s.start])
        pieces.append(s.new)
        prev = s.end
    pieces.append(text[prev:])
    return "".join(pieces)


def set_source(nb: Notebook, cell: Cell, new: str) -> Splice:
    """The splice that makes ``cell``'s source ``new`` and changes nothing else."""
    member = cell.members["source"]
    return Splice(member.value_start, member.value_end, _dump_source(nb, member, new))


def clear_outputs(cell: Cell) -> list[Splice]:
    """Splices emptying a code cell's outputs and execution count (Jupyter does so when a
    cell's source is edited: the old outputs no longer belong to it)."""
    out: list[Splice] = []
    outputs = cell.members.get("outputs")
    if outputs is not None and outputs.value != []:
        out.append(Splice(outputs.value_start, outputs.value_end, "[]"))
    count = cell.members.get("execution_count")
    if count is not None and count.value is not None:
        out.append(Splice(count.value_start, count.value_end, "null"))
    return out


def fresh_id(nb: Notebook) -> str:
    """A new cell id, valid for nbformat (``[a-zA-Z0-9-_]{1,64}``) and unique in ``nb``
    (eight hex digits, as nbformat's own ``random_cell_id``)."""
    taken = {c.id for c in nb.cells}
    while True:
        candidate = secrets.token_hex(4)
        if candidate not in taken:
            return candidate


def new_cell(nb: Notebook, cell_type: CellType, source: str, *,
             template: dict[str, Any] | None = None) -> tuple[dict[str, Any], str | None]:
    """A new cell as nbformat writes one (id only where the notebook's version has
    them), its keys in the order the notebook's cells use; and its id."""
    cell_id = fresh_id(nb) if nb.uses_ids else None
    src: Any = split_source(source)
    if nb.cells and isinstance(nb.cells[0].value["source"], str):
        src = source  # this writer stores source as one string
    value: dict[str, Any] = {"cell_type": cell_type}
    if cell_type == "code":
        value["execution_count"] = None
    if cell_id is not None:
        value["id"] = cell_id
    value["metadata"] = {} if template is None else template
    if cell_type == "code":
        value["outputs"] = []
    value["source"] = src
    return _ordered(nb, value), cell_id


def _ordered(nb: Notebook, value: dict[str, Any]) -> dict[str, Any]:
    """``value``'s keys in the order this notebook's cells write them (sorted, as
    nbformat does, where no cell shows the order)."""
    order: list[str] = []
    for cell in nb.cells:
        for key in cell.order:
            if key not in order:
                order.append(key)
    rank = {k: i for i, k in enumerate(order)}
    return dict(sorted(value.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))


def insert_cell(nb: Notebook, after: Cell | None, value: dict[str, Any]) -> Splice:
    """The splice inserting ``value`` as a cell after ``after`` (``None``: at the top)."""
    text, style = nb.text, nb.style
    cm = nb.cells_member
    if not nb.cells:
        base = _line_indent(text, cm.key_start)
        if style.newline:
            inner = base + style.indent
            body = dump_value(value, style, inner)
            return Splice(cm.value_start, cm.value_end,
                          "[" + style.newline + inner + body + style.newline + base + "]")
        return Splice(cm.value_start, cm.value_end, "[" + dump_value(value, style, "") + "]")
    ref = nb.cells[0] if after is None else after
    base = _line_indent(text, ref.start)
    body = dump_value(value, style, base)
    if len(nb.cells) > 1:
        between = text[nb.cells[0].end:nb.cells[1].start]
    else:
        opening = text[cm.value_start + 1:nb.cells[0].start]
        between = "," + opening if "\n" in opening else style.item_separator
    if after is None:
        return Splice(ref.start, ref.start, body + between)
    return Splice(after.end, after.end, between + body)


def delete_cell(nb: Notebook, cell: Cell) -> Splice:
    """The splice removing ``cell`` and one separator next to it."""
    cm = nb.cells_member
    if len(nb.cells) == 1:
        return Splice(cm.value_start, cm.value_end, "[]")
    if cell.index + 1 < len(nb.cells):  # up to the next cell
        return Splice(cell.start, nb.cells[cell.index + 1].start, "")
    return Splice(nb.cells[cell.index - 1].end, cell.end, "")  # from the previous cell


def replace_cell(nb: Notebook, cell: Cell, value: dict[str, Any]) -> Splice:
    """The splice rewriting the whole ``cell`` as ``value`` (a change of type)."""
    base = _line_indent(nb.text, cell.start)
    return Splice(cell.start, cell.end, dump_value(value, nb.style, base))


def retyped(nb: Notebook, cell: Cell, cell_type: CellType, source: str) -> dict[str, Any]:
    """``cell`` as a cell of ``cell_type`` with ``source``: its id and metadata kept, the
    members only the other type has added or dropped (a code cell gets empty outputs,
    a markdown cell keeps no outputs or count; attachments stay on markdown only)."""
    old = cell.value
    value: dict[str, Any] = {}
    for key in cell.order:
        if key in ("outputs", "execution_count") and cell_type != "code":
            continue
        if key == "attachments" and cell_type != "markdown":
            continue
        value[key] = old[key]
    value["cell_type"] = cell_type
    src = old["source"]
    value["source"] = source if isinstance(src, str) else split_source(source)
    if cell_type == "code":
        value.setdefault("execution_count", None)
        value.setdefault("outputs", [])
        value["execution_count"], value["outputs"] = None, []
    value.setdefault("metadata", {})
    return _ordered(nb, value) if any(k not in cell.order for k in value) else value


# -- matching ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceMatch:
    """Where ``old_string`` occurs in the cells' sources."""

    cells: list[tuple[Cell, int]]
    """Each cell with at least one occurrence, and how many."""

    @property
    def total(self) -> int:
        return sum(n for _, n in self.cells)


def match_sources(nb: Notebook, old: str) -> SourceMatch:
    """The occurrences of ``old`` in each cell's source (non-overlapping, as
    ``str.replace`` sees them)."""
    found: list[tuple[Cell, int]] = []
    for cell in nb.cells:
        n = cell.source.count(old)
        if n:
            found.append((cell, n))
    return SourceMatch(found)


def spanning_cells(nb: Notebook, old: str) -> tuple[Cell, Cell] | None:
    """Two adjacent cells that ``old`` runs across (the end of one source, maybe a
    newline, the start of the next), as a model that read the cells one after the other
    may copy them. Called when no single cell holds ``old``: each pair costs a search
    in a window of twice ``old``'s length around the boundary."""
    for a, b in zip(nb.cells, nb.cells[1:], strict=False):
        sa, sb = a.source, b.source
        for joiner in ("\n", ""):
            lo = max(0, len(sa) - len(old) + 1)
            window = sa[lo:] + joiner + sb[:len(old) - 1]
            if old in window:
                return a, b
    return None


# -- validation -------------------------------------------------------------------------


def validate_notebook_text(text: str) -> None:
    """Raise ``invalid_arguments`` saying what is wrong unless ``text`` is a valid
    nbformat 4 notebook (nbformat's schema when the ``notebook`` extra is installed,
    else a structural check: JSON, nbformat 4, cells with a type, source and metadata)."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise _invalid("the JSON is nested too deeply") from None
    except ValueError as exc:
        raise _invalid(f"it is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _invalid("a notebook is a JSON object")
    try:
        import nbformat  # the `notebook` extra
    except ImportError:
        _structural_check(data)
        return
    if data.get("nbformat") != 4:
        raise _invalid(f"nbformat must be 4, not {str(data.get('nbformat'))[:20]}")
    try:
        with warnings.catch_warnings():  # nbformat's notes on ids it would add itself
            warnings.simplefilter("ignore")
            nbformat.validate(data, version=4, version_minor=_minor(data))
    except nbformat.ValidationError as exc:
        raise _invalid(_schema_message(exc)) from None
    except Exception as exc:  # nbformat's own surprise on odd input
        raise _invalid(f"{type(exc).__name__}: {exc}"[:500]) from None


def _minor(data: dict[str, Any]) -> int | None:
    minor = data.get("nbformat_minor")
    return minor if type(minor) is int else None


def _schema_message(exc: Exception) -> str:
    """nbformat's (jsonschema's) error in one sentence: what, and where."""
    message = str(getattr(exc, "message", "") or exc).splitlines()[0]
    where = "/".join(str(p) for p in getattr(exc, "absolute_path", ()) or ())
    text = f"{message} (at {where})" if where else message
    return text[:500]


def _structural_check(data: dict[str, Any]) -> None:
    if data.get("nbformat") != 4:
        raise _invalid(f"nbformat must be 4, not {str(data.get('nbformat'))[:20]}")
    for key, kind in (("nbformat_minor", int), ("metadata", dict), ("cells", list)):
        if not isinstance(data.get(key), kind):
            raise _invalid(f"{key!r} is missing or not a {kind.__name__}")
    for n, cell in enumerate(data["cells"], 1):
        if not isinstance(cell, dict):
            raise _invalid(f"cell {n} is not an object")
        if cell.get("cell_type") not in ("code", "markdown", "raw"):
            raise _invalid(f"cell {n}: cell_type must be code, markdown or raw")
        if not isinstance(cell.get("metadata"), dict):
            raise _invalid(f"cell {n}: 'metadata' is missing or not an object")
        src = cell.get("source")
        if not (isinstance(src, str) or (isinstance(src, list)
                                         and all(isinstance(s, str) for s in src))):
            raise _invalid(f"cell {n}: 'source' must be a string or a list of strings")
        if cell["cell_type"] == "code" and not isinstance(cell.get("outputs"), list):
            raise _invalid(f"cell {n}: a code cell needs an 'outputs' list")
        if "id" in cell and not (isinstance(cell["id"], str)
                                 and _ID_CHARS.fullmatch(cell["id"])):
            raise _invalid(f"cell {n}: id must be 1-64 letters, digits, '-' or '_'")


def _invalid(reason: str) -> FsError:
    return fs_error("invalid_arguments", f"not a valid Jupyter notebook (nbformat 4): {reason}",
                    details={"reason": reason})


def iter_outputs(cell: Cell) -> Iterator[dict[str, Any]]:
    """The output objects of a code cell (others have none)."""
    outputs = cell.value.get("outputs")
    if not isinstance(outputs, list):
        return
    for out in outputs:
        if isinstance(out, dict):
            yield out
