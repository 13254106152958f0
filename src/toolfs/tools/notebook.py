"""``read``, ``edit`` and ``write`` of Jupyter notebooks, and the ``notebook_edit`` tool.

Over a :class:`~toolfs.policy.PolicyFileSystem`, as :mod:`toolfs.tools`: a notebook read
is an observation of the file's version; an edit reads the observed bytes
(``intent="edit"``) and commits through that handle, so it lands only on the version it
was computed from (``stale`` otherwise), with one conditional request on object stores.
The bytes are changed by :mod:`toolfs.formats.notebook`'s splices only: every byte outside the
touched cell stays as it was.

A ``.ipynb`` that is not an nbformat 4 notebook (broken JSON, nbformat 3) is read and
edited as text, so that an agent can repair it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from toolfs import tools
from toolfs._trusted import trusted
from toolfs.errors import FsError, fs_error
from toolfs.formats.merge import Rebased
from toolfs.formats.notebook import (
    Cell,
    CellType,
    NotANotebook,
    Notebook,
    Splice,
    apply_splices,
    clear_outputs,
    delete_cell,
    insert_cell,
    is_notebook_path,
    iter_outputs,
    match_sources,
    new_cell,
    parse,
    replace_cell,
    retyped,
    set_source,
    source_text,
    spanning_cells,
    validate_notebook_text,
)
from toolfs.formats.text import BOM, decode
from toolfs.policy.filesystem import ObservedFile, PolicyFileSystem
from toolfs.policy.observe_commit import Commit
from toolfs.results import (
    EditResult,
    MediaResult,
    NotebookCell,
    NotebookEditResult,
    NotebookImage,
    NotebookOutput,
    NotebookReadResult,
    ReadResult,
    WriteResult,
)
from toolfs.schemas import DEFAULT_LIMIT, EditArgs, NotebookEditArgs, ReadArgs, WriteArgs

__all__ = ["DEFAULT_CELLS", "MAX_NOTEBOOK_IMAGES", "OUTPUT_LINES", "edit", "edit_file",
           "image_bytes", "notebook_edit", "notebook_edit_file", "read", "read_file", "write",
           "write_file"]

DEFAULT_CELLS = 100
"""Cells a notebook read returns when no ``limit`` is given."""
OUTPUT_LINES = 10
"""Lines of each output's text a read keeps (the rest is counted, and marked)."""
SOURCE_SNIPPET_LINES = 40
"""Lines of a changed cell's new source an edit result holds."""
NEARBY_IDS = 10
MAX_NOTEBOOK_IMAGES = 20
"""Image outputs one notebook read decodes and may show, in cell order (the output budget
may show fewer); the rest are named, and the text says how many were not shown. Twenty
keeps a read's decoding bounded, and is Anthropic's threshold for many-image requests."""
_IMAGE_TYPES = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif",
                "image/webp": "webp", "image/svg+xml": "svg", "image/bmp": "bmp"}
# The outputs shown as images: those toolfs.formats.media fits to the providers' limits.
_RASTER_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


# -- read -------------------------------------------------------------------------------


def read(fs: PolicyFileSystem, args: ReadArgs
         ) -> ReadResult | MediaResult | NotebookReadResult:
    """``read``: a notebook as cells, an image or a PDF as media (:mod:`toolfs.formats.media`),
    any other file as numbered lines."""
    return read_file(fs, args.file_path, args.offset, args.limit)


def read_file(fs: PolicyFileSystem, file_path: str, offset: int | None = None,
              limit: int | None = None) -> ReadResult | MediaResult | NotebookReadResult:
    """:func:`read` with the arguments given one by one, already valid. For a notebook
    ``offset`` and ``limit`` count cells (1-based; default :data:`DEFAULT_CELLS`)."""
    if not is_notebook_path(file_path):
        return tools.read_file(fs, file_path, offset, limit)
    if offset is not None and offset > tools.MAX_OFFSET:
        return tools.read_file(fs, file_path, offset, limit)  # its refusal
    with fs.open(file_path, "rb") as f:
        if not f.complete:  # over the whole-file cap: windows of its text
            return tools._read_stream(f, offset or 1, limit or DEFAULT_LIMIT)
        data = f.read()
        doc = decode(data, f.path, wide=False)
        try:
            nb = parse(doc.text)
        except NotANotebook:
            f.seek(0)
            return tools._read_whole(f, offset or 1, limit or DEFAULT_LIMIT)
        return _cells_view(nb, f, offset or 1, limit or DEFAULT_CELLS)


def _cells_view(nb: Notebook, f: ObservedFile, offset: int, limit: int
                ) -> NotebookReadResult:
    window = nb.cells[offset - 1: offset - 1 + limit]
    decodes = _Decodes(f.path)
    cells = [_cell_view(c, decodes) for c in window]
    return trusted(NotebookReadResult, frozenset(NotebookReadResult.model_fields), {
        "path": f.path, "version": f.version, "cells": cells, "start_cell": offset,
        "cell_count": len(cells), "total_cells": len(nb.cells), "size": f.size,
        "partial": len(cells) < len(nb.cells), "language": nb.language,
        "truncated": False})


def _cell_view(cell: Cell, decodes: _Decodes) -> NotebookCell:
    count = cell.value.get("execution_count")
    outputs = [_output_view(cell, n, out, decodes)
               for n, out in enumerate(iter_outputs(cell), 1)]
    return NotebookCell(
        index=cell.index + 1, cell_id=cell.handle, cell_type=cell.cell_type,
        source=_source_lines(cell.source),
        execution_count=count if type(count) is int else None, outputs=outputs)


def _source_lines(source: str) -> list[str]:
    """A source's lines without terminators; a final newline ends the last line rather
    than starting an empty one (as a read of a text file shows it)."""
    lines = source.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _text_lines(text: str) -> tuple[list[str], int]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines[:OUTPUT_LINES], max(0, len(lines) - OUTPUT_LINES)


def _output_view(cell: Cell, n: int, out: dict[str, Any], decodes: _Decodes
                 ) -> NotebookOutput:
    kind = str(out.get("output_type", "unknown"))
    if kind == "stream":
        lines, more = _text_lines(source_text(out.get("text")))
        return NotebookOutput(output_type=kind, label=str(out.get("name", "stream")),
                              lines=lines, more_lines=more)
    if kind == "error":
        tb = out.get("traceback")
        frames = len(tb) if isinstance(tb, list) else 0
        line = f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"
        lines, more = _text_lines(line)
        return NotebookOutput(output_type=kind, label=str(out.get("ename", "Error")),
                              lines=lines, more_lines=more + frames)
    data = out.get("data")
    if not isinstance(data, dict):
        return NotebookOutput(output_type=kind, label="", lines=[])
    for mime, ext in _IMAGE_TYPES.items():
        if mime in data:
            return NotebookOutput(output_type=kind, label=mime, lines=[],
                                  image=_image(cell, n, mime, ext, data[mime], decodes))
    if "text/plain" in data:
        lines, more = _text_lines(source_text(data["text/plain"]))
        return NotebookOutput(output_type=kind, label="text/plain", lines=lines,
                              more_lines=more)
    mimes = sorted(k for k in data if isinstance(k, str))
    label = mimes[0] if mimes else ""
    size = len(source_text(data.get(label))) if label else 0
    return NotebookOutput(output_type=kind, label=label,
                          lines=[f"[{label} output, {size} characters, not shown]"])


class _Decodes:
    """The image outputs one read has decoded: at most :data:`MAX_NOTEBOOK_IMAGES`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.left = MAX_NOTEBOOK_IMAGES


def _image(cell: Cell, n: int, mime: str, ext: str, value: Any, decodes: _Decodes
           ) -> NotebookImage:
    """An image output, named; its size is that of the decoded image (base64 is four
    characters per three bytes; an SVG is text). A PNG, JPEG, GIF or WebP output is
    decoded and fitted to the providers' limits as a read image is (while the read's
    :data:`MAX_NOTEBOOK_IMAGES` last)."""
    text = source_text(value)
    name = f"cell-{cell.index + 1}-output-{n}.{ext}"
    if mime == "image/svg+xml":
        return NotebookImage(name=name, mime_type=mime, size=len(
            text.encode("utf-8", "surrogatepass")), not_shown="an SVG is not a raster image")
    compact = "".join(text.split())
    size = max(0, len(compact) * 3 // 4 - compact[-2:].count("="))
    if mime not in _RASTER_TYPES:
        return NotebookImage(name=name, mime_type=mime, size=size,
                             not_shown="only PNG, JPEG, GIF and WebP images are shown")
    if decodes.left <= 0:
        return NotebookImage(name=name, mime_type=mime, size=size, not_shown=(
            f"a read shows at most {MAX_NOTEBOOK_IMAGES} images"))
    decodes.left -= 1
    return _fitted(name, mime, size, compact, f"{decodes.path} ({name})")


def _fitted(name: str, mime: str, size: int, compact: str, where: str) -> NotebookImage:
    """The output ``name`` with its image fitted to show (:func:`toolfs.formats.media.show_image`),
    or the reason it cannot be shown."""
    import base64  # only here: a notebook's images are decoded only when shown
    import binascii

    from toolfs.formats import media

    def unshown(why: str) -> NotebookImage:
        return NotebookImage(name=name, mime_type=mime, size=size, not_shown=why)

    try:
        data = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return unshown("its base64 data is malformed")
    kind = media.sniff(data[:media.SNIFF_BYTES])
    if kind is None or kind.kind != "image":
        return unshown("its data is not a PNG, JPEG, GIF or WebP image")
    try:
        shown = media.show_image(data, kind, where)
    except FsError as exc:
        if exc.code == "unsupported":
            return unshown(f"fitting it to the image limits needs the {media.MEDIA_EXTRA} "
                           "extra")
        return unshown("it cannot be decoded")
    return NotebookImage(name=name, mime_type=mime, size=size, width=shown.width,
                         height=shown.height, image=shown.image)


def image_bytes(cell: Cell, n: int) -> tuple[str, bytes] | None:
    """The MIME type and bytes of the image output ``n`` (1-based) of ``cell``; ``None``
    when that output is not an image: the bytes as stored (a read shows them fitted,
    :attr:`NotebookImage.image`)."""
    outputs = list(iter_outputs(cell))
    if not 1 <= n <= len(outputs):
        return None
    data = outputs[n - 1].get("data")
    if not isinstance(data, dict):
        return None
    for mime in _IMAGE_TYPES:
        if mime in data:
            text = source_text(data[mime])
            if mime == "image/svg+xml":
                return mime, text.encode("utf-8", "surrogatepass")
            import base64  # only here: reading a notebook never decodes its images
            import binascii

            try:
                return mime, base64.b64decode("".join(text.split()), validate=True)
            except (binascii.Error, ValueError):
                return None
    return None


# -- edit ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Change:
    """One change planned on a parsed notebook: its splices and what the result says."""

    splices: list[Splice]
    action: Literal["edited", "replaced", "inserted", "deleted"]
    cell_id: str
    index: int
    """1-based position of the cell (before a delete, after an insert)."""
    cell_type: str
    total: int
    source: str
    replacements: int = 0
    changed: tuple[str, ...] = ()
    cleared: bool = False
    anchors: tuple[str, ...] = ()
    """Cells the change rests on: they must be as they were for it to move onto a newer
    version of the notebook (``Policy(on_stale="merge")``)."""


# A change planned on a notebook; raises FsError when it does not apply.
_Plan = Callable[[Notebook], _Change]


def edit(fs: PolicyFileSystem, args: EditArgs) -> EditResult | NotebookEditResult:
    """``edit``: in a notebook, ``old_string`` is matched in the cells' sources."""
    return edit_file(fs, args.file_path, args.old_string, args.new_string, args.replace_all)


def edit_file(fs: PolicyFileSystem, file_path: str, old_string: str, new_string: str,
              replace_all: bool = False) -> EditResult | NotebookEditResult:
    """:func:`edit` with the arguments given one by one, already valid."""
    if not is_notebook_path(file_path):
        return tools.edit_file(fs, file_path, old_string, new_string, replace_all)
    with fs.open(file_path, "rb", intent="edit") as f:
        doc = decode(f.read(), f.path, wide=False)
        try:
            nb = parse(doc.text)
        except NotANotebook:
            nb = None
        if nb is None:  # edited as the text it is (an agent repairing it)
            del doc
            return tools.edit_file(fs, file_path, old_string, new_string, replace_all)
        tools._check_text(new_string, f.path)

        def plan(on: Notebook) -> _Change:
            return _source_edit(on, f.path, old_string, new_string, replace_all)

        return _land(fs, f, nb, doc.bom, plan)


def _land(fs: PolicyFileSystem, f: ObservedFile, nb: Notebook, bom: bool, plan: _Plan
          ) -> NotebookEditResult:
    """Plan the change on ``nb`` and commit it through ``f``. If the notebook changed
    since and the policy merges, the same change is planned again on the current
    notebook, when the cells it rests on are as they were (else ``stale``, with the
    diff)."""
    commit, done = _committed(fs, f, nb, bom, plan)
    return NotebookEditResult(
        path=commit.path, action=done.action, version=commit.version, cell_id=done.cell_id,
        index=done.index, cell_type=done.cell_type, total_cells=done.total,
        replacements=done.replacements, cells_changed=list(done.changed),
        outputs_cleared=done.cleared, source=_source_lines(done.source)[:SOURCE_SNIPPET_LINES],
        merged=commit.merged)


def _committed(fs: PolicyFileSystem, f: ObservedFile, nb: Notebook, bom: bool, plan: _Plan
               ) -> tuple[Commit, _Change]:
    """:func:`_land`'s commit, and the change it stored (planned again if merged)."""
    try:
        change = plan(nb)
    except FsError:
        if f.cached:  # planned on an outdated read: "read it again" helps more
            f.verify()
        raise
    data = _encode(fs, f.path, nb, change.splices, bom)
    moved: list[_Change] = []

    def rebase(current: bytes) -> Rebased | None:
        try:
            doc = decode(current, f.path, wide=False)
            now = parse(doc.text)
            again = plan(now)
            if not _rests_on_the_same(nb, now, change, again):
                return None
            moved[:] = [again]
            return Rebased(_encode(fs, f.path, now, again.splices, doc.bom), ())
        except (FsError, NotANotebook):
            return None

    commit = f.commit(data, operation="edit", rebase=rebase)
    return commit, moved[0] if commit.merged and moved else change


def _rests_on_the_same(base: Notebook, now: Notebook, planned: _Change, again: _Change
                       ) -> bool:
    """Whether a change planned again on a newer notebook does what it did on the one
    it was made from: the same cells, each as it was (type, source; for a delete, the
    whole cell); cells without ids are found by position, so their number must not
    have changed."""
    if (planned.anchors, planned.changed) != (again.anchors, again.changed):
        return False
    if not base.uses_ids and len(base.cells) != len(now.cells):
        return False
    for handle in planned.anchors:
        a, b = base.find(handle), now.find(handle)
        if a is None or b is None:
            return False
        if planned.action == "deleted" and a.value != b.value:
            return False
        if (a.cell_type, a.source) != (b.cell_type, b.source):
            return False
    return True


def _normalized(nb: Notebook, old: str, new: str) -> tuple[str, str]:
    """``old`` and ``new`` with CRLFs as LFs when no cell's source holds a CR (a model
    may send the line endings of its platform)."""
    if "\r" in old and not any("\r" in c.source for c in nb.cells):
        return old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
    return old, new


def _source_edit(nb: Notebook, path: str, old: str, new: str, replace_all: bool) -> _Change:
    old, new = _normalized(nb, old, new)
    if old == new:
        raise fs_error("invalid_arguments", "old_string and new_string must differ",
                       path=path)
    found = match_sources(nb, old)
    if not found.cells:
        pair = spanning_cells(nb, old)
        hint, details = "", {}
        if pair is not None:
            a, b = pair
            hint = (f" It runs across two cells ({a.handle} and {b.handle}): an edit "
                    "changes one cell's source; edit each cell separately, or use "
                    "notebook_edit.")
            details = {"cells": [a.handle, b.handle]}
        elif old in nb.text:
            hint = (" It is text of the file's JSON (keys, escapes or outputs), not of a "
                    "cell's source: copy the source as read shows it, or use notebook_edit.")
        raise fs_error("no_match", "old_string was not found in any cell's source." + hint,
                       path=path, details=details)
    if found.total > 1 and not replace_all:
        where = ", ".join(f"{c.handle} ({n})" for c, n in found.cells[:20])
        raise fs_error("ambiguous_match",
                       f"old_string occurs {found.total} times in the cells' sources "
                       f"(cells: {where}); it must be unique unless replace_all is true.",
                       path=path, details={"count": found.total,
                                           "cells": [c.handle for c, _ in found.cells]})
    splices = [set_source(nb, cell, cell.source.replace(old, new)) for cell, _ in found.cells]
    first = found.cells[0][0]
    handles = tuple(c.handle for c, _ in found.cells)
    return _Change(splices, "edited", first.handle, first.index + 1, first.cell_type,
                   len(nb.cells), first.source.replace(old, new), replacements=found.total,
                   changed=handles, anchors=handles)


def _encode(fs: PolicyFileSystem, path: str, nb: Notebook, splices: list[Splice],
            bom: bool) -> bytes:
    new_data = apply_splices(nb.text, splices).encode("utf-8")
    if bom:
        new_data = BOM + new_data
    if len(new_data) > fs.size_cap:
        raise fs_error("too_large", f"the notebook would be {len(new_data)} bytes, over the "
                       f"cap of {fs.size_cap}", path=path,
                       details={"size": len(new_data), "cap": fs.size_cap, "result": True})
    return new_data


# -- a change of the sources' text (apply_patch) ---------------------------------------------

# Between two cells' sources in the text a patch applies to: a line no diff can hold (a
# diff with a NUL is refused), so a hunk's context or removed lines never reach across it.
_CELL_BREAK = "\x00toolfs: next cell\x00\n"


def sources_text(nb: Notebook) -> str:
    """The cells' sources as one text, each as whole lines (a source without a final
    newline given one), one cell apart from the next by a line no diff can match."""
    return _CELL_BREAK.join(c.source if c.source == "" or c.source.endswith("\n")
                            else c.source + "\n" for c in nb.cells)


def patch_sources(fs: PolicyFileSystem, f: ObservedFile, nb: Notebook, bom: bool,
                  change: Callable[[str], str]) -> tuple[Commit, tuple[str, ...]]:
    """Commit through ``f`` what ``change`` (a patch applied to :func:`sources_text`)
    makes of the cells' sources: each changed cell's source set, every byte outside those
    sources as it was (``merged`` as :func:`edit`). ``invalid_arguments`` when it
    changes no source; the commit and the ids of the cells changed."""
    def plan(on: Notebook) -> _Change:
        return _sources_change(on, f.path, change)

    commit, done = _committed(fs, f, nb, bom, plan)
    return commit, done.changed


def patched_bytes(fs: PolicyFileSystem, path: str, nb: Notebook, bom: bool,
                  change: Callable[[str], str]) -> bytes:
    """The bytes :func:`patch_sources` would commit, for a caller that stores them
    elsewhere (a patch that also moves the notebook)."""
    return _encode(fs, path, nb, _sources_change(nb, path, change).splices, bom)


def _sources_change(nb: Notebook, path: str, change: Callable[[str], str]) -> _Change:
    try:
        new = change(sources_text(nb))
    except FsError as err:  # its quotes of the text name the boundary in words
        mark = _CELL_BREAK.rstrip("\n")
        shown = err.message.replace(repr(mark), "<the next cell>").replace(
            mark, "<the next cell>")
        if shown != err.message:
            shown += (" (In a notebook a diff applies to the cells' sources as read shows "
                      "them, and a hunk stays within one cell.)")
        err.message = shown
        err.args = (err.message,)
        raise
    parts = new.split(_CELL_BREAK)
    if len(parts) != len(nb.cells):  # unreachable while no diff holds a NUL
        raise fs_error("invalid_arguments", "the patch reaches across cells", path=path)
    splices: list[Splice] = []
    cells: list[tuple[Cell, str]] = []
    for cell, part in zip(nb.cells, parts, strict=True):
        if not cell.source.endswith("\n") and part.endswith("\n"):
            part = part[:-1]  # the newline sources_text gave it
        if part != cell.source:
            splices.append(set_source(nb, cell, part))
            cells.append((cell, part))
    if not cells:
        raise fs_error("invalid_arguments", "the patch changes no cell's source", path=path)
    handles = tuple(c.handle for c, _ in cells)
    first, source = cells[0]
    return _Change(splices, "edited", first.handle, first.index + 1, first.cell_type,
                   len(nb.cells), source, replacements=len(cells), changed=handles,
                   anchors=handles)


# -- notebook_edit --------------------------------------------------------------------------


def notebook_edit(fs: PolicyFileSystem, args: NotebookEditArgs) -> NotebookEditResult:
    """Replace, insert or delete one cell; see :data:`toolfs.schemas.DESCRIPTIONS`."""
    return notebook_edit_file(fs, args.file_path, args.cell_id, args.new_source,
                              args.cell_type, args.edit_mode)


def notebook_edit_file(fs: PolicyFileSystem, file_path: str, cell_id: str, new_source: str,
                       cell_type: CellType | None = None, edit_mode: str = "replace"
                       ) -> NotebookEditResult:
    """:func:`notebook_edit` with the arguments given one by one, already valid."""
    if not is_notebook_path(file_path):
        raise fs_error("invalid_arguments", "notebook_edit edits Jupyter notebooks (.ipynb); "
                       "use edit for other files", path=file_path)
    if edit_mode != "insert" and not cell_id:
        raise fs_error("invalid_arguments", f"cell_id is required to {edit_mode} a cell "
                       "(\"\" means the top only for insert)", path=file_path)
    if edit_mode != "delete":
        tools._check_text(new_source, file_path)
    with fs.open(file_path, "rb", intent="edit") as f:
        doc = decode(f.read(), f.path, wide=False)
        try:
            nb = parse(doc.text)
        except NotANotebook as exc:
            raise fs_error("invalid_arguments", f"{f.path} cannot be edited as cells: {exc}. "
                           "Use read and edit to fix it as text.", path=f.path) from None

        def plan(on: Notebook) -> _Change:
            return _cell_change(on, f.path, cell_id, new_source, cell_type, edit_mode)

        return _land(fs, f, nb, doc.bom, plan)


def _cell_change(nb: Notebook, path: str, cell_id: str, new_source: str,
                 cell_type: CellType | None, edit_mode: str) -> _Change:
    cell = nb.find(cell_id) if cell_id else None
    if cell_id and cell is None:
        raise _unknown_cell(nb, cell_id, path)
    anchors = (cell.handle,) if cell is not None else ()
    if edit_mode == "insert":
        kind: CellType = cell_type or "code"
        value, new_id = new_cell(nb, kind, new_source)
        index = 1 if cell is None else cell.index + 2
        return _Change([insert_cell(nb, cell, value)], "inserted", new_id or f"cell-{index}",
                       index, kind, len(nb.cells) + 1, new_source, anchors=anchors)
    assert cell is not None
    if edit_mode == "delete":
        return _Change([delete_cell(nb, cell)], "deleted", cell.handle, cell.index + 1,
                       cell.cell_type, len(nb.cells) - 1, "", anchors=anchors)
    if cell_type is not None and cell_type != cell.cell_type:
        splices = [replace_cell(nb, cell, retyped(nb, cell, cell_type, new_source))]
        cleared = cell.cell_type == "code" and bool(
            list(iter_outputs(cell)) or cell.value.get("execution_count") is not None)
    else:
        splices = [set_source(nb, cell, new_source)]
        cleared = cell.cell_type == "code"
        if cleared:
            splices += clear_outputs(cell)
    return _Change(splices, "replaced", cell.handle, cell.index + 1,
                   cell_type or cell.cell_type, len(nb.cells), new_source, cleared=cleared,
                   anchors=anchors)


def _unknown_cell(nb: Notebook, cell_id: str, path: str) -> FsError:
    """``not_found`` naming the ids nearest ``cell_id`` (by spelling), else the first."""
    import difflib  # only for this refusal

    handles = [c.handle for c in nb.cells]
    close = (difflib.get_close_matches(cell_id, handles, n=NEARBY_IDS, cutoff=0.5)
             if len(cell_id) <= 100 else [])
    shown = close or handles[:NEARBY_IDS]
    what = "closest ids" if close else "its cells are"
    listed = ", ".join(shown) if shown else "none: the notebook has no cells"
    return fs_error("not_found", f"no cell with id {cell_id[:100]!r} in {path} "
                    f"({len(handles)} cells; {what}: {listed}). Read the notebook to see "
                    "the cell ids.", path=path,
                    details={"operation": "notebook_edit", "cell_id": cell_id[:100],
                             "nearby": shown,
                             "total_cells": len(handles)})


# -- write ------------------------------------------------------------------------------------


def write(fs: PolicyFileSystem, args: WriteArgs) -> WriteResult:
    """``write``: a ``.ipynb`` must be a valid nbformat 4 notebook; it is stored as given."""
    return write_file(fs, args.file_path, args.content)


def write_file(fs: PolicyFileSystem, file_path: str, content: str) -> WriteResult:
    """:func:`write` with the arguments given one by one, already valid."""
    if is_notebook_path(file_path):
        try:
            validate_notebook_text(content)
        except FsError as err:
            err.path = file_path
            raise
    return tools.write_file(fs, file_path, content)
