"""Projection of canonical results and errors to what the model reads.

Everything the model gets -- :attr:`ToolOutput.text` and the structured content of
:meth:`ToolOutput.to_dict` -- is cut here to one character budget (``max_output_chars``,
default :data:`MAX_OUTPUT_CHARS`): a read shows whole lines only and ends, when cut, with
the offset to continue at; long lines, long paths, long messages and long lists are cut
with a visible marker. The structured content carries no more than the text shows.
The canonical values (``ws.read()``, ``ToolOutput.value``) are never cut.

This module holds :class:`ToolOutput` and the entry points that make one
(:func:`render_output`, :func:`structured_content`); the parts live below it, each one
concept: :mod:`toolfs.render.lines` (limits, cut markers, numbered lines),
:mod:`toolfs.render.views` (the text of each result and error) and
:mod:`toolfs.render.structured` (the JSON form within the budget). Their public names are
imported from here, as before, and so are the private parts that
:mod:`toolfs.render.media`, :mod:`toolfs.render.notebook` and the tests use (the
``from ... import _x as _x`` lines).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from toolfs.errors import FsError
from toolfs.escaping import escape_undecodable, escape_undecodable_data
from toolfs.render import notebook as notebook_render
from toolfs.render.lines import _FOOTER_ROOM as _FOOTER_ROOM
from toolfs.render.lines import _PREFIX_CACHE_LINES as _PREFIX_CACHE_LINES
from toolfs.render.lines import _WIDE_NUMBERS as _WIDE_NUMBERS
from toolfs.render.lines import (
    MAX_LINE_CHARS,
    MIN_OUTPUT_CHARS,
    check_output_budget,
    number_line,
)
from toolfs.render.lines import _clip as _clip
from toolfs.render.lines import _fit as _fit
from toolfs.render.lines import _has_run_over as _has_run_over
from toolfs.render.lines import _Limits as _Limits
from toolfs.render.lines import _numbered_lines as _numbered_lines
from toolfs.render.lines import _plural as _plural
from toolfs.render.media import media_view
from toolfs.render.notebook import notebook_read_view
from toolfs.render.structured import _discovery_view, _error_data, _fit_error_json, _fit_json
from toolfs.render.views import (
    _edit_view,
    _read_view,
    diff_budget,
    error_diff,
    render_edit,
    render_error,
    render_glob,
    render_grep,
    render_ls,
    render_patch,
    render_read,
    render_result,
    render_write,
)
from toolfs.results import (
    MAX_OUTPUT_CHARS,
    EditResult,
    GlobResult,
    GrepResult,
    ListResult,
    MediaResult,
    NotebookEditResult,
    NotebookReadResult,
    ReadResult,
    ToolImage,
    ToolResult,
)

__all__ = ["MAX_LINE_CHARS", "MAX_OUTPUT_CHARS", "MIN_OUTPUT_CHARS", "bound_text",
           "check_output_budget", "diff_budget", "error_diff", "number_line", "render_edit",
           "render_error", "render_glob", "render_grep", "render_ls",
           "render_output", "render_patch", "render_read", "render_result", "render_write",
           "structured_content"]


def render_output(outcome: ToolResult | FsError,
                  max_chars: int = MAX_OUTPUT_CHARS) -> ToolOutput:
    """The :class:`ToolOutput` of a result or an error, within ``max_chars``."""
    if isinstance(outcome, FsError):
        return ToolOutput(text=render_error(outcome, max_chars), value=None, error=outcome,
                          max_chars=max_chars)
    if isinstance(outcome, MediaResult):
        return render_media(outcome, max_chars)
    if isinstance(outcome, NotebookReadResult):
        return render_notebook_output(outcome, max_chars)
    if isinstance(outcome, ReadResult):
        # The lines the text shows are kept, so that to_dict() need not render it again.
        text, shown, cut = _read_view(outcome, max_chars)
        return ToolOutput(text=text, value=outcome, error=None, max_chars=max_chars,
                          _shown=_Shown(outcome, max_chars, shown, cut))
    return ToolOutput(text=render_result(outcome, max_chars), value=outcome, error=None,
                      max_chars=max_chars)


@dataclass(frozen=True)
class _Shown:
    """What a read's text shows, computed with that text (see :func:`render_output`)."""

    value: ReadResult
    max_chars: int
    lines: list[str]
    cut: bool


def bound_text(text: str, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    """``text`` as valid Unicode and within ``max_chars`` (a last resort: the renderers
    already keep their text within the budget)."""
    text = escape_undecodable(text)
    if len(text) <= max_chars:
        return text
    note = f"\n[Output truncated at {max_chars} characters.]"
    return text[:max_chars - len(note)] + note


def structured_content(output: ToolOutput) -> dict[str, Any]:
    """``output`` as JSON-safe data holding no more than its text shows: the lines a read
    shows (long ones cut as in the text, ``truncated`` when anything was cut), the
    snippet and line numbers an edit shows, an error's clipped message and details.
    Written as JSON it stays within the budget too: where JSON's escapes (up to six
    characters for a control character) would take a list of lines, paths or matches
    over it, the list is cut further (``truncated``)."""
    limits = _Limits(output.max_chars)
    if output.error is not None:
        data: dict[str, Any] = {"ok": False, "error": _error_data(output.error, limits)}
        data = escape_undecodable_data(data)
        _fit_error_json(data, output.max_chars)
        return data
    value = output.value
    assert value is not None
    if isinstance(value, MediaResult):
        return media_structured(output)
    view: ToolResult
    if isinstance(value, GlobResult | GrepResult | ListResult):
        view = _discovery_view(value, output.max_chars, limits)
        data = escape_undecodable_data({"ok": True, "result": view.model_dump(mode="json")})
        _fit_json(data, output.max_chars)
        return data
    if isinstance(value, NotebookReadResult | NotebookEditResult):
        part: NotebookReadResult | NotebookEditResult = (
            notebook_render.notebook_read_view(value, output.max_chars)[1]
            if isinstance(value, NotebookReadResult)
            else notebook_render.notebook_edit_view(value, output.max_chars)[1])
        data = escape_undecodable_data({"ok": True, "result": part.model_dump(mode="json")})
        return notebook_render.fit_json(data, output.max_chars)
    path = _clip(value.path, limits.path)
    if isinstance(value, ReadResult):
        known = output._shown
        if known is not None and known.value is value and known.max_chars == output.max_chars:
            shown, cut = known.lines, known.cut
        else:
            _, shown, cut = _read_view(value, output.max_chars)
        view = value.model_copy(update={
            "path": path, "lines": shown, "line_count": len(shown),
            "partial": value.partial or cut, "truncated": shown != value.lines})
    elif isinstance(value, EditResult):
        _, listed, snippet = _edit_view(value, output.max_chars)
        view = value.model_copy(update={"path": path, "lines": listed, "snippet": snippet})
    else:
        view = value.model_copy(update={"path": path})
    data = escape_undecodable_data({"ok": True, "result": view.model_dump(mode="json")})
    _fit_json(data, output.max_chars)
    return data


@dataclass(frozen=True)
class ToolOutput:
    """The outcome of :meth:`toolfs.Workspace.execute`: model text plus the canonical value
    or the error. ``execute`` never raises for tool errors.

    ``text`` and :meth:`to_dict` are what goes to the model: valid Unicode (undecodable
    names escaped visibly) and within ``max_chars`` characters. ``value`` is never cut."""

    text: str
    value: ToolResult | None
    error: FsError | None
    max_chars: int = MAX_OUTPUT_CHARS
    """The character budget of ``text`` and of the lines in :meth:`to_dict`."""
    images: tuple[ToolImage, ...] = ()
    """Images shown to the model next to ``text`` (a read of an image, a PDF's scanned
    pages); empty for text. Each adapter sends them in its provider's own form."""
    _shown: _Shown | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", bound_text(self.text, self.max_chars))

    @property
    def is_error(self) -> bool:
        return self.error is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe structured content: the value's fields or the error's, cut the way
        ``text`` is (see :func:`structured_content`)."""
        return structured_content(self)


def render_media(r: MediaResult, max_chars: int) -> ToolOutput:
    """The :class:`ToolOutput` of a media read."""
    text, images, _, _ = media_view(r, max_chars)
    return ToolOutput(text=text, value=r, error=None, max_chars=max_chars, images=images)


def render_notebook_output(r: NotebookReadResult, max_chars: int) -> ToolOutput:
    """The :class:`ToolOutput` of a notebook read: its text and the images it shows."""
    text, view = notebook_read_view(r, max_chars)
    return ToolOutput(text=text, value=r, error=None, max_chars=max_chars,
                      images=view.images)


def _image_facts(image: ToolImage | None) -> dict[str, Any] | None:
    if image is None:
        return None
    return {"mime_type": image.mime_type, "width": image.width, "height": image.height}


def media_structured(output: ToolOutput) -> dict[str, Any]:
    """The structured content of a media read: its facts, the shown pages' text, and for
    each image only its type and size (the bytes go as images, not JSON); within the
    budget once written as JSON."""
    r = output.value
    assert isinstance(r, MediaResult)
    _, _, shown, cut = media_view(r, output.max_chars)
    limits = _Limits(output.max_chars)
    result: dict[str, Any] = {
        "path": _clip(r.path, limits.path), "version": r.version.model_dump(mode="json"),
        "size": r.size, "kind": r.kind, "mime_type": r.mime_type, "pages": r.pages,
        "format": r.format, "width": r.width, "height": r.height,
        "image": _image_facts(r.image), "start_page": r.start_page,
        "page_list": [{"number": p.number, "text": p.text, "image": _image_facts(p.image)}
                      for p in shown],
        "partial": r.partial or cut or len(shown) < len(r.page_list),
        "truncated": cut or len(shown) < len(r.page_list),
    }
    data: dict[str, Any] = escape_undecodable_data({"ok": True, "result": result})
    result = data["result"]
    pages = result["page_list"]
    # JSON's escapes may take the shown text over the budget: drop pages from the end,
    # then halve the first page's text, until it fits (each step a measure).
    while len(json.dumps(data, ensure_ascii=False)) > output.max_chars:
        result["truncated"] = result["partial"] = True
        if len(pages) > 1:
            pages.pop()
        elif pages and pages[0]["text"]:
            pages[0]["text"] = pages[0]["text"][:len(pages[0]["text"]) // 2]
        else:
            result["path"] = result["path"][:len(result["path"]) // 2]
    return data
