"""A notebook read shows its cells' image outputs as images (``ToolOutput.images``):
each fitted to the providers' limits as a read image is, counted against the output
budget as a PDF page's image is, at most ``MAX_NOTEBOOK_IMAGES`` decoded per read; an
SVG stays a named placeholder; structured content carries each image's type and size,
never its bytes."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import jsonschema
import nbformat
import pytest
from PIL import Image

import toolfs
from tests.backend_fixtures import Backend
from tests.media_samples import image_bytes
from toolfs.formats import media
from toolfs.render.media import image_cost
from toolfs.results import NotebookReadResult
from toolfs.tools.notebook import MAX_NOTEBOOK_IMAGES

PLOT = image_bytes("RGB", (64, 48), "PNG")


PHOTO = image_bytes("RGB", (3000, 1500), "JPEG")  # over MAX_EDGE: shown at 1568x784


SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect/></svg>'


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def notebook(cells: list[list[dict[str, Any]]]) -> bytes:
    """A notebook with one code cell per item of ``cells``, each holding those outputs."""
    nb = nbformat.v4.new_notebook()
    for n, outputs in enumerate(cells):
        cell = nbformat.v4.new_code_cell(f"plot({n})", execution_count=n + 1)
        cell.outputs = [nbformat.v4.new_output("display_data", data=d) for d in outputs]
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nbformat.writes(nb).encode("utf-8")


def _size(data: bytes) -> tuple[int, int]:
    return Image.open(io.BytesIO(data)).size  # type: ignore[no-any-return]


def test_without_pillow_an_output_within_the_limits_still_shows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(media, "_pillow", lambda: None)  # as without toolfs[media]
    ws = toolfs.Workspace("memory://nbimages-no-pillow")
    ws.fs.fs.pipe_file(ws.fs.jail.root + "/plots.ipynb", notebook([
        [{"image/png": _b64(PLOT)}], [{"image/jpeg": _b64(PHOTO)}],
        [{"image/png": "not base64!"}], [{"image/png": _b64(b"\x89PNG\r\n\x1a\n" + bytes(8))}]]))
    out = ws.execute("read", {"file_path": "plots.ipynb"})
    assert [i.data for i in out.images] == [PLOT]
    assert (f"[image cell-2-output-1.jpg: image/jpeg, {len(PHOTO) / 1000:.1f} KB; not "
            "shown: fitting it to the image limits needs the toolfs[media] extra]"
            in out.text)
    assert "cell-3-output-1.png: image/png, 7 bytes; not shown: its base64 data is " \
        "malformed]" in out.text
    assert "[image cell-4-output-1.png: image/png, 16 bytes; not shown: it cannot be " \
        "decoded]" in out.text


def test_a_thousand_image_outputs_decode_a_bounded_number(
        monkeypatch: pytest.MonkeyPatch) -> None:
    tiny = _b64(image_bytes("RGB", (32, 24), "PNG"))
    assert len(base64.b64decode(tiny)) == 118
    ws = toolfs.Workspace("memory://nbimages-many")
    ws.fs.fs.pipe_file(ws.fs.jail.root + "/many.ipynb",
                       notebook([[{"image/png": tiny}] * 10 for _ in range(100)]))
    decoded: list[str] = []
    show = media.show_image

    def counted(data: bytes, kind: media.MediaType, path: str, **kw: Any
                ) -> media.ShownImage:
        decoded.append(path)
        return show(data, kind, path, **kw)

    monkeypatch.setattr(media, "show_image", counted)
    out = ws.execute("read", {"file_path": "many.ipynb"})
    assert len(decoded) == MAX_NOTEBOOK_IMAGES == len(out.images)
    assert len(out.text) + sum(image_cost(i) for i in out.images) <= ws.max_output_chars
    assert "[image cell-2-output-10.png: image/png, 32x24, shown]" in out.text
    assert ("[image cell-3-output-1.png: image/png, 118 bytes; not shown: a read shows at "
            "most 20 images]") in out.text
    # The text is cut too (1,000 output lines): both say where to go on.
    last = int(out.text.rsplit("Use offset=", 1)[1].split(" ", 1)[0]) - 1
    assert out.text.endswith(
        f"({(last - 2) * 10} images not shown (a read shows at most 20 images): read from "
        "offset=3 with a smaller limit to see them.)"), out.text[-300:]
    later = ws.execute("read", {"file_path": "many.ipynb", "offset": 3, "limit": 2})
    assert len(later.images) == 20 and "not shown" not in later.text


def test_images_count_against_the_output_budget() -> None:
    plot = _b64(image_bytes("RGB", (640, 480), "PNG"))
    budget = 12_000  # each 640x480 image counts as 1,640 characters
    ws = toolfs.Workspace("memory://nbimages-budget", max_output_chars=budget)
    ws.fs.fs.pipe_file(ws.fs.jail.root + "/plots.ipynb",
                       notebook([[{"image/png": plot}] for _ in range(8)]))
    out = ws.execute("read", {"file_path": "plots.ipynb"})
    assert 0 < len(out.images) < 8
    assert len(out.text) + sum(image_cost(i) for i in out.images) <= budget
    first_left = len(out.images) + 1
    # Every cell's text is shown; the images past the budget are named and counted.
    assert "[cell 8]" in out.text and "Output truncated" not in out.text
    assert (f"[image cell-{first_left}-output-1.png: image/png, 640x480; not shown: over "
            "the output budget]") in out.text
    assert out.text.endswith(
        f"({8 - len(out.images)} image{'s' if len(out.images) < 7 else ''} not shown (over "
        f"the output budget): read from offset={first_left} with a smaller limit to see "
        f"{'them' if len(out.images) < 7 else 'it'}.)"), out.text[-300:]
    result = out.to_dict()["result"]
    assert result["truncated"] is True
    shown = [c["outputs"][0]["image"]["image"] is not None for c in result["cells"]]
    assert shown == [True] * len(out.images) + [False] * (8 - len(out.images))
    assert result["cells"][-1]["outputs"][0]["image"]["not_shown"] == "over the output budget"
    assert len(json.dumps(out.to_dict())) <= budget
    # From where the note says, the images left out are shown.
    rest = ws.execute("read", {"file_path": "plots.ipynb", "offset": first_left})
    assert len(rest.images) == 8 - len(out.images) and "not shown" not in rest.text


def test_every_adapter_projection_carries_the_notebook_images() -> None:
    """Each adapter sends ``ToolOutput.images`` in its provider's form (checked through
    the frameworks' runners in tests/test_media_projections.py): a notebook's go too."""
    from toolfs.integrations import anthropic, langchain, openai, openai_agents, pydantic_ai
    from toolfs.integrations.mcp_server import mcp_content

    ws = toolfs.Workspace("memory://nbimages-adapters")
    ws.fs.fs.pipe_file(ws.fs.jail.root + "/plots.ipynb",
                       notebook([[{"image/png": _b64(PLOT)}]]))
    out = ws.execute("read", {"file_path": "plots.ipynb"})
    b64 = _b64(PLOT)
    assert mcp_content(out)[1] == {"type": "image", "data": b64, "mimeType": "image/png"}
    blocks = anthropic.tool_result_content(out)
    assert isinstance(blocks, list) and blocks[1]["source"]["data"] == b64
    chat = langchain.message_content(out)
    assert isinstance(chat, list) and chat[1]["base64"] == b64
    item = openai.function_call_output({"type": "function_call", "call_id": "c1"}, out)
    assert item["output"][1]["image_url"] == f"data:image/png;base64,{b64}"
    parts = openai_agents.tool_output(out)
    assert isinstance(parts, list) and parts[1].image_url == f"data:image/png;base64,{b64}"
    ret = pydantic_ai.tool_return(out)
    assert not isinstance(ret, str) and ret.content is not None
    assert [c.data for c in ret.content if not isinstance(c, str)] == [PLOT]


@pytest.mark.anyio
async def test_mcp_stdio_sends_a_notebook_image_as_image_content(tmp_path: Any) -> None:
    from mcp import Client

    from tests.integrations.test_mcp import _stdio
    from toolfs.integrations.mcp_server import output_schema

    (tmp_path / "plots.ipynb").write_bytes(notebook([[{"image/png": _b64(PLOT)}]]))
    async with Client(_stdio(str(tmp_path))) as client:
        result = await client.call_tool("read", {"file_path": "plots.ipynb"})
    assert [c.type for c in result.content] == ["text", "image"]
    assert "[image cell-1-output-1.png: image/png, 64x48, shown]" in result.content[0].text
    assert result.content[1].mime_type == "image/png"
    assert base64.b64decode(result.content[1].data) == PLOT
    jsonschema.validate(result.structured_content, output_schema("read"))


@pytest.mark.parametrize("sync_backend", ["memory", "local", "s3"], indirect=True)
def test_image_outputs_are_shown_fitted_and_svg_stays_named(sync_backend: Backend) -> None:
    sync_backend.put("nb/plots.ipynb", notebook([
        [{"image/png": _b64(PLOT), "text/plain": "<Figure size 64x48>"}],
        [{"image/jpeg": _b64(PHOTO)}],
        [{"image/svg+xml": SVG}],
    ]))
    ws = sync_backend.workspace()
    out = ws.execute("read", {"file_path": "nb/plots.ipynb"})
    assert isinstance(out.value, NotebookReadResult), out.text
    # The small PNG goes as stored; the large JPEG is downscaled within the limits.
    assert [(i.mime_type, i.width, i.height) for i in out.images] == [
        ("image/png", 64, 48), ("image/jpeg", 1568, 784)]
    assert out.images[0].data == PLOT
    assert _size(out.images[1].data) == (1568, 784)
    assert len(out.images[1].data) <= media.MAX_IMAGE_BYTES
    assert ("[output 1: display_data image/png] [image cell-1-output-1.png: image/png, "
            "64x48, shown]") in out.text
    assert ("[image cell-2-output-1.jpg: image/jpeg, 3000x1500, shown at 1568x784]"
            in out.text)
    assert (f"[image cell-3-output-1.svg: image/svg+xml, {len(SVG)} bytes; not shown: an "
            "SVG is not a raster image]") in out.text
    assert "not shown (" not in out.text  # nothing left out: no note
    # Structured content: each image's type and size, never its bytes.
    data = out.to_dict()
    dumped = json.dumps(data)
    assert _b64(PLOT)[:40] not in dumped and _b64(out.images[1].data)[:40] not in dumped
    images = [c["outputs"][0]["image"] for c in data["result"]["cells"]]
    assert images[0]["image"] == {"mime_type": "image/png", "width": 64, "height": 48}
    assert (images[1]["width"], images[1]["height"]) == (3000, 1500)
    assert images[1]["image"] == {"mime_type": "image/jpeg", "width": 1568, "height": 784}
    assert images[2]["image"] is None and images[2]["not_shown"] == (
        "an SVG is not a raster image")
    # The Python value holds the fitted images too.
    r = ws.read("nb/plots.ipynb")
    assert isinstance(r, NotebookReadResult) and r.images == out.images
