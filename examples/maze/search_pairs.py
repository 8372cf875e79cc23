"""Paired search success from `evo compare` run directories: each (instance, seed) run of one
policy against the same run of another, pooled over several compare outputs; a bootstrap CI
of the difference in success rate across the paired runs (evo.metrics.paired_test).

    python examples/maze/search_pairs.py examples/maze/results-clusters/compare-s5150/search RUNS/s8080/search --baseline grpo --baseline warmup
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from evo import metrics
from evo.compare.search import best_so_far


def successes(search: Path) -> dict[str, dict[str, bool]]:
    """policy -> run name -> reached the target (the oracle optimum) within the run's calls."""
    result: dict[str, dict[str, bool]] = {}
    for policy in sorted(p for p in search.iterdir() if p.is_dir()):
        for run in sorted(r for r in policy.iterdir() if (r / "run" / "run.json").is_file()):
            overrides = json.loads((run / "run" / "run.json").read_text())["overrides"]
            curve = best_so_far(run / "run", int(overrides["search.iterations"]), float(overrides["search.target"]))
            result.setdefault(policy.name, {})[f"{search}:{run.name}"] = bool(curve[-1] >= 1.0 - 1e-9)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("search", nargs="+", type=Path, help="the search/ directories of evo compare outputs")
    parser.add_argument("--baseline", action="append", default=[])
    args = parser.parse_args()
    pooled: dict[str, dict[str, bool]] = {}
    for search in args.search:
        for policy, runs in successes(search).items():
            pooled.setdefault(policy, {}).update(runs)
    runs = sorted(set.intersection(*(set(r) for r in pooled.values())))
    table = {policy: np.array([pooled[policy][r] for r in runs]) for policy in pooled}
    for policy, solved in table.items():
        print(f"{policy}: {int(solved.sum())} / {len(solved)} runs reach the optimum ({solved.mean():.3f})")
    for baseline in args.baseline:
        for policy, solved in table.items():
            if policy != baseline:
                test = metrics.paired_test(solved, table[baseline])
                print(f"{policy} - {baseline}: {test.mean_difference:+.3f} [{test.low:+.3f}, {test.high:+.3f}], "
                      f"p={test.p_value:.2g} over {len(runs)} paired runs")


if __name__ == "__main__":
    main()
