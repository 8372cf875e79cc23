"""`evo report`: the data gathered from a real run (two `mutate:` policies, real sandbox and
SQLite), a self-contained page, and that page loaded in a real headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from evo.database.config import FeatureConfig
from evo.database.records import Program
from evo.report import RunRecords, gather, render, svg
from evo.report.data import LINEAGE_SHOWN
from tests.test_run_cli import evo, problem, show  # noqa: F401  (the fixture)

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install -y chromium; .ci/run does)")
FRONT_RED = (0xD6, 0x27, 0x28)  # evo/report/svg.py: the Pareto front's points


@pytest.fixture
def run(problem, tmp_path) -> Path:  # noqa: F811
    out = tmp_path / "run"
    result = evo("run", str(problem), "--policy", "small=mutate:", "--policy", "big=mutate:max_edits=5,scale=2",
                 "--iterations", "16", "--seed", "2", "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    return out


def test_the_gathered_data_matches_the_run(run):
    page = gather(RunRecords.read(run), "fb", "fa")
    summary = show(run)
    assert page["policies"] == summary["policies"] and page["best"]["id"] == summary["best"]["id"]
    curve = page["curves"]
    assert np.all(np.diff(curve["scalar"]) >= 0) and curve["scalar"][-1] == pytest.approx(summary["best"]["scalar"])
    for name, values in curve["objectives"].items():
        assert np.all(np.diff(values) >= 0) and len(values) == len(curve["iterations"])
    front = page["front"]
    points = np.array(front["points"])
    brute = [not any((q >= p).all() and (q > p).any() for q in points) for p in points]
    assert front["front"] == brute and front["pairs"] == [["fb", "fa"]]
    steps = page["lineage"]
    assert steps[-1]["id"] == summary["best"]["id"] and steps[0]["parent"] is None
    assert all(step["parent"] == before["id"] for before, step in zip(steps, steps[1:]))
    assert page["grid"]["features"][0]["name"] == "length" and len(page["grid"]["values"]) == 4
    assert sum(v is not None for row in page["grid"]["values"] for v in row) >= 1
    assert sum(page["failures"].get(k, 0) for k in ("unparseable", "duplicate")) == summary["unparseable"] + summary["duplicates"]


THREE = {"problem.toml": lambda text: text.replace('objectives = ["fa", "fb"]', 'objectives = ["fa", "fb", "fc"]\nminimize = ["fc"]'),
         "score.py": lambda text: text.replace('"fb": 1.0 / (1.0 + abs(b + 1.0))}',
                                               '"fb": 1.0 / (1.0 + abs(b + 1.0)), "fc": abs(float(ns["C"]) - 5.0)}')}


def test_the_front_is_the_one_evo_show_prints_over_every_objective(problem, tmp_path):  # noqa: F811
    """Three objectives (one minimized): the report's front is `evo show`'s, not the front of
    the first two objectives, and every pair and every objective is drawn."""
    for name, edit in THREE.items():
        (problem.parent / name).write_text(edit((problem.parent / name).read_text()))
    out = tmp_path / "three"
    done = evo("run", str(problem), "--policy", "mutate:max_edits=3,scale=2", "--iterations", "12", "--seed", "1",
               "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    page = gather(RunRecords.read(out))
    front = page["front"]
    assert front["objectives"] == ["fa", "fb", "fc"] and front["pairs"] == [["fa", "fb"], ["fa", "fc"], ["fb", "fc"]]
    firsts: dict[tuple, int] = {}
    for point, on, pid in zip(front["points"], front["front"], front["ids"]):
        if on:
            firsts.setdefault(tuple(point), pid)
    shown = show(out)["pareto"]
    assert sorted(firsts.values()) == sorted(entry["id"] for entry in shown) and front["distinct"] == len(shown)
    assert {tuple(entry["scores"].values()) for entry in shown} == set(firsts)  # real values: fc as the scorer said
    html = render(page)
    assert html.count("Pareto front of ") == 3 and "Parallel coordinates of 3 objectives" in html
    parallel = re.search(r'<svg[^>]*aria-label="Parallel coordinates.*?</svg>', html).group(0)
    assert parallel.count('stroke="#d62728"') == len(shown)  # one red line per distinct front vector


def three_objective_records() -> RunRecords:
    """#4 is on the front of all three objectives, yet dominated by #3 in the first two."""
    vectors = {1: [1.0, 0.0, 0.0], 2: [0.0, 1.0, 0.0], 3: [0.5, 0.5, 0.9], 4: [0.2, 0.2, 1.0], 5: [0.1, 0.1, 0.5]}
    programs = {i: Program(i, f"x = {i}\n", f"h{i}", f"n{i}", 0, i - 1, np.array(v), float(np.mean(v)),
                           parents=(i - 1,) if i > 1 else (), policy="p" if i > 1 else "initial")
                for i, v in vectors.items()}
    return RunRecords("three", ("a", "b", "c"), (), programs, (("p", "ok", 4),), 5)


def test_a_program_on_the_front_of_all_objectives_is_red_in_every_panel():
    page = gather(three_objective_records())
    front = page["front"]
    assert dict(zip(front["ids"], front["front"])) == {1: True, 2: True, 3: True, 4: True, 5: False}
    html = render(page)
    assert html.count('<svg class="chart"') == 2 + 3 + 1  # the curves, three pairs, parallel coordinates
    assert "4 of 5 programs on the front over all 3 objectives" in html
    panel = re.search(r'aria-label="Pareto front of a and b".*?</svg>', html).group(0)
    assert re.search(r'fill="#d62728"><title>#4:', panel)  # dominated in (a, b), on the front all the same
    assert "<polyline" not in panel  # no line joins a front that is not of these two objectives alone
    chosen = gather(three_objective_records(), "c", "a")["front"]
    assert chosen["pairs"] == [["c", "a"]] and chosen["front"] == front["front"]


def test_the_best_so_far_axes_stop_at_the_runs_last_iteration(nguyen7_run):
    page = gather(RunRecords.read(nguyen7_run))
    last = page["iterations"] - 1  # the children of iteration k are stored with k: 0 .. 11 for 12 iterations
    assert last == 11 and page["curves"]["iterations"][-1] == last  # the curves run on to the end
    charts = re.findall(r'<svg class="chart"[^>]*aria-label="best [^"]* by iteration".*?</svg>', render(page))
    assert len(charts) == 2
    for chart in charts:
        ticks = [float(t) for t in re.findall(r'text-anchor="middle">([-\d.]+)</text>', chart)]
        assert ticks and max(ticks) <= last  # no axis past the run (it was 0, 5, 10, 15)
        ends = [float(points.split()[-1].split(",")[0]) for points in re.findall(r'<polyline[^>]*points="([^"]*)"', chart)]
        assert ends and all(x == svg.WIDTH - svg.RIGHT for x in ends)  # every curve reaches the axis' end


def hostile_records() -> RunRecords:
    code = 'x = "</pre><script>alert(1)</script><img src=http://example.com/a.png>"\n'
    programs = {
        1: Program(1, "x = 0\n", "h1", "n1", 0, 0, np.array([0.1, 0.2]), 0.15, features=(5.0,), policy="initial"),
        2: Program(2, code, "h2", "n2", 0, 1, np.array([0.3, 0.1]), 0.2, features=(60.0,), parents=(1,),
                   policy="<b>p</b>"),
        3: Program(3, "y = 1\n", "h3", "n3", 0, 1, None, None, parents=(1,), policy="<b>p</b>", failure_kind="timeout"),
    }
    return RunRecords("<run>", ("a<", "b&"), (FeatureConfig("len", "code_length", (0, 100), 3),), programs,
                      (("<b>p</b>", "pending", 2), ("<b>p</b>", "parse", 1)), 2)


def test_the_page_is_self_contained_and_escapes_what_the_run_holds():
    html = render(gather(hostile_records()))
    assert "<script" not in html and "<img" not in html and "<b>p" not in html
    assert not re.search(r"<[^>]*\b(src|href)\s*=", html) and "url(" not in html and "@import" not in html  # in tags
    assert "&lt;/pre&gt;&lt;script&gt;" in html and "&lt;b&gt;p&lt;/b&gt;" in html
    assert html.count("<svg") == 4  # two curves, the front, the grid
    assert "timeout" in html and "unparseable" in html


def test_report_command_writes_dir_report_html_or_out(run, tmp_path):
    result = evo("report", str(run))
    assert result.returncode == 0, result.stderr
    assert (run / "report.html").stat().st_size > 2000
    elsewhere = tmp_path / "elsewhere.html"
    assert evo("report", str(run), "--out", str(elsewhere), "--x", "fb", "--y", "fa").returncode == 0
    assert "front of fb and fa" in elsewhere.read_text()
    bad = evo("report", str(run), "--x", "nope")
    assert bad.returncode == 2 and "not an objective" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    missing = evo("report", str(tmp_path / "nothing"))
    assert missing.returncode == 2 and "no run here" in missing.stderr


def load_in_chromium(page: Path, shot: Path) -> str:
    """Load `page` in headless Chromium, screenshot it; returns its console lines."""
    result = subprocess.run(
        [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr", "--v=0",
         f"--screenshot={shot}", "--window-size=1280,2200", "--hide-scrollbars", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=180)
    assert shot.is_file(), f"Chromium wrote no screenshot (exit {result.returncode}):\n{result.stderr[-3000:]}"
    return "\n".join(line for line in result.stderr.splitlines() if ":CONSOLE" in line)


def pixels(shot: Path) -> np.ndarray:
    from matplotlib.image import imread

    return np.round(imread(shot)[:, :, :3] * 255).astype(int)


def near(image: np.ndarray, rgb: tuple[int, int, int], tolerance: int = 12) -> int:
    return int((np.abs(image - np.array(rgb)).max(axis=2) <= tolerance).sum())


@pytest.mark.slow
@needs_chromium
def test_the_report_renders_in_headless_chromium(run, tmp_path):
    assert evo("report", str(run)).returncode == 0
    console = load_in_chromium(run / "report.html", tmp_path / "report.png")
    assert console == "", f"console messages:\n{console}"
    image = pixels(tmp_path / "report.png")
    background = np.array([0xFA, 0xFA, 0xFA])
    drawn = (np.abs(image - background).max(axis=2) > 16).mean()
    assert drawn > 0.03, f"only {drawn:.1%} of the screenshot differs from the background"
    assert near(image, FRONT_RED) > 20  # the SVG was drawn: the front's red points are on screen
    # the checks can fail: a page with a script error is caught, a blank page is blank
    (tmp_path / "broken.html").write_text("<!DOCTYPE html><p>x</p><script>throw new Error('boom-report')</script>")
    assert "boom-report" in load_in_chromium(tmp_path / "broken.html", tmp_path / "broken.png")
    blank = pixels(tmp_path / "broken.png")
    assert (np.abs(blank - np.array([255, 255, 255])).max(axis=2) > 16).mean() < 0.01
    assert near(blank, FRONT_RED) == 0


def long_run(n: int) -> RunRecords:
    """`n` programs in one line of descent (each the child of the one before), each a little better."""
    programs = {}
    for i in range(1, n + 1):
        code = "".join(f"x{j} = {i * j % 97}\n" for j in range(12))
        programs[i] = Program(i, code, f"h{i}", f"n{i}", 0, i - 1, np.array([i / n, 1 - i / n]), 0.5 + i / (4 * n),
                              features=(float(len(code)),), parents=(i - 1,) if i > 1 else (), policy="p" if i > 1 else "initial")
    return RunRecords("long", ("a", "b"), (FeatureConfig("len", "code_length", (0, 400), 8),), programs,
                      (("p", "pending", n - 1),), n)


def test_a_20k_step_lineage_makes_a_bounded_page_in_seconds():
    records = long_run(20_000)
    started = time.perf_counter()
    page = gather(records)
    html = render(page)
    seconds = time.perf_counter() - started
    steps = page["lineage"]
    assert steps[0]["parent"] is None and steps[-1]["id"] == 20_000 and len(steps) == 1 + LINEAGE_SHOWN
    assert steps[1]["skipped"]["steps"] == 20_000 - 1 - LINEAGE_SHOWN and "steps not shown" in html
    assert all(step["parent"] == before["id"] for before, step in zip(steps[1:], steps[2:]))
    assert seconds < 5 and len(html.encode()) < 3_000_000, (seconds, len(html))
