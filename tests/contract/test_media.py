"""``read`` of images and PDFs: shown to the model within every provider's limits, an
observation like any read on every backend, and bounded on hostile input."""

from __future__ import annotations

import io
import json
import random
import threading
import tracemalloc
from typing import Any

import pytest
from PIL import Image

import toolfs
from tests.backend_fixtures import Backend
from tests.media_samples import (
    bomb_pdf,
    encrypted_pdf,
    image_bytes,
    looping_pdf,
    many_objects_pdf,
    png_declaring,
    text_pdf,
)
from toolfs.formats import media
from toolfs.results import MediaResult, ReadResult, ToolImage

SMALL_PNG = image_bytes("RGB", (64, 48), "PNG")


WIDE_JPEG = image_bytes("RGB", (2000, 1000), "JPEG", quality=90)


SCANNED = text_pdf(["first page\nsecond line", None, "third page"])


def _decoded(image: ToolImage) -> Image.Image:
    """The image as a provider would decode it, checked against the limits."""
    assert image.mime_type in ("image/png", "image/jpeg", "image/webp")
    assert len(image.data) <= media.MAX_IMAGE_BYTES
    im = Image.open(io.BytesIO(image.data))
    im.load()
    assert im.size == (image.width, image.height)
    assert max(im.size) <= media.MAX_EDGE
    assert Image.MIME[im.format] == image.mime_type
    return im


def _error(out: toolfs.ToolOutput) -> toolfs.FsError:
    assert out.error is not None, out.text
    return out.error


def _read(data: bytes, name: str = "f", **options: Any) -> toolfs.ToolOutput:
    ws = toolfs.Workspace("memory://", root=f"/media-{id(data)}", **options)
    ws.fs.fs.pipe(f"/media-{id(data)}/{name}", data)
    return ws.execute("read", {"file_path": name})


def _cmyk_jpeg() -> bytes:
    out = io.BytesIO()
    Image.open(io.BytesIO(image_bytes("RGB", (80, 60)))).convert("CMYK").save(out, "JPEG")
    return out.getvalue()


def _rotated_jpeg() -> bytes:
    """300x200 stored, EXIF orientation 6 (rotate 90 clockwise to view): 200x300."""
    im = Image.open(io.BytesIO(image_bytes("RGB", (300, 200))))
    exif = Image.Exif()
    exif[0x0112] = 6
    out = io.BytesIO()
    im.save(out, "JPEG", exif=exif)
    return out.getvalue()


def _animated(fmt: str) -> bytes:
    frames = [Image.new("RGB", (40, 30), c) for c in ((255, 0, 0), (0, 255, 0), (0, 0, 255))]
    out = io.BytesIO()
    frames[0].save(out, fmt, save_all=True, append_images=frames[1:], duration=50, loop=0)
    return out.getvalue()


def _sixteen_bit_png(size: tuple[int, int] = (50, 40)) -> bytes:
    im = Image.new("I;16", size)
    im.putdata([i * 1000 % 65536 for i in range(size[0] * size[1])])
    out = io.BytesIO()
    im.save(out, "PNG")
    return out.getvalue()


# (file, format, displayed size, sent as stored?)
FORMATS: dict[str, tuple[bytes, str, tuple[int, int], bool]] = {
    "png-rgb": (SMALL_PNG, "PNG", (64, 48), True),
    "png-palette": (image_bytes("P", (64, 48)), "PNG", (64, 48), True),
    "png-alpha": (image_bytes("RGBA", (64, 48)), "PNG", (64, 48), True),
    "png-grey-alpha": (image_bytes("LA", (64, 48)), "PNG", (64, 48), True),
    "png-1bit": (image_bytes("1", (64, 48)), "PNG", (64, 48), True),
    "png-16bit": (_sixteen_bit_png(), "PNG", (50, 40), True),
    "png-16bit-large": (_sixteen_bit_png((2000, 100)), "PNG", (2000, 100), False),
    "png-animated": (_animated("PNG"), "PNG", (40, 30), False),
    "jpeg": (image_bytes("RGB", (64, 48), "JPEG"), "JPEG", (64, 48), True),
    "jpeg-progressive": (image_bytes("RGB", (64, 48), "JPEG", progressive=True), "JPEG",
                         (64, 48), True),
    "jpeg-grey": (image_bytes("L", (64, 48), "JPEG"), "JPEG", (64, 48), True),
    "jpeg-cmyk": (_cmyk_jpeg(), "JPEG", (80, 60), False),
    "jpeg-exif-rotated": (_rotated_jpeg(), "JPEG", (200, 300), False),
    "gif": (image_bytes("P", (64, 48), "GIF"), "GIF", (64, 48), False),
    "gif-animated": (_animated("GIF"), "GIF", (40, 30), False),
    "webp-lossy": (image_bytes("RGB", (64, 48), "WEBP"), "WebP", (64, 48), True),
    "webp-lossless-alpha": (image_bytes("RGBA", (64, 48), "WEBP", lossless=True), "WebP",
                            (64, 48), True),
    "webp-animated": (_animated("WEBP"), "WebP", (40, 30), False),
    "png-large": (image_bytes("RGB", (3000, 1000)), "PNG", (3000, 1000), False),
}


def _pages(n: int) -> bytes:
    return text_pdf([f"text of page {i}" for i in range(1, n + 1)])


@pytest.mark.parametrize("name", FORMATS)
def test_each_format_and_mode_is_shown_within_the_limits(name: str) -> None:
    data, fmt, (w, h), as_stored = FORMATS[name]
    out = _read(data, "pic.dat")  # told by content, not by the name
    assert isinstance(out.value, MediaResult), out.text
    assert (out.value.format, out.value.width, out.value.height) == (fmt, w, h)
    shown = _decoded(out.images[0])
    assert (out.images[0].data == data) is as_stored
    assert f"Image pic.dat ({fmt}, {w}x{h}, " in out.text
    assert out.text.endswith(f"shown at {shown.width}x{shown.height})")
    if name == "jpeg-exif-rotated":  # the top of the view is the stored image's left
        assert shown.size == (200, 300)
    if name.endswith("animated"):  # the first frame
        assert shown.convert("RGB").getpixel((5, 5)) == pytest.approx((255, 0, 0), abs=40)
    if name == "png-16bit":
        assert shown.mode in ("I;16", "I", "L")
    if name == "png-16bit-large":  # scaled to 8 bits, not clipped at 255
        assert shown.mode == "L" and 100 < shown.getextrema()[1] < 256 \
            and len(shown.getcolors(256) or []) > 50
    if name == "png-large":
        assert (shown.width, shown.height) == (1568, 523)


def test_an_image_too_large_in_bytes_is_reencoded_smaller() -> None:
    noise = Image.frombytes("RGB", (1500, 1500), random.Random(0).randbytes(1500 * 1500 * 3))
    out = io.BytesIO()
    noise.save(out, "PNG", compress_level=1)
    assert out.tell() > media.MAX_IMAGE_BYTES
    shown = _read(out.getvalue(), "noise.png")
    assert _decoded(shown.images[0]).format == "JPEG"
    assert shown.text.startswith("Image noise.png (PNG, 1500x1500,")


def test_without_the_extra_an_image_within_the_limits_passes_unchanged(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(media, "_pillow", lambda: None)
    monkeypatch.setattr(media, "_pdfium", lambda: None)
    for key in ("png-rgb", "png-alpha", "jpeg", "webp-lossy", "webp-lossless-alpha"):
        data = FORMATS[key][0]
        out = _read(data)
        assert out.images[0].data == data, key
    for key in ("gif", "jpeg-cmyk", "jpeg-exif-rotated", "png-large", "webp-animated"):
        err = _error(_read(FORMATS[key][0]))
        assert err.code == "unsupported" and "toolfs[media]" in err.message, key
        assert "toolfs[media]" in err.advice
    err = _error(_read(SCANNED))
    assert err.code == "unsupported" and "toolfs[media]" in err.message


def test_huge_declared_dimensions_are_refused_before_decoding(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A bomb's header is enough: no pixel is decoded (Pillow is never asked to open
    it), and the answer says why."""
    opened: list[Any] = []
    real_open = Image.open
    monkeypatch.setattr(Image, "open", lambda *a, **k: opened.append(a) or real_open(*a, **k))
    gif = bytearray(image_bytes("P", (8, 8), "GIF"))
    gif[6:10] = b"\xff\xff\xff\xff"  # logical screen 65535x65535
    jpeg = bytearray(image_bytes("RGB", (16, 16), "JPEG"))
    sof = jpeg.index(b"\xff\xc0")
    jpeg[sof + 5:sof + 9] = b"\xea\x60\xea\x60"  # 60000x60000: 56 MP even at 1/8 scale
    for data in (png_declaring(100_000, 100_000), png_declaring(7000, 7000), bytes(gif),
                 bytes(jpeg)):
        err = _error(_read(data))
        assert err.code == "not_text" and "megapixel" in err.message, err.message
        assert err.details["max_pixels"] == media.MAX_DECODE_PIXELS
    assert opened == []


def test_a_large_jpeg_is_decoded_at_a_reduced_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted work: the pixels decoded for a 4000x3000 JPEG shown at 1568 px are those
    of libjpeg's 1/2 scale (2000x1500), not the full 12 MP."""
    decoded: list[tuple[int, int]] = []
    real = media._normalise_mode
    monkeypatch.setattr(media, "_normalise_mode", lambda im: decoded.append(im.size)
                        or real(im))
    out = _read(image_bytes("RGB", (4000, 3000), "JPEG"))
    assert [(i.width, i.height) for i in out.images] == [(1568, 1176)]
    assert decoded == [(2000, 1500)]


def test_malformed_images_are_not_text() -> None:
    for data in (SMALL_PNG[:20], WIDE_JPEG[:600], b"GIF89a\x01", b"RIFF\x00\x00\x00\x00WEBPVP8 "):
        err = _error(_read(data))
        assert err.code == "not_text" and "cannot be decoded" in err.message, err.message


def test_pdf_offset_and_limit_count_pages() -> None:
    data = _pages(45)
    out = _read(data, "doc.pdf")
    assert out.text.startswith(f"PDF doc.pdf (45 pages, {len(data) / 1000:.1f} KB)\n"
                               "--- page 1 of 45 ---\ntext of page 1\n")
    assert out.text.endswith("--- page 20 of 45 ---\ntext of page 20\n\n"
                             "(Showing pages 1-20 of 45. Use offset=21 to continue.)")
    value = out.value
    assert isinstance(value, MediaResult) and value.pages == 45 and value.partial
    assert [p.number for p in value.page_list] == list(range(1, 21))
    ws = toolfs.Workspace("memory://", root="/pdf-window")
    ws.fs.fs.pipe("/pdf-window/doc.pdf", data)
    last = ws.execute("read", {"file_path": "doc.pdf", "offset": 41, "limit": 10})
    assert last.text.endswith("text of page 45\n\n(Showing pages 41-45 of 45.)")
    one = ws.execute("read", {"file_path": "doc.pdf", "offset": 7, "limit": 1})
    assert one.text.endswith("text of page 7\n\n(Showing page 7 of 45. Use offset=8 to "
                             "continue.)")
    past = ws.execute("read", {"file_path": "doc.pdf", "offset": 46})
    assert past.text == ("(Offset 46 is past the end of doc.pdf: the PDF has 45 pages. "
                         "Use an offset between 1 and 45.)")
    whole = ws.read("doc.pdf", limit=1000)
    assert isinstance(whole, MediaResult) and len(whole.page_list) == media.MAX_PDF_PAGES - 55
    assert not whole.partial


def test_pdf_pages_and_images_fit_the_output_budget() -> None:
    long_pages = [("word " * 100 + "\n") * 3 for _ in range(10)]
    ws = toolfs.Workspace("memory://", root="/pdf-budget", max_output_chars=5000)
    ws.fs.fs.pipe("/pdf-budget/long.pdf", text_pdf(long_pages))
    ws.fs.fs.pipe("/pdf-budget/scans.pdf", text_pdf([None] * 6))
    out = ws.execute("read", {"file_path": "long.pdf"})
    assert len(out.text) <= 5000
    assert "--- page 1 of 10 ---" in out.text and "--- page 5 of 10 ---" not in out.text
    assert "(Output truncated at 5000 characters: showing pages 1-" in out.text
    assert len(json.dumps(out.to_dict(), ensure_ascii=False)) <= 5000
    # One scanned page costs about its tokens (1212x1568 / 750 * 4 characters): more
    # than this budget, yet the first page of the window is always shown.
    scans = ws.execute("read", {"file_path": "scans.pdf", "offset": 3})
    assert len(scans.images) == 1
    assert scans.text.endswith("(Output truncated at 5000 characters: showing page 3 of "
                               "6. Use offset=4 to continue.)")
    roomy = ws.new_context(max_output_chars=100_000).execute(
        "read", {"file_path": "scans.pdf"})
    assert len(roomy.images) == 6 and not roomy.text.endswith(")")


def test_encrypted_and_broken_pdfs_say_which() -> None:
    cases = {
        "encrypted": encrypted_pdf("secret"),
        "permissions-only": encrypted_pdf(""),
        "truncated": _pages(3)[:300],
        "garbage": b"%PDF-1.7\n" + bytes(range(256)) * 20,
    }
    for name, data in cases.items():
        err = _error(_read(data, f"{name}.pdf"))
        assert err.code == "not_text", name
        if name in ("encrypted", "permissions-only"):
            assert "encrypted" in err.message and err.details["reason"] == "encrypted"
        else:
            assert "damaged or not a PDF" in err.message and err.details["reason"] == \
                "unreadable"


def test_hostile_pdfs_are_bounded() -> None:
    """A stream that inflates to 140 MB (a 140 KB file) is refused after counting at most
    the limit, a megabyte at a time: Python's peak stays a few MB. A page tree that
    loops, and 200,000 objects, are answered page by page."""
    bomb = bomb_pdf(140)
    tracemalloc.start()
    try:
        err = _error(_read(bomb, "bomb.pdf"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert err.code == "not_text" and err.details["reason"] == "too_much_data"
    assert peak < 3 * len(bomb) + 8 * 2**20, peak
    total, _ = media.inflated_size(bomb)
    assert media.MAX_PDF_INFLATED < total <= media.MAX_PDF_INFLATED + 2**20
    # Just under the limit is read (an honest, large stream).
    assert not _read(bomb_pdf(40), "fine.pdf").is_error

    loop = _read(looping_pdf(), "loop.pdf")
    assert "[page 2 cannot be read" in loop.text and loop.images == ()
    many = _read(many_objects_pdf(200_000), "many.pdf")
    assert many.text.startswith("PDF many.pdf (1 page,") and "[No text on this page.]" \
        in many.text


def test_unmeasured_filters_are_bounded_by_size() -> None:
    """LZW and run-length streams are not inflated by toolfs: a PDF naming them (even
    through #xx escapes) is read only if its size times their worst ratio stays within
    the limit."""
    small = text_pdf(["hi"]).replace(b"/BaseFont /Helvetica", b"/BaseFont /Helvetica "
                                     b"/Note /RunLengthDecode")
    assert not _read(small, "small.pdf").is_error
    padded = small.replace(b"%PDF-1.7\n", b"%PDF-1.7\n" + b"%" + b"x" * 60_000 + b"\n")
    err = _error(_read(padded, "padded.pdf"))
    assert "LZW or run-length" in err.message
    escaped = padded.replace(b"/RunLengthDecode", b"/Fl#61teDecode")
    assert "LZW or run-length" in _error(_read(escaped, "escaped.pdf")).message


def test_parallel_media_reads_agree() -> None:
    """PDFium is not thread-safe: toolfs serialises it; image decodes run at most
    MAX_CONCURRENT_DECODES at a time. Parallel calls all answer, each as a lone call."""
    ws = toolfs.Workspace("memory://", root="/parallel")
    ws.fs.fs.pipe("/parallel/r.pdf", SCANNED)
    ws.fs.fs.pipe("/parallel/w.jpg", WIDE_JPEG)
    alone = {n: ws.execute("read", {"file_path": n}) for n in ("r.pdf", "w.jpg")}
    results: list[tuple[str, toolfs.ToolOutput]] = []

    def work(name: str) -> None:
        for _ in range(3):
            results.append((name, ws.new_context().execute("read", {"file_path": name})))

    threads = [threading.Thread(target=work, args=(n,)) for n in ("r.pdf", "w.jpg") * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 24
    for name, out in results:
        assert out.text == alone[name].text
        assert out.images == alone[name].images


def test_text_reads_are_unchanged() -> None:
    """Only a signature at the very start makes a file media: text quoting one (a test
    fixture writing a PDF header) stays text."""
    for data in (b"hello\nworld\n", b'fixture = b"%PDF-1.7\\n"\n', b" GIF89a\n"):
        out = _read(data, "a.txt")
        assert isinstance(out.value, ReadResult) and out.images == (), out.text


class SyncMedia:
    """Images and PDFs read on every backend."""

    def test_images_and_pdfs_on_every_backend(self, backend: Backend) -> None:
        backend.put("shots/small.png", SMALL_PNG)
        backend.put("wide.jpg", WIDE_JPEG)
        backend.put("report.pdf", SCANNED)
        backend.put("blob.bin", b"\x00\x01\x02 not media")
        ws = backend.workspace()

        small = ws.read("shots/small.png")
        assert isinstance(small, MediaResult) and small.kind == "image"
        assert small.image is not None and small.image.data == SMALL_PNG  # sent as stored
        assert (small.width, small.height, small.size) == (64, 48, len(SMALL_PNG))

        out = ws.execute("read", {"file_path": "wide.jpg", "offset": 5, "limit": 1})
        assert out.text == (f"Image wide.jpg (JPEG, 2000x1000, "
                            f"{len(WIDE_JPEG) / 1000:.1f} KB, shown at 1568x784)")
        assert [(i.width, i.height) for i in out.images] == [(1568, 784)]
        assert _decoded(out.images[0]).format == "JPEG"
        assert out.to_dict()["result"]["image"] == {"mime_type": "image/jpeg", "width": 1568,
                                                    "height": 784}

        pdf = ws.execute("read", {"file_path": "report.pdf"})
        assert "--- page 1 of 3 ---\nfirst page\nsecond line" in pdf.text
        assert "--- page 2 of 3 ---\n[No text layer" in pdf.text
        assert "--- page 3 of 3 ---\nthird page" in pdf.text
        assert len(pdf.images) == 1 and _decoded(pdf.images[0]).format == "JPEG"

        # Other binary files stay not_text.
        assert _error(ws.execute("read", {"file_path": "blob.bin"})).code == "not_text"

        # An observation: the image may now be replaced; another context has not read it.
        other = ws.new_context()
        assert _error(other.execute("write", {"file_path": "wide.jpg", "content": "x"})
                      ).code == "not_observed"
        backend.put("shots/small.png", image_bytes("RGB", (10, 10), "PNG"))  # behind its back
        assert _error(ws.execute("write", {"file_path": "shots/small.png", "content": "x"})
                      ).code == "stale"
        assert not ws.execute("write", {"file_path": "wide.jpg", "content": "now text"}).is_error
        again = ws.read("shots/small.png")
        assert isinstance(again, MediaResult) and again.version != small.version

        # The deny rules, confinement and the size cap hold for media as for text.
        denied = backend.workspace(deny=["**/*.png"])
        assert _error(denied.execute("read", {"file_path": "shots/small.png"})).code == "denied"
        assert _error(ws.execute("read", {"file_path": "../x.png"})).code == "outside_root"
        capped = backend.workspace(size_cap=len(SCANNED) - 1)
        err = _error(capped.execute("read", {"file_path": "report.pdf"}))
        assert err.code == "too_large" and "images and PDFs" in err.message

        if hasattr(backend, "emulator"):  # object stores: one request for a small image
            backend.emulator.clear_requests()
            ws.new_context().read("shots/small.png")
            asked = [r for r in backend.emulator.requests() if not r.path.startswith("/_toolfs")]
            assert [r.method for r in asked] == ["GET"], asked
