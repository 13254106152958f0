"""Real image and PDF files made in the tests: Pillow encodes the images; PDFs are
written object by object (text pages with a font, scanned pages holding only a JPEG), so
that each hostile shape can be made exactly."""

from __future__ import annotations

import io
import struct
import zlib
from typing import Any

from PIL import Image


def image_bytes(mode: str = "RGB", size: tuple[int, int] = (64, 48), fmt: str = "PNG",
                **options: Any) -> bytes:
    """An image of ``mode`` and ``size`` with some structure (a gradient), encoded."""
    im = Image.linear_gradient("L").resize(size)
    if mode != "L":
        im = Image.merge("RGB", (im, im.transpose(Image.Transpose.FLIP_LEFT_RIGHT),
                                 Image.new("L", size, 90)))
        if mode == "RGBA":
            im.putalpha(Image.linear_gradient("L").resize(size))
        elif mode != "RGB":
            im = im.convert(mode)
    out = io.BytesIO()
    im.save(out, fmt, **options)
    return out.getvalue()


def png_declaring(width: int, height: int) -> bytes:
    """A PNG whose header declares ``width`` x ``height`` (8-bit grey) with one small
    compressed row of data: what a decompression bomb's header looks like."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body)))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(b"\x00" * 1024)) + chunk(b"IEND", b""))


def pdf(objects: list[bytes], *, trailer: bytes = b"") -> bytes:
    """A PDF of ``objects`` (object 1 the catalog), with a correct cross-reference
    table."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += (b"trailer\n<< /Size %d /Root 1 0 R %s>>\nstartxref\n%d\n%%%%EOF\n"
            % (len(objects) + 1, trailer, xref))
    return bytes(out)


def stream(data: bytes, extra: bytes = b"") -> bytes:
    return b"<< /Length %d %s>>\nstream\n" % (len(data), extra) + data + b"\nendstream"


def text_pdf(pages: list[str | None], *, compress: bool = True) -> bytes:
    """A PDF with one page per item: its text (Helvetica), or, for ``None``, a scanned
    page (a JPEG filling the page, no text layer)."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    scan = image_bytes("RGB", (200, 260), "JPEG", quality=70)
    objects.append(stream(scan, b"/Type /XObject /Subtype /Image /Width 200 /Height 260 "
                          b"/ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /DCTDecode "))
    image_number = len(objects)
    kids = []
    for text in pages:
        if text is None:
            content = b"q 612 0 0 792 0 0 cm /Im0 Do Q"
        else:
            lines = [t.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
                     for t in text.split("\n")]
            shown = b" T* ".join(b"(%s) Tj" % t.encode("latin-1") for t in lines)
            content = b"BT /F1 12 Tf 14 TL 72 712 Td " + shown + b" ET"
        if compress:
            objects.append(stream(zlib.compress(content), b"/Filter /FlateDecode "))
        else:
            objects.append(stream(content))
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents "
                       b"%d 0 R /Resources << /Font << /F1 3 0 R >> /XObject << /Im0 %d "
                       b"0 R >> >> >>" % (len(objects), image_number))
        kids.append(len(objects))
    objects[1] = (b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % k for k in kids)
                  + b"] /Count %d >>" % len(kids))
    return pdf(objects)


def bomb_pdf(inflated_mb: int) -> bytes:
    """A one-page PDF whose content stream (a word, then spaces) inflates to
    ``inflated_mb`` MB: about a thousandth of that on disk."""
    inflater = zlib.compressobj(9)
    parts = [inflater.compress(b"BT /F1 12 Tf 72 712 Td (Hi) Tj ET\n")]
    block = b" " * (1 << 20)
    parts += [inflater.compress(block) for _ in range(inflated_mb)]
    parts.append(inflater.flush())
    return pdf([b"<< /Type /Catalog /Pages 2 0 R >>",
                b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
                b"/Resources << /Font << /F1 5 0 R >> >> >>",
                stream(b"".join(parts), b"/Filter /FlateDecode "),
                b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"])


def looping_pdf() -> bytes:
    """A page tree whose node lists itself among its kids."""
    return pdf([b"<< /Type /Catalog /Pages 2 0 R >>",
                b"<< /Type /Pages /Kids [2 0 R 3 0 R] /Count 2 >>",
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>"])


def many_objects_pdf(count: int) -> bytes:
    """One page and ``count`` unused objects, each in the cross-reference table."""
    return pdf([b"<< /Type /Catalog /Pages 2 0 R >>",
                b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>",
                *[b"<< >>"] * count])


def encrypted_pdf(user_password: str) -> bytes:
    """A text PDF encrypted (AES-128) by pypdf with ``user_password`` ("" opens it
    without one: only its permissions are restricted)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(text_pdf(["secret"]))))
    writer.encrypt(user_password=user_password, owner_password="owner",
                   algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
