"""Images and PDFs through ``read``: what a model can be shown of a binary file.

A file is recognised by its content (magic numbers), not its name. Images (PNG, JPEG,
GIF, WebP) are decoded and, where needed, oriented (EXIF), downscaled and re-encoded so
that they fit every major provider's per-image limits (:data:`MAX_EDGE`,
:data:`MAX_IMAGE_BYTES`); an image already within them is sent as it is stored. PDFs give
the text of a window of pages; a page without a text layer is rendered as an image.

Decoding needs the ``toolfs[media]`` extra (Pillow, pypdfium2). Without it, an image that
already fits is still shown (its header is parsed here, in pure Python); anything else is
``unsupported`` naming the extra.

Every step is bounded before it runs: an image's declared dimensions are read from its
header and refused past :data:`MAX_DECODE_PIXELS` before any pixel is decoded (JPEGs are
decoded at a reduced scale: libjpeg's DCT scaling); at most :data:`MAX_CONCURRENT_DECODES`
decodes run at a time in the process; a PDF is opened by PDFium (which is not
thread-safe: one lock serialises it), at most :data:`MAX_PDF_PAGES` pages are taken per
call, at most :data:`MAX_PAGE_CHARS` characters per page, and a page is rendered no
larger than an image may be shown.
"""

from __future__ import annotations

import io
import struct
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import re2

from toolfs.errors import FsError, fs_error
from toolfs.results import MediaPage, MediaResult, ToolImage
from toolfs.schemas import DEFAULT_PDF_PAGES
from toolfs.versions import FileVersion

__all__ = ["DEFAULT_PDF_PAGES", "MAX_DECODE_PIXELS", "MAX_EDGE", "MAX_IMAGE_BYTES",
           "MAX_PAGE_CHARS", "MAX_PDF_PAGES", "MEDIA_EXTRA", "MediaType", "read_media",
           "sniff"]

MAX_EDGE = 1568
"""Longest side, in pixels, of an image shown to a model. Anthropic recommends at most
1568 (larger images are scaled down on its side, and requests of more than 20 images
refuse sides over 2000); OpenAI's ``high`` detail fits 2048x2048; Gemini tiles up to
3072x3072. 1568 fits all three."""
MAX_IMAGE_BYTES = 3_750_000
"""Largest encoded image shown: Bedrock's limit per image (3.75 MB), whose base64 (5.0 MB)
also stays under Anthropic's 5 MB; OpenAI and Gemini allow more."""
MAX_DECODE_PIXELS = 36_000_000
"""Largest image decoded (after a JPEG's reduced-scale decode): 36 megapixels, an 8K
frame; at most 144 MB of pixels (RGBA). Larger ones are refused from their header."""
MAX_CONCURRENT_DECODES = 2
"""Decodes running at once in the process (each up to :data:`MAX_DECODE_PIXELS`)."""
MAX_PDF_PAGES = 100
"""Most pages one PDF read takes, whatever ``limit`` asks."""
MAX_PAGE_CHARS = 100_000
"""Characters of one page's text kept (the output budget cuts further)."""
MAX_PDF_INFLATED = 128 * 2**20
"""Most bytes a PDF's compressed streams may inflate to, all together, measured before
PDFium sees the file (PDFium inflates a stream whole: a 1 MB page content stream of
spaces becomes 1 GB in memory)."""
LZW_RATIO = 2730
"""Most an LZW or run-length stream can expand (12-bit codes, up to 4096 bytes each):
these filters are not measured, so a PDF that may use them is bounded by its size times
this ratio."""
MEDIA_EXTRA = "toolfs[media]"
SNIFF_BYTES = 16
"""Bytes of a file's start that tell its type. Each signature is at offset 0: a PDF
reader accepts junk before ``%PDF-``, but a text file quoting a PDF header (a test
fixture, these sources) must stay text."""

_OPERATION = "read_media"  # selects the errors' advice (toolfs.errors)
_JPEG_QUALITY = 85
_PAGE_JPEG_QUALITY = 80


@dataclass(frozen=True)
class MediaType:
    """What a file's first bytes say it is."""

    kind: Literal["image", "pdf"]
    format: str
    """``PNG``, ``JPEG``, ``GIF``, ``WebP`` or ``PDF``."""
    mime_type: str


_PNG = MediaType("image", "PNG", "image/png")
_JPEG = MediaType("image", "JPEG", "image/jpeg")
_GIF = MediaType("image", "GIF", "image/gif")
_WEBP = MediaType("image", "WebP", "image/webp")
_PDF = MediaType("pdf", "PDF", "application/pdf")


def sniff(head: bytes) -> MediaType | None:
    """The media type ``head`` (a file's first bytes) starts, or ``None`` for any other
    file (text, or binary that stays ``not_text``)."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return _PNG
    if head.startswith(b"\xff\xd8\xff"):
        return _JPEG
    if head.startswith((b"GIF87a", b"GIF89a")):
        return _GIF
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return _WEBP
    if head.startswith(b"%PDF-"):
        return _PDF
    return None


# -- errors -------------------------------------------------------------------------


def _unsupported(path: str, what: str) -> FsError:
    return fs_error("unsupported", f"{path}: {what} needs the {MEDIA_EXTRA} extra "
                    f"(pip install '{MEDIA_EXTRA}'), which is not installed", path=path,
                    details={"operation": _OPERATION, "extra": MEDIA_EXTRA})


def _unreadable(path: str, message: str, **details: Any) -> FsError:
    return fs_error("not_text", f"{path}: {message}", path=path,
                    details={"operation": _OPERATION, **details})


# -- optional libraries -------------------------------------------------------------


def _pillow() -> Any:
    """The ``PIL.Image`` module, or ``None`` without the extra."""
    try:
        from PIL import Image
    except ImportError:
        return None
    return Image


def _pdfium() -> Any:
    try:
        import pypdfium2
    except ImportError:
        return None
    return pypdfium2


_DECODES = threading.BoundedSemaphore(MAX_CONCURRENT_DECODES)
_PDFIUM_LOCK = threading.Lock()  # PDFium is not thread-safe


@contextmanager
def _decode_slot() -> Iterator[None]:
    with _DECODES:
        yield


# -- headers, in pure Python --------------------------------------------------------


@dataclass(frozen=True)
class _Header:
    """An image's facts read from its header, without decoding it."""

    width: int
    height: int
    plain: bool
    """True when the image can be sent as stored if its size fits: one frame, a colour
    model every provider takes, no EXIF rotation."""


def _header(data: bytes, media: MediaType) -> _Header | None:
    """The header facts of an image, or ``None`` if the header is malformed."""
    try:
        if media is _PNG:
            return _png_header(data)
        if media is _JPEG:
            return _jpeg_header(data)
        if media is _GIF:
            w, h = struct.unpack_from("<HH", data, 6)
            return _Header(w, h, plain=False)  # Gemini takes no GIF: always converted
        return _webp_header(data)
    except (struct.error, IndexError, ValueError):
        return None


def _png_header(data: bytes) -> _Header | None:
    if data[12:16] != b"IHDR":
        return None
    w, h = struct.unpack_from(">II", data, 16)
    # An animated PNG (acTL before the image data) shows its first frame to decoders that
    # know APNG and a default image to others: converted, to be sure of what is shown.
    idat = data.find(b"IDAT")
    actl = data.find(b"acTL", 0, idat if idat >= 0 else len(data))
    return _Header(w, h, plain=actl < 0)


# JPEG start-of-frame markers (baseline, extended, progressive, lossless, ...), not DHT
# (C4), JPG (C8) or DAC (CC).
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_header(data: bytes) -> _Header | None:
    """Walk the JPEG's marker segments up to its frame header; note an EXIF orientation."""
    i, n = 2, len(data)
    orientation = 1
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            i += 2
            continue
        (length,) = struct.unpack_from(">H", data, i + 2)
        if length < 2:
            return None
        if marker == 0xE1 and data[i + 4:i + 10] == b"Exif\x00\x00":
            orientation = _exif_orientation(data[i + 10:i + 2 + length])
        if marker in _SOF:
            precision, h, w, components = struct.unpack_from(">BHHB", data, i + 4)
            # 8-bit greyscale or YCbCr baseline/progressive: what every provider decodes.
            plain = (precision == 8 and components in (1, 3) and orientation == 1
                     and marker in (0xC0, 0xC1, 0xC2))
            return _Header(w, h, plain=plain)
        i += 2 + length
    return None


def _exif_orientation(tiff: bytes) -> int:
    """The Orientation tag (0x0112) of IFD0 in an EXIF TIFF block; 1 when absent."""
    if tiff[:2] == b"II":
        order = "<"
    elif tiff[:2] == b"MM":
        order = ">"
    else:
        return 1
    (ifd,) = struct.unpack_from(order + "I", tiff, 4)
    (count,) = struct.unpack_from(order + "H", tiff, ifd)
    for k in range(min(count, 1000)):
        tag, _type, _count, value = struct.unpack_from(order + "HHIH", tiff, ifd + 2 + 12 * k)
        if tag == 0x0112:
            return value if 1 <= value <= 8 else 1
    return 1


def _webp_header(data: bytes) -> _Header | None:
    chunk = data[12:16]
    if chunk == b"VP8 ":
        w, h = struct.unpack_from("<HH", data, 26)
        return _Header(w & 0x3FFF, h & 0x3FFF, plain=True)
    if chunk == b"VP8L":
        b = data[21:25]
        w = 1 + (((b[1] & 0x3F) << 8) | b[0])
        h = 1 + (((b[3] & 0xF) << 10) | (b[2] << 2) | ((b[1] & 0xC0) >> 6))
        return _Header(w, h, plain=True)
    if chunk == b"VP8X":
        flags = data[20]
        w = 1 + int.from_bytes(data[24:27], "little")
        h = 1 + int.from_bytes(data[27:30], "little")
        animated = bool(flags & 0x02)
        exif = bool(flags & 0x08)  # may rotate: decoded to be sure
        return _Header(w, h, plain=not (animated or exif))
    return None


# -- images -------------------------------------------------------------------------


def fit_size(width: int, height: int, max_edge: int = MAX_EDGE) -> tuple[int, int]:
    """``(width, height)`` scaled down, aspect kept, so that neither side exceeds
    ``max_edge`` (unchanged when they already fit)."""
    longest = max(width, height)
    if longest <= max_edge:
        return width, height
    scale = max_edge / longest
    return max(1, round(width * scale)), max(1, round(height * scale))


@dataclass(frozen=True)
class ShownImage:
    """An image as :func:`show_image` made it, with the source's facts."""

    image: ToolImage
    width: int
    """Source width as displayed (EXIF orientation applied)."""
    height: int
    format: str


def show_image(data: bytes, media: MediaType, path: str, *,
               keep_format: bool = False) -> ShownImage:
    """``data`` made fit to show; raises ``not_text`` (undecodable, too many pixels) or
    ``unsupported`` (it needs converting and the extra is missing). ``keep_format``: for
    a caller that labels the image by its file's type (Deep Agents, by extension): sent
    as stored whenever its size fits, else downscaled in its own format."""
    header = _header(data, media)
    if header is None or header.width < 1 or header.height < 1:
        raise _unreadable(path, f"the {media.format} image cannot be decoded (its header "
                          "is malformed)", format=media.format)
    w, h = header.width, header.height
    fits = max(w, h) <= MAX_EDGE and len(data) <= MAX_IMAGE_BYTES
    if fits and (header.plain or keep_format):
        return ShownImage(ToolImage(media.mime_type, data, w, h), w, h, media.format)
    image_module = _pillow()
    if image_module is None:
        why = "converting this image (its size or format is beyond what every provider " \
              "takes)"
        raise _unsupported(path, why)
    decode_scale = 8 if media is _JPEG else 1  # libjpeg decodes at 1/2, 1/4 or 1/8
    if w * h > MAX_DECODE_PIXELS * decode_scale ** 2:
        raise _too_many_pixels(path, w, h)
    with _decode_slot():
        return _convert(image_module, data, media, path, w, h, keep_format)


def _too_many_pixels(path: str, w: int, h: int) -> FsError:
    return _unreadable(path, f"the image declares {w}x{h} pixels ({w * h / 1e6:.0f} "
                       f"megapixels), over the {MAX_DECODE_PIXELS // 1_000_000}-megapixel "
                       "limit for decoding; it was not decoded",
                       width=w, height=h, max_pixels=MAX_DECODE_PIXELS)


# EXIF orientations that swap width and height.
_TRANSPOSED = frozenset({5, 6, 7, 8})


def _convert(image_module: Any, data: bytes, media: MediaType, path: str,
             w: int, h: int, keep_format: bool = False) -> ShownImage:
    from PIL import ImageOps

    try:
        im = image_module.open(io.BytesIO(data), formats=[media.format.upper()])
        if im.size != (w, h):  # the header this module read and Pillow's disagree
            w, h = im.size
        orientation = _orientation(im)
        shown_w, shown_h = (h, w) if orientation in _TRANSPOSED else (w, h)
        target = fit_size(shown_w, shown_h)
        if media is _JPEG:
            # Decode at the smallest DCT scale still at least the target size.
            want = (target[1], target[0]) if orientation in _TRANSPOSED else target
            im.draft(im.mode if im.mode in ("L", "RGB") else "RGB", want)
        if im.size[0] * im.size[1] > MAX_DECODE_PIXELS:
            raise _too_many_pixels(path, w, h)
        im.load()  # the first frame only (GIF, animated PNG and WebP)
        if orientation != 1:
            im = ImageOps.exif_transpose(im)
        im = _normalise_mode(im)
        if im.size != target:
            # Bicubic, as Pillow's thumbnail(): LANCZOS took twice as long for a 12 MP
            # photo, with no difference a model can see at this scale.
            im = im.resize(target, image_module.Resampling.BICUBIC, reducing_gap=2.0)
        tool_image = _encode(image_module, im, photo=media is _JPEG,
                             keep=media if keep_format else None)
    except FsError:
        raise
    except (OSError, ValueError, SyntaxError, struct.error, EOFError,
            image_module.DecompressionBombError) as exc:
        raise _unreadable(path, f"the {media.format} image cannot be decoded "
                          f"({type(exc).__name__}: {exc})", format=media.format) from exc
    return ShownImage(tool_image, shown_w, shown_h, media.format)


def _orientation(im: Any) -> int:
    try:
        value = im.getexif().get(0x0112, 1)
    except Exception:  # a malformed EXIF block: shown as stored
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def _normalise_mode(im: Any) -> Any:
    """``im`` as 8-bit L, RGB or RGBA (what PNG, JPEG and WebP encoders all take)."""
    mode = im.mode
    if mode in ("L", "RGB", "RGBA"):
        return im
    if mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        # 16-bit or wider greyscale: scaled to 8 bits, not clipped at 255.
        top = 65535 if mode.startswith("I;16") else max(1, im.getextrema()[1] or 1)
        return im.convert("F").point(lambda v: v * 255.0 / top).convert("L")
    has_alpha = mode in ("LA", "PA", "La", "RGBa") or "transparency" in im.info
    return im.convert("RGBA" if has_alpha else "RGB")


def _encode(image_module: Any, im: Any, *, photo: bool,
            keep: MediaType | None = None) -> ToolImage:
    """``im`` encoded within :data:`MAX_IMAGE_BYTES`: a photo as JPEG, anything else as
    PNG; too large, as JPEG (WebP when it has alpha), then smaller, a bounded number of
    times. ``keep``: always in that format, only smaller."""
    for attempt in range(6):
        if attempt:
            w, h = im.size
            im = im.resize(fit_size(w, h, max_edge=max(64, int(max(w, h) * 0.75))),
                           image_module.Resampling.LANCZOS)
        alpha = im.mode == "RGBA"
        if keep is not None:
            fmt, mime = keep.format.upper(), keep.mime_type
            if fmt == "JPEG" and alpha:
                im = im.convert("RGB")
            options: dict[str, Any] = {"quality": _JPEG_QUALITY} if fmt in ("JPEG", "WEBP") \
                else {}
        elif photo and not alpha and attempt == 0:
            fmt, mime, options = "JPEG", "image/jpeg", {"quality": _JPEG_QUALITY}
        elif attempt == 0:
            fmt, mime, options = "PNG", "image/png", {"compress_level": 6}
        elif alpha:
            fmt, mime, options = "WEBP", "image/webp", {"quality": _JPEG_QUALITY}
        else:
            fmt, mime, options = "JPEG", "image/jpeg", {"quality": _JPEG_QUALITY}
        out = io.BytesIO()
        im.save(out, fmt, **options)
        if out.tell() <= MAX_IMAGE_BYTES:
            return ToolImage(mime, out.getvalue(), im.size[0], im.size[1])
    raise AssertionError("unreachable: a 64-pixel image encodes in a few KB")


# -- PDFs ---------------------------------------------------------------------------


def read_pdf(data: bytes, path: str, offset: int, limit: int | None
             ) -> tuple[int, int, list[MediaPage]]:
    """``(pages, start, window)``: the page count and the window of pages from
    ``offset`` (1-based), at most ``limit`` (default :data:`DEFAULT_PDF_PAGES`, at most
    :data:`MAX_PDF_PAGES`); pages without text rendered as images."""
    pdfium = _pdfium()
    if pdfium is None:
        raise _unsupported(path, "reading a PDF")
    count = min(limit or DEFAULT_PDF_PAGES, MAX_PDF_PAGES)
    _check_inflation(data, path)
    with _PDFIUM_LOCK:
        try:
            doc = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as exc:
            raise _pdf_error(path, exc) from exc
        try:
            if pdfium.raw.FPDF_GetSecurityHandlerRevision(doc.raw) != -1:
                # Even one that opens without a password: its streams are encrypted, so
                # their inflated size could not be measured.
                raise _encrypted(path)
            total = len(doc)
            window = [_pdf_page(pdfium, doc, n, total, path)
                      for n in range(offset, min(total, offset + count - 1) + 1)]
        finally:
            doc.close()
    return total, offset, window


def _encrypted(path: str) -> FsError:
    return _unreadable(path, "the PDF is encrypted; encrypted PDFs are not read",
                       reason="encrypted")


def _pdf_error(path: str, exc: Exception) -> FsError:
    text = str(exc)
    if "password" in text.lower() or "security" in text.lower():
        return _unreadable(path, "the PDF is encrypted (a password is required to open "
                           "it); encrypted PDFs are not read", reason="encrypted")
    return _unreadable(path, f"the PDF cannot be read: it is damaged or not a PDF "
                       f"({text})", reason="unreadable")


# Filters whose expansion is not measured, and names written with #xx escapes (which
# could spell them, or /FlateDecode, unseen).
_UNMEASURED = re2.compile(rb"LZW|RunLength|/RL\b|/[A-Za-z0-9]*#[0-9A-Fa-f]{2}")
_CHUNK = 1 << 16
_OUT_CHUNK = 1 << 20


def inflated_size(data: bytes, limit: int = MAX_PDF_INFLATED) -> tuple[int, bool]:
    """What the zlib streams of ``data`` inflate to, all together (counting stops past
    ``limit``), and whether ``data`` or what they inflate to names a filter that is not
    measured. O(size + inflated size) time, O(chunk) memory: each stream is inflated a
    megabyte at a time and only counted."""
    total, pos, unmeasured = 0, 0, _UNMEASURED.search(data) is not None
    n = len(data)
    while total <= limit:
        i = data.find(b"stream", pos)
        if i < 0:
            break
        j = i + 6
        pos = j
        if data[i - 3:i] == b"end":
            continue
        if data[j:j + 2] == b"\r\n":
            j += 2
        elif data[j:j + 1] in (b"\n", b"\r"):
            j += 1
        else:
            continue
        # Only an object stream can hide names (a /Filter held by reference) in its
        # compressed bytes; its dictionary is plain text before the keyword (an escaped
        # /Type name there is itself caught in the raw bytes).
        opened = data.rfind(b"obj", max(0, i - 4096), i)
        names_inside = opened < 0 or b"ObjStm" in data[opened:i]
        inflater, k, tail = zlib.decompressobj(), j, b""
        try:
            while not inflater.eof and k < n and total <= limit:
                buf = data[k:k + _CHUNK]
                k += len(buf)
                while buf and total <= limit:
                    out = inflater.decompress(buf, _OUT_CHUNK)
                    total += len(out)
                    if names_inside and not unmeasured and (
                            _UNMEASURED.search(out) is not None
                            or _UNMEASURED.search(tail + out[:64]) is not None):
                        unmeasured = True
                    tail = out[-64:]
                    buf = inflater.unconsumed_tail
                    if inflater.eof:
                        break
        except zlib.error:
            continue  # not zlib data: another filter, or none
        pos = k - len(inflater.unused_data)
    return total, unmeasured


def _check_inflation(data: bytes, path: str) -> None:
    """Refuse a PDF whose streams would inflate past :data:`MAX_PDF_INFLATED`."""
    total, unmeasured = inflated_size(data)
    bound = (total + len(data)) * LZW_RATIO if unmeasured else total
    if bound > MAX_PDF_INFLATED:
        why = (f"its compressed streams inflate to more than {MAX_PDF_INFLATED // 2**20} MB"
               if total > MAX_PDF_INFLATED else
               "it uses LZW or run-length compression (or escaped filter names) whose "
               f"output could exceed {MAX_PDF_INFLATED // 2**20} MB")
        raise _unreadable(path, f"the PDF is not read: {why} (a decompression bomb, or "
                          "too large to read safely)", reason="too_much_data",
                          max_inflated=MAX_PDF_INFLATED)


def _pdf_page(pdfium: Any, doc: Any, number: int, total: int, path: str) -> MediaPage:
    try:
        page = doc[number - 1]
    except pdfium.PdfiumError as exc:  # one broken page: said on that page
        return MediaPage(number=number, text=f"[page {number} cannot be read: {exc}]")
    try:
        textpage = page.get_textpage()
        try:
            chars = textpage.count_chars()
            text = textpage.get_text_range(0, min(chars, MAX_PAGE_CHARS)) if chars > 0 else ""
        finally:
            textpage.close()
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        image = None
        # A page without text that draws something (a scan, a drawing) is shown as an
        # image; an empty page is not worth one.
        if not text.strip() and pdfium.raw.FPDFPage_CountObjects(page.raw) > 0:
            image = _render_page(page)
        return MediaPage(number=number, text=text, image=image)
    finally:
        page.close()


def _render_page(page: Any) -> ToolImage | None:
    """The page as an image no larger than :data:`MAX_EDGE` on its longest side;
    ``None`` without Pillow (pypdfium2 alone cannot encode)."""
    image_module = _pillow()
    if image_module is None:
        return None
    width, height = page.get_size()  # points, rotation applied
    longest = max(width, height, 1.0)
    # 150 dpi at most, and never more than an image may show: a page of absurd declared
    # size is rendered just as small.
    scale = min(MAX_EDGE / longest, 150 / 72)
    bitmap = page.render(scale=scale, grayscale=False)
    try:
        im = bitmap.to_pil()
    finally:
        bitmap.close()
    out = io.BytesIO()
    im.convert("RGB").save(out, "JPEG", quality=_PAGE_JPEG_QUALITY)
    return ToolImage("image/jpeg", out.getvalue(), im.size[0], im.size[1])


# -- the read -----------------------------------------------------------------------


def read_media(data: bytes, media: MediaType, *, path: str, version: FileVersion,
               size: int, offset: int | None, limit: int | None) -> MediaResult:
    """The :class:`MediaResult` of a whole file's ``data`` of type ``media``."""
    if media.kind == "image":
        shown = show_image(data, media, path)
        return MediaResult(path=path, version=version, size=size, kind="image",
                           mime_type=media.mime_type, pages=None, format=media.format,
                           width=shown.width, height=shown.height, image=shown.image)
    total, start, window = read_pdf(data, path, offset or 1, limit)
    return MediaResult(path=path, version=version, size=size, kind="pdf",
                       mime_type=media.mime_type, pages=total, format=media.format,
                       start_page=start, page_list=window,
                       partial=not (start == 1 and len(window) == total))
