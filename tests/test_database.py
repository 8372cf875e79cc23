"""The program database on real SQLite files: durability, reopen, duplicates, MAP-Elites, islands."""

from __future__ import annotations

import json
import sqlite3

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from evo.database import Database, DatabaseConfig, FeatureConfig, Grid, normalized_hash, topology
from evo.database.config import SearchSettings
from evo.database.matrix import MemberMatrix
from evo.selection.population import signature_keys
from evo.errors import UserError
from evo.metrics import pareto_mask
from evo.scores import Evaluation

OBJECTIVES = ("a", "b")


def ok(*scores: float, **extras: float) -> Evaluation:
    return Evaluation(scores=np.array(scores, dtype=float), extras=extras)


def config(**overrides) -> DatabaseConfig:
    base = dict(objectives=OBJECTIVES, islands=1, migration_interval=0, selection="uniform", population_cap=0)
    merged = {**base, **overrides}
    search = {k: merged.pop(k) for k in list(merged) if k in SearchSettings.__dataclass_fields__}
    return DatabaseConfig(**merged, search=SearchSettings(**search))


def program(i: int) -> str:
    return f"def f(x):\n    return x + {i}\n"


def test_add_is_committed_before_it_returns(tmp_path):
    db = Database.open(tmp_path, config())
    added = db.add(program(1), ok(0.5, 1.0), island=0, parents=(), policy="mutate:")
    other = sqlite3.connect(tmp_path / "programs.sqlite")  # a second connection sees only committed rows
    row = other.execute("SELECT code, scalar, policy FROM programs WHERE id = ?", (added.id,)).fetchone()
    assert row == (program(1), 0.75, "mutate:")
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_failures_are_stored_and_never_selected(tmp_path):
    db = Database.open(tmp_path, config())
    good = db.add(program(1), ok(0.1, 0.1), island=0)
    bad = db.add(program(2), Evaluation.failed("timeout", "took 10 s"), island=0)
    assert not bad.ok and bad.scores is None and bad.failure_kind == "timeout"
    rng = np.random.default_rng(0)
    assert all(db.sample(0, rng)[0] == [good] for _ in range(20))
    assert db.stats()["failures"] == 1 and db.stats()["programs"] == 2
    assert Database.open(tmp_path).get(bad.id).failure_message == "took 10 s"


def test_exact_and_whitespace_duplicates_are_rejected_before_evaluation(tmp_path):
    db = Database.open(tmp_path, config(islands=2))
    code = "def f(x):\n    return x + 1\n"
    assert not db.is_duplicate(code, 0)
    db.add(code, ok(1, 1), island=0)
    assert db.is_duplicate(code, 1)
    assert db.is_duplicate("def f(x):   \n\n    return  x +  1", 1)  # trailing, blank lines, inner runs
    assert db.is_duplicate("def f(x):\n\treturn x + 1\n", 1)  # a tab is indentation of 4
    assert not db.is_duplicate("def f(x):\n    return x + 2\n", 0)
    assert normalized_hash("for i in a:\n    g()\nh()") != normalized_hash("for i in a:\n    g()\n    h()")
    again = db.add(code, ok(1, 1), island=0)  # added anyway: stored, but not a second member
    assert again.removed == 0 and len(db.islands[0].members) == 1


def test_map_elites_bins_are_fixed_and_clipped(tmp_path):
    features = (FeatureConfig("a", "objective:a", (0.0, 1.0), 4), FeatureConfig("n", "scorer:n", (0, 10), 2))
    db = Database.open(tmp_path, config(features=features))
    assert db.grid.cells == 8
    assert db.grid.cell((0.0, 0.0)) == 0 and db.grid.cell((0.99, 9.0)) == 7
    assert db.grid.cell((5.0, -3.0)) == db.grid.cell((1.0, 0.0)) == 6  # clipped into the edge bins
    first = db.add(program(1), ok(0.3, 0.0, n=1), island=0)
    db.add(program(2), ok(0.3, -1.0, n=2), island=0)  # same cell, lower scalar: not the elite
    better = db.add(program(3), ok(0.4, 0.5, n=3), island=0)  # same cell (0.25..0.5), better
    db.add(program(4), ok(2.0, 0.0, n=99), island=0)  # out of range: clipped to the last cell
    elites = db.islands[0].archive.elites
    assert elites[db.grid.cell((0.3, 1))] == (better.id, better.scalar) and first.id not in db.islands[0].archive.elite_ids()
    stats = db.stats()
    assert stats["coverage"] == pytest.approx(2 / 8) and stats["qd_score"] == pytest.approx(0.45 + 1.0)
    assert db.best().code == program(4)
    missing = db.add(program(5), ok(0.1, 0.1), island=0)  # scorer key n missing
    assert missing.failure_kind == "bad_output" and "'n'" in missing.failure_message


def test_population_cap_never_evicts_a_cell_elite(tmp_path):
    features = (FeatureConfig("len", "code_length", (0, 400), 4),)
    db = Database.open(tmp_path, config(features=features, population_cap=3))
    short = db.add("x = 1", ok(0.0, 0.0), island=0)  # alone in the short-code cell: an elite
    for i in range(6):
        db.add("y = 0\n" * 20 + f"z = {i}", ok(i / 10, i / 10), island=0)
    members = db.islands[0].members
    assert len(members) == 3 and short.id in members
    assert sorted(p.scalar for p in members.values()) == [0.0, 0.4, 0.5]
    assert sum(p.removed is not None for p in db.programs.values()) == 4


def test_topologies():
    assert sorted(topology("ring", 5).edges) == [(0, 1), (0, 4), (1, 2), (2, 3), (3, 4)]
    assert topology("complete", 4).number_of_edges() == 6
    regular = topology("random-regular", 8, seed=3)
    assert {d for _, d in regular.degree} == {3} and nx.is_isomorphic(regular, topology("random-regular", 8, seed=3))
    assert sorted(topology([[0, 2]], 3).edges) == [(0, 2)] and topology([[0, 2]], 3).number_of_nodes() == 3
    with pytest.raises(UserError, match="edge"):
        topology([[0, 7]], 3)
    assert topology("ring", 1).number_of_edges() == 0 and topology("ring", 2).number_of_edges() == 1


def test_migration_copies_top_k_to_neighbours_once(tmp_path):
    db = Database.open(tmp_path, config(islands=3, topology=[[0, 1], [1, 2]], migration_interval=2, migration_size=1))
    a = db.add(program(1), ok(0.9, 0.9), island=0)
    db.add(program(2), ok(0.1, 0.1), island=0)
    c = db.add(program(3), ok(0.5, 0.5), island=2)
    assert db.end_iteration()["migrated"] == 0
    assert db.end_iteration()["migrated"] == 2  # a -> 1 and c -> 1; island 1 has nothing of its own
    on_1 = {p.source: p for p in db.islands[1].members.values()}
    assert set(on_1) == {a.id, c.id} and all(p.origin == "migrant" for p in on_1.values())
    db.end_iteration()
    summary = db.end_iteration()  # island 1 holds only migrants: they are not migrated again
    assert summary["migrated"] == 0
    assert all(len(set(i.hashes)) == len(i.members) for i in db.islands)
    assert db.genealogy().edges[a.id, on_1[a.id].id]["relation"] == "copy"


def test_reset_reseeds_the_weaker_half_from_survivors(tmp_path):
    db = Database.open(tmp_path, config(islands=4, reset_interval=3, seed=1))
    for island, value in enumerate([0.2, 0.9, 0.1, 0.8]):
        db.add(program(island), ok(value, value), island=island)
        db.add(program(10 + island), ok(value / 2, value / 2), island=island)
    db.end_iteration(), db.end_iteration()
    assert db.end_iteration()["reset"] == [2, 0]  # weakest first
    for weak in (0, 2):
        (only,) = db.islands[weak].members.values()
        assert only.origin == "reseed" and db.get(only.source).scalar in (0.9, 0.8)
    assert len(db.islands[1].members) == 2 and db.stats()["programs"] == 8


def test_sample_uses_the_configured_strategy_on_one_island(tmp_path):
    db = Database.open(tmp_path, config(islands=2, selection="lexicase", parents=1, inspirations=3))
    best_a = db.add(program(1), ok(1.0, 0.0), island=0)
    best_b = db.add(program(2), ok(0.0, 1.0), island=0)
    db.add(program(3), ok(0.2, 0.2), island=0)  # dominated: lexicase never picks it
    db.add(program(4), ok(1.0, 1.0), island=1)
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(50):
        parents, inspirations = db.sample(0, rng)
        assert len(parents) == 1 and not {p.id for p in parents} & {p.id for p in inspirations}
        seen |= {p.id for p in parents + inspirations}
    assert seen == {best_a.id, best_b.id}
    empty = Database.open(tmp_path / "other", config())
    assert empty.sample(0, rng) == ([], [])


def test_genealogy_and_pareto(tmp_path):
    db = Database.open(tmp_path, config())
    root = db.add(program(1), ok(0.5, 0.5), island=0)
    child = db.add(program(2), ok(1.0, 0.0), island=0, parents=[root.id])
    grandchild = db.add(program(3), ok(0.4, 0.4), island=0, parents=[child.id, root.id])
    graph = db.genealogy()
    assert set(graph.predecessors(grandchild.id)) == {child.id, root.id}
    assert nx.is_directed_acyclic_graph(graph)
    assert [p.id for p in db.front()] == [root.id, child.id]


def run_random_history(db: Database, rng: np.random.Generator, steps: int) -> None:
    for step in range(steps):
        island = int(rng.integers(db.config.search.islands))
        code = program(int(rng.integers(60)))
        if rng.random() < 0.15:
            db.add(code, Evaluation.failed("exception", f"boom {step}"), island=island)
        else:
            scores = np.round(rng.random(2), 1)
            db.add(code, ok(*scores, n=float(rng.integers(10))), island=island, parents=[int(rng.integers(1, step + 2))])
        if rng.random() < 0.2:
            db.end_iteration()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reopening_rebuilds_identical_state(tmp_path, seed):
    features = (FeatureConfig("a", "objective:a", (0, 1), 3), FeatureConfig("n", "scorer:n", (0, 10), 3))
    cfg = config(islands=3, topology="complete", migration_interval=2, migration_size=2, reset_interval=5,
                 population_cap=6, features=features, selection="epsilon-lexicase")
    db = Database.open(tmp_path, cfg)
    rng = np.random.default_rng(seed)
    db.add_initial(program(999), ok(0.3, 0.3, n=1.0))
    for _ in range(4):
        run_random_history(db, rng, 40)
        again = Database.open(tmp_path)
        assert again.state() == db.state() and again.config == cfg
        again.close()
    assert db.iteration > 5 and any(e["kind"] == "reset" for e in db.store.events())
    assert any(p.removed is not None for p in db.programs.values())
    reopened = Database.open(tmp_path)
    for island in range(cfg.search.islands):  # the same members in the same order: the same draws
        live = db.sample(island, np.random.default_rng(island))
        again = reopened.sample(island, np.random.default_rng(island))
        assert [[p.id for p in group] for group in live] == [[p.id for p in group] for group in again]
        assert all(p.island == island and p.member for p in live[0] + live[1])


def test_run_metadata_and_events_survive_reopening(tmp_path):
    db = Database.open(tmp_path, config())
    db.set_meta("spec", "[problem]\nname = 'x'\n")
    db.event("start", {"policy": "mutate:"})
    again = Database.open(tmp_path)
    assert again.get_meta("spec") == "[problem]\nname = 'x'\n" and again.get_meta("missing") is None
    assert [e["kind"] for e in again.store.events()] == ["start"]
    with pytest.raises(ValueError):
        db.set_meta("iteration", "7")


def test_non_finite_scores_are_a_bad_output_failure(tmp_path):
    db = Database.open(tmp_path, config())
    bad = db.add(program(1), Evaluation(scores=np.array([np.nan, 1.0])), island=0)
    assert bad.failure_kind == "bad_output" and not db.islands[0].members


def test_user_errors(tmp_path):
    with pytest.raises(UserError, match="no run"):
        Database.open(tmp_path / "nothing")
    assert not (tmp_path / "nothing").exists()
    Database.open(tmp_path, config()).close()
    with pytest.raises(UserError, match="other objectives"):
        Database.open(tmp_path, config(objectives=("a", "c")))
    with pytest.raises(UserError, match="unknown objective"):
        config(features=(FeatureConfig("x", "objective:zzz"),))
    with pytest.raises(UserError, match="range"):
        FeatureConfig("x", range=(1, 1))
    with pytest.raises(UserError, match="topology"):
        config(topology="star")
    with pytest.raises(UserError, match="unknown selection"):
        config(selection="roulette")
    with pytest.raises(UserError, match="no option"):
        config(selection="dalex", selection_options={"alpha": 1})
    (tmp_path / "junk.sqlite").write_text("not a database at all" * 100)
    with pytest.raises(UserError, match="not a usable"):
        Database.open(tmp_path / "junk.sqlite", config())


@settings(max_examples=60, deadline=None)
@given(st.tuples(st.integers(1, 40), st.integers(1, 4)).flatmap(
    lambda shape: arrays(np.float64, shape, elements=st.integers(0, 3).map(float))), st.integers(1, 8))
def test_pareto_mask_matches_brute_force(vectors, block):
    ge = (vectors[:, None, :] >= vectors[None, :, :]).all(axis=2)
    gt = (vectors[:, None, :] > vectors[None, :, :]).any(axis=2)
    assert np.array_equal(pareto_mask(vectors, block=block), ~(ge & gt).any(axis=0))


def test_a_rolled_back_outer_transaction_leaves_memory_as_the_store(tmp_path):
    db = Database.open(tmp_path, config(islands=2))
    db.add(program(1), ok(0.5, 0.5), island=0)
    before = db.state()
    with pytest.raises(RuntimeError):
        with db.store.transaction():  # how the loop commits an iteration's batch
            db.add(program(2), ok(0.9, 0.9), island=1)
            db.end_iteration()
            raise RuntimeError("the loop failed mid-batch")
    assert db.state() == before == Database.open(tmp_path).state()
    db.add(program(2), ok(0.9, 0.9), island=1)  # and it carries on
    assert db.best().code == program(2)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 3)), max_size=300))
def test_member_matrix_follows_adds_and_removals(operations):
    matrix, members, next_id = MemberMatrix(2, capacity=4), {}, 0
    for add, value in operations:
        if add or not members:
            members[next_id] = np.array([value, -value], dtype=float)
            matrix.add(next_id, members[next_id], length=value)
            next_id += 1
        else:
            victim = sorted(members)[value % len(members)]
            del members[victim]
            matrix.remove(victim)
    scores, keys, ids, lengths = matrix.view()
    assert ids.tolist() == sorted(members)
    assert np.array_equal(scores.reshape(-1, 2), np.array([members[i] for i in sorted(members)]).reshape(-1, 2))
    assert np.array_equal(lengths, scores[:, 0])
    assert not len(ids) or np.array_equal(keys, signature_keys(scores))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.floats(-5, 5), st.floats(0.1, 5), st.integers(1, 7), st.floats(-20, 20)), min_size=1, max_size=3))
def test_grid_cells_match_clip_floor_ravel(dims):
    features = tuple(FeatureConfig(f"f{i}", "code_length", (low, low + width), bins) for i, (low, width, bins, _) in enumerate(dims))
    values = [value for *_, value in dims]
    low = np.array([f.range[0] for f in features])
    high = np.array([f.range[1] for f in features])
    bins = np.array([f.bins for f in features])
    index = np.floor((np.clip(values, low, high) - low) / (high - low) * bins).astype(int)
    expected = np.ravel_multi_index(tuple(np.minimum(index, bins - 1)), tuple(bins))
    assert Grid(features).cell(values) == expected


def test_a_config_stored_before_search_settings_still_loads():
    """Runs stored their [search] keys at the top level of the config; they load into SearchSettings."""
    flat = {"objectives": ["a", "b"], "weights": None, "features": [{"name": "n", "source": "code_length",
            "range": [0, 9], "bins": 3}], "islands": 3, "topology": [[0, 1]], "migration_interval": 0,
            "migration_size": 2, "reset_interval": 0, "selection": "uniform", "selection_options": {},
            "parents": 2, "inspirations": 2, "population_cap": 10, "seed": 4}
    loaded = DatabaseConfig.from_json(json.dumps(flat))
    assert loaded.search == SearchSettings(islands=3, topology=((0, 1),), migration_interval=0, selection="uniform",
                                           population_cap=10)
    assert loaded.seed == 4 and loaded.features == (FeatureConfig("n", "code_length", (0, 9), 3),)
    assert DatabaseConfig.from_json(loaded.to_json()) == loaded
