"""Charts as inline SVG, drawn on the server: no chart library, nothing to load, no script.

Colours and sizes are SVG presentation attributes (not `style`), so a strict Content Security
Policy that forbids inline styles still lets them render.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

OUTCOME_COLOURS = {
    "answered": "#2e7d32",
    "declined": "#ef6c00",
    "silent": "#90a4ae",
    "rate_limited": "#8e24aa",
    "ignored": "#cfd8dc",
    "command": "#1565c0",
    "error": "#c62828",
}


def stacked_bars(
    days: Sequence[str],
    series: Mapping[str, Sequence[int]],
    *,
    width: int = 720,
    height: int = 200,
    title: str = "",
) -> str:
    """One bar per day, stacked by series (outcome), with the day's total above it."""
    left, bottom, top = 36.0, 28.0, 14.0
    plot_h = height - bottom - top
    n = max(len(days), 1)
    slot = (width - left - 8) / n
    bar = max(slot * 0.7, 2)
    totals = [sum(values[i] for values in series.values()) for i in range(len(days))]
    peak = max([*totals, 1])
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - 4}" y2="{top + plot_h}" '
        'stroke="#999" stroke-width="1"/>',
        f'<text x="4" y="{top + 4}" font-size="10" fill="#666">{peak}</text>',
        f'<text x="4" y="{top + plot_h}" font-size="10" fill="#666">0</text>',
    ]
    for i, day in enumerate(days):
        x = left + i * slot + (slot - bar) / 2
        y = top + plot_h
        for name, values in series.items():
            value = values[i]
            if not value:
                continue
            h = plot_h * value / peak
            y -= h
            colour = OUTCOME_COLOURS.get(name, "#607d8b")
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                f'fill="{colour}"><title>{escape(day)} {escape(name)}: {value}</title></rect>'
            )
        if totals[i]:
            parts.append(
                f'<text x="{x + bar / 2:.1f}" y="{y - 2:.1f}" font-size="9" fill="#333" '
                f'text-anchor="middle">{totals[i]}</text>'
            )
        if n <= 16 or i % max(n // 8, 1) == 0:
            parts.append(
                f'<text x="{x + bar / 2:.1f}" y="{height - 10}" font-size="9" fill="#666" '
                f'text-anchor="middle">{escape(day[5:])}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def legend(names: Sequence[str]) -> str:
    items = []
    for name in names:
        colour = OUTCOME_COLOURS.get(name, "#607d8b")
        items.append(
            f'<span class="legend-item"><svg width="10" height="10" aria-hidden="true">'
            f'<rect width="10" height="10" fill="{colour}"/></svg> {escape(name)}</span>'
        )
    return " ".join(items)


def pr_curve(
    points: Sequence[tuple[float, float]],
    *,
    marked: tuple[float, float] | None = None,
    width: int = 360,
    height: int = 300,
) -> str:
    """Precision (y) against recall (x), with the chosen threshold's point marked."""
    left, bottom, top, right = 40, 34, 10, 10
    pw, ph = width - left - right, height - top - bottom

    def at(recall: float, precision: float) -> tuple[float, float]:
        return left + recall * pw, top + (1 - precision) * ph

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="precision-recall curve">',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#bbb"/>',
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        x, _ = at(tick, 0)
        _, y = at(0, tick)
        parts.append(
            f'<text x="{x:.1f}" y="{top + ph + 14}" font-size="10" fill="#666" '
            f'text-anchor="middle">{tick:g}</text>'
            f'<text x="{left - 4}" y="{y + 3:.1f}" font-size="10" fill="#666" '
            f'text-anchor="end">{tick:g}</text>'
        )
    parts.append(
        f'<text x="{left + pw / 2}" y="{height - 4}" font-size="11" fill="#333" '
        'text-anchor="middle">recall</text>'
        f'<text x="12" y="{top + ph / 2}" font-size="11" fill="#333" text-anchor="middle" '
        f'transform="rotate(-90 12 {top + ph / 2})">precision</text>'
    )
    if points:
        path = " ".join(
            f"{'M' if i == 0 else 'L'}{x:.1f},{y:.1f}"
            for i, (x, y) in enumerate(at(r, p) for r, p in points)
        )
        parts.append(f'<path d="{path}" fill="none" stroke="#1565c0" stroke-width="2"/>')
    if marked is not None:
        x, y = at(*marked)
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="#c62828" class="threshold-mark">'
            f"<title>threshold: recall {marked[0]:.2f}, precision {marked[1]:.2f}</title>"
            "</circle>"
        )
    parts.append("</svg>")
    return "".join(parts)
