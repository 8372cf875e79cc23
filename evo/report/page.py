"""The report as ONE self-contained HTML file: inline CSS and SVG, no script, no external
src or href, every value from the run escaped. `render(gather(...))` -> str."""

from __future__ import annotations

from html import escape
from typing import Any

from evo.report import svg

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px auto; max-width: 1200px; color: #222; background: #fafafa; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
svg.chart { background: #fff; border: 1px solid #ddd; font-size: 11px; }
table { border-collapse: collapse; background: #fff; } td, th { border: 1px solid #ddd; padding: 3px 10px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
td.text { text-align: left; white-space: pre-wrap; font-family: monospace; font-size: 12px; max-width: 520px; }
pre { background: #fff; border: 1px solid #ddd; padding: 8px; overflow-x: auto; font-size: 12px; }
.add { color: #116611; background: #eaffea; } .del { color: #a11; background: #ffecec; } .hunk { color: #55a; }
.muted { color: #777; }
"""


def _table(header: list[str], rows: list[list[object]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    cell = lambda c: f'<td class="text">{escape(c)}</td>' if isinstance(c, str) and len(c) > 40 else f"<td>{escape(str(c))}</td>"  # noqa: E731
    body = "".join("<tr>" + "".join(map(cell, row)) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _summary(page: dict) -> str:
    best = page["best"]
    lost = page["failures"]
    line = (f"{page['iterations']} iterations, {page['programs']} programs evaluated ({page['failed']} failed), "
            f"{lost.get('unparseable', 0)} unparseable, {lost.get('duplicate', 0)} duplicates"
            + (f", {lost['pending']} pending" if lost.get("pending") else ""))
    if best is None:
        return f"<p>{escape(line)}; no program succeeded.</p>"
    scores = ", ".join(f"{k}={v:.4g}" for k, v in best["scores"].items())
    return f"<p>{escape(line)}; best #{best['id']}: scalar {best['scalar']:.6g} ({escape(scores)}).</p>"


def _curves(page: dict) -> str:
    c = page["curves"]
    if not c["iterations"]:
        return '<p class="muted">No successful program yet.</p>'
    scalar = svg.steps({"scalar": (c["iterations"], c["scalar"])}, "iteration", "best scalar so far")
    objectives = svg.steps({name: (c["iterations"], ys) for name, ys in c["objectives"].items()},
                           "iteration", "best value so far, per objective")
    return f'<div class="charts">{scalar}{objectives}</div>'


def _front(page: dict) -> str:
    """The front over every objective (the one `evo show` prints), in red in each panel: a scatter
    per pair of objectives, and parallel coordinates of all of them from three on."""
    f = page["front"]
    if not f["points"]:
        return '<p class="muted">No successful program yet.</p>'
    names = f["objectives"]
    charts = []
    for x, y in f["pairs"]:
        i, j = names.index(x), names.index(y)
        charts.append(svg.scatter([[p[i], p[j]] for p in f["points"]], f["front"], f["ids"], x, y, joined=len(names) == 2))
    if len(names) > 2:
        charts.append(svg.parallel(f["points"], f["front"], f["ids"], names, f["minimize"]))
    on = sum(f["front"])
    over = f"of {escape(names[0])} and {escape(names[1])}" if len(names) == 2 else f"over all {len(names)} objectives"
    return (f'<div class="charts">{"".join(charts)}</div><p>{on} of {len(f["points"])} programs on the front {over} '
            f'({f["distinct"]} distinct score vectors: the front <code>evo show</code> prints), red in every chart.</p>')


def _grid(page: dict) -> str:
    g = page["grid"]
    if g is None:
        return '<p class="muted">This run has no [features]: no MAP-Elites grid.</p>'
    x = g["features"][0]
    y: dict[str, Any] = g["features"][1] if len(g["features"]) > 1 else {"name": "", "range": None}
    filled = sum(v is not None for row in g["values"] for v in row)
    cells = len(g["values"]) * len(g["values"][0])
    chart = svg.heatmap(g["values"], x["name"], y["name"], x["range"], y["range"])
    return f'<div class="charts">{chart}</div><p>{filled} of {cells} cells filled (best scalar per cell).</p>'


def _diff_line(line: str) -> str:
    kind = "hunk" if line.startswith(("@@", "---", "+++")) else "add" if line.startswith("+") else "del" if line.startswith("-") else ""
    return f'<span class="{kind}">{escape(line)}</span>' if kind else escape(line)


def _lineage(page: dict) -> str:
    steps = page["lineage"]
    if not steps:
        return '<p class="muted">No best program yet.</p>'
    parts = []
    for step in steps:
        title = (f"#{step['id']} (iteration {step['iteration']}, scalar {step['scalar']:.6g}, "
                 f"policy {step['policy']})")
        if step["parent"] is None:
            parts.append(f"<h3>{escape(title)}: the start</h3><pre>{escape(step['code'])}</pre>")
            continue
        skipped = step.get("skipped")
        if skipped:
            parts.append(f'<p class="muted">{skipped["steps"]} steps not shown: #{skipped["first"]} '
                         f'(iteration {skipped["iterations"][0]}, scalar {skipped["scalar"][0]:.6g}) to #{skipped["last"]} '
                         f'(iteration {skipped["iterations"][1]}, scalar {skipped["scalar"][1]:.6g}); '
                         "the whole genealogy: evo show DIR --lineage FILE.</p>")
        body = "\n".join(map(_diff_line, step["diff"])) or "(same code)"
        cut = f"\n... {step['cut']} more lines" if step["cut"] else ""
        parts.append(f"<h3>{escape(title)} from #{step['parent']}</h3><pre>{body}{escape(cut)}</pre>")
    return "".join(parts)


def _policies(page: dict) -> str:
    rows = [[name, s["replies"], s["proposals"], s["evaluated"], s["failures"], s["improvements"], s["unparseable"], s["duplicates"],
             f"{s['improvements'] / s['proposals']:.3f}" if s["proposals"] else "-"]
            for name, s in page["policies"].items()]
    if not rows:
        return '<p class="muted">No proposals yet.</p>'
    return _table(["policy", "replies", "programs proposed", "evaluated", "failures", "improvements", "unparseable", "duplicates",
                   "improvement rate"], rows)


def _failures(page: dict) -> str:
    if not page["failures"]:
        return '<p class="muted">No failures.</p>'
    return _table(["kind", "candidates"], [[kind, n] for kind, n in page["failures"].items()])


def _why(page: dict) -> str:
    if not page["why"]:
        return '<p class="muted">No evaluation failed.</p>'
    rows = [[entry["count"], entry["kind"], entry["message"], f"#{entry['example']}", entry["output"]] for entry in page["why"]]
    return _table(["children", "kind", "message (numbers aside)", "example", "its output ended with"], rows)


def _why_unparsed(page: dict) -> str:
    if not page["why_unparsed"]:
        return '<p class="muted">Every reply held the programs asked for.</p>'
    rows = [[entry["count"], entry["message"], entry["iteration"]] for entry in page["why_unparsed"]]
    return _table(["proposals", "message (numbers aside)", "first at iteration"], rows)


def _training(page: dict) -> str:
    """The policy's training during the search (evo run --train); '' when it did not train."""
    t = page.get("training")
    if t is None:
        return ""
    rows = [[step, "-" if reward is None else f"{reward:.4g}", "-" if kl is None else f"{kl:.3g}"]
            for step, reward, kl in t["curve"]]
    head = (f"<p>{escape(str(t['algo']))}, one PPO step every {escape(str(t['every']))} committed iterations: "
            f"{escape(str(t['steps']))} steps, {float(t['seconds']):.1f} s spent training.</p>")
    if t.get("stopped"):
        head += f"<p>Training stopped: {escape(str(t['stopped']))}</p>"
    return head + (_table(["step", "reward (mean scalar)", "KL"], rows) if rows else "")


SECTIONS = (
    ("Best so far", _curves),
    ("Pareto front", _front),
    ("MAP-Elites grid", _grid),
    ("Lineage of the best program", _lineage),
    ("Policies", _policies),
    ("Failures by kind", _failures),
    ("Why children fail", _why),
    ("Why proposals were unparseable or cut off", _why_unparsed),
    ("Training during the search", _training),
)


def render(page: dict) -> str:
    """The whole HTML document."""
    title = f"evo report: {page['name']}"
    parts = ((heading, section(page)) for heading, section in SECTIONS)
    body = "".join(f"<h2>{escape(heading)}</h2>{html}" for heading, html in parts if html)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f'<style>{STYLE}</style></head><body><h1>{escape(title)}</h1>{_summary(page)}{body}</body></html>\n')
