"""A chat task's spec: its model answers a prompt rather than continuing a file, so the spec's
`[prompt] head` is the task's own m-answer prompt, there is no block prefix, and a reply's
programs are its route tags wherever they stand (`[prompt] answer_pattern`; tasks/maze/spec.py,
evo.prompts, evo.prompt_sets). Before, the
maze-chat spec glued its START marker to the prompt's last line and asked a chat model to
continue a random prefix of a route inside its user turn: 8 of 40 one-route and 0 of 120
three-route replies made of the task's own demonstrations became valid programs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import tasks
from evo import spec as specs
from evo.database import Database
from evo.database.journal import PARSE_ERROR
from evo.loop import Evolution, LoopConfig
from evo.policies import trained_for
from tests.evo_cli import refused
from tests.openai_server import server  # noqa: F401 -- the fixture

TASK = tasks.get("maze-chat")


@pytest.fixture
def chat_spec(tmp_path) -> tuple[Path, object]:
    instance = TASK.instances("test", 1, seed=5)[0]
    return TASK.problem_spec(instance, tmp_path / "spec"), instance


def asked(spec_path: Path, tmp_path: Path, answers: int) -> list[str]:
    """The prompt texts a real Evolution over the spec asks for (one group)."""
    from evo.sandbox.pool import Sandbox

    spec = specs.load(spec_path)
    config = LoopConfig.for_spec(spec, iterations=4, batch=4, answers=answers)
    code = (spec_path.parent / "route.txt").read_text()
    with Sandbox.from_spec(spec) as sandbox, Database.open(tmp_path / f"run{answers}", spec.database_config()) as db:
        db.add_initial(code, sandbox.evaluate(code))
        return list(Evolution(config, db).ask().texts)


def test_the_spec_asks_exactly_the_tasks_own_prompt_for_any_m(chat_spec, tmp_path):
    path, instance = chat_spec
    program = (path.parent / "route.txt").read_text()
    assert "</route_1>\n# EVOLVE-BLOCK-START\n" in program  # the marker on its own line
    for m in (1, 3):
        texts = asked(path, tmp_path, m)
        assert texts and all(text == TASK.prompt(instance, m) for text in texts)


@pytest.mark.slow
def test_set_replies_in_the_tasks_format_become_valid_programs(chat_spec, tmp_path, server):
    """`evo run` of the maze-chat spec against a real HTTP server answering each prompt with the
    task's own demonstrations for the m it asks: every route of every reply is its own candidate,
    parsed and scored valid by the spec's scorer in the sandbox."""
    from evo.cli import main

    path, instance = chat_spec
    rng = np.random.default_rng(0)
    server = server()

    def reply(body, i):
        m = 3 if "Give 3 different" in body["prompt"] else 1
        return TASK.demonstrations(instance, m, rng)

    server.reply = reply
    for m in (3, 1):
        out = tmp_path / f"run{m}"
        try:
            main(["run", str(path), "--policy", f"openai:{server.url}#tiny", "--answers", str(m), "--iterations", "4",
                  "--out", str(out), "--quiet", "--set", "sandbox.workers=1", "--set", "search.target=2.0"])
        except SystemExit as stop:
            assert stop.code in (0, None)
        with Database.open(out, read_only=True) as db:
            rows = db.journal.candidates()
            valid = [p.extras.get("valid") for p in db.programs.values() if p.ok]
        assert len(rows) == 4 * 4 * m and PARSE_ERROR not in {c.status for c in rows}
        assert valid and set(valid) == {1.0}
    assert {body["prompt"] for body in server.bodies} == {TASK.prompt(instance, 3), TASK.prompt(instance, 1)}


def test_a_head_is_checked_in_one_line(chat_spec, tmp_path, capsys):
    path, _ = chat_spec
    message = refused(capsys, "run", str(path), "--policy", "mutate:", "--set", "prompt.style=full", "--out", str(tmp_path / "a"))
    assert "[prompt] head" in message and 'style = "continue"' in message
    (path.parent / "set.txt").write_text("routes {answers}\n")
    message = refused(capsys, "run", str(path), "--policy", "mutate:", "--set", f"prompt.set_head={path.parent / 'set.txt'}",
                      "--out", str(tmp_path / "b"))
    assert "no head beside a set_head" in message
    message = refused(capsys, "run", str(path), "--policy", "mutate:", "--set", "prompt.head=missing.txt",
                      "--out", str(tmp_path / "c"))
    assert "[prompt] head" in message and "an existing UTF-8 file" in message
    assert not any((tmp_path / name).exists() for name in "abc")


def test_a_chat_checkpoint_on_a_spec_without_the_head_is_warned(chat_spec, tmp_path):
    path, _ = chat_spec
    from training import tiny

    checkpoint = tmp_path / "ckpt"
    tokenizer = tiny.char_tokenizer()
    tiny.save(tiny.new_model("nano", "llama", tokenizer, context=256, seed=0), tokenizer, checkpoint)
    (checkpoint / "train_config.json").write_text(json.dumps({"task": "maze-chat", "set_size": 3}))
    assert trained_for.warnings(specs.load(path), f"local:{checkpoint}", 3) == []
    text = re.sub(r"\n(head|answer_pattern) = .*", "", path.read_text())
    (path.parent / "nohead.toml").write_text(text)
    (line,) = trained_for.warnings(specs.load(path.parent / "nohead.toml"), f"local:{checkpoint}", 1)
    assert "[prompt] head" in line and "has no [prompt] head" in line and "tasks.get('maze-chat')" in line


@pytest.mark.parametrize("shape", ["\n{}", "{}\n\n", "\r\n{}"])
def test_blank_lines_around_a_set_replys_routes_are_not_programs(chat_spec, tmp_path, shape):
    """A chat model's set reply with a leading line break, blank lines between routes, or CRLF:
    every route is still its own program (the head's separator is a line break)."""
    from evo import prompt_sets, prompts
    from tasks.spec_files import block_of

    path, instance = chat_spec
    spec = specs.load(path)
    config = LoopConfig.for_spec(spec)
    base = prompts.Shown((path.parent / "route.txt").read_text(), 0.0)
    one = prompts.build("continue", [base], rng=np.random.default_rng(0), head=config.head, pattern=config.answer_pattern)
    prompt = prompt_sets.widen(one, 3, set_head=config.head, separator=config.separator)
    routes = TASK.demonstrations(instance, 3, np.random.default_rng(1)).split("\n")
    reply = "\n".join(shape.format(route) for route in routes)
    found = prompt_sets.programs(prompt, reply)
    assert [isinstance(p, str) for p in found] == [True] * 3
    assert [block_of(p).strip() for p in found] == [route.strip() for route in routes]


def chat_prompt(path: Path, m: int):
    """The spec's prompt for m routes, built as the loop builds it."""
    from evo import prompt_sets, prompts

    config = LoopConfig.for_spec(specs.load(path))
    base = prompts.Shown((path.parent / "route.txt").read_text(), 0.0)
    one = prompts.build("continue", [base], rng=np.random.default_rng(0), head=config.head, pattern=config.answer_pattern)
    return prompt_sets.widen(one, m, set_head=config.head, separator=config.separator)


@pytest.mark.parametrize("shape", ["Here are three routes:\n{0}\n{1}\n{2}", "{0} {1} {2}", "{0}{1}\n\n{2}\nDone.",
                                   "```\n{0}\n{1}\n{2}\n```"])
def test_a_set_replys_routes_are_found_wherever_they_stand(chat_spec, shape):
    """An instruct model that opens with a line of prose, writes every route on one line or fences
    them: each `<route_k>` tag is its own program (the spec's [prompt] answer_pattern), scored as
    the task scores that route. Split at line breaks, the prose line was program 1 and the third
    route was lost; routes on one line were one program."""
    from evo import prompt_sets
    from tasks.maze.spec import one_route, score_task_file
    from tasks.spec_files import block_of

    path, instance = chat_spec
    routes = TASK.demonstrations(instance, 3, np.random.default_rng(1)).split("\n")
    found = prompt_sets.programs(chat_prompt(path, 3), shape.format(*routes))
    assert [block_of(p).strip() for p in found] == routes
    maze = json.loads((path.parent / "score.py").read_text().split("MAZE = ", 1)[1].split("\n", 1)[0])
    for k, program in enumerate(found):
        (path.parent / f"c{k}.txt").write_text(program)
        scores = score_task_file(maze, "maze-chat", path.parent / f"c{k}.txt")
        assert scores["valid"] == 1.0
        assert [scores[name] for name in TASK.objectives] == pytest.approx(list(TASK.score(instance, one_route(TASK, instance, routes[k]))[0]))


def test_a_one_route_reply_keeps_its_route_and_drops_the_prose(chat_spec):
    from evo import prompts
    from tasks.spec_files import block_of

    path, instance = chat_spec
    (route,) = TASK.demonstrations(instance, 1, np.random.default_rng(2)).split("\n")
    prompt = chat_prompt(path, 1)
    assert block_of(prompts.parse(prompt, f"Sure. The shortest safe route is\n{route}\nGood luck!")).strip() == route
    with pytest.raises(prompts.ParseFailure, match="answer_pattern"):
        prompts.parse(prompt, "I cannot see a route.")


def test_a_cut_set_reply_keeps_its_whole_routes(chat_spec):
    """A reply cut at the token budget: the routes it closed are programs, the open one is missing."""
    from evo import prompt_sets

    path, instance = chat_spec
    routes = TASK.demonstrations(instance, 3, np.random.default_rng(3)).split("\n")
    found = prompt_sets.programs(chat_prompt(path, 3), "\n".join(routes)[:-5], cut=True)
    assert [isinstance(p, str) for p in found] == [True, True, False]
    assert "program 3 is missing" in str(found[2])


@pytest.mark.parametrize("setting, words", [
    ("prompt.answer_pattern=(unclosed", "a regular expression"),
    ("prompt.answer_pattern=x*", "an empty text does not"),
    ("prompt.separator=|", "no separator beside an answer_pattern"),
])
def test_an_answer_pattern_is_checked_in_one_line(chat_spec, tmp_path, capsys, setting, words):
    path, _ = chat_spec
    message = refused(capsys, "run", str(path), "--policy", "mutate:", "--set", setting, "--out", str(tmp_path / "a"))
    assert "[prompt] answer_pattern" in message and words in message
    assert not (tmp_path / "a").exists()


def test_an_answer_pattern_needs_a_head(chat_spec, tmp_path):
    path, _ = chat_spec
    (path.parent / "nohead.toml").write_text(path.read_text().replace('head = "route.prompt.txt"', ""))
    with pytest.raises(specs.SpecError, match=r"\[prompt\] answer_pattern: expected an answer_pattern only with a \[prompt\] head"):
        specs.load(path.parent / "nohead.toml")


def test_the_context_check_measures_the_heads_prompt(chat_spec):
    """`local:` checks that the smallest prompt fits the model's context: for a head spec that is
    the head's one-route prompt (the program file's text before its block is another text)."""
    from evo.policies import fit

    path, instance = chat_spec
    assert fit.smallest_prompt(specs.load(path)) == TASK.prompt(instance, 1)
