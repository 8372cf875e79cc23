"""What a checkpoint was trained to answer, against what a spec asks: one `warning:` line per
mismatch before a run (`evo run`, `evo compare --spec`), saying what will go wrong and what to do.

    for line in trained_for.warnings(spec, "local:maze-clusters-vpo", answers=3):
        click.echo(line, err=True)

A checkpoint names its training task in train_config.json or pretrain.json: a registered task
family, whose own spec (`Task.problem_spec`) holds the prompts it was trained on, or
`spec:PATH`, the spec `evo train --spec` trained it on. Against the run's spec:

- the problem: the spec's objectives are among the task's;
- the prompt style: the task's (`continue` for every family) is the spec's;
- the prompt itself: a task whose spec's `[prompt] head` is its own prompt (a chat task, whose
  model answers rather than continues) is searched with a spec that has a head too;
- the set format: asked for m > 1 programs in `continue` prompts, the spec has the task's
  `[prompt] set_head` and `separator` (else the model's m programs read as one);
- the set size: a checkpoint trained on sets of s > 1 programs (train_config.json's set_size)
  is asked for at most s (set size 1 says nothing: a warm-up learns both templates).

Nothing is refused here: with each mismatch some replies still parse. The prompt format (chat
template or plain text) cannot differ: every policy that loads a checkpoint prompts it in its
recorded format (evo.policies.prompt_format).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from evo.policies.checkpoints import SPEC_TASK

RECORDS = ("train_config.json", "pretrain.json")  # where a checkpoint names its task, the last training first


@dataclass(frozen=True)
class Trained:
    """What a checkpoint was trained to answer."""

    task: str
    objectives: tuple[str, ...]  # the task's
    style: str  # the prompt style of the task's spec
    set_head: bool  # whether the task's spec asks for sets with its own m-answer prompt
    separator: str  # what separates a set's programs in the task's spec ("": the default marker line)
    set_size: int  # programs per reply of its set training; 1: none recorded
    source: str  # where a spec of the task comes from: a command, or the spec's path
    head: bool = False  # whether the task's spec prompts with the task's own prompt ([prompt] head), no block prefix


def recorded_task(directory: Path) -> str | None:
    """The task a checkpoint was trained on (train_config.json's, else pretrain.json's), or None."""
    for name in RECORDS:
        try:
            data = json.loads((Path(directory) / name).read_text())
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("task"), str) and data["task"]:
            return data["task"]
    return None


def spec_command(task: str) -> str:
    """A command that writes a spec of a task family (a held-out instance) and prints its path."""
    return (f"python -c \"import tasks; t = tasks.get('{task}'); "
            f"print(t.problem_spec(t.instances('test', 1)[0], 'runs/{task}-spec'))\"")


def trained(directory: Path, set_size: int) -> Trained | None:
    """What the checkpoint in `directory` was trained to answer, or None when its task is not
    recorded or cannot be read back (an unregistered family, a spec that is gone)."""
    from evo import spec as specs

    task = recorded_task(directory)
    if task is None:
        return None
    if task.startswith(SPEC_TASK):
        path = Path(task[len(SPEC_TASK):])
        try:
            spec = specs.load(path)
        except specs.SpecError:
            return None
        return _of(task, spec, spec.problem.objectives, set_size, f"the spec it was trained on, {path}")
    import tasks

    try:
        family = tasks.get(task)
        with tempfile.TemporaryDirectory() as scratch:
            spec = specs.load(family.problem_spec(family.instances("test", 1)[0], Path(scratch)))
    except (tasks.UnknownTask, specs.SpecError, ImportError, OSError, ValueError):
        return None
    return _of(task, spec, tuple(str(name) for name in family.objectives), set_size, f"a spec of {task}: {spec_command(task)}")


def _of(task: str, spec, objectives: Sequence[str], set_size: int, source: str) -> Trained:
    return Trained(task, tuple(objectives), spec.prompt.style, bool(spec.prompt.set_head), spec.prompt.separator,
                   set_size, source, bool(spec.prompt.head))


def _names(names: Sequence[str], shown: int = 6) -> str:
    return ", ".join(names[:shown]) + (f", ... ({len(names)} in all)" if len(names) > shown else "")


def _separator(text: str) -> str:
    return repr(text) if text else "an EVOLVE-BLOCK-NEXT line (the default)"


def mismatches(uri: str, t: Trained, spec, answers: int, answers_flag: str = "--answers ") -> list[str]:
    """One `warning:` line per way the run of `spec` with `answers` programs per reply asks the
    checkpoint of `uri` for something other than what it was trained on (`t`); `answers_flag`:
    the flag, up to its value, that sets the programs per reply in the refused command."""
    lines = []
    objectives = spec.problem.objectives
    if not set(objectives) <= set(t.objectives):
        lines.append(f"warning: {uri} was trained on {t.task} (objectives {_names(t.objectives)}) and this spec scores "
                     f"{_names(objectives)}: it answers the prompts of its own task, so expect unparseable replies and "
                     f"few useful programs; use a checkpoint trained on this problem, or search {t.source}")
    style = spec.prompt.style
    if style != t.style:
        lines.append(f"warning: {uri} was trained on {t.task}'s {t.style!r} prompts and this spec asks in {style!r} "
                     f"prompts, a form it never saw: expect most replies unparseable; set [prompt] style = "
                     f"\"{t.style}\" (--set prompt.style={t.style})")
    elif t.head != bool(spec.prompt.head):
        lines.append(f"warning: {uri} was trained on {t.task}'s prompts, which its spec "
                     f"{'states as [prompt] head (the model answers them, writing whole programs)' if t.head else 'continues from the program file'}, "
                     f"and this spec {'has a' if spec.prompt.head else 'has no'} [prompt] head: expect most replies unparseable; "
                     f"search {t.source}")
    elif answers > 1 and style == "continue":
        head = bool(spec.prompt.set_head)
        if head != t.set_head or spec.prompt.separator != t.separator:
            lines.append(f"warning: {uri} writes a set of programs as {t.task}'s spec asks for it ("
                         f"{'a' if t.set_head else 'no'} [prompt] set_head, separator {_separator(t.separator)}), and "
                         f"this spec has {'a' if head else 'no'} set_head, separator {_separator(spec.prompt.separator)}: "
                         f"most replies will read as fewer than the {answers} programs asked for and count as "
                         f"unparseable; use {answers_flag}1, or the set_head and separator of {t.source}")
    if 1 < t.set_size < answers:
        lines.append(f"warning: {uri} was trained to write sets of {t.set_size} programs (set_size in its "
                     f"train_config.json), and {answers} per reply is more than it learned to write: most replies "
                     f"will hold fewer and count as unparseable; use {answers_flag}{t.set_size}")
    return lines


def cut_warnings(spec, uri: str, budget: int | None = None, flag: str = "--max-new-tokens") -> list[str]:
    """One `warning:` line when the checkpoint of `uri` is searched, by default, at a token budget
    a program (`budget`, a comparison's shared one; None: the one it was trained to write, the
    loop's default for it) below what the spec's initial program takes in its tokens (its EVOLVE
    block for `continue` prompts, else the whole file): every program it writes as long would be
    cut and count as unparseable. A budget the user gave is not checked (callers skip it)."""
    from evo.policies import checkpoint_of, resolve_checkpoint, trained_tokens
    from evo.policies.local import load_tokenizer
    from evo.program import MarkerError, split

    trained = trained_tokens(uri)
    budget = budget or trained
    path = checkpoint_of(uri)
    if budget is None or path is None:
        return []
    code = spec.problem.program.read_text(encoding="utf-8")
    if spec.prompt.style == "continue":
        try:
            code = split(code).block
        except MarkerError:
            return []
    try:
        needed = len(load_tokenizer(resolve_checkpoint(path))(code, add_special_tokens=False)["input_ids"])
    except (OSError, ValueError):  # no tokenizer to count with: loading the policy says what is wrong
        return []
    if needed <= budget:
        return []
    whose = ("the tokens it was trained to write (train_config.json)" if budget == trained
             else "the largest any compared policy was trained to write")
    return [f"warning: {uri} is searched at {budget} tokens a program, {whose}, and this spec's initial program "
            f"takes {needed}: programs as long will be cut and count as unparseable; give {flag} {2 * needed + 64}, "
            "or search with a checkpoint trained on this problem"]


def warnings(spec, uri: str, answers: int, answers_flag: str = "--answers ") -> list[str]:
    """The `mismatches` of the checkpoint a policy URI names (`local:`, `vllm:`,
    `openai:...;train=PATH`) with a run of `spec` at `answers` programs per reply; [] for a
    policy with no checkpoint, or one whose training task is not known."""
    from evo.policies import checkpoint_of, resolve_checkpoint, trained_answers

    path = checkpoint_of(uri)
    if path is None:
        return []
    t = trained(resolve_checkpoint(path), trained_answers(uri))
    return [] if t is None else mismatches(uri, t, spec, answers, answers_flag)
