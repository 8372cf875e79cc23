"""OpenEvolve-style evaluators run unchanged under `evo check` (patterns of its
function_minimization, signal_processing and circle_packing examples, written here, not
copied): `evaluate(program_path)` returning a dict of metrics or an object with `metrics`
and `artifacts`, an `error` key, lower-is-better metrics, a temporary script run in a
subprocess. Each score under `evo check` equals the evaluator's own, called directly."""

import importlib.util
import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

EVO = shutil.which("evo") or pytest.skip("the evo console script is not installed", allow_module_level=True)

FUNCTION_MINIMIZATION = {
    "initial.py": '''
        import numpy as np

        # EVOLVE-BLOCK-START
        def search_algorithm(iterations=200, bounds=(-5, 5)):
            rng = np.random.default_rng(0)
            best_x, best_y = rng.uniform(*bounds), rng.uniform(*bounds)
            best = evaluate_function(best_x, best_y)
            for _ in range(iterations):
                x, y = rng.uniform(*bounds), rng.uniform(*bounds)
                value = evaluate_function(x, y)
                if value < best:
                    best_x, best_y, best = x, y, value
            return best_x, best_y, best
        # EVOLVE-BLOCK-END

        def evaluate_function(x, y):
            return np.sin(x) * np.cos(y) + np.sin(x * y) + (x ** 2 + y ** 2) / 20

        def run_search():
            return search_algorithm()
        ''',
    "evaluator.py": '''
        import importlib.util
        import time
        from dataclasses import dataclass, field

        import numpy as np

        GLOBAL_MIN = -1.704

        @dataclass
        class EvaluationResult:  # the shape of OpenEvolve's, duck-typed
            metrics: dict
            artifacts: dict = field(default_factory=dict)

        def _load(program_path):
            spec = importlib.util.spec_from_file_location("program", program_path)
            program = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(program)
            return program

        def evaluate(program_path):
            try:
                program = _load(program_path)
                values = []
                for trial in range(3):
                    x, y, value = program.run_search()
                    values.append(float(value))
                value_score = 1.0 / (1.0 + abs(np.mean(values) - GLOBAL_MIN))
                reliability = 1.0 / (1.0 + float(np.std(values)))
                return {"value_score": value_score, "reliability_score": reliability,
                        "combined_score": 0.7 * value_score + 0.3 * reliability}
            except Exception as error:
                print(f"Evaluation failed: {error}")
                return {"value_score": 0.0, "reliability_score": 0.0, "combined_score": 0.0, "error": str(error)}

        def evaluate_stage1(program_path):
            metrics = evaluate(program_path)
            return EvaluationResult(metrics=metrics, artifacts={"stage": "first stage ran", "blob": b"123"})
        ''',
    "problem.toml": '''
        [problem]
        program = "initial.py"
        scorer = "evaluator.py:evaluate"
        objectives = ["combined_score", "value_score", "reliability_score"]
        weights = [1.0, 0.0, 0.0]
        ''',
}

SIGNAL_PROCESSING = {
    "initial.py": '''
        import numpy as np

        # EVOLVE-BLOCK-START
        def process_signal(signal, window_size=5):
            kernel = np.ones(window_size) / window_size
            return np.convolve(signal, kernel, mode="valid")
        # EVOLVE-BLOCK-END

        def run_signal_processing(signal):
            return process_signal(np.asarray(signal))
        ''',
    "evaluator.py": '''
        import importlib.util
        from dataclasses import dataclass

        import numpy as np

        @dataclass
        class EvaluationResult:
            metrics: dict
            artifacts: dict

        def evaluate(program_path):
            spec = importlib.util.spec_from_file_location("program", program_path)
            program = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(program)
            t = np.linspace(0, 4 * np.pi, 200)
            clean = np.sin(t)
            noisy = clean + np.random.default_rng(1).normal(0, 0.3, t.size)
            filtered = np.asarray(program.run_signal_processing(noisy.tolist()))
            delay = t.size - filtered.size
            lag_error = float(np.mean(np.abs(filtered - clean[delay:])))
            slope_changes = float(np.sum(np.diff(np.sign(np.diff(filtered))) != 0))
            return EvaluationResult(
                metrics={"overall_score": 1.0 / (1.0 + lag_error + slope_changes / 100), "lag_error": lag_error,
                         "slope_changes": slope_changes},
                artifacts={"summary": f"lag {lag_error:.3f}, {slope_changes:g} slope changes"})
        ''',
    "problem.toml": '''
        [problem]
        program = "initial.py"
        scorer = "evaluator.py:evaluate"
        objectives = ["overall_score", "lag_error", "slope_changes"]
        minimize = ["lag_error", "slope_changes"]
        ''',
}

CIRCLE_PACKING = {
    "initial.py": '''
        import numpy as np

        # EVOLVE-BLOCK-START
        def construct_packing(n=6):
            centers = np.array([[0.25 + 0.5 * (i % 2), 1 / 6 + (i // 2) / 3] for i in range(n)])
            radii = np.full(n, 0.12)
            return centers, radii, float(radii.sum())
        # EVOLVE-BLOCK-END

        def run_packing():
            return construct_packing()
        ''',
    "evaluator.py": '''
        import os, pickle, subprocess, sys, tempfile, time

        import numpy as np

        def run_with_timeout(program_path, timeout_seconds=20):
            with tempfile.NamedTemporaryFile(suffix=".py", delete=False) as temp_file:
                script = f"""
        import sys, pickle, importlib.util
        spec = importlib.util.spec_from_file_location("program", {program_path!r})
        program = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(program)
        centers, radii, total = program.run_packing()
        with open({temp_file.name + '.results'!r}, "wb") as out:
            pickle.dump({{"centers": centers, "radii": radii, "sum": total}}, out)
        """
                temp_file.write(script.encode())
                temp_path = temp_file.name
            try:
                process = subprocess.Popen([sys.executable, temp_path], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                stdout, stderr = process.communicate(timeout=timeout_seconds)
                if process.returncode != 0:
                    raise RuntimeError(f"the program failed: {stderr.decode()[-200:]}")
                with open(temp_path + ".results", "rb") as results:
                    found = pickle.load(results)
                return found["centers"], found["radii"], found["sum"]
            finally:
                for path in (temp_path, temp_path + ".results"):
                    if os.path.exists(path):
                        os.unlink(path)

        def evaluate(program_path):
            try:
                start = time.time()
                centers, radii, total = run_with_timeout(program_path)
                valid = bool(np.all(radii > 0) and np.all(centers - radii[:, None] >= -1e-9)
                             and np.all(centers + radii[:, None] <= 1 + 1e-9))
                return {"sum_radii": float(total) if valid else 0.0, "target_ratio": float(total) / 2.635 if valid else 0.0,
                        "validity": 1.0 if valid else 0.0, "combined_score": float(total) / 2.635 if valid else 0.0}
            except Exception as error:
                print(f"Evaluation failed completely: {error}")
                return {"sum_radii": 0.0, "target_ratio": 0.0, "validity": 0.0, "combined_score": 0.0}
        ''',
    "problem.toml": '''
        [problem]
        program = "initial.py"
        scorer = "evaluator.py:evaluate"
        objectives = ["combined_score", "validity"]
        weights = [1.0, 0.0]
        ''',
}


def write(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip())
    return tmp_path / "problem.toml"


def check(spec: Path) -> tuple[int, dict]:
    result = subprocess.run([EVO, "check", "--json", str(spec)], capture_output=True, text=True, timeout=120)
    assert result.stdout, result.stderr
    return result.returncode, json.loads(result.stdout)


def direct(directory: Path, function: str = "evaluate"):
    """The evaluator called the way OpenEvolve calls it: in this process, on the program's path."""
    spec = importlib.util.spec_from_file_location(f"evaluator_{directory.name}", directory / "evaluator.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, function)(str(directory / "initial.py"))


def test_function_minimization_scores_as_its_evaluator_does(tmp_path):
    code, report = check(write(tmp_path, FUNCTION_MINIMIZATION))
    assert code == 0, report
    expected = direct(tmp_path)
    assert report["scores"] == pytest.approx({k: expected[k] for k in report["scores"]}, rel=1e-12)
    assert report["scalar"] == pytest.approx(expected["combined_score"])


def test_an_evaluation_result_object_and_its_artifacts(tmp_path):
    spec = write(tmp_path, FUNCTION_MINIMIZATION)
    spec.write_text(spec.read_text().replace("evaluator.py:evaluate", "evaluator.py:evaluate_stage1"))
    code, report = check(spec)
    assert code == 0, report
    assert report["scores"] == pytest.approx({k: v for k, v in direct(tmp_path).items() if k in report["scores"]})
    assert "stage: first stage ran" in report["feedback"] and "blob: (3 bytes)" in report["feedback"]


def test_an_error_key_is_the_failure_and_the_output_is_shown(tmp_path):
    write(tmp_path, FUNCTION_MINIMIZATION)
    (tmp_path / "initial.py").write_text("def run_search():\n    raise ValueError('no minimum \\x1b[31mhere')\n")
    code, report = check(tmp_path / "problem.toml")
    assert code == 1
    assert report["error"] == {"kind": "exception", "message": "the scorer reported: no minimum \x1b[31mhere"}
    assert "Evaluation failed: no minimum \\x1b[31mhere" in report["output"]  # the scorer's print, escaped
    text = subprocess.run([EVO, "check", str(tmp_path / "problem.toml")], capture_output=True, text=True, timeout=120)
    assert text.returncode == 1 and "\x1b" not in text.stdout
    assert "failed    exception: the scorer reported: no minimum \\x1b[31mhere" in text.stdout
    assert "  | Evaluation failed: no minimum" in text.stdout


def test_a_failed_evaluation_results_artifacts_are_kept(tmp_path):
    """OpenEvolve's evaluators return their traceback as an artifact beside the error: the
    failure keeps it (it is what OpenEvolve shows the LLM), and `evo check` shows its end."""
    spec = write(tmp_path, FUNCTION_MINIMIZATION)
    with (tmp_path / "evaluator.py").open("a") as evaluator:
        evaluator.write(textwrap.dedent('''
            def evaluate_with_traceback(program_path):
                import traceback
                try:
                    _load(program_path).run_search()
                    return evaluate(program_path)
                except Exception as error:
                    return EvaluationResult(metrics={"combined_score": 0.0, "error": str(error)},
                                            artifacts={"traceback": traceback.format_exc(), "failure_stage": "run"})
            '''))
    spec.write_text(spec.read_text().replace("evaluator.py:evaluate", "evaluator.py:evaluate_with_traceback"))
    (tmp_path / "initial.py").write_text("def run_search():\n    return helper()\n\ndef helper():\n    raise KeyError('lost')\n")
    code, report = check(spec)
    assert code == 1 and report["error"] == {"kind": "exception", "message": "the scorer reported: 'lost'"}
    assert report["feedback"].startswith("traceback: Traceback (most recent call last):")
    assert "in helper" in report["feedback"] and report["feedback"].endswith("failure_stage: run")
    text = subprocess.run([EVO, "check", str(spec)], capture_output=True, text=True, timeout=120).stdout
    assert "feedback  KeyError: 'lost'" in text and "feedback  failure_stage: run" in text


def test_lower_is_better_metrics_keep_their_real_values(tmp_path):
    code, report = check(write(tmp_path, SIGNAL_PROCESSING))
    assert code == 0, report
    expected = direct(tmp_path)
    assert report["scores"] == pytest.approx(expected.metrics, rel=1e-12)  # shown as the evaluator reported them
    m = expected.metrics
    assert report["scalar"] == pytest.approx((m["overall_score"] - m["lag_error"] - m["slope_changes"]) / 3)
    assert report["feedback"] == f"summary: {expected.artifacts['summary']}"
    text = subprocess.run([EVO, "check", str(tmp_path / "problem.toml")], capture_output=True, text=True, timeout=120)
    assert "minimize  lag_error, slope_changes" in text.stdout and f"lag_error={m['lag_error']:.6g}" in text.stdout


def test_a_cascade_stage_missing_an_objective_is_named(tmp_path):
    """OpenEvolve's stage-1 functions often return fewer metrics than `evaluate` (its
    signal_processing's has no overall_score): `evo check` says which stage lacks what."""
    spec = write(tmp_path, SIGNAL_PROCESSING)
    with (tmp_path / "evaluator.py").open("a") as evaluator:
        evaluator.write("\ndef evaluate_stage1(program_path):\n    return {'runs_successfully': 1.0, 'composite_score': 0.7}\n")
    spec.write_text(spec.read_text().replace('scorer = "evaluator.py:evaluate"',
                                             'scorer = ["evaluator.py:evaluate_stage1", "evaluator.py:evaluate"]\ncascade = [0.3]'))
    code, report = check(spec)
    assert code == 1 and report["error"]["stage"] == 1 and report["error"]["scorer"].endswith("evaluator.py:evaluate_stage1")
    assert "misses objective(s) ['overall_score', 'lag_error', 'slope_changes']" in report["error"]["message"]
    text = subprocess.run([EVO, "check", str(spec)], capture_output=True, text=True, timeout=120)
    assert text.returncode == 1
    assert "failed    bad_output in cascade stage 1 (evaluator.py:evaluate_stage1): scorer result misses" in text.stdout


def test_circle_packing_runs_its_temp_script_under_the_default_sandbox(tmp_path):
    code, report = check(write(tmp_path, CIRCLE_PACKING))
    assert code == 0, report
    expected = direct(tmp_path)
    assert expected["validity"] == 1.0 and expected["combined_score"] > 0.2
    assert report["scores"] == pytest.approx({k: expected[k] for k in report["scores"]}, rel=1e-12)


def test_minimize_names_objectives(tmp_path):
    from evo import spec as spec_module

    path = write(tmp_path, SIGNAL_PROCESSING)
    assert spec_module.load(path).problem.minimize == ("lag_error", "slope_changes")
    assert spec_module.load(path).database_config().minimize == ("lag_error", "slope_changes")
    path.write_text(path.read_text().replace('minimize = ["lag_error", "slope_changes"]', 'minimize = ["lag"]'))
    with pytest.raises(spec_module.SpecError, match="minimize"):
        spec_module.load(path)


def test_unwrap_error_values():
    from evo.scores import ScorerFailed, unwrap

    assert unwrap({"a": 1.0, "error": None}, ("a",)) == ({"a": 1.0}, "")
    assert unwrap({"a": 1.0, "error": ""}, ("a",)) == ({"a": 1.0}, "")
    assert unwrap({"a": 1.0, "error": 2.0}, ("a",)) == ({"a": 1.0, "error": 2.0}, "")  # a number: an extra
    assert unwrap({"error": "x"}, ("error",)) == ({"error": "x"}, "")  # an objective named error stays one
    with pytest.raises(ScorerFailed, match="^boom here$"):
        unwrap({"a": 0.0, "error": "boom\n  here"}, ("a",))
