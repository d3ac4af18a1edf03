"""Throughput charts drawn on the server as SVG: no script, no chart library, nothing fetched.

The points are BullMQ's metrics lists (jobs finished per minute, newest first: ``queue.metrics``);
a chart is numbers and fixed words only, so nothing a job carries can reach it.
"""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup

WIDTH, HEIGHT, PAD = 600, 140, 24
#: Colours by series, as SVG presentation attributes (the CSP forbids inline style).
COLOURS = {"completed": "#2e7d32", "failed": "#c62828"}


def throughput_svg(series: dict[str, Sequence[int]], minutes: int) -> Markup:
    """A line per series over the last ``minutes`` minutes (oldest left), with its peak marked.

    ``series``: name -> points newest first, as stored; missing minutes count as 0."""
    peak = max([1, *(max(points[:minutes], default=0) for points in series.values())])
    step = (WIDTH - 2 * PAD) / max(1, minutes - 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" '
             f'role="img" aria-label="jobs finished per minute, last {minutes} minutes">',
             f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" stroke="#999"/>',
             f'<text x="{PAD}" y="14" font-size="11" fill="#555">peak {peak}/min</text>',
             f'<text x="{PAD}" y="{HEIGHT - 6}" font-size="11" fill="#555">-{minutes} min</text>',
             f'<text x="{WIDTH - PAD}" y="{HEIGHT - 6}" font-size="11" fill="#555" text-anchor="end">now</text>']
    for index, (name, points) in enumerate(series.items()):
        window = list(points[:minutes]) + [0] * max(0, minutes - len(points))
        oldest_first = list(reversed(window))
        coords = " ".join(f"{PAD + i * step:.1f},{HEIGHT - PAD - (value / peak) * (HEIGHT - 2 * PAD - 12):.1f}"
                          for i, value in enumerate(oldest_first))
        colour = COLOURS.get(name, "#1565c0")
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{coords}"/>')
        label = "completed" if name == "completed" else "failed"
        parts.append(f'<text x="{WIDTH - PAD - 90 * (len(series) - index)}" y="14" font-size="11" '
                     f'fill="{colour}">{label} {sum(window)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
