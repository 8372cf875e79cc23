"""Test-time training: the search's own proposals train its policy during `evo run`.

    learner = Learner.of(policy, run, loop, name, spec.problem, OnlineSettings.of("vpo_front", 4, {}))
    run_dir.execute(config, policy, observers=[learner])     # evo run SPEC --policy local:PATH --train vpo_front

The learner is an observer of the loop (evo.loop.Observer): it is told each group's replies
and the front its prompts were built from before they are journaled, and each iteration's
evaluations before it is inserted, and writes both to RUN/online/; it never opens the run's
database. The policy is a Trainable (evo.policies.base: `local:` trains its own sampling model,
`vllm:` and `openai:...;train=PATH` a torch copy whose weights are pushed into the engine, or the
running `vllm serve`, after every step and on resume). It trains under `evo train`'s precision plan
(training/precision.py): float32 master weights and AdamW moments, bf16 autocast on CUDA for a
16-bit checkpoint; a sampling model in 16 bits gets the masters' weights pushed in after each step
(`trained_model`). The learning rate is chosen by the model's size (training/rates.py), a tenth of
`evo train`'s unless given; the memory the step needs is checked before the search samples
(trainer.check_memory).
A group is the completions of one prompt (one iteration). A policy that answers with a set of
m programs per completion (a VPO checkpoint's trained m) trains on the sets: a completion's m
journal slots are its answers (rewards (B, G, m, d)), scored together by a set estimator
(`vpo_front`: the set's gain over the front F; `vpo`); a single-answer estimator refuses such
a policy. Each step is training.trainer.train_step, the one step `evo train` takes too. The
rule that makes a run deterministic for a seed whatever the timing, and a killed run resume to
the same programs and weights:

- when the loop is about to ask for the group that starts at iteration s (`asking`, on the
  policy's thread), the learner has taken every step k with k * every <= max(0, s - lag)
  (lag = the loop's depth x batch: those iterations are committed when the group is asked);
- step k trains on the groups of iterations [(k - 1) * every, k * every), log-probs
  recomputed under the current weights, advantages from the estimator with a generator seeded
  by (seed, k). Staleness: a group was sampled by weights at most 1 + lag // every steps older
  than those it trains.

What a proposal earns, and the front F `vpo_front` measures it against, are
training/search_signal.py's rule (shared with `evo train --spec`): a failure earns the floor,
below every valid program; a duplicate by the `duplicates` setting. When `idle_steps` steps in
a row taught nothing (all failed, all repeated, zero advantage everywhere), training stops: the
message is printed once and written to RUN/online/stopped.json (`evo show` says it) and the
search goes on with the policy frozen.

State in RUN/online/: settings.json, groups/ITERATION.json (prompt token ids, completions and
front, written when the loop is told them), outcomes/ITERATION.json (what each proposal became,
written when the loop commits it), state.pt (weights, optimizer, step; replaced atomically
after each step), metrics.jsonl (one line per step) and stopped.json; each is typed and checked
on read (evo/training_log.py, training/online_files.py). Every setting is checked when the
settings are made, before any work (OnlineSettings); a step whose loss or gradient is not
finite stops the run before the optimizer applies it.
"""

from __future__ import annotations

import copy
import json
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from evo.errors import UserError
from evo.loop import Committed, LoopConfig, PromptGroup, Told
from evo.policies.base import Completion, Trainable
from evo.training_log import (DIRECTORY, METRICS_FILE, Settings, damaged, move_online, read_metrics,
                              read_stopped, truncate_metrics, write_stopped)
from training import advantages, precision, rates, search_signal
from training.advantages import pad_fronts
from training.config import TrainConfig
from training.online_files import GROUPS, OUTCOMES, Group, Outcome, load_state, save_state
from training.rollouts import Rollouts
from training.trainer import Batch, check_memory, finite, not_finite, train_step, trained_state

TRAIN_FIELDS = ("lr", "weight_decay", "max_grad_norm", "eps_low", "eps_high", "entropy_coef", "kl_coef", "max_new_tokens",
                "duplicates", "failures", "idle_steps")
# `evo run --train` without --train-option lr: a tenth of the offline rate for the model's size
# (2e-5 for the tiny models). At the offline rate (2e-4) online training made the search worse on
# fresh maze-clusters instances (136 paired runs: success -0.103 [-0.184, -0.022],
# experiments/maze/results-online-pilot/); at a tenth it did no harm in the pilots.
ONLINE_LR_FACTOR = 0.1
NOT_TRAINABLE = "--train needs a policy this process can train (local:PATH, vllm:PATH or openai:URL#MODEL;train=PATH)"
LOSS_TOKENS = 64  # TrainConfig.max_new_tokens here: only the loss's normalizer (rollouts x this), unless given


@dataclass(frozen=True)
class OnlineSettings(Settings):
    """The run's training settings (RUN/online/settings.json), every value checked when made:
    on the command line before any work, and when read back on --resume."""

    def __post_init__(self) -> None:
        try:
            estimator = advantages.entry(self.algo)
        except advantages.UnknownEstimator as error:
            raise UserError(f"--train: {error}") from None
        if estimator.goal_conditioned:
            raise UserError(f"--train {self.algo}: a search prompt shows no weighting; use vpo_front, vpo, or a "
                            "single-answer estimator such as grpo")
        if self.every < 1:
            raise UserError(f"--train-every must be >= 1, got {self.every}")
        names = advantages.option_names(estimator.function)
        unknown = sorted(set(self.train) - set(TRAIN_FIELDS)) + sorted(set(self.options) - set(names))
        if unknown:
            raise UserError(f"--train-option {unknown[0]}: neither a training setting ({', '.join(TRAIN_FIELDS)}) "
                            f"nor an option of {self.algo} ({', '.join(names) or 'none'})")
        if self.train.get("max_new_tokens", LOSS_TOKENS) == 0:
            raise UserError("--train-option max_new_tokens must be >= 1 (the loss is divided by rollouts x it)")
        self.check_group(None)
        try:  # the training settings' values (the options were checked above, G is the search's)
            TrainConfig(task="online", algo=self.algo, init="-", out="-", **{"max_new_tokens": LOSS_TOKENS, **self.train})
        except ValueError as error:
            raise UserError(f"--train-option {error}") from None

    def check_answers(self, per_completion: int) -> int:
        """`per_completion`, the programs in each completion of the policy (LoopConfig.asked),
        when the estimator can learn from that shape; else a one-line UserError. m > 1 programs
        in one completion are one set, scored together by a set estimator (vpo_front: the
        set's gain over the front; vpo, multi_rlvr); a single-answer estimator (grpo, ...)
        needs one program per completion."""
        estimator = advantages.entry(self.algo)
        if per_completion > 1 and not (estimator.multi_answer or estimator.front):
            raise UserError(f"--train {self.algo} learns from one program per reply, and this policy answers with "
                            f"{per_completion}: train on the sets with --train vpo_front (or vpo), or pass --answers 1")
        if per_completion == 1 and estimator.multi_answer:
            raise UserError(f"--train {self.algo} scores a set of programs per reply, and this policy answers with one: "
                            "give --answers 2 or more (a policy trained on sets), or use vpo_front or grpo")
        return per_completion

    def check_group(self, group: int | None) -> None:
        """Refuse an estimator option's bad value; with `group` (completions per prompt) also maxk's k > G."""
        problem = advantages.option_problem(self.algo, self.options, group)
        if problem:
            raise UserError(f"--train-option {problem}")

    def check_policy(self, uri: str, spec: Any, answers: int = 0) -> None:
        """Before any work (`evo run --train`, `evo compare --spec --train`): the policy at `uri`
        is one this process can train, the estimator's options fit the spec's completions per
        prompt, the estimator learns from the replies the search will ask that policy for, and no
        zero-vector rule meets a minimized objective (where zero is above every program).
        `answers`: the programs per reply asked of the policy (0: the spec's, else its checkpoint's)."""
        from evo import policies
        from evo.loop import asked

        search = spec.search
        zeros = [key for key in ("failures", "duplicates") if self.train.get(key) == "zero"]
        if zeros and spec.problem.minimize:
            raise UserError(f"--train-option {zeros[0]}=zero scores a zero vector, which beats every program on the "
                            f"minimized objective {spec.problem.minimize[0]!r} (negated in the score vector): drop it "
                            "(the default rule is safe whatever the signs)")
        if not policies.trainable(uri):
            raise UserError(f"{NOT_TRAINABLE}, not {uri!r}")
        self.check_group(search.samples_per_prompt)
        m = policies.answers_for(uri, answers or search.answers)
        per_completion, _ = asked(m, search.samples_per_prompt, search.answers_by)
        self.check_answers(per_completion)

    def train_config(self, init: str, out: str, *, seed: int, group: int | None = None) -> TrainConfig:
        """The trainer's settings; `group`: the search's completions per prompt (None: unknown,
        large enough for the options)."""
        self.check_group(group)
        group = group or max(TrainConfig.group, self.options.get("k") or 0)
        return TrainConfig(task="online", algo=self.algo, init=init, out=out, seed=seed, group=group,
                           options=dict(self.options), **{"max_new_tokens": LOSS_TOKENS, **self.train})

    @classmethod
    def of(cls, algo: str, every: int, pairs: dict[str, Any]) -> "OnlineSettings":
        """Split KEY=VALUE pairs into training settings and estimator options."""
        train = {k: v for k, v in pairs.items() if k in TRAIN_FIELDS}
        return cls(algo, every, train, {k: v for k, v in pairs.items() if k not in TRAIN_FIELDS})

    @classmethod
    def read(cls, run: Path) -> "OnlineSettings | None":
        """The run's settings, or None when it did not train; a damaged file is one line."""
        typed = Settings.read(run)
        if typed is None:
            return None
        try:
            return cls(**{**asdict(typed), "algo": advantages.stored_name(typed.algo)})
        except UserError as error:
            raise damaged(Settings.path(run), f"not the run's training settings ({error})", move_online(run)) from None


class Learner:
    """Trains a Trainable policy on what the loop tells it (see the module doc)."""

    def __init__(self, policy: Any, run: Path, settings: OnlineSettings, *, seed: int, lag: int,
                 objectives: Sequence[str], weights: np.ndarray, group: int, answers: int = 1) -> None:
        if not isinstance(policy, Trainable):
            raise UserError(NOT_TRAINABLE)
        self.policy, self.settings, self.seed, self.lag = policy, settings, seed, lag
        self.answers, self.group = answers, group  # a completion's `answers` journal slots are one set
        self.objectives, self.weights = tuple(objectives), np.asarray(weights, dtype=np.float64)
        self.directory = Path(run) / DIRECTORY
        if not Settings.path(run).exists():  # a resumed run's are read from there
            settings.save(run)
        for name in (GROUPS, OUTCOMES):
            try:
                (self.directory / name).mkdir(exist_ok=True)
            except OSError as error:
                raise UserError(f"cannot create {self.directory / name} ({error.strerror}); pick a writable --out") from None
        model, tokenizer, plan = trained_model(policy)
        config = rates.resolved(settings.train_config(str(policy.checkpoint()), str(self.directory), seed=seed, group=group),
                                rates.parameters(model))
        if "lr" not in settings.train:  # the safe default: a tenth of the offline rate
            config = replace(config, lr=config.lr * ONLINE_LR_FACTOR)
        config = replace(config, device=next(model.parameters()).device.type, bf16=plan.autocast,
                         weight_dtype=precision.dtype_name(plan.weights))
        self.state = trained_state(config, None, model, tokenizer, plan)  # config.init: the policy's checkpoint
        check_memory(self.state)  # before the search samples
        self.seconds = 0.0
        self.history: list[dict] = []  # the steps' records (what search_signal.idle_cause reads)
        self.stopped = ""  # why training stopped (nothing to learn); '' while it trains
        self._lock = threading.Lock()
        self._resume()

    @classmethod
    def of(cls, policy: Any, run: Path, loop: LoopConfig, name: str, problem: Any,
           settings: OnlineSettings | None = None) -> "Learner":
        """The learner of the run in `run` whose loop is `loop`, training its policy `name`
        (`problem`: the spec's [problem], for the objectives and weights); `settings` None: the
        run's stored ones (a resumed run)."""
        stored = settings is None
        settings = settings or OnlineSettings.read(Path(run))
        if settings is None:
            raise UserError(f"{run}: the run did not train its policy (no online/settings.json); "
                            "give --train ALGO to a new run")
        per_completion, group = loop.asked(name)
        try:
            settings.check_answers(per_completion)
        except UserError as error:
            if not stored:
                raise
            raise UserError(f"{Settings.path(run)}: the run's training settings do not fit its policy ({error})") from None
        checkpoint = str(Path(policy.checkpoint()).resolve())
        if stored:
            check_resumed(settings, Path(run), group, per_completion, checkpoint)
        else:
            settings = replace(settings, group=group, answers=per_completion, checkpoint=checkpoint)
        return cls(policy, Path(run), settings, seed=loop.seed, lag=loop.lag, objectives=problem.objectives,
                   weights=problem.weights, group=group, answers=per_completion)

    def untrained(self) -> str | None:
        """A `warning:` line for a run that ended before its first training step (None otherwise):
        step 1 waits for `every` iterations' proposals to be scored, `lag` iterations behind the asks."""
        if self.state.step or self.stopped:
            return None
        every, lag = self.settings.every, self.lag
        return (f"warning: --train took no training step: step 1 trains on iterations 0-{every - 1} once they are "
                f"scored, {lag} iterations behind the search's asks (--depth x --batch), so before iteration "
                f"{every + lag}; run more iterations (evo run --resume DIR --iterations N), or a smaller --train-every")

    # -- what the loop tells it (evo.loop.Observer) ------------------------------------------

    def asking(self, group: PromptGroup) -> None:
        """Before the group starting at s is sampled: every step k with k * every <= max(0, s - lag)."""
        with self._lock:
            committed = max(0, group.start - self.lag)
            while not self.stopped and (self.state.step + 1) * self.settings.every <= committed:
                self._step(self.state.step + 1)

    def told(self, told: Told) -> None:
        ids = self.policy.encode(told.group.texts)
        for offset, (prompt, row) in enumerate(zip(ids, told.replies)):
            completions = tuple((c.text, tuple(c.token_ids), c.finish_reason) for c in row)
            Group(told.group.start, tuple(prompt), completions, told.front).write(self.directory, told.group.start + offset)

    def committed(self, iterations: Sequence[Committed]) -> None:
        slots = self.group * self.answers
        for committed in iterations:
            kinds, scores = search_signal.outcome(committed.candidates, committed.evaluations, slots, len(self.objectives))
            Outcome(kinds, scores).write(self.directory, committed.iteration)

    # -- state -------------------------------------------------------------------------------

    def _resume(self) -> None:
        loaded = load_state(self.directory, self.state.model, self.state.optimizer)
        if loaded is not None:
            self.state.step, self.seconds = loaded
            truncate_metrics(self.directory / METRICS_FILE, self.state.step)  # a kill between a step's line and its state
            self.history = read_metrics(self.directory / METRICS_FILE)
            self.stopped = read_stopped(self.directory.parent) or self._idle()
        if not self.stopped:
            self._check_recorded()  # before any step, and before the weights reach the policy's engine
        if loaded is not None:
            self.policy.push(self.state.model)

    def _check_recorded(self) -> None:
        """Before any step of a resumed run: every group and outcome its next steps will train on
        (the earlier sessions' files of iterations >= step x every) reads back as the run's, or
        one line names the first that does not."""
        first = self.state.step * self.settings.every
        for name, read in ((GROUPS, self._group), (OUTCOMES, self._outcome)):
            for path in sorted((self.directory / name).glob("[0-9]" * 8 + ".json")):
                if int(path.stem) >= first:
                    read(int(path.stem))

    def _group(self, iteration: int) -> Group:
        vocabulary = self.state.model.get_input_embeddings().num_embeddings
        return Group.read(self.directory, iteration, vocabulary, len(self.objectives), self.group)

    def _outcome(self, iteration: int) -> Outcome:
        return Outcome.read(self.directory, iteration, self.group * self.answers, len(self.objectives),
                            len(search_signal.KINDS))

    def _save(self, record: dict) -> None:
        """The step's metrics line, then the state (a kill between the two: the line is cut on resume)."""
        try:
            with open(self.directory / METRICS_FILE, "a") as handle:
                handle.write(json.dumps(record) + "\n")
        except OSError as error:
            raise UserError(f"cannot write {self.directory / METRICS_FILE} ({error.strerror}); free space or make it "
                            f"writable, then continue with evo run --resume {self.directory.parent}") from None
        save_state(self.directory, self.state.model, self.state.optimizer, self.state.step, self.seconds)

    def _idle(self) -> str:
        """The one line when the last `idle_steps` steps taught nothing (then training stops), else ''."""
        cause = search_signal.idle_cause(self.history, self.state.config.idle_steps)
        if not cause:
            return ""
        line = f"{cause}; training stopped, the search goes on with the policy frozen"
        write_stopped(self.directory.parent, self.state.step, line)
        return line

    # -- training ----------------------------------------------------------------------------

    def _step(self, k: int) -> None:
        started = time.perf_counter()
        iterations = range((k - 1) * self.settings.every, k * self.settings.every)
        record = train_step(self.state, lambda state: self._batch(k, iterations))
        if not finite(record):
            raise not_finite(k, record)
        self.policy.push(self.state.model)
        self.seconds += time.perf_counter() - started
        record = {"step": k, "iterations": [iterations[0], iterations[-1]], **record,
                  "seconds": time.perf_counter() - started, "seconds_total": self.seconds}
        self._save(record)
        self.history.append(record)
        self.stopped = self._idle()
        if self.stopped:
            print(self.stopped, file=sys.stderr, flush=True)

    def _batch(self, k: int, iterations: range) -> Batch:
        """Step k's training data: the recorded groups of `iterations` and what they became."""
        from training.engines import as_rollout

        state = self.state
        groups, outcomes = [self._group(i) for i in iterations], [self._outcome(i) for i in iterations]
        proposals = proposals_of(groups, outcomes, self.answers)
        kinds, fronts = proposals.kinds, proposals.fronts
        truncated = np.array([group.truncated for group in groups])
        rewards = set_rewards(proposals, self.group, state.config.duplicates, state.config.failures)
        completions = [[Completion(t, ids, finish_reason=f) for t, ids, f in g.completions] for g in groups]
        samples = as_rollout([g.prompt for g in groups], completions, getattr(state.tokenizer, "pad_token_id"),
                             next(state.model.parameters()).device)
        unparsed = (kinds.reshape(len(groups), self.group, self.answers) == search_signal.UNPARSED).all(axis=2)
        rolls = Rollouts([], samples, [c.text for row in completions for c in row], rewards, unparsed, truncated, kinds)
        extra = {"front": fronts} if advantages.entry(self.settings.algo).front else {}
        return Batch(rolls, rewards, self.objectives, self.weights, np.random.default_rng([self.seed, k]), extra)


def check_resumed(settings: OnlineSettings, run: Path, group: int, answers: int, checkpoint: str) -> None:
    """A resumed run trains on the groups and outcomes its earlier sessions wrote: refuse, in one
    line, a search that now asks another number of completions per prompt or programs per
    completion (--answers, --answers-by), or a policy moved to another checkpoint."""
    if settings.group and (settings.group, settings.answers) != (group, answers):
        raise UserError(f"{run}: the run trained on {settings.group} completions of {settings.answers} program(s) per "
                        f"prompt, and this resume asks {group} of {answers}; its recorded groups hold the first: resume "
                        "with the run's --answers and --answers-by (drop the flags), or start a new run")
    if settings.checkpoint and settings.checkpoint != checkpoint:
        raise UserError(f"{run}: the run trains {settings.checkpoint}, not {checkpoint}; its online state continues "
                        "that model: resume with --policy naming it (a served model's URL may move), or start a new "
                        "run (a checkpoint that moved on disk: set \"checkpoint\" in online/settings.json)")


def trained_model(policy: Trainable) -> tuple[torch.nn.Module, Any, precision.Precision]:
    """The model the learner updates, its tokenizer and its precision plan: `evo train`'s plan
    (training/precision.py) on the device the policy samples on, for full fine-tuning of its
    checkpoint (float32 masters; bf16 autocast on CUDA for a 16-bit checkpoint). When the
    policy's own model is in another dtype (a `local:` policy samples a bf16 checkpoint in bf16
    on CUDA), the masters are a float32 copy of it beside it, and `push` copies them in."""
    model, tokenizer = policy.trainee()
    device = next(model.parameters()).device
    plan = precision.plan(device.type, precision.checkpoint_dtype(policy.checkpoint()), lora=False)
    if any(p.dtype != plan.weights for p in model.parameters()):
        model = copy.deepcopy(model).to(dtype=plan.weights)
    return model, tokenizer, plan


def proposals_of(groups: Sequence[Group], outcomes: Sequence[Outcome], answers: int) -> search_signal.Proposals:
    """A step's proposals from its groups (B prompts of G completions, as told) and their outcomes
    (B x G x `answers` journal slots, as committed). A cut-off single program is CUT; of a
    cut-off set, the loop already failed the program the budget cut and the others stand."""
    truncated = np.array([group.truncated for group in groups])
    cut = truncated if answers == 1 else np.zeros((len(groups), truncated.shape[1] * answers), dtype=bool)
    kinds = search_signal.cut_off(np.stack([o.kinds for o in outcomes]), cut)
    fronts = pad_fronts([group.front for group in groups], groups[0].front.shape[1])
    return search_signal.Proposals(kinds, np.stack([o.scores for o in outcomes]), fronts)


def set_rewards(proposals: search_signal.Proposals, completions: int, duplicates: str = search_signal.DEFAULT_DUPLICATES,
                failures: str = search_signal.DEFAULT_FAILURES) -> np.ndarray:
    """The (B, G, m, d) rewards of a step's proposals (B, G x m journal slots: completion j's
    programs are slots j x m ... j x m + m - 1) under search_signal's rule."""
    b, slots, d = proposals.scores.shape
    return search_signal.rewards(proposals, duplicates, failures).reshape(b, completions, slots // completions, d)
