"""Draw docs/benchmarks.svg from the tables of docs/benchmarks.md (no dependencies).

A table on the page is charted when a marker comment stands right above it:

    <!-- chart title="MCP per call over stdio" label="call,server" value="median ms"
         bound="10" -->

``label`` names the columns joined into each bar's label, ``value`` the column whose
numbers the bars show (one panel per marker, bars scaled to the panel's largest value;
markers may be stacked to chart several columns of one table), ``bound`` (optional)
draws a dashed line at that value. The chart is always drawn from
the page, so the two cannot disagree: after changing a charted table, run

    python benchmarks/chart.py          # writes docs/benchmarks.svg
    python benchmarks/chart.py --check  # exit 1 if the committed SVG is not the page's

(``tests/project/test_benchmarks.py`` runs ``--check``).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "benchmarks.md"
SVG = ROOT / "docs" / "benchmarks.svg"

MARKER = re.compile(r"<!--\s*chart\s+(.*?)-->", re.S)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')
BARS_WIDTH, BAR_HEIGHT, GAP, PANEL_GAP, TITLE_HEIGHT, MARGIN = 400, 16, 6, 22, 24, 8
VALUE_WIDTH = 70  # room right of the longest bar for its number
CHAR_WIDTH = 6.8  # a generous average advance of 12 px sans-serif, to fit the labels
COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2")


@dataclass
class Panel:
    title: str
    bars: list[tuple[str, float]]
    unit: str
    bound: float | None


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def _number(text: str) -> float | None:
    match = re.search(r"-?\d[\d,]*(?:\.\d+)?", text.replace("\u2009", ""))
    return float(match.group(0).replace(",", "")) if match else None


def panels(page: str) -> list[Panel]:
    """The charted tables of ``page``, in page order."""
    out = []
    page = FENCE.sub("", page)  # a marker shown in a code block is an example
    for marker in MARKER.finditer(page):
        attrs = dict(ATTRIBUTE.findall(marker.group(1)))
        rows = []
        below = page[marker.end():].lstrip()
        while below.startswith("<!--"):  # several charts of one table: markers stacked
            below = below[below.index("-->") + 3:].lstrip()
        for line in below.splitlines():
            if not line.startswith("|"):
                break
            rows.append(_cells(line))
        if len(rows) < 3:
            raise ValueError(f"no table under the chart marker {attrs.get('title')!r}")
        header, body = rows[0], rows[2:]
        labels = [header.index(name) for name in attrs["label"].split(",")]
        value = header.index(attrs["value"])
        bars = []
        for row in body:
            number = _number(row[value])
            if number is not None:
                bars.append((", ".join(row[i] for i in labels), number))
        bound = attrs.get("bound")
        out.append(Panel(attrs["title"], bars, attrs.get("unit", attrs["value"]),
                         float(bound) if bound else None))
    return out


def svg(charted: list[Panel]) -> str:
    """The panels as one SVG document: a horizontal bar chart per panel."""
    parts: list[str] = []
    y = 10
    longest = max((len(label) for panel in charted for label, _ in panel.bars), default=0)
    label_width = MARGIN + round(longest * CHAR_WIDTH) + 8
    width = label_width + BARS_WIDTH + VALUE_WIDTH
    for index, panel in enumerate(charted):
        colour = COLOURS[index % len(COLOURS)]
        top = max([value for _, value in panel.bars] + [panel.bound or 0.0]) or 1.0
        scale = BARS_WIDTH / top
        parts.append(f'<text x="{MARGIN}" y="{y + 16}" class="title">{escape(panel.title)} '
                     f'({escape(panel.unit)})</text>')
        y += TITLE_HEIGHT
        first = y
        for label, value in panel.bars:
            length = max(value * scale, 1.0)
            parts.append(f'<text x="{label_width - 8}" y="{y + 12}" class="label">'
                         f"{escape(label)}</text>")
            parts.append(f'<rect x="{label_width}" y="{y}" width="{length:.1f}" '
                         f'height="{BAR_HEIGHT}" fill="{colour}"/>')
            parts.append(f'<text x="{label_width + length + 4:.1f}" y="{y + 12}" '
                         f'class="value">{value:g}</text>')
            y += BAR_HEIGHT + GAP
        if panel.bound is not None:
            x = label_width + panel.bound * scale
            parts.append(f'<line x1="{x:.1f}" y1="{first - 4}" x2="{x:.1f}" y2="{y}" '
                         'class="bound"/>')
            parts.append(f'<text x="{x - 3:.1f}" y="{first - 6}" class="label">'
                         f"bound {panel.bound:g}</text>")
        y += PANEL_GAP
    style = ("text{font-family:sans-serif;font-size:12px;fill:#222}"
             ".title{font-size:14px;font-weight:bold}.label{text-anchor:end}"
             ".bound{stroke:#c00;stroke-width:1.5;stroke-dasharray:4 3}")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" '
            f'viewBox="0 0 {width} {y}" role="img" aria-label="toolfs benchmarks">\n'
            f'<style>{style}</style>\n<rect width="100%" height="100%" fill="#fff"/>\n'
            + "\n".join(parts) + "\n</svg>\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the SVG on disk is not the page's chart")
    parser.add_argument("--page", type=Path, default=PAGE)
    parser.add_argument("--out", type=Path, default=SVG)
    args = parser.parse_args(argv)
    drawn = svg(panels(args.page.read_text(encoding="utf-8")))
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != drawn:
            print(f"{args.out} is not the chart of {args.page}: run benchmarks/chart.py",
                  file=sys.stderr)
            return 1
        return 0
    args.out.write_text(drawn, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
