"""`evo show DIR [--json] [--plots] [--lineage FILE] [--failures] [--program N]`: what a run found."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import click
import numpy as np

from evo.errors import UserError


def summary(directory: Path) -> dict:
    """The DESIGN.md shape: programs, failures, iterations, best, pareto, coverage (+ counts)."""
    from evo import failures
    from evo.scores import real_values
    from evo.database import Database, database_file
    from evo.database.journal import outcome_counts, policy_counts, reply_counts
    from evo.policy_mix import policy_table
    from evo.run_dir import LEGACY_JOURNAL_FILE, policy_names

    if not database_file(directory).is_file():
        raise UserError(f"{directory}: no run here (no {database_file(directory).name}); start one with evo run SPEC --out {directory}")
    with Database.open(directory, read_only=True) as db:
        stats = db.stats()
        objectives = db.config.objectives
        best = db.best()
        minimize = db.config.minimize
        pareto = failures.distinct_front(db.pareto(), objectives, minimize)
        has_features = bool(db.config.features)
        counts = db.journal.counts()
        proposed = db.journal.policy_counts()
        replies = db.journal.reply_counts()
        programs = dict(db.programs)
        messages = failures.common(programs.values())
    legacy = directory / LEGACY_JOURNAL_FILE
    if legacy.is_file():  # a run of the two-file layout, not resumed since: its journal, read-only
        try:
            with closing(sqlite3.connect(f"file:{legacy}?mode=ro", uri=True)) as connection:
                counts, proposed = outcome_counts(connection), policy_counts(connection)
                replies = reply_counts(connection)
        except sqlite3.DatabaseError as error:
            raise UserError(f"{legacy}: the old run journal is unreadable ({error})") from None
    from evo.training_log import figures

    training = figures(directory)
    return {
        **({"training": training} if training is not None else {}),
        "programs": stats["programs"],
        "failures": stats["failures"],
        "iterations": stats["iterations"],
        "best": None if best is None else {
            "id": best.id, "scalar": best.scalar,
            "scores": real_values(best.vector, objectives, minimize), "code": best.code},
        "pareto": pareto,
        "coverage": stats["coverage"] if has_features else None,
        "failure_messages": messages,
        "unparseable": counts["parse"],
        "duplicates": counts["duplicate"],
        "policies": policy_table(proposed, programs, policy_names(directory), replies),
    }


LINEAGE_IDS = 20  # of a program's lineage, the latest ancestors listed by `--program`


def program_view(directory: Path, program_id: int) -> dict:
    """Program `program_id` of the run: where it came from (parents, lineage by first parent,
    oldest first), its scores (real values) or its failure, and its code."""
    from evo.database import Database, database_file
    from evo.database.records import ancestry, original
    from evo.scores import real_values

    if not database_file(directory).is_file():
        raise UserError(f"{directory}: no run here (no {database_file(directory).name}); start one with evo run SPEC --out {directory}")
    with Database.open(directory, read_only=True) as db:
        programs, objectives, minimize = dict(db.programs), db.config.objectives, db.config.minimize
    p = programs.get(program_id)
    if p is None:
        held = f"its programs are #{min(programs)} to #{max(programs)}" if programs else "it holds no program"
        raise UserError(f"{directory}: no program #{program_id} in this run ({held}); see evo show {directory}")
    lineage = [a.id for a in ancestry(programs, original(programs, p.id))][::-1]
    return {"id": p.id, "iteration": p.iteration, "island": p.island, "policy": p.policy, "origin": p.origin,
            "source": p.source, "parents": list(p.parents), "lineage": lineage, "scalar": p.scalar,
            "scores": None if p.scores is None else real_values(p.scores, objectives, minimize),
            "failure": None if p.ok else {"kind": p.failure_kind, "message": p.failure_message},
            "feedback": p.feedback, "code": p.code}


def _echo_program(view: dict) -> None:
    from evo.feedback import printable

    copy = f", a {view['origin']} copy of #{view['source']}" if view["source"] is not None else ""
    parents = ", ".join(f"#{i}" for i in view["parents"]) or "none"
    click.echo(f"#{view['id']}: iteration {view['iteration']}, island {view['island']}, "
               f"policy {printable(view['policy']) or '-'}{copy}, parents {parents}")
    if view["failure"] is None:
        scores = ", ".join(f"{k}={v:.6g}" for k, v in view["scores"].items())
        click.echo(f"scalar {view['scalar']:.6g} ({scores})")
    else:
        click.echo(f"failed {view['failure']['kind']}: {printable(view['failure']['message'])}")
    lineage, cut = view["lineage"][-LINEAGE_IDS:], max(0, len(view["lineage"]) - LINEAGE_IDS)
    earlier = f"({cut} earlier) " if cut else ""
    click.echo(f"lineage (first parents, oldest first): {earlier}{' -> '.join(f'#{i}' for i in lineage)}")
    click.echo(printable(view["code"].rstrip()))
    if view["feedback"].strip():
        click.echo("feedback (the scorer's text; for a failure, the end of its output):")
        for line in view["feedback"].strip().splitlines()[-20:]:
            click.echo(f"  | {printable(line)}")


def heatmap(db, path: Path) -> Path | None:
    """The MAP-Elites archive: the elite's scalar per cell over the first two features."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    features = db.config.features
    if not features:
        return None
    bins = tuple(f.bins for f in features)
    grid = np.full(bins[:2] if len(bins) > 1 else (1, bins[0]), np.nan)
    for cell, (_, scalar) in db.archive.elites.items():
        index = np.unravel_index(cell, bins)
        at = (index[0], index[1]) if len(bins) > 1 else (0, index[0])
        grid[at] = np.fmax(grid[at], scalar)
    fig, ax = plt.subplots(figsize=(6, 5))
    image = ax.imshow(grid.T if len(bins) > 1 else grid, origin="lower", aspect="auto", cmap="viridis")
    fig.colorbar(image, ax=ax, label="best scalar in cell")
    ax.set_xlabel(f"{features[0].name} {list(features[0].range)}")
    ax.set_ylabel(f"{features[1].name} {list(features[1].range)}" if len(features) > 1 else "")
    ax.set_title(f"archive: coverage {db.archive.coverage:.0%}")
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def best_so_far(db, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    programs = db.evaluated()
    iterations = [p.iteration for p in programs]
    running = np.maximum.accumulate([p.value for p in programs]) if programs else np.zeros(0)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.step(iterations, running, where="post")
    ax.set_xlabel("iteration")
    ax.set_ylabel("best scalar so far")
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def export_lineage(db, path: Path) -> Path:
    """The genealogy (parent -> child, source -> copy) as GraphML or node-link JSON."""
    import networkx as nx

    graph = db.genealogy()
    for _, data in graph.nodes(data=True):
        for key, value in list(data.items()):
            if value is None:
                data[key] = "" if key in ("origin", "failure") else float("nan")
    if path.suffix == ".json":
        path.write_text(json.dumps(nx.node_link_data(graph, edges="edges"), default=str))
    else:
        nx.write_graphml(graph, path)
    return path


def _plots(directory: Path) -> list[str]:
    from evo.database import Database

    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return ["plots skipped: matplotlib is missing (pip install 'vpo-evo[plots]')"]
    with Database.open(directory, read_only=True) as db:
        try:
            written = [heatmap(db, directory / "archive.png"), best_so_far(db, directory / "best_so_far.png")]
        except OSError as error:
            raise UserError(f"{directory}: cannot write the plots there ({error.strerror}); "
                            "copy the run somewhere writable first") from None
    return [f"wrote {p}" for p in written if p is not None]


def _echo_policies(policies: dict[str, dict[str, int]]) -> None:
    """Per policy: proposals, failures, improvements (evo/policy_mix.py)."""
    from evo.feedback import printable

    for name, s in policies.items():
        click.echo(f"policy {printable(name)}: {s['replies']} replies, {s['proposals']} programs proposed, "
                   f"{s['failures']} failed, {s['improvements']} improvements "
                   f"({s['unparseable']} unparseable, {s['duplicates']} duplicates)")


@click.command(name="show")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="print the summary as one JSON object")
@click.option("--plots", is_flag=True, help="write DIR/archive.png and DIR/best_so_far.png (needs matplotlib)")
@click.option("--lineage", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="export the genealogy to FILE (.graphml or .json)")
@click.option("--failures", is_flag=True, help="list the ten most common failure messages, each with an example's output")
@click.option("--program", "program_id", type=int, default=None,
              help="print program N: its scores (or failure), parents, lineage and code")
def command(directory: Path, as_json: bool, plots: bool, lineage: Path | None, failures: bool,
            program_id: int | None) -> None:
    """What the run in DIRECTORY found: best program, Pareto front, coverage."""
    if program_id is not None:
        view = program_view(directory, program_id)
        if as_json:
            click.echo(json.dumps(view))
        else:
            _echo_program(view)
        return
    data = summary(directory)
    notes = _plots(directory) if plots else []
    if lineage is not None:
        from evo.database import Database

        with Database.open(directory, read_only=True) as db:
            try:
                notes.append(f"wrote {export_lineage(db, lineage)}")
            except OSError as error:
                raise UserError(f"{lineage}: cannot write the lineage ({error.strerror}); pick another path") from None
    if as_json:
        click.echo(json.dumps(data))
        for note in notes:
            click.echo(note, err=True)
        return
    from evo.feedback import printable

    best = data["best"]
    coverage = "" if data["coverage"] is None else f", coverage {data['coverage']:.0%}"
    click.echo(f"{printable(str(directory))}: {data['iterations']} iterations, {data['programs']} programs "
               f"({data['failures']} failed){coverage}, "
               f"{data['unparseable']} unparseable, {data['duplicates']} duplicates")
    if best is not None:
        scores = ", ".join(f"{k}={v:.4g}" for k, v in best["scores"].items())
        click.echo(f"best #{best['id']}: scalar {best['scalar']:.6g} ({scores})\n{printable(best['code'].rstrip())}")
    _echo_policies(data["policies"])
    if "training" in data:
        t = data["training"]
        reward = "-" if t["reward"] is None else f"{t['reward']:.4g}"
        kl = "-" if t["kl"] is None else f"{t['kl']:.3g}"
        click.echo(f"training ({printable(str(t['algo']))}, every {t['every']} iterations): {t['steps']} steps, last reward {reward}, "
                   f"KL {kl}, {t['seconds']:.1f} s training")
        if t["stopped"]:
            click.echo(f"training stopped: {printable(t['stopped'])}")
    front = data["pareto"]
    click.echo(f"pareto front: {len(front)} distinct score vectors ({sum(e['count'] for e in front)} programs)")
    for entry in front[:20]:
        scores = ", ".join(f"{k}={v:.4g}" for k, v in entry["scores"].items())
        same = f" and {entry['count'] - 1} more with the same scores" if entry["count"] > 1 else ""
        click.echo(f"  #{entry['id']}{same}: {entry['scalar']:.4g} ({scores})")
    _echo_failures(data["failure_messages"], data["failures"], directory, full=failures)
    for note in notes:
        click.echo(note)


def _echo_failures(messages: list[dict], failed: int, directory: Path, full: bool) -> None:
    """The most common failure messages (all ten and each example's output with `full`,
    else the first three and a pointer to --failures)."""
    from evo.feedback import printable

    if not messages:
        if full:
            click.echo("why children fail: no failures (every evaluated program returned scores)")
        return
    click.echo(f"why children fail ({failed} failed evaluations, most common messages):")
    for entry in messages if full else messages[:3]:
        click.echo(f"  {entry['count']:>5} x {entry['kind']}: {printable(entry['message'])} (e.g. #{entry['example']})")
        if full:
            for line in entry["output"].splitlines():
                click.echo(f"          | {printable(line)}")
    if not full:
        click.echo(f"  (all of them, with each example's output: evo show {directory} --failures)")
