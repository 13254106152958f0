"""Canonical results: the facts each tool produced, never an echo of its arguments.

The model text is a projection of these (see :mod:`toolfs.render`); token-facing
truncation lives only there.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_serializer

from toolfs.versions import FileVersion


class _Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LineCut(BaseModel):
    """The full size of a line that a result holds only a prefix of."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    chars: int
    """Characters in the whole line (line terminator excluded)."""
    bytes: int
    """UTF-8 bytes of the whole line (line terminator and a BOM excluded)."""


class ReadResult(_Result):
    """What ``read`` returned."""

    path: str
    """Display path, relative to the workspace root."""
    version: FileVersion
    """Version of exactly the bytes these lines came from."""
    lines: list[str]
    """The returned lines, complete (without line terminators)."""
    start_line: int
    """1-based number of ``lines[0]``."""
    line_count: int
    """Number of returned lines."""
    total_lines: int | None
    """Lines in the file; ``None`` when a windowed read of a file over the whole-file cap
    stopped before the end (the count would cost reading the whole file)."""
    size: int
    """Size of the file in bytes."""
    partial: bool
    """True unless every line of the file was returned."""
    truncated: bool = False
    """Only in the model's view (:meth:`ToolOutput.to_dict`): ``lines`` holds what the
    model text shows, which is less than was read -- the output budget dropped lines from
    the end (continue at ``start_line + line_count``) or a long line was cut (its text
    ends with the ``[line truncated: ...]`` marker). Never set on a value from ``read``."""
    cut_lines: dict[int, LineCut] | None = None
    """Lines whose canonical value in ``lines`` is only a prefix, by 1-based line number,
    with the whole line's length; ``None`` when every returned line is whole. Only a
    windowed read of a file over the whole-file cap cuts lines (it keeps the first
    ``toolfs.tools.STREAM_LINE_CHARS`` characters of each, so memory stays bounded
    whatever the line length); the whole line was still validated as text."""

    def __repr_args__(self) -> Any:
        # cut_lines is shown only when a line was cut (reprs stay as they were otherwise).
        return [(k, v) for k, v in super().__repr_args__()
                if not (k == "cut_lines" and v is None)]

    @property
    def end_line(self) -> int:
        """Number of the last returned line (``start_line - 1`` when none)."""
        return self.start_line + self.line_count - 1


class _MaybeMerged(_Result):
    """A change's result: ``merged`` and ``merged_lines`` are shown only when merged."""

    def __repr_args__(self) -> Any:
        merged = getattr(self, "merged", False)
        return [(k, v) for k, v in super().__repr_args__()
                if merged or k not in ("merged", "merged_lines")]


class WriteResult(_MaybeMerged):
    """What ``write`` did."""

    path: str
    action: Literal["created", "updated"]
    version: FileVersion
    size: int
    """Bytes written."""
    merged: bool = False
    """The file had changed since this context read it, and the content was merged with
    that change (``Policy(on_stale="merge")``): three-way, by lines."""
    merged_lines: list[tuple[int, int]] | None = None
    """When ``merged``: the lines of the file now that hold the other writer's change,
    as 1-based ``(first, last)`` ranges (``first == last + 1``: lines removed there)."""


class EditResult(_MaybeMerged):
    """What ``edit`` did."""

    path: str
    replacements: int
    replace_all: bool
    version: FileVersion
    lines: list[int]
    """Line of each replaced span in the file before the edit."""
    snippet: list[str]
    """A few lines of the new file around the first replacement."""
    snippet_start: int
    """1-based line number of ``snippet[0]`` in the new file."""
    merged: bool = False
    """The file had changed since this context read it, and the edit was applied to the
    current text: the other change left the lines it matched untouched
    (``Policy(on_stale="merge")``). ``lines`` and the snippet are then of that text."""
    merged_lines: list[tuple[int, int]] | None = None
    """When ``merged``: the lines of the new file that hold the other writer's change,
    as 1-based ``(first, last)`` ranges (``first == last + 1``: lines removed there)."""


class GlobResult(_Result):
    """What ``glob`` found: files whose path matches, newest first (ties by path)."""

    paths: list[str]
    """Display paths, relative to the workspace root."""
    truncated: bool
    """True when more files matched than the result holds (the workspace's glob cap)."""


class GrepMatch(_Result):
    """One line of a ``grep`` result in ``content`` mode."""

    path: str
    line: int
    """1-based line number."""
    text: str
    """The line, without its terminator."""
    context: bool
    """True for a context line (``context`` > 0), False for a matching line."""
    chars: int | None = None
    """Characters in the whole line when ``text`` holds only its first
    ``toolfs.tools.search.GREP_LINE_CHARS``; ``None`` when ``text`` is the whole line."""


class GrepResult(_Result):
    """What ``grep`` found, in the shape of its ``output_mode``."""

    mode: Literal["files_with_matches", "content", "count"]
    files: list[str]
    """Files with at least one match (every mode), sorted by path."""
    matches: list[GrepMatch]
    """Matching and context lines (``content`` mode only), by path then line."""
    counts: dict[str, int]
    """Matching lines per file (``count`` mode only)."""
    truncated: bool
    """True when ``head_limit`` or a cap cut the result."""
    files_searched: int
    """Text files actually searched (skipped files not counted). With ``skipped_unknown``
    (ripgrep's engine): the files ripgrep searched, binary files it gave up on included."""
    skipped: dict[str, int] = {}
    """Files left out, by reason: ``too_large`` (over the size cap, never fetched),
    ``not_text`` (NUL bytes or invalid UTF-8), ``unreadable`` (vanished or failed while
    being read). Hidden, ignored and denied files are not searched and not counted."""
    ignore_rules_not_applied: int = 0
    """``.gitignore`` wildcard rules beyond the limit of one file
    (:data:`toolfs.schemas.MAX_IGNORE_PATTERNS`), not applied: files only they would
    ignore were searched."""
    skipped_unknown: bool = False
    """True when the engine did not report the files it skipped (ripgrep, local grep's
    engine where ``rg`` is available, does not count the files it leaves out as binary,
    over the size cap or unreadable): ``skipped`` is then empty, which says nothing of
    how many were skipped. See docs/contract.md, "grep engines"."""


class ListEntry(_Result):
    """One child of a directory listed by ``ls``."""

    name: str
    kind: Literal["file", "dir"]
    size: int | None
    """Bytes, for files; ``None`` for directories."""


class ListResult(_Result):
    """What ``ls`` listed: the immediate children of one directory, sorted by name."""

    path: str
    """Display path of the directory (``.`` for the root)."""
    entries: list[ListEntry]
    truncated: bool
    """True when the directory has more entries than the result holds (the ls cap)."""


class PatchResult(_Result):
    """What one ``apply_patch`` operation did (:mod:`toolfs.integrations.openai`)."""

    path: str
    """Display path of the file the operation named."""
    action: Literal["created", "updated", "deleted"]
    version: FileVersion | None
    """Version of the bytes stored (``None`` after a delete)."""
    size: int | None
    """Bytes stored (``None`` after a delete)."""
    moved_to: str | None = None
    """Where an update moved the file (``version`` and ``size`` are those of that file)."""
    hunks: int = 0
    """Hunks of the diff applied (an update)."""
    added: int = 0
    """Lines added."""
    removed: int = 0
    """Lines removed."""


@dataclass(frozen=True)
class ToolImage:
    """One image a tool shows the model: encoded bytes ready to send (PNG, JPEG or WebP,
    within every major provider's per-image limits; see docs/contract.md)."""

    mime_type: str
    """``image/png``, ``image/jpeg`` or ``image/webp``."""
    data: bytes
    """The encoded image."""
    width: int
    height: int

    def base64(self) -> str:
        """``data`` in base64 (what most provider APIs take)."""
        return base64.b64encode(self.data).decode("ascii")

    def data_url(self) -> str:
        """``data:<mime>;base64,...`` (OpenAI's ``image_url`` / ``input_image``)."""
        return f"data:{self.mime_type};base64,{self.base64()}"

    def __repr__(self) -> str:  # never the bytes
        return (f"ToolImage(mime_type={self.mime_type!r}, data=<{len(self.data)} bytes>, "
                f"width={self.width}, height={self.height})")


class MediaPage(_Result):
    """One page of a PDF as ``read`` returned it."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    number: int
    """1-based page number."""
    text: str
    """The page's text layer (empty when it has none)."""
    image: ToolImage | None = None
    """The page rendered, when it has no text layer (a scan); ``None`` otherwise, or when
    no renderer is installed (``toolfs[media]``)."""


class MediaResult(_Result):
    """What ``read`` returned for an image or a PDF (text files give a
    :class:`ReadResult`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    path: str
    """Display path, relative to the workspace root."""
    version: FileVersion
    """Version of exactly the bytes shown."""
    size: int
    """Size of the file in bytes."""
    kind: Literal["image", "pdf"]
    mime_type: str
    """The file's own type, told from its content (``image/png``, ``application/pdf``)."""
    pages: int | None
    """Pages in the PDF; ``None`` for an image."""
    format: str
    """Short name of the file's format: ``PNG``, ``JPEG``, ``GIF``, ``WebP``, ``PDF``."""
    width: int | None = None
    """An image's width in pixels as stored (before EXIF orientation); ``None`` for a PDF."""
    height: int | None = None
    image: ToolImage | None = None
    """An image as shown to the model (downscaled, oriented, re-encoded where needed)."""
    start_page: int | None = None
    """A PDF's first returned page (1-based)."""
    page_list: list[MediaPage] = []
    """A PDF's returned pages, in order from ``start_page``."""
    partial: bool = False
    """True unless every page of the PDF was returned."""

    @property
    def images(self) -> tuple[ToolImage, ...]:
        """Every image this result holds: the image, or the rendered pages."""
        if self.image is not None:
            return (self.image,)
        return tuple(p.image for p in self.page_list if p.image is not None)



class _NotebookResult(_Result):
    # Built on first use (a notebook read or cell edit): an import of toolfs, e.g. every
    # short-lived process of a coding agent, does not pay for these models.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class ImageFacts(BaseModel):
    """An image in structured content: its type and size (the bytes go as an image)."""

    model_config = ConfigDict(extra="forbid")

    mime_type: str
    width: int
    height: int


class NotebookImage(_NotebookResult):
    """An image output of a notebook cell: named, and the image as shown to the model
    (PNG, JPEG, GIF and WebP outputs, fitted as a read image is; see docs/contract.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True,
                              arbitrary_types_allowed=True)

    name: str
    """``cell-<index>-output-<n>.<ext>``: unique in the notebook's view."""
    mime_type: str
    """The output's own type (``image/png``, ``image/svg+xml`` ...)."""
    size: int
    """Bytes of the image (decoded from the notebook's base64)."""
    width: int | None = None
    """Width in pixels as stored (display orientation); ``None`` when not decoded."""
    height: int | None = None
    image: ToolImage | None = None
    """The image as shown to the model (downscaled or re-encoded where needed); ``None``
    when it is not shown (:attr:`not_shown` says why). Serialized as its type and size
    only: the bytes go as an image (``ToolOutput.images``), never as JSON."""
    not_shown: str | None = None
    """Why the image is not shown (an SVG, the output budget, undecodable ...)."""

    @field_serializer("image")
    def _image_facts(self, image: ToolImage | None) -> ImageFacts | None:
        if image is None:
            return None
        return ImageFacts(mime_type=image.mime_type, width=image.width, height=image.height)


class NotebookOutput(_NotebookResult):
    """One output of a code cell as a notebook read shows it."""

    output_type: str
    """``stream``, ``execute_result``, ``display_data``, ``error`` (or another)."""
    label: str
    """What it is: ``stdout``, ``stderr``, ``text/plain``, ``ValueError`` ..."""
    lines: list[str]
    """Its first lines of text (an error: ``ename: evalue``)."""
    more_lines: int = 0
    """Lines of its text not in ``lines`` (only the first few of each are kept)."""
    image: NotebookImage | None = None


class NotebookCell(_NotebookResult):
    """One cell as a notebook read shows it."""

    index: int
    """1-based position in the notebook."""
    cell_id: str
    """The id to give ``notebook_edit``: the cell's id, or ``cell-<index>`` for a cell
    without one (nbformat before 4.5)."""
    cell_type: str
    source: list[str]
    """The source's lines, without terminators."""
    execution_count: int | None = None
    outputs: list[NotebookOutput] = []


class NotebookReadResult(_NotebookResult):
    """What ``read`` returned for a Jupyter notebook: cells, not JSON."""

    path: str
    version: FileVersion
    """Version of exactly the bytes these cells came from."""
    cells: list[NotebookCell]
    start_cell: int
    """1-based index of ``cells[0]`` (the read's ``offset``)."""
    cell_count: int
    total_cells: int
    size: int
    partial: bool
    """True unless every cell was returned."""
    language: str | None = None
    """The kernel's language, from the notebook's metadata."""
    truncated: bool = False
    """Only in the model's view: the output budget cut cells, lines or images."""

    @property
    def images(self) -> tuple[ToolImage, ...]:
        """The image outputs of these cells as shown to the model, in order."""
        return tuple(o.image.image for c in self.cells for o in c.outputs
                     if o.image is not None and o.image.image is not None)


class NotebookEditResult(_NotebookResult):
    """What ``notebook_edit`` (or ``edit`` on a notebook) did to one cell."""

    path: str
    action: Literal["edited", "replaced", "inserted", "deleted"]
    version: FileVersion
    cell_id: str
    """The cell changed, inserted or deleted (the first one for ``replace_all``)."""
    index: int
    """Its 1-based position (before a delete, after an insert)."""
    cell_type: str
    total_cells: int
    """Cells in the notebook now."""
    replacements: int = 0
    """Occurrences replaced (``edit``)."""
    cells_changed: list[str] = []
    """Every cell an ``edit`` with ``replace_all`` changed."""
    outputs_cleared: bool = False
    """A replaced code cell's outputs and execution count were cleared."""
    source: list[str] = []
    """The cell's new source lines (empty after a delete)."""
    merged: bool = False
    """The notebook had changed since it was read, in other cells, and this change was
    made again on its current version (``Policy(on_stale="merge")``)."""


ToolResult = (ReadResult | WriteResult | EditResult | GlobResult | GrepResult
              | ListResult | PatchResult | MediaResult | NotebookReadResult
              | NotebookEditResult)

MAX_OUTPUT_CHARS = 100_000
"""Default character budget of what one tool call sends the model (about 25k tokens)."""
