"""The maze Task: prompts, strict parsers, set scoring, demonstrations, problem specs."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import tasks
from evo.program import split, splice
from tasks.base import ParseError, TemplateMismatch
from tasks.maze import MazeTask
from tasks.maze.env import MOVES
from tasks.maze.formats import NOTES, cell_name, compact_answer


@pytest.fixture(scope="module")
def compact():
    return tasks.get("maze")


@pytest.fixture(scope="module")
def chat():
    return tasks.get("maze-chat")


def test_registry_and_contract(compact, chat):
    assert isinstance(compact, tasks.Task) and isinstance(chat, tasks.Task)
    assert compact.objectives == ("completion", "gold", "diamond", "avoid_lava")
    train, test = compact.instances("train", 10), compact.instances("test", 10)
    assert {i.data for i in train}.isdisjoint({i.data for i in test})
    assert [i.data for i in compact.instances("test", 3, seed=1)] == [i.data for i in compact.instances("test", 3, seed=1)]
    assert compact.instances("test", 3, seed=1)[0].data != compact.instances("test", 3, seed=2)[0].data


def test_compact_prompt_has_fixed_length_and_explicit_cells(compact):
    lengths = {len(compact.prompt(i, m)) for i in compact.instances("test", 10) for m in (1, 3)}
    assert len(lengths) == 1
    text = compact.prompt(compact.instances("test", 1)[0], 3)
    assert text.startswith(" 0123456\na") and text.endswith("\n") and "routes 3 moves" in text


@pytest.mark.parametrize("name", ["maze", "maze-notes", "maze-chat"])
@pytest.mark.parametrize("m", [1, 3])
def test_demonstrations_parse_and_reach_the_exit(name, m):
    task = tasks.get(name)
    rng = np.random.default_rng(0)
    for instance in task.instances("train", 8):
        text = task.demonstrations(instance, m, rng)
        answers = task.parse(instance, text, m)
        scores = task.score(instance, answers)
        assert scores.shape == (m, 4)
        assert np.all(scores[:, 0] == 1.0), text  # distinct, valid routes that reach E


def test_notes_name_the_open_moves_and_routes_copy_them_from_the_prompt(compact):
    notes = tasks.get("maze-notes")
    for instance in notes.instances("test", 5):
        maze = instance.data
        assert "\n".join(notes.prompt(instance, 3).split("\n")[1 + maze.size : 1 + 2 * maze.size]) not in compact.prompt(instance, 3)
        lines = notes.prompt(instance, 1).split("\n")[1 + maze.size : 1 + 2 * maze.size]  # under the grid
        listing = {}
        for r, line in enumerate(lines):
            for c in range(maze.size):
                assert line[3 * c : 3 * c + 2] == cell_name((r, c))
                listing[(r, c)] = line[3 * c + 2]
                if maze.rows[r][c] == "#":
                    assert listing[(r, c)] == "#"
                    continue
                opened = {move for move, (dr, dc) in MOVES.items() if maze.is_open((r + dr, c + dc))}
                bits = NOTES.index(listing[(r, c)])
                assert {move for i, move in enumerate("UDLR") if bits >> i & 1} == opened
        text = notes.demonstrations(instance, 1, np.random.default_rng(0))
        cells = notes.parse(instance, text, 1)[0]
        assert text[2::4] == "".join(listing[cell] for cell in cells)  # each cell followed by its note
        stripped = "".join(ch for ch in text if ch not in NOTES)  # notes are a scratchpad: ignored
        assert notes.parse(instance, stripped, 1) == compact.parse(instance, stripped, 1) == [cells]
        assert stripped == compact_answer(maze, [cells])


def test_demonstrations_are_varied(compact):
    instance = compact.instances("train", 1)[0]
    rng = np.random.default_rng(1)
    assert len({compact.demonstrations(instance, 1, rng) for _ in range(30)}) > 5


def test_compact_parser_is_strict(compact):
    instance = compact.instances("test", 1)[0]
    route = compact.demonstrations(instance, 1, np.random.default_rng(0))
    assert len(compact.parse(instance, route + "|" + route + "|" + route, 3)) == 3
    with pytest.raises(TemplateMismatch):
        compact.parse(instance, route + "|" + route, 3)
    with pytest.raises(TemplateMismatch):
        compact.parse(instance, route + "|" + route, 1)
    for bad in ["", "a1b", "a1 b1", "A1B1", "a1b1;a2", "z1a1", "a9a8", "Ua1b1", "a1Ub1U", "a1UUb1"]:
        with pytest.raises(ParseError):
            compact.parse(instance, bad, 1)


def test_compact_routes_carry_moves_that_must_match_their_cells(compact):
    instance = compact.instances("test", 1)[0]
    maze = instance.data
    text = compact.demonstrations(instance, 1, np.random.default_rng(0))
    assert set(text[2::3]) <= set("UDLR")  # a6Db6La5...: a move letter before every later cell
    [annotated] = compact.parse(instance, text, 1)
    [plain] = compact.parse(instance, "".join(c for c in text if c not in "UDLR"), 1)
    assert annotated == plain and compact.score(instance, [annotated])[0, 0] == 1.0
    wrong = text[:2] + {"U": "D", "D": "U", "L": "R", "R": "L"}[text[2]] + text[3:]
    assert not compact.score(instance, compact.parse(instance, wrong, 1)).any()
    assert maze.start == annotated[0]


def test_chat_parser_is_strict(chat):
    instance = chat.instances("test", 1)[0]
    assert chat.parse(instance, "<route_1>R D d</route_1>\n<route_2>UP, LEFT</route_2>", 2) == ["RDD", "UL"]
    with pytest.raises(TemplateMismatch):
        chat.parse(instance, "<route_1>R</route_1>", 3)
    for bad in ["R D", "<route_1>R X</route_1>", "<route_2>R</route_2>", "<route_1>R</route_2>"]:
        with pytest.raises(ParseError):
            chat.parse(instance, bad, 1)


def test_duplicates_and_invalid_routes_score_zero_rows(compact):
    instance = compact.instances("test", 1)[0]
    maze = instance.data
    good = compact.parse(instance, compact.demonstrations(instance, 1, np.random.default_rng(0)), 1)[0]
    jump = (maze.start, (maze.start[0] + 2, maze.start[1]))
    scores = compact.score(instance, [good, good, jump])
    assert scores[0, 0] == 1.0 and not scores[1].any() and not scores[2].any()
    # cells after the exit do not make a different route
    extended = good + (good[-2],)
    assert not compact.score(instance, [good, extended])[1].any()


def test_chat_and_compact_agree_on_the_same_route(compact, chat):
    instance = compact.instances("test", 1)[0]
    text = compact.demonstrations(instance, 1, np.random.default_rng(3))
    from tasks.maze.env import moves_from_path

    cells = compact.parse(instance, text, 1)[0]
    moves = moves_from_path(cells)
    np.testing.assert_array_equal(compact.score(instance, [cells]), chat.score(instance, [moves]))
    assert compact_answer(instance.data, [cells]) == text


def test_problem_spec_head_is_the_single_answer_prompt(compact, tmp_path):
    instance = compact.instances("test", 2)[1]
    spec = compact.problem_spec(instance, tmp_path)
    text = (tmp_path / "route.txt").read_text()
    program = split(text)
    assert program.head == compact.prompt(instance, m=1)
    assert 'style = "continue"' in spec.read_text() and 'isolation = "none"' in spec.read_text()
    module_spec = importlib.util.spec_from_file_location("maze_score", tmp_path / "score.py")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    assert module.evaluate(tmp_path / "route.txt")["completion"] == 1.0
    (tmp_path / "bad.txt").write_text(splice(text, "a0a9\n"))
    assert module.evaluate(tmp_path / "bad.txt") == {
        "completion": 0.0, "gold": 0.0, "diamond": 0.0, "avoid_lava": 0.0, "valid": 0.0}


def test_oracle_best_is_at_least_every_demonstration(compact):
    rng = np.random.default_rng(0)
    for instance in compact.instances("test", 5):
        best = compact.oracle_best(instance)
        routes = compact.parse(instance, compact.demonstrations(instance, 3, rng), 3)
        assert compact.score(instance, routes).mean(axis=1).max() <= best + 1e-12


def test_unknown_style_is_rejected():
    with pytest.raises(ValueError):
        MazeTask(style="verbose")


def test_evo_check_evaluates_maze_and_symreg_specs(tmp_path):
    import json
    import subprocess
    import sys

    maze, symreg = tasks.get("maze"), tasks.get("symreg")
    specs = [maze.problem_spec(maze.instances("test", 1)[0], tmp_path / "maze"),
             symreg.problem_spec(symreg.instances("benchmark", 1)[0], tmp_path / "nguyen1")]
    for spec, key in zip(specs, ["completion", "region0"]):
        done = subprocess.run([sys.executable, "-m", "evo", "check", str(spec), "--json"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-1000:]
        result = json.loads(done.stdout.strip().splitlines()[-1])
        assert 0 < result["scores"][key] <= 1 and result["scalar"] > 0


def test_oracle_front_is_the_non_dominated_best_and_holds_the_oracle_best():
    task = tasks.get("maze")
    for instance in task.instances("test", 5, seed=3):
        front = task.oracle_front(instance)
        assert front.shape[1] == len(task.objectives) and len(front)
        assert front.mean(axis=1).max() == pytest.approx(task.oracle_best(instance))
        for seed in range(5):  # every achievable vector is weakly dominated by a front point
            text = task.demonstrations(instance, 1, np.random.default_rng(seed))
            [vector] = task.score(instance, task.parse(instance, text, 1))
            assert vector.any() and (front >= vector - 1e-12).all(axis=1).any()
