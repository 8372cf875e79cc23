"""Problem specs for maze instances, so `evo check` / `evo run` can search one maze.

The program file is the task's single-answer prompt, then the EVOLVE block holding one
answer (a route). Compact tasks (`maze`, `maze-notes`, `maze-clusters`) search with
`[prompt] style = "continue"`: the policy sees its training prompt and continues the route
(a set: the task's m-answer prompt as `set_head`, routes split at ` | `). A chat task
(`maze-chat`) is answered, not continued: its spec's `[prompt] head` is the task's m-route
prompt itself, so the policy sees exactly its training prompt for any m, writes whole routes,
and a reply's routes are its `<route_k>...</route_k>` tags wherever they stand
(`[prompt] answer_pattern`: prose around them, several on one line). The scorer reads the
route back from the block.
"""

from __future__ import annotations

import json
from pathlib import Path

from tasks.base import ParseError, TemplateMismatch
from tasks.maze.env import OBJECTIVES, Maze
from tasks.spec_files import block_of, problem_tables, scorer_file, write_problem

START_LINE = "# EVOLVE-BLOCK-START\n"
END_LINE = "# EVOLVE-BLOCK-END\n"


def score_file(maze: dict, style: str, path: str | Path) -> dict[str, float]:
    from tasks.maze import MazeTask
    from tasks.base import Instance

    task = MazeTask(style=style)
    instance = Instance("maze", "spec", 0, Maze(tuple(maze["rows"]), int(maze["budget"])))
    try:
        answers = one_route(task, instance, block_of(Path(path).read_text()))
    except (ParseError, TemplateMismatch):
        return {**dict.fromkeys(OBJECTIVES, 0.0), "valid": 0.0}
    vector = task.score(instance, answers)[0]
    return {**{name: float(v) for name, v in zip(OBJECTIVES, vector)}, "valid": 1.0}


def score_task_file(maze: dict, task_name: str, path: str | Path) -> dict[str, float]:
    """The route in the file's EVOLVE block scored by the registered task `task_name`."""
    import tasks
    from tasks.base import Instance

    task = tasks.get(task_name)
    instance = Instance(task_name, "spec", 0, Maze(tuple(maze["rows"]), int(maze["budget"])))
    try:
        answers = one_route(task, instance, block_of(Path(path).read_text()))
    except (ParseError, TemplateMismatch):
        return {**dict.fromkeys(task.objectives, 0.0), "valid": 0.0}
    vector = task.score(instance, answers)[0]
    return {**{name: float(v) for name, v in zip(task.objectives, vector)}, "valid": 1.0}


def one_route(task, instance, block: str) -> list:
    """The block's one route, parsed as the task parses a one-route answer; a block holding one
    answer is read as `task.answer_texts` gives it alone (a chat route numbered as in a set
    reply, `<route_2>...</route_2>`, is route 1)."""
    texts = task.answer_texts(block)
    return task.parse(instance, texts[0] if len(texts) == 1 else block, m=1)


MISSING = "missing_"  # a minimized objective: the share of a treasure kind the route leaves behind


def score_missing_file(maze: dict, task_name: str, path: str | Path) -> dict[str, float]:
    """The route scored as shares left behind (`missing_<treasure>`, lower is better); a route
    that does not parse, jumps, walks into a wall or misses E within the budget RAISES (a failed
    evaluation): the scorer of an own problem whose objectives are minimized and whose bad
    programs fail, as `write_spec(..., minimized=True)` writes it."""
    import tasks
    from tasks.base import Instance

    task = tasks.get(task_name)
    instance = Instance(task_name, "spec", 0, Maze(tuple(maze["rows"]), int(maze["budget"])))
    answers = one_route(task, instance, block_of(Path(path).read_text()))  # ParseError: a failure
    route = task.path(instance.data, answers[0])
    if route is None:
        raise ValueError("the route jumps or walks into a wall")
    if route[-1] != instance.data.exit or len(route) - 1 > instance.data.budget:
        raise ValueError(f"the route does not reach E within the budget of {instance.data.budget} moves")
    vector = task.score(instance, answers)[0]
    return {f"{MISSING}{name}": 1.0 - float(v) for name, v in zip(task.objectives, vector)}


SET_HEAD_FILE = "route.set.txt"
HEAD_FILE = "route.prompt.txt"


def set_head(task, instance) -> str | None:
    """The task's own m-answer prompt with `{answers}` for m (compact prompts: the last line's
    `routes M`), so a set search asks exactly what a set-trained checkpoint saw; None for chat."""
    if task.style != "compact":
        return None
    head, _, last = task.prompt(instance, m=2).rstrip("\n").rpartition("\n")
    if not last.startswith("routes 2 "):
        return None
    return f"{head}\n{last.replace('routes 2 ', 'routes {answers} ', 1)}\n"


def write_spec(task, instance, directory: Path, initial: str, minimized: bool = False) -> Path:
    """The maze's spec, its target the maze's oracle best scalar; `minimized`: every objective stated as the share left behind
    (`missing_<treasure>`, in [problem] minimize) and a bad route a failed evaluation
    (`score_missing_file`), as an own problem with minimized objectives would be."""
    from tasks.maze.formats import ROUTE_TAG, SEPARATOR, chat_prompt

    maze: Maze = instance.data
    head = task.prompt(instance, m=1)
    program = head + ("" if head.endswith("\n") else "\n") + START_LINE + initial.strip() + "\n" + END_LINE
    literal = json.dumps({"rows": list(maze.rows), "budget": maze.budget})
    prefix = MISSING if minimized else ""
    objectives = [prefix + name for name in task.objectives]
    treasures = [prefix + name for name in task.objectives if name not in ("completion", "avoid_lava")]
    tables = problem_tables(f"{task.name}-{instance.split}-{instance.index}{'-minimized' if minimized else ''}", "route.txt",
                            objectives, target=task.oracle_best(instance), weights=[1.0] * len(objectives), isolation="none", timeout=5.0, style="continue",
                            features={name: (f"objective:{name}", [-1.0, 0.0] if minimized else [0.0, 1.0], 3)
                                      for name in treasures[:2]})
    if minimized:
        tables["problem"]["minimize"] = objectives
        del tables["search"]["target"]  # the best route leaves nothing behind: the search spends its budget
    files = {"route.txt": program}
    sets = set_head(task, instance)
    if sets is not None:  # a set search (answers > 1) asks with the task's own m-answer prompt
        tables["prompt"].update(set_head=SET_HEAD_FILE, separator=SEPARATOR)
        files[SET_HEAD_FILE] = sets
    elif task.style == "chat":  # answered, not continued: the task's own prompt for any m, each route its own tags
        tables["prompt"].update(head=HEAD_FILE, answer_pattern=ROUTE_TAG)
        files[HEAD_FILE] = chat_prompt(maze, "{answers}")  # where a head file puts m
    if minimized:
        scorer = scorer_file("one maze, objectives minimized", "tasks.maze.spec:score_missing_file",
                             {"MAZE": literal, "TASK": repr(task.name)})
    elif task.name == "maze":  # the specs written before other maze families existed
        scorer = scorer_file("one maze", "tasks.maze.spec:score_file", {"MAZE": literal, "STYLE": repr(task.style)})
    else:
        scorer = scorer_file("one maze", "tasks.maze.spec:score_task_file", {"MAZE": literal, "TASK": repr(task.name)})
    return write_problem(directory, tables, {**files, "score.py": scorer})
