"""`evo check`'s report of an initial program's evaluation, as plain values (the `--json` shape):
`{"scores": {...}, "scalar": x, "features": {...}, ...}` or `{"error": {"kind": ..., "message": ...}, ...}`."""

from __future__ import annotations

from typing import Any

import numpy as np


OUTPUT_LINES, OUTPUT_CHARS = 20, 3000  # of the evaluation's captured output shown
SCALE_RATIO = 10.0  # objectives whose sizes differ by more than this get `scale_warning`


def output_tail(evaluation: Any) -> str:
    """The tail of what the scorer and the candidate printed, bounded and escaped."""
    from evo.feedback import clean, tail

    return clean(tail(evaluation.output, OUTPUT_CHARS, OUTPUT_LINES)) if evaluation.output.strip() else ""


def report(spec: Any, code: str, evaluation: Any) -> dict[str, Any]:
    """What `evo check` says of one initial program's evaluation: its scores, scalar, features,
    extras, seconds, feedback and output, or its error (and which cascade stage failed)."""
    from evo.features import as_dict, feature_values
    from evo.scores import BadOutput, real_values, scalarize

    problem = spec.problem
    if not evaluation.ok:
        error = {"kind": evaluation.failure.kind, "message": evaluation.failure.message}
        if problem.cascade and evaluation.stage:  # which stage failed: OpenEvolve's stages often return other keys
            stages = (problem.scorer, *(scorer for scorer, _ in problem.cascade))
            error.update(stage=evaluation.stage, scorer=stages[evaluation.stage - 1])
        artifacts = {"feedback": evaluation.feedback} if evaluation.feedback else {}  # an EvaluationResult's traceback
        return {"error": error, **artifacts, "output": output_tail(evaluation)}
    try:
        features = feature_values(spec.features, code, evaluation.scores, evaluation.extras, problem.objectives)
    except BadOutput as error:
        return {"error": {"kind": "bad_output", "message": str(error)}, "output": output_tail(evaluation)}
    return {
        "scores": real_values(evaluation.scores, problem.objectives, problem.minimize),
        "scalar": float(scalarize(evaluation.scores, np.array(problem.weights))),
        "features": as_dict(spec.features, features),
        "extras": dict(evaluation.extras),
        "seconds": round(evaluation.seconds, 4),
        "feedback": evaluation.feedback,
        "stage": evaluation.stage,
        "output": output_tail(evaluation),
    }


def objective_sizes(spec: Any, reports: list[dict[str, Any]]) -> dict[str, float]:
    """Each objective's size: the largest magnitude among the initial programs' scores, at least
    the range a `[features.NAME] source = "objective:..."` declares for it, else at least 1 (an
    initial score near 0 says nothing of an objective's scale; [0, 1] is the usual one)."""
    declared: dict[str, float] = {}
    for feature in spec.features:
        name = feature.source.removeprefix("objective:")
        if feature.source.startswith("objective:"):
            declared[name] = max(declared.get(name, 0.0), *map(abs, feature.range))
    sizes = {name: declared.get(name, 1.0) for name in spec.problem.objectives}
    for report in reports:
        for name, value in report.get("scores", {}).items():
            sizes[name] = max(sizes[name], abs(value))
    return sizes


def scale_warning(sizes: dict[str, float], ratio: float = SCALE_RATIO) -> str | None:
    """One line when the largest objective is more than `ratio` times the smallest
    (`objective_sizes`), naming both and how to normalize; None otherwise."""
    known = {name: size for name, size in sizes.items() if size > 0}
    if len(known) < 2:
        return None
    large, small = max(known, key=known.__getitem__), min(known, key=known.__getitem__)
    if known[large] <= ratio * known[small]:
        return None
    return (f"warning: objective scales differ by more than {ratio:g}x ({large} about {known[large]:.3g}, "
            f"{small} about {known[small]:.3g}): {large} dominates the scalar and the per-objective plot; "
            f"have the scorer divide each objective by a fixed typical size so all lie near [0, 1] "
            f"(docs/spec.md, \"Objectives of unequal scale\")")
