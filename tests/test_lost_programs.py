"""Every lost program is visible: a run whose policy mostly answers in no parseable form warns
once at its end, and `evo show` (text, --failures, --json) and `evo report` count its
unparseable proposals with their most common message; the run line, `evo show` and the report
give one "evaluated" count."""

from __future__ import annotations

import html
import re
from pathlib import Path

from evo import policies, run_dir
from evo.loop import RunOptions
from evo.policies.base import Completion
from evo.report import RunRecords, gather, render, summary, text

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "function_minimization" / "problem.toml"


class MostlyJunk:
    """`mutate:`, but three replies of four say something that holds no program."""

    def __init__(self) -> None:
        self.inner, self.calls = policies.load("mutate:"), 0

    def generate(self, prompts, **options) -> list[list[Completion]]:
        replies = self.inner.generate(prompts, **options)
        out = []
        for row in replies:
            kept = []
            for completion in row:
                self.calls += 1
                kept.append(completion if self.calls % 4 == 0 else Completion("I would rather not write code today."))
            out.append(kept)
        return out


def test_unparseable_replies_are_counted_shown_and_warned_about(tmp_path):
    directory = tmp_path / "run"
    config = run_dir.new_config(SPEC, "mutate:", 0, directory, {"search.iterations": 6, "search.target": 2.0},
                                RunOptions(), "process")
    line = run_dir.execute(config, MostlyJunk(), progress=False)
    warning, last = line.splitlines()
    assert warning.startswith("warning: ") and "unparseable" in warning and f"evo show {directory} --failures" in warning
    evaluated = int(re.search(r"(\d+) evaluated", last).group(1))
    unparseable = int(re.search(r"(\d+) unparseable", last).group(1))
    assert unparseable > evaluated > 0

    data = summary.summary(directory)
    assert data["programs"] == evaluated and data["unparseable"] == unparseable
    (entry,) = data["unparseable_messages"]
    assert entry["count"] == unparseable and entry["message"]
    shown = "\n".join(text.summary_lines(data, directory, full_failures=True))
    assert f"{evaluated} programs evaluated" in shown
    assert f"{unparseable} x {entry['message']}" in shown, shown

    page = gather(RunRecords.read(directory))
    assert page["programs"] == evaluated and page["why_unparsed"][0]["count"] == unparseable
    assert html.escape(entry["message"]) in render(page)
