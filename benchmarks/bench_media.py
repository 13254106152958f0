"""Media reads: a 12 MP JPEG and a 20-page window of a 300-page PDF, time and peak memory,
against the plain library calls a caller without toolfs would make; and the two PDF
libraries (pypdf, pypdfium2) on the same real PDF.

* JPEG: ``ws.read("photo.jpg")`` (decoded at libjpeg's reduced scale, downscaled to
  1568 px, re-encoded) against Pillow's plain ``Image.open(...).load()`` + ``thumbnail``
  (a full-size decode).
* PDF: ``ws.read("book.pdf", offset=141, limit=20)`` against pypdfium2's text of the same
  20 pages, and pypdf's.
* Libraries: opening the PDF and extracting the text of every page, pypdf vs pypdfium2.

The PDF is a real one: a TeX manual found on this machine
(``/usr/share/doc/libtasn1-doc/libtasn1.pdf``, 36 pages), its pages repeated to 300 with
pypdfium2; without it, a generated text PDF (say so in the output).

Time: the median wall time and the median CPU time of the process (the libraries run on
the calling thread, so CPU time is the work done, and stays meaningful on a shared,
loaded machine where wall time is not); ratios are of CPU time.

Peak memory: each case runs in a fresh process; "RSS" is the growth of the peak resident
set (``VmHWM``, reset just before the call through ``/proc/self/clear_refs``), which sees
Pillow's and PDFium's own allocations; "Python" is tracemalloc's peak (Python objects
only), in a separate run so tracing does not slow the timed one.

Usage: ``python benchmarks/bench_media.py [--tiny] [--rounds N] [--cases a,b]``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _common

REAL_PDF = Path("/usr/share/doc/libtasn1-doc/libtasn1.pdf")
WORK = Path(os.environ.get("TMPDIR", "/tmp")) / f"toolfs-bench-media-{os.getpid()}"


def make_files(tiny: bool) -> dict[str, Any]:
    """The JPEG and the PDF on local disk; what they are."""
    import pypdfium2
    from PIL import Image

    WORK.mkdir(parents=True, exist_ok=True)
    size = (800, 600) if tiny else (4000, 3000)
    im = Image.radial_gradient("L").resize(size).convert("RGB")
    noise = Image.effect_noise(size, 40).convert("RGB")
    Image.blend(im, noise, 0.3).save(WORK / "photo.jpg", "JPEG", quality=90)
    pages = 30 if tiny else 300
    source = "generated text PDF"
    if REAL_PDF.exists():
        src = pypdfium2.PdfDocument(str(REAL_PDF))
        source = f"{REAL_PDF.name} ({len(src)} pages, pdfTeX) repeated"
        out = pypdfium2.PdfDocument.new()
        while len(out) < pages:
            take = min(len(src), pages - len(out))
            out.import_pages(src, list(range(take)))
        out.save(str(WORK / "book.pdf"))
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from tests.media_samples import text_pdf

        (WORK / "book.pdf").write_bytes(text_pdf([f"page {i} " * 200 for i in range(pages)]))
    return {"jpeg": f"{size[0]}x{size[1]}, {os.path.getsize(WORK / 'photo.jpg'):,} bytes",
            "megapixels": f"{size[0] * size[1] / 1e6:.1f} MP",
            "pdf": f"{pages} pages, {os.path.getsize(WORK / 'book.pdf'):,} bytes ({source})",
            "pages": pages}


# -- the cases (each run in a child process) ------------------------------------------


def _toolfs_jpeg() -> Callable[[], Any]:
    import toolfs

    ws = toolfs.Workspace(str(WORK))
    return lambda: ws.new_context().execute("read", {"file_path": "photo.jpg"}).images


def _pillow_jpeg() -> Callable[[], Any]:
    from PIL import Image

    def run() -> Any:
        im = Image.open(WORK / "photo.jpg")
        im.load()
        im.thumbnail((1568, 1568))
        out = io.BytesIO()
        im.save(out, "JPEG", quality=85)
        return out.getvalue()
    return run


def _window(pages: int) -> tuple[int, int]:
    start = max(1, pages // 2 - 9)
    return start, 20


def _toolfs_pdf(pages: int) -> Callable[[], Any]:
    import toolfs

    ws = toolfs.Workspace(str(WORK))
    start, count = _window(pages)
    return lambda: ws.new_context().execute(
        "read", {"file_path": "book.pdf", "offset": start, "limit": count}).text


def _pdfium_pdf(pages: int) -> Callable[[], Any]:
    import pypdfium2

    start, count = _window(pages)

    def run() -> Any:
        doc = pypdfium2.PdfDocument((WORK / "book.pdf").read_bytes())
        texts = [doc[i].get_textpage().get_text_range() for i in range(start - 1,
                                                                        start - 1 + count)]
        doc.close()
        return texts
    return run


def _pypdf_pdf(pages: int) -> Callable[[], Any]:
    from pypdf import PdfReader

    start, count = _window(pages)

    def run() -> Any:
        reader = PdfReader(io.BytesIO((WORK / "book.pdf").read_bytes()))
        return [reader.pages[i].extract_text() for i in range(start - 1, start - 1 + count)]
    return run


def _pdfium_all(pages: int) -> Callable[[], Any]:
    import pypdfium2

    def run() -> Any:
        doc = pypdfium2.PdfDocument((WORK / "book.pdf").read_bytes())
        texts = [doc[i].get_textpage().get_text_range() for i in range(len(doc))]
        doc.close()
        return texts
    return run


def _pypdf_all(pages: int) -> Callable[[], Any]:
    from pypdf import PdfReader

    def run() -> Any:
        reader = PdfReader(io.BytesIO((WORK / "book.pdf").read_bytes()))
        return [page.extract_text() for page in reader.pages]
    return run


CASES: dict[str, Callable[..., Callable[[], Any]]] = {
    "toolfs-jpeg": lambda pages: _toolfs_jpeg(), "pillow-jpeg": lambda pages: _pillow_jpeg(),
    "toolfs-pdf": _toolfs_pdf, "pdfium-pdf": _pdfium_pdf, "pypdf-pdf": _pypdf_pdf,
    "pdfium-all": _pdfium_all, "pypdf-all": _pypdf_all,
}


def _hwm_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def child(case: str, pages: int, rounds: int) -> None:
    """Run one case: its median time, then its peak memory (RSS growth and
    tracemalloc's peak), printed as one line of JSON."""
    run = CASES[case](pages)
    run()  # warm: imports, first-use setup
    times, cpu = [], []
    for _ in range(rounds):
        t, c = time.perf_counter(), time.process_time()
        run()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    rss_before = _hwm_kib()
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")  # reset VmHWM to the current RSS
        rss_before = _hwm_kib()
    except OSError:
        pass
    run()
    rss = max(0, _hwm_kib() - rss_before) * 1024
    tracemalloc.start()
    run()
    python_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(json.dumps({"seconds": statistics.median(times), "cpu": statistics.median(cpu),
                      "rss": rss, "python": python_peak}))


def measure(case: str, pages: int, rounds: int) -> dict[str, float]:
    # A fixed mmap threshold: glibc otherwise raises it after the first large free, and
    # keeps later large blocks resident once freed, hiding the next run's peak.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
    done = subprocess.run([sys.executable, __file__, "--child", case, "--pages", str(pages),
                           "--rounds", str(rounds), "--work", str(WORK)],
                          capture_output=True, text=True, check=True, env=env)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    global WORK
    parser = argparse.ArgumentParser()
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child")
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--work")
    parser.add_argument("--cases", help="comma-separated subset of: " + ", ".join(CASES))
    args = parser.parse_args()
    if args.work:
        WORK = Path(args.work)
    if args.child:
        child(args.child, args.pages, args.rounds)
        return
    rounds = 2 if args.tiny else args.rounds
    facts = make_files(args.tiny)
    try:
        wanted = args.cases.split(",") if args.cases else list(CASES)
        results = {case: measure(case, facts["pages"], rounds) for case in wanted}
    finally:
        for f in WORK.iterdir():
            f.unlink()
        WORK.rmdir()
    print(_common.machine_facts())
    print(f"JPEG: {facts['jpeg']}; PDF: {facts['pdf']}; median of {rounds} runs\n")

    def row(name: str, case: str, base: str | None) -> list[str] | None:
        if case not in results or (base is not None and base not in results):
            return None
        r = results[case]
        ratio = "" if base is None else _common.ratio(r["cpu"], results[base]["cpu"])
        return [name, f"{r['seconds'] * 1000:,.1f}", f"{r['cpu'] * 1000:,.1f}",
                ratio or "1.00x", _common.fmt_bytes(r["rss"]), _common.fmt_bytes(r["python"])]

    headers = ["read", "wall ms", "CPU ms", "CPU vs baseline", "peak RSS growth",
               "Python peak"]
    start, count = _window(facts["pages"])
    mp = facts["megapixels"]
    print(_common.markdown_table(headers, [r for r in [
        row(f"{mp} JPEG: Pillow full decode + thumbnail (baseline)", "pillow-jpeg", None),
        row(f"{mp} JPEG: toolfs ws.read", "toolfs-jpeg", "pillow-jpeg"),
        row(f"PDF pages {start}-{start + count - 1}: pypdfium2 text (baseline)", "pdfium-pdf",
            None),
        row(f"PDF pages {start}-{start + count - 1}: toolfs ws.read", "toolfs-pdf",
            "pdfium-pdf"),
        row(f"PDF pages {start}-{start + count - 1}: pypdf text", "pypdf-pdf", "pdfium-pdf"),
        row(f"PDF all {facts['pages']} pages: pypdfium2 text (baseline)", "pdfium-all", None),
        row(f"PDF all {facts['pages']} pages: pypdf text", "pypdf-all", "pdfium-all"),
    ] if r is not None]))


if __name__ == "__main__":
    main()
