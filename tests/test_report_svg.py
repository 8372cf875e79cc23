"""The report's charts: round axis ticks, distinguishable overlapping curves, legends that
fit, MAP-Elites bin edges."""

import math
import re

import pytest

from evo.report import svg


@pytest.mark.parametrize("low, high", [(0.0, 1.0), (0.1234, 0.98765), (-3.3, 17.2), (0, 137), (1e-5, 3e-5),
                                       (0.3333, 0.3334), (-1.0, -0.2), (250, 1999)])
def test_ticks_are_round_and_cover_the_data(low, high):
    ticks = svg.nice_ticks(low, high)
    step = ticks[1] - ticks[0]
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert min(abs(mantissa - m) for m in (1, 2, 5, 10)) < 1e-6
    assert ticks[0] <= low and ticks[-1] >= high and 3 <= len(ticks) <= 8
    assert all(abs(t / step - round(t / step)) < 1e-6 for t in ticks)
    labels = [svg.tick_label(t, step) for t in ticks]
    assert all(len(label) <= 8 for label in labels) and len(set(labels)) == len(labels), labels


def test_overlapping_curves_differ_in_dash_and_long_names_are_shortened():
    name = "a_very_long_objective_name_indeed"
    chart = svg.steps({"scalar": ([0, 1, 2], [0.5, 0.5, 0.5]), name: ([0, 1, 2], [0.5, 0.5, 0.5])}, "iteration", "best")
    dashes = re.findall(r'<polyline[^>]*?(stroke-dasharray="[^"]*")?\s*points', chart)
    assert dashes[0] == "" and dashes[1].startswith("stroke-dasharray")
    assert "a_very_long_objec…" in chart and f"<title>{name}</title>" in chart
    labels = re.findall(r">([^<]+)</text>", chart)
    assert labels[:6] == ["0", "1", "2", "0.0", "0.5", "1.0"]  # iterations: whole ticks; scores: one decimal each


def test_the_grid_labels_its_bin_edges():
    chart = svg.heatmap([[0.1, None], [None, 0.4], [0.2, 0.3], [None, None]], "length", "gold", [0, 2000], [0.0, 1.0])
    for edge in ("0", "500", "1000", "1500", "2000"):
        assert f">{edge}</text>" in chart
    for edge in ("0.0", "0.5", "1.0"):
        assert f">{edge}</text>" in chart
    assert "(bin edges)" in chart


def text_boxes(chart: str) -> list[tuple[str, float, float, float, float]]:
    """Each unrotated label's box at 11 px: 0.6 em a character (generous for digits), from 8 px
    above the baseline to 1 below (numbers have no descenders)."""
    boxes = []
    for attrs, text in re.findall(r"<text ([^>]*)>([^<]*)</text>", chart):
        if "transform" in attrs:
            continue
        x, y = (float(re.search(rf'\b{a}="([-\d.]+)"', attrs).group(1)) for a in ("x", "y"))
        anchor = re.search(r'text-anchor="(\w+)"', attrs)
        width = 6.6 * len(text)
        left = {"start": x, "middle": x - width / 2, "end": x - width}[anchor.group(1) if anchor else "start"]
        boxes.append((text, left, left + width, y - 8, y + 1))
    return boxes


@pytest.mark.parametrize("xrange, colors", [([0, 4000], (0.364, 0.372)), ([0.0, 1.0], (-1234.5, 0.000123)),
                                             ([0, 2000], (0.1, 0.4))])
def test_the_grid_labels_overlap_nothing_and_stay_inside(xrange, colors):
    values = [[colors[0], None], [None, colors[1]], [None, None], [0.5 * sum(colors), None]]
    chart = svg.heatmap(values * 3, "length", "gold", xrange, [0.0, 1.0])
    boxes = text_boxes(chart)
    assert {f"{colors[0]:.3g}", f"{colors[1]:.3g}", f"{xrange[1]}"} <= {b[0] for b in boxes}  # the bar's ends, the last edge
    for i, a in enumerate(boxes):
        assert 0 <= a[1] and a[2] <= svg.WIDTH, a
        for b in boxes[i + 1:]:
            assert a[2] <= b[1] or b[2] <= a[1] or a[4] <= b[3] or b[4] <= a[3], (a, b)
