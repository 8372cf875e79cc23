import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evo import spec
from evo.errors import UserError

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "function_minimization" / "problem.toml"
MINIMAL = """
[problem]
program = "initial.py"
scorer = "score.py:evaluate"
objectives = ["a", "b"]
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "initial.py").write_text("x = 1\n")
    (tmp_path / "score.py").write_text("def evaluate(path):\n    return [1.0, 0.0]\n")
    return tmp_path


def write(project: Path, text: str, name: str = "spec.toml") -> Path:
    path = project / name
    path.write_text(text)
    return path


def error_of(path: Path) -> str:
    with pytest.raises(spec.SpecError) as info:
        spec.load(path)
    message = str(info.value)
    assert "\n" not in message and isinstance(info.value, UserError)
    assert str(path) in message
    return message


def test_example_spec_loads_with_its_values():
    s = spec.load(EXAMPLE)
    assert s.problem.name == "function_minimization"
    assert s.problem.objectives == ("sphere", "rastrigin", "rosenbrock", "ackley")
    assert s.problem.program == EXAMPLE.parent / "initial.py"
    assert s.problem.scorer == f"{EXAMPLE.parent / 'score.py'}:evaluate"
    assert s.sandbox.timeout == 20.0 and s.search.target == 0.95
    assert [f.name for f in s.features] == ["length", "rastrigin"]
    assert s.features[0] == spec.FeatureConfig("length", "code_length", (0.0, 4000.0), 10)


def test_minimal_spec_gets_every_default(project):
    s = spec.load(write(project, MINIMAL))
    assert s.problem.weights == (1.0, 1.0)
    assert s.problem.name == project.name
    assert s.sandbox == spec.SandboxLimits() and s.search == spec.SearchSettings() and s.prompt == spec.PromptSettings()
    assert s.features == () and s.sandbox.cpu_limit == s.sandbox.timeout
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.search.iterations = 3  # type: ignore[misc]


def test_paths_resolve_relative_to_the_spec_not_the_cwd(project, monkeypatch, tmp_path_factory):
    sub = project / "nested"
    sub.mkdir()
    path = write(sub, MINIMAL.replace('"initial.py"', '"../initial.py"').replace('"score.py', '"../score.py'))
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    assert spec.load(path).problem.program == project / "initial.py"
    monkeypatch.chdir(project)
    s = spec.load("nested/spec.toml")
    assert s.problem.program == project / "initial.py" and s.path == path


@pytest.mark.parametrize(
    "section, typo, suggestion",
    [("problem", "objective", "objectives"), ("sandbox", "timout", "timeout"), ("search", "iteration", "iterations"),
     ("prompt", "styl", "style")],
)
def test_a_typo_is_one_line_naming_file_section_and_key(project, section, typo, suggestion):
    text = MINIMAL + ("" if section == "problem" else f"\n[{section}]\n") + f"{typo} = 1\n"
    message = error_of(write(project, text))
    assert f"[{section}] unknown key {typo!r}" in message and f"did you mean {suggestion!r}" in message


@pytest.mark.parametrize(
    "extra, needle",
    [
        ("[sandbox]\ntimeout = -1", "[sandbox] timeout: expected a finite positive number, found int -1"),
        ("[sandbox]\nworkers = true", "[sandbox] workers: expected an integer >= 1, found bool True"),
        ("[sandbox]\nisolation = \"docker\"", "[sandbox] isolation: expected one of 'process', 'shared', 'none'"),
        ("[search]\nselection = \"best\"", "[search] selection: expected one of"),
        ("[search]\ntopology = [[0, 9]]", "[search] topology: expected"),
        ("[search]\ntarget = \"high\"", "[search] target: expected a finite number, found str 'high'"),
        ("[search]\ntarget = nan", "[search] target: expected a finite number, found float nan"),
        ("[sandbox]\ntimeout = inf", "[sandbox] timeout: expected a finite positive number, found float inf"),
        ("[prompt]\nstyle = \"poem\"", "[prompt] style: expected one of"),
        ("[search]\nselection_options = { size = 3 }", "[search] selection_options: expected options of 'lexicase' (none), found str 'size'"),
        ("[search]\nselection = \"dalex\"\nselection_options = 3", "[search] selection_options: expected a table"),
        ("[search]\npopulation_cap = -1", "[search] population_cap: expected an integer >= 0, found int -1"),
        ("[features.x]\nsource = \"objective:zz\"", "[features.x] source: expected 'code_length'"),
        ("[features.x]\nrange = [1, 0]", "[features.x] range: expected [low, high] with low < high"),
        ("[features.x]\nbins = 0", "[features.x] bins: expected an integer >= 1, found int 0"),
        ("[features]\nx = 3", "[features.x]: expected a table, found int 3"),
        ("[extra]\nx = 3", "[top level] unknown key 'extra'"),
    ],
)
def test_bad_values_name_the_key_the_expectation_and_the_value(project, extra, needle):
    assert needle in error_of(write(project, MINIMAL + "\n" + extra + "\n"))


@pytest.mark.parametrize(
    "problem, needle",
    [
        ('scorer = "score.py:evaluate"\nobjectives = ["a"]', "[problem] program: required key is missing"),
        ('program = "initial.py"\nobjectives = ["a"]', "[problem] scorer: required key is missing"),
        ('program = "initial.py"\nscorer = "score.py:evaluate"', "[problem] objectives: required key is missing"),
        ('program = "nope.py"\nscorer = "score.py:evaluate"\nobjectives = ["a"]', "program: expected an existing file"),
        ('program = "initial.py"\nscorer = "gone.py:f"\nobjectives = ["a"]', "scorer: expected an existing scorer file"),
        ('program = "initial.py"\nscorer = "score.py"\nobjectives = ["a"]', "scorer: expected 'path.py:function'"),
        ('program = "initial.py"\nscorer = "bad module:f"\nobjectives = ["a"]', "scorer: expected 'path.py:function'"),
        ('program = "initial.py"\nscorer = "m:f"\nobjectives = ["a", "a"]', "objectives: expected a non-empty list of distinct"),
        ('program = "initial.py"\nscorer = "m:f"\nobjectives = ["a"]\nweights = [1, 2]', "weights: expected a list of 1"),
        ('program = "initial.py"\nscorer = "m:f"\nobjectives = ["a"]\nweights = [0]', "with a positive sum"),
    ],
)
def test_problem_table_errors(project, problem, needle):
    assert needle in error_of(write(project, "[problem]\n" + problem + "\n"))


def test_missing_file_and_bad_toml_are_one_line(project):
    assert "no such spec file" in error_of(project / "absent.toml")
    assert "invalid TOML" in error_of(write(project, "[problem\n"))
    assert "[problem] table is missing" in error_of(write(project, "[search]\nislands = 2\n"))


def test_module_scorer_and_several_programs(project):
    (project / "second.py").write_text("x = 2\n")
    text = MINIMAL.replace('"initial.py"', '["initial.py", "second.py"]').replace("score.py:evaluate", "pkg.mod:run")
    s = spec.load(write(project, text))
    assert s.problem.scorer == "pkg.mod:run"
    assert s.problem.programs == (project / "initial.py", project / "second.py")


def test_feature_defaults_follow_the_name(project):
    text = MINIMAL + "\n[features.a]\n[features.length]\n[features.novelty]\nbins = 4\n"
    a, length, novelty = spec.load(write(project, text)).features
    assert (a.source, a.range, a.bins) == ("objective:a", (0.0, 1.0), 10)
    assert (length.source, length.range) == ("code_length", (0.0, 2000.0))
    assert (novelty.source, novelty.bins) == ("scorer:novelty", 4)


def test_topology_edges_become_tuples(project):
    s = spec.load(write(project, MINIMAL + "\n[search]\nislands = 3\ntopology = [[0, 1], [1, 2]]\n"))
    assert s.search.topology == ((0, 1), (1, 2))


def test_overrides_are_validated_like_the_file(project):
    s = spec.load(write(project, MINIMAL + "\n[features.length]\n"))
    t = s.override({"search.iterations": 50, "sandbox.workers": 1, "features.length.bins": 3, "search.target": 0.5})
    assert (t.search.iterations, t.sandbox.workers, t.features[0].bins, t.search.target) == (50, 1, 3, 0.5)
    assert s.search.iterations == 200  # the original is untouched
    for bad, needle in [
        ({"search.iteration": 5}, "unknown key 'iteration'"),
        ({"search.iterations": 0}, "[search] iterations: expected an integer >= 1"),
        ({"iterations": 5}, "expected SECTION.KEY"),
        ({"features.length": 5}, "expected SECTION.KEY"),
    ]:
        with pytest.raises(spec.SpecError) as info:
            s.override(bad)
        assert needle in str(info.value) and "\n" not in str(info.value)


_VALUES = st.one_of(
    st.integers(-5, 10**6), st.floats(), st.text(max_size=8), st.booleans(),
    st.lists(st.integers(-2, 5), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
_KEYS = [("sandbox", f.name) for f in dataclasses.fields(spec.SandboxLimits)] + [
    ("search", f.name) for f in dataclasses.fields(spec.SearchSettings)] + [
    ("prompt", f.name) for f in dataclasses.fields(spec.PromptSettings)] + [("features", "f.source"), ("features", "f.range"),
    ("features", "f.bins"), ("problem", "weights"), ("problem", "name")]


_BASE = spec.load(EXAMPLE)


@settings(max_examples=150, deadline=None)
@given(key=st.sampled_from(_KEYS), value=_VALUES)
def test_any_value_either_validates_or_is_a_one_line_spec_error(key, value):
    section, name = key
    try:
        result = _BASE.override({f"{section}.{name}": value})
    except spec.SpecError as error:
        assert "\n" not in str(error) and str(EXAMPLE) in str(error)
    else:
        assert isinstance(result, spec.Spec) and result.raw[section] is not None


@pytest.mark.parametrize(
    "program, needle",
    [
        ("# EVOLVE-BLOCK-START\nx = 1\n", "EVOLVE-BLOCK-START on line 1 is never closed"),
        ("x = 1\n# EVOLVE-BLOCK-END\n", "EVOLVE-BLOCK-END on line 2 without a START"),
        ("# EVOLVE-BLOCK-START\n# EVOLVE-BLOCK-START\n# EVOLVE-BLOCK-END\n", "EVOLVE-BLOCK-START on line 2 inside the block opened on line 1"),
    ],
)
def test_unbalanced_evolve_markers_are_spec_errors(project, program, needle):
    (project / "initial.py").write_text(program)
    message = error_of(write(project, MINIMAL))
    assert "[problem] program: initial.py: " + needle in message


def test_balanced_markers_and_several_blocks_are_fine(project):
    (project / "initial.py").write_text("# EVOLVE-BLOCK-START\na = 1\n# EVOLVE-BLOCK-END\n# EVOLVE-BLOCK-START\n# EVOLVE-BLOCK-END\n")
    assert spec.load(write(project, MINIMAL)).problem.program.name == "initial.py"


def test_selection_options_and_population_cap_reach_the_database(project):
    s = spec.load(write(project, MINIMAL + '[search]\nselection = "tournament"\nselection_options = { size = 3 }\n'
                                          "population_cap = 50\n"))
    config = s.database_config(seed=0)
    assert config.search.selection == "tournament" and config.search.selection_options == {"size": 3}
    assert config.search.population_cap == 50
    assert spec.load(write(project, MINIMAL)).database_config(seed=0).search.population_cap == spec.SearchSettings().population_cap


@pytest.mark.parametrize("key, names", [
    ("search.selection", __import__("evo.selection", fromlist=["NAMES"]).NAMES),
    ("search.topology", tuple(__import__("evo.database", fromlist=["TOPOLOGIES"]).TOPOLOGIES)),
    ("prompt.style", __import__("evo.prompts", fromlist=["STYLES"]).STYLES),
])
def test_every_registered_name_is_a_valid_spec_value(project, key, names):
    """The spec checks names against the registries themselves (downsampled-lexicase was refused)."""
    s = spec.load(write(project, MINIMAL))
    assert "downsampled-lexicase" in names or key != "search.selection"
    for name in names:
        section, field = key.split(".")
        assert getattr(getattr(s.override({key: name}), section), field) == name


def test_migration_interval_zero_means_never_in_the_spec_and_the_database(project, tmp_path):
    """One rule: 0 = never migrate, like reset_interval; a negative interval is refused by both."""
    from evo.database import Database, DatabaseConfig, SearchSettings

    s = spec.load(write(project, MINIMAL + "[search]\nmigration_interval = 0\n"))
    assert s.search.migration_interval == 0
    assert "[search] migration_interval: expected an integer >= 0" in error_of(
        write(project, MINIMAL + "[search]\nmigration_interval = -1\n"))
    with pytest.raises(UserError, match="migration_interval"):
        SearchSettings(migration_interval=-1)
    from evo.scores import Evaluation
    import numpy as np

    with Database.open(tmp_path / "db", DatabaseConfig(objectives=("a",), search=SearchSettings(islands=2, migration_interval=0))) as db:
        db.add("x = 1", Evaluation(scores=np.array([1.0])), island=0)
        for _ in range(30):
            db.end_iteration()
        assert not [e for e in db.store.events() if e["kind"] == "migration"]
