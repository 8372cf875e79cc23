"""`evo show`'s text: the lines printed for a run's summary and for one program
(evo/report/summary.py gathers both), every stored string escaped for the terminal."""

from __future__ import annotations

from pathlib import Path

from evo.feedback import printable
from evo.report.summary import LINEAGE_IDS


def program_lines(view: dict) -> list[str]:
    """Program `view` (summary.program_view): origin, scores or failure, lineage, code, feedback."""
    copy = f", a {printable(view['origin'])} copy of #{view['source']}" if view["source"] is not None else ""
    parents = ", ".join(f"#{i}" for i in view["parents"]) or "none"
    lines = [f"#{view['id']}: iteration {view['iteration']}, island {view['island']}, "
             f"policy {printable(view['policy']) or '-'}{copy}, parents {parents}"]
    if view["failure"] is None:
        scores = ", ".join(f"{k}={v:.6g}" for k, v in view["scores"].items())
        lines.append(f"scalar {view['scalar']:.6g} ({scores})")
    else:
        lines.append(f"failed {printable(view['failure']['kind'])}: {printable(view['failure']['message'])}")
    lineage, cut = view["lineage"][-LINEAGE_IDS:], max(0, len(view["lineage"]) - LINEAGE_IDS)
    earlier = f"({cut} earlier) " if cut else ""
    lines.append(f"lineage (first parents, oldest first): {earlier}{' -> '.join(f'#{i}' for i in lineage)}")
    lines.append(printable(view["code"].rstrip()))
    if view["feedback"].strip():
        lines.append("feedback (the scorer's text; for a failure, the end of its output):")
        lines += [f"  | {printable(line)}" for line in view["feedback"].strip().splitlines()[-20:]]
    return lines


def summary_lines(data: dict, directory: Path, full_failures: bool) -> list[str]:
    """The run's summary (summary.summary): counts, best, policies, training, front, failures."""
    best = data["best"]
    coverage = "" if data["coverage"] is None else f", coverage {data['coverage']:.0%}"
    pending = f", {data['pending']} pending (proposed, not committed when the run stopped)" if data["pending"] else ""
    lines = [f"{printable(str(directory))}: {data['iterations']} iterations, {data['programs']} programs evaluated "
             f"({data['failures']} failed){coverage}, "
             f"{data['unparseable']} unparseable, {data['duplicates']} duplicates{pending}"]
    if best is not None:
        scores = ", ".join(f"{k}={v:.4g}" for k, v in best["scores"].items())
        lines.append(f"best #{best['id']}: scalar {best['scalar']:.6g} ({scores})\n{printable(best['code'].rstrip())}")
    lines += policy_lines(data["policies"])
    if "training" in data:
        lines += training_lines(data["training"])
    front = data["pareto"]
    lines.append(f"pareto front: {len(front)} distinct score vectors ({sum(e['count'] for e in front)} programs)")
    for entry in front[:20]:
        scores = ", ".join(f"{k}={v:.4g}" for k, v in entry["scores"].items())
        same = f" and {entry['count'] - 1} more with the same scores" if entry["count"] > 1 else ""
        lines.append(f"  #{entry['id']}{same}: {entry['scalar']:.4g} ({scores})")
    return (lines + failure_lines(data["failure_messages"], data["failures"], directory, full_failures)
            + unparsed_lines(data["unparseable_messages"], data["unparseable"], directory, full_failures))


def policy_lines(policies: dict[str, dict[str, int]]) -> list[str]:
    """Per policy: proposals, failures, improvements (evo/policy_mix.py)."""
    return [f"policy {printable(name)}: {s['replies']} replies, {s['proposals']} programs proposed, "
            f"{s['failures']} failed, {s['improvements']} improvements "
            f"({s['unparseable']} unparseable, {s['duplicates']} duplicates)" for name, s in policies.items()]


def training_lines(t: dict) -> list[str]:
    """The run's training (evo/training_log.py figures): steps, last reward, KL, why it stopped."""
    reward = "-" if t["reward"] is None else f"{t['reward']:.4g}"
    kl = "-" if t["kl"] is None else f"{t['kl']:.3g}"
    lines = [f"training ({printable(str(t['algo']))}, every {t['every']} iterations): {t['steps']} steps, last reward {reward}, "
             f"KL {kl}, {t['seconds']:.1f} s training"]
    return lines + ([f"training stopped: {printable(t['stopped'])}"] if t["stopped"] else [])


def failure_lines(messages: list[dict], failed: int, directory: Path, full: bool) -> list[str]:
    """The most common failure messages (all ten and each example's output with `full`,
    else the first three and a pointer to --failures)."""
    if not messages:
        return ["why children fail: no failures (every evaluated program returned scores)"] if full else []
    lines = [f"why children fail ({failed} failed evaluations, most common messages):"]
    for entry in messages if full else messages[:3]:
        lines.append(f"  {entry['count']:>5} x {entry['kind']}: {printable(entry['message'])} (e.g. #{entry['example']})")
        if full:
            lines += [f"          | {printable(line)}" for line in entry["output"].splitlines()]
    if not full:
        lines.append(f"  (all of them, with each example's output: evo show {directory} --failures)")
    return lines


def unparsed_lines(messages: list[dict], unparseable: int, directory: Path, full: bool) -> list[str]:
    """The most common reasons replies held no program to evaluate (unparseable, cut off)."""
    if not messages:
        return []
    lines = [f"why proposals were lost before evaluation ({unparseable} unparseable or cut off, most common messages):"]
    for entry in messages if full else messages[:3]:
        lines.append(f"  {entry['count']:>5} x {printable(entry['message'])} (e.g. iteration {entry['iteration']})")
    if not full:
        lines.append(f"  (all of them: evo show {directory} --failures)")
    return lines
