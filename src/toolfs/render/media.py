"""The model's view of a :class:`~toolfs.results.MediaResult`: a text part that says what
is shown, and the images (:attr:`ToolOutput.images`).

A PDF's pages are shown in order under ``--- page N of M ---`` markers until the output
budget is spent; an image of a page counts against the budget as its tokens would
(:func:`image_cost`). The first page of the window is always shown (its text cut to the
budget if need be), so that ``offset`` always moves on.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from toolfs.render.lines import _FOOTER_ROOM, _clip, _Limits, _plural
from toolfs.results import ImageFacts, MediaPage, MediaResult, ToolImage
from toolfs.versions import FileVersion

__all__ = ["ImageFacts", "MediaPageView", "MediaView", "human_size", "image_cost",
           "media_view"]

CHARS_PER_TOKEN = 4
"""How the character budget converts to tokens (as ``MAX_OUTPUT_CHARS`` does)."""
PIXELS_PER_TOKEN = 750
"""Anthropic's documented estimate of an image's tokens (width x height / 750); OpenAI's
tiling and Gemini's per-tile count come out in the same range for a 1568-pixel image."""


class MediaPageView(BaseModel):
    """A PDF page in structured content."""

    model_config = ConfigDict(extra="forbid")

    number: int
    text: str
    image: ImageFacts | None


class MediaView(BaseModel):
    """The structured content's ``result`` of a media read (:func:`media_structured`):
    :class:`~toolfs.results.MediaResult` with each image's bytes left out, and
    ``truncated`` when the budget cut the pages or their text."""

    model_config = ConfigDict(extra="forbid")

    path: str
    version: FileVersion
    size: int
    kind: Literal["image", "pdf"]
    mime_type: str
    pages: int | None
    format: str
    width: int | None
    height: int | None
    image: ImageFacts | None
    start_page: int | None
    page_list: list[MediaPageView]
    partial: bool
    truncated: bool


def image_cost(image: ToolImage) -> int:
    """What one image counts against the character budget."""
    return -(-image.width * image.height // PIXELS_PER_TOKEN) * CHARS_PER_TOKEN


def human_size(size: int) -> str:
    """``512 bytes``, ``45.2 KB``, ``2.1 MB`` (decimal units)."""
    if size < 1000:
        return _plural(size, "byte")
    if size < 1_000_000:
        return f"{size / 1000:.1f} KB"
    return f"{size / 1_000_000:.1f} MB"


def _dims(w: int | None, h: int | None) -> str:
    return f"{w}x{h}"


def _image_line(r: MediaResult, path: str) -> str:
    assert r.image is not None
    return (f"Image {path} ({r.format}, {_dims(r.width, r.height)}, {human_size(r.size)}, "
            f"shown at {_dims(r.image.width, r.image.height)})")


def media_view(r: MediaResult, max_chars: int
               ) -> tuple[str, tuple[ToolImage, ...], list[MediaPage], bool]:
    """The text, the images and the PDF pages (as shown) of ``r``, and whether the
    budget cut it."""
    limits = _Limits(max_chars)
    path = _clip(r.path, limits.path)
    if r.kind == "image":
        assert r.image is not None
        return _image_line(r, path), (r.image,), [], False
    total = r.pages or 0
    head = f"PDF {path} ({_plural(total, 'page')}, {human_size(r.size)})"
    if total == 0:
        return f"{head}: it has no pages.", (), [], False
    start = r.start_page or 1
    if not r.page_list:
        use = "Use offset=1." if total == 1 else f"Use an offset between 1 and {total}."
        return (f"(Offset {start} is past the end of {path}: the PDF has "
                f"{_plural(total, 'page')}. {use})"), (), [], False
    room = max_chars - len(head) - _FOOTER_ROOM
    blocks: list[str] = []
    shown: list[MediaPage] = []
    images: list[ToolImage] = []
    cut = False
    for page in r.page_list:
        marker = f"--- page {page.number} of {total} ---"
        if page.image is not None:
            body = (f"[No text layer: the page is shown as an image, "
                    f"{_dims(page.image.width, page.image.height)}.]")
            cost = image_cost(page.image)
        elif page.text.strip():
            body = page.text.rstrip("\n")
            cost = 0
        else:
            body = "[No text on this page.]"
            cost = 0
        need = len(marker) + 1 + len(body) + 1 + cost
        if need > room:
            if shown:
                cut = True
                break
            # The first page is always shown: its text cut to what is left.
            keep = max(0, room - len(marker) - 80 - cost)
            if page.image is None and len(body) > keep:
                body = (f"{body[:keep]}\n[page truncated: {keep} of {len(body)} characters "
                        "shown]")
                page = page.model_copy(update={"text": page.text[:keep]})
                cut = True
        room -= need
        blocks.append(f"{marker}\n{body}")
        shown.append(page)
        if page.image is not None:
            images.append(page.image)
    end = shown[-1].number
    more = end < total
    span = f"page {start}" if start == end else f"pages {start}-{end}"
    then = f" Use offset={end + 1} to continue." if more else ""
    text = head + "\n" + "\n".join(blocks)
    if cut:
        text += (f"\n\n(Output truncated at {max_chars} characters: showing {span} of "
                 f"{total}.{then})")
    elif start != 1 or more:
        text += f"\n\n(Showing {span} of {total}.{then})"
    return text, tuple(images), shown, cut
