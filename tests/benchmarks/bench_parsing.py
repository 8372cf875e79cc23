"""Reply parsing and report benchmark (issue 27): adversarial `diff` replies through the
line parser against the regex parser it replaced (the baseline, measured in the same run, on
smaller replies: it is quadratic), and `evo report` on a long lineage.

    python tests/benchmarks/bench_parsing.py [--quick]

The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evo import prompts  # noqa: E402
from evo.prompts import ParseFailure, Shown, build  # noqa: E402

REGEX_EDIT = re.compile(r"<{5,}\s*SEARCH[ \t]*\n(.*?)\n?={5,}[ \t]*\n(.*?)\n?>{5,}\s*REPLACE", re.DOTALL)  # the baseline: one regex over the reply
BASE = "# EVOLVE-BLOCK-START\ndef f(x):\n    return x + 1\n# EVOLVE-BLOCK-END\n"


def adversarial(size: int) -> str:
    line = "<<<<<<< SEARCH\n"
    return line * (size // len(line))


def seconds(work) -> float:
    started = time.perf_counter()
    try:
        work()
    except ParseFailure:
        pass
    return time.perf_counter() - started


def parsing(sizes_old: list[int], sizes_new: list[int]) -> dict:
    prompt = build("diff", [Shown(BASE, 0.5)], rng=np.random.default_rng(0))
    old = {size: seconds(lambda: REGEX_EDIT.findall(adversarial(size))) for size in sizes_old}
    new = {size: seconds(lambda: prompts.parse(prompt, adversarial(size))) for size in sizes_new}
    return {"regex_s": old, "line_parser_s": new}


def report(n: int) -> dict:
    from evo.report import gather, render
    from tests.test_report import long_run

    records = long_run(n)
    started = time.perf_counter()
    html = render(gather(records))
    return {"programs": n, "seconds": round(time.perf_counter() - started, 3), "bytes": len(html.encode())}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    result = parsing([4_000, 8_000, 16_000] if quick else [9_000, 18_000, 37_000],
                     [37_000, 1_000_000] if quick else [37_000, 1_000_000, 4_000_000])
    for size, took in result["regex_s"].items():
        print(f"regex parser, {size / 1000:.0f} KB of SEARCH lines: {took:.3f} s")
    for size, took in result["line_parser_s"].items():
        print(f"line parser,  {size / 1000:.0f} KB of SEARCH lines: {took:.4f} s")
    result["report"] = [report(n) for n in ((2_000,) if quick else (12_000, 20_000))]
    for row in result["report"]:
        print(f"report of a {row['programs']}-step lineage: {row['seconds']:.2f} s, {row['bytes'] / 1e6:.2f} MB")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
