"""Inline SVG charts as strings: step lines, a scatter with its front, parallel coordinates, a
heatmap. No script, no external reference; every text is escaped; hovering a mark shows its
<title>."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

WIDTH, HEIGHT = 560, 320
LEFT, RIGHT, TOP, BOTTOM = 76, 16, 16, 48
COLORBAR = 92  # a heatmap's room right of its grid: a gap, the bar, and its labels (up to 9 characters)
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
VIRIDIS = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))


def _span(values: Sequence[float]) -> tuple[float, float]:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 1.0)
    if high - low < 1e-12:
        low, high = low - 0.5, high + 0.5
    return low, high


def nice_step(span: float, count: int = 5) -> float:
    """A round step (1, 2 or 5 x 10^k) giving about `count` ticks over `span`."""
    raw = span / max(count - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-9))


def nice_ticks(low: float, high: float, count: int = 5, integer: bool = False) -> list[float]:
    """Round ticks covering [low, high]: the first at or below `low`, the last at or above `high`
    (`integer`: whole steps, for iterations)."""
    step = max(nice_step(high - low, count), 1.0) if integer else nice_step(high - low, count)
    first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
    return [round(k * step, 12) for k in range(first, last + 1)]


def tick_label(value: float, step: float) -> str:
    """`value` with as many decimals as `step` needs (no 0.30000000000000004, no 1e+03 for 1000)."""
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) if step < 1 else 0
    if abs(value) >= 1e6 or (value and abs(value) < 1e-4):
        return f"{value:.3g}"
    text = f"{value:.{decimals}f}"
    return text.lstrip("-") if float(text) == 0 else text


def short(name: str, limit: int = 18) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


DASHES = ("", "7 3", "2 3", "9 3 2 3", "4 4", "1 2")  # overlapping curves stay distinguishable


class Frame:
    """The plotting area of one chart: data coordinates to pixels, axes and their labels."""

    def __init__(self, xs: Sequence[float], ys: Sequence[float], xlabel: str, ylabel: str, tight_x: bool = False) -> None:
        """`tight_x`: the x axis spans exactly the data (a run's iterations), its ticks inside."""
        whole = bool(xs) and all(float(x).is_integer() for x in xs)
        self.xticks, self.yticks = nice_ticks(*_span(xs), integer=whole), nice_ticks(*_span(ys))
        self.x0, self.x1 = self.xticks[0], self.xticks[-1]
        inside = [x for x in self.xticks if xs and min(xs) <= x <= max(xs)]
        if tight_x and len(inside) > 1:
            self.x0, self.x1, self.xticks = min(xs), max(xs), inside
        self.y0, self.y1 = self.yticks[0], self.yticks[-1]
        self.xlabel, self.ylabel = xlabel, ylabel

    def px(self, x: float) -> float:
        return LEFT + (x - self.x0) / (self.x1 - self.x0) * (WIDTH - LEFT - RIGHT)

    def py(self, y: float) -> float:
        return HEIGHT - BOTTOM - (y - self.y0) / (self.y1 - self.y0) * (HEIGHT - TOP - BOTTOM)

    def axes(self) -> str:
        parts = [f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" height="{HEIGHT - TOP - BOTTOM}" '
                 'fill="#fff" stroke="#999"/>']
        xstep, ystep = self.xticks[1] - self.xticks[0], self.yticks[1] - self.yticks[0]
        for x in self.xticks:
            parts.append(f'<text x="{self.px(x):.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">'
                         f'{tick_label(x, xstep)}</text>')
        for y in self.yticks:
            parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{self.py(y):.1f}" y2="{self.py(y):.1f}" stroke="#eee"/>')
            parts.append(f'<text x="{LEFT - 6}" y="{self.py(y) + 4:.1f}" text-anchor="end">{tick_label(y, ystep)}</text>')
        parts.append(f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 8}" text-anchor="middle">{escape(self.xlabel)}</text>')
        parts.append(f'<text transform="translate(14 {(TOP + HEIGHT - BOTTOM) / 2}) rotate(-90)" '
                     f'text-anchor="middle">{escape(self.ylabel)}</text>')
        return "".join(parts)


def _svg(body: str, label: str, height: int = HEIGHT, width: int = WIDTH) -> str:
    return (f'<svg class="chart" role="img" aria-label="{escape(label)}" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}">{body}</svg>')


def steps(series: dict[str, tuple[Sequence[float], Sequence[float]]], xlabel: str, ylabel: str) -> str:
    """Step lines (best-so-far curves), one color per series, with a legend; the x axis ends
    where the series do."""
    xs = [x for xs_, _ in series.values() for x in xs_]
    ys = [y for _, ys_ in series.values() for y in ys_]
    frame = Frame(xs, ys, xlabel, ylabel, tight_x=True)
    parts = [frame.axes()]
    for k, (name, (x, y)) in enumerate(series.items()):
        color = PALETTE[k % len(PALETTE)]
        points = []
        for i, (a, b) in enumerate(zip(x, y)):
            if i:
                points.append(f"{frame.px(a):.1f},{frame.py(y[i - 1]):.1f}")
            points.append(f"{frame.px(a):.1f},{frame.py(b):.1f}")
        if len(points) == 1:
            points.append(f"{frame.px(x[0]) + 2:.1f},{frame.py(y[0]):.1f}")
        dash = DASHES[k % len(DASHES)]
        style = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="{2.5 if k == 0 else 2}"{style} '
                     f'points="{" ".join(points)}"><title>{escape(name)}</title></polyline>')
        top = HEIGHT - BOTTOM - 8 - 16 * (len(series) - k)  # bottom right: best-so-far curves rise away from it
        left = WIDTH - RIGHT - 150
        parts.append(f'<line x1="{left}" x2="{left + 22}" y1="{top + 5}" y2="{top + 5}" stroke="{color}" '
                     f'stroke-width="2.5"{style}/><text x="{left + 28}" y="{top + 9}">{escape(short(name))}'
                     f'<title>{escape(name)}</title></text>')
    return _svg("".join(parts), f"{ylabel} by {xlabel}")


def scatter(points: Sequence[Sequence[float]], front: Sequence[bool], ids: Sequence[int], xlabel: str, ylabel: str,
            joined: bool = True) -> str:
    """All points in grey, the Pareto front in red (`joined`: by a line, when the front is of
    these two objectives alone)."""
    frame = Frame([p[0] for p in points], [p[1] for p in points], xlabel, ylabel)
    parts = [frame.axes()]
    for (x, y), on, pid in drawn(frame, points, front, ids):
        color, r = ("#d62728", 4) if on else ("#888", 2.5)
        parts.append(f'<circle cx="{frame.px(x):.1f}" cy="{frame.py(y):.1f}" r="{r}" fill="{color}">'
                     f'<title>#{pid}: {escape(xlabel)}={x:.4g}, {escape(ylabel)}={y:.4g}</title></circle>')
    line = sorted((x, y) for (x, y), on in zip(points, front) if on)
    if joined and len(line) > 1:
        path = " ".join(f"{frame.px(x):.1f},{frame.py(y):.1f}" for x, y in line)
        parts.append(f'<polyline fill="none" stroke="#d62728" stroke-dasharray="4 3" points="{path}"/>')
    return _svg("".join(parts), f"Pareto front of {xlabel} and {ylabel}")


MAX_POINTS = 4000  # circles drawn in one scatter at most (the page stays small whatever the run)
MAX_LINES = 400  # lines drawn in parallel coordinates at most, of the front and of the rest each
AXIS_GAP = 64  # pixels between two axes of parallel coordinates (the chart widens, up to MAX_WIDTH)
MAX_WIDTH = 1160


def thinned(items: list, limit: int) -> list:
    """At most `limit` of `items`, evenly spaced (all of them when they fit)."""
    return items if len(items) <= limit else items[:: -(-len(items) // limit)]


def parallel(points: Sequence[Sequence[float]], front: Sequence[bool], ids: Sequence[int], names: Sequence[str],
             minimize: Sequence[str] = ()) -> str:
    """Parallel coordinates: one vertical axis per objective, each over its own span with the
    better end up (a minimized one's low values at the top), one line per program: the front's
    in red over the others in grey (the first of each distinct vector; at most MAX_LINES each)."""
    d = len(names)
    width = min(MAX_WIDTH, max(WIDTH, LEFT + RIGHT + AXIS_GAP * (d - 1)))
    gap = (width - LEFT - RIGHT) / max(d - 1, 1)
    spans = [_span([p[j] for p in points]) for j in range(d)]

    def py(j: int, value: float) -> float:
        low, high = spans[j]
        t = (value - low) / (high - low)
        return HEIGHT - BOTTOM - (1 - t if names[j] in minimize else t) * (HEIGHT - TOP - BOTTOM)

    parts = []
    for j, name in enumerate(names):
        x = LEFT + j * gap
        low, high = spans[j]
        top, bottom = (low, high) if name in minimize else (high, low)
        label = short(name, max(4, int(gap // 7))) + (" (min)" if name in minimize and gap >= 90 else "")
        anchor = "end" if j == d - 1 and d > 1 else "middle"  # the last axis' label stays inside
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" stroke="#999"/>'
                     f'<text x="{x - 3:.1f}" y="{TOP + 8}" text-anchor="end">{top:.3g}</text>'
                     f'<text x="{x - 3:.1f}" y="{HEIGHT - BOTTOM}" text-anchor="end">{bottom:.3g}</text>'
                     f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="{anchor}">{escape(label)}'
                     f'<title>{escape(name)}{" (minimized: lower is better, drawn up)" if name in minimize else ""}'
                     '</title></text>')
    distinct: dict[tuple, tuple] = {}
    for point, on, pid in zip(points, front, ids):
        distinct.setdefault((tuple(point), bool(on)), (point, bool(on), pid))
    rest = thinned([item for item in distinct.values() if not item[1]], MAX_LINES)
    best = thinned([item for item in distinct.values() if item[1]], MAX_LINES)
    for point, on, pid in rest + best:  # the front drawn last, on top
        path = " ".join(f"{LEFT + j * gap:.1f},{py(j, v):.1f}" for j, v in enumerate(point))
        tip = ", ".join(f"{escape(n)}={v:.4g}" for n, v in zip(names, point))
        stroke = 'stroke="#d62728" stroke-width="1.8"' if on else 'stroke="#bbb" stroke-width="1"'
        parts.append(f'<polyline fill="none" {stroke} points="{path}"><title>#{pid}: {tip}</title></polyline>')
    parts.append(f'<text x="{LEFT}" y="{HEIGHT - 8}">every objective, better up; the front in red</text>')
    return _svg("".join(parts), f"Parallel coordinates of {len(names)} objectives", width=width)


def drawn(frame: "Frame", points, front, ids) -> list[tuple]:
    """The points worth a circle: one per pixel (a front point before the others), at most
    MAX_POINTS (the front first, the rest evenly thinned)."""
    seen: dict[tuple[int, int, bool], tuple] = {}
    for point, on, pid in sorted(zip(points, front, ids), key=lambda item: not item[1]):
        seen.setdefault((round(frame.px(point[0])), round(frame.py(point[1])), bool(on)), (point, on, pid))
    kept = list(seen.values())
    if len(kept) > MAX_POINTS:
        on = [item for item in kept if item[1]][:MAX_POINTS]
        rest = [item for item in kept if not item[1]]
        room = MAX_POINTS - len(on)
        kept = on + (thinned(rest, room) if room > 0 else [])
    return sorted(kept, key=lambda item: bool(item[1]))  # the front drawn last, on top


def color(t: float) -> str:
    """A viridis-like color for t in [0, 1]."""
    t = min(max(t, 0.0), 1.0) * (len(VIRIDIS) - 1)
    i = min(int(t), len(VIRIDIS) - 2)
    a, b = VIRIDIS[i], VIRIDIS[i + 1]
    return "#" + "".join(f"{round(u + (v - u) * (t - i)):02x}" for u, v in zip(a, b))


def heatmap(values: Sequence[Sequence[float | None]], xlabel: str, ylabel: str, xrange, yrange) -> str:
    """values[i][j]: cell i along x, j along y (None: empty cell, drawn hatched grey)."""
    nx, ny = len(values), len(values[0])
    filled = [v for row in values for v in row if v is not None]
    low, high = _span(filled)
    width, height = (WIDTH - LEFT - RIGHT - COLORBAR) / nx, (HEIGHT - TOP - BOTTOM) / ny
    parts = []
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            x, y = LEFT + i * width, HEIGHT - BOTTOM - (j + 1) * height
            fill = "#e6e6e6" if v is None else color((v - low) / (high - low))
            tip = "empty" if v is None else f"best scalar {v:.4g}"
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}" fill="{fill}" '
                         f'stroke="#fff"><title>cell ({i}, {j}): {tip}</title></rect>')
    right = WIDTH - RIGHT - COLORBAR + 16  # the color bar, its labels beside it (clear of the x-axis labels)
    for k in range(20):
        parts.append(f'<rect x="{right}" y="{TOP + (19 - k) * (HEIGHT - TOP - BOTTOM) / 20:.1f}" width="12" '
                     f'height="{(HEIGHT - TOP - BOTTOM) / 20 + 0.5:.1f}" fill="{color(k / 19)}"/>')
    parts.append(f'<text x="{right + 16}" y="{TOP + 8}">{high:.3g}</text>'
                 f'<text x="{right + 16}" y="{HEIGHT - BOTTOM}">{low:.3g}</text>')
    parts += _bin_labels(xrange, nx, lambda k, text: f'<text x="{LEFT + k * width:.1f}" y="{HEIGHT - BOTTOM + 14}" '
                                                     f'text-anchor="middle">{text}</text>')
    if yrange:
        parts += _bin_labels(yrange, ny, lambda k, text: f'<text x="{LEFT - 4}" y="{HEIGHT - BOTTOM - k * height + 4:.1f}" '
                                                         f'text-anchor="end">{text}</text>')
    parts.append(f'<text x="{(LEFT + right) / 2}" y="{HEIGHT - 8}" text-anchor="middle">'
                 f'{escape(xlabel)} (bin edges)</text>')
    parts.append(f'<text transform="translate(14 {(TOP + HEIGHT - BOTTOM) / 2}) rotate(-90)" text-anchor="middle">'
                 f'{escape(ylabel)}{" (bin edges)" if yrange else ""}</text>')
    return _svg("".join(parts), f"MAP-Elites grid over {xlabel} and {ylabel}")


def _bin_labels(span, bins: int, place) -> list[str]:
    """The bin edges of a fixed feature range, every one up to 10 bins, else about ten."""
    low, high = float(span[0]), float(span[1])
    every = max(1, math.ceil(bins / 10))
    step = (high - low) / bins
    return [place(k, tick_label(low + k * step, step * every)) for k in range(0, bins + 1, every)]
