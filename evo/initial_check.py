"""`evo check`'s report of an initial program's evaluation, as plain values (the `--json` shape):
`{"scores": {...}, "scalar": x, "features": {...}, ...}` or `{"error": {"kind": ..., "message": ...}, ...}`."""

from __future__ import annotations

from typing import Any

import numpy as np


OUTPUT_LINES, OUTPUT_CHARS = 20, 3000  # of the evaluation's captured output shown


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
