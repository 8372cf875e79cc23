"""Test-time training: the search's own proposals train its policy during `evo run`.

    policy = online_policy(LocalPolicy(path), config, OnlineSettings.of("vpo_archive", 4, {}))  # config: a RunConfig
    run_dir.execute(config, policy)            # evo run SPEC --policy local:PATH --train vpo_archive

The loop (evo/loop.py) stays ignorant of training: this wrapper is the Policy it calls. A
`local:` policy's own torch model is trained; for a `vllm:` policy a torch copy of the
checkpoint is trained and its weights pushed into the engine after every step (and on resume). A
group is the completions of one prompt (one iteration); their score vectors are what the
loop journaled. A policy that answers with a set of m programs per completion (a VPO
checkpoint's trained m) trains on the sets: a completion's m journaled programs are its
answers (rewards (B, G, m, d)), scored together by a set estimator (`vpo_archive`: the set's
gain over the front F; `vpo`); a single-answer estimator refuses such a policy. The rule that makes a run deterministic for a seed whatever the timing, and
a killed run resume to the same programs and weights:

- before generating the group that starts at iteration s, the policy has taken every step k
  with k * every <= max(0, s - lag) (lag = the loop's depth x batch: those iterations are
  committed when the group is asked);
- step k is one PPO-clip step (training.trainer.update) on the groups of iterations
  [(k - 1) * every, k * every), log-probs recomputed under the current weights, advantages
  from the estimator with a generator seeded by (seed, k). Staleness: a group was sampled by
  weights at most 1 + lag // every steps older than those it trains.

What a proposal earns, and the front F `vpo_archive` measures it against, are
training/search_signal.py's rule (shared with `evo train --spec`): a failure earns the floor,
below every valid program; a duplicate by the `duplicates` setting. When `idle_steps` steps in a
row taught nothing (all failed, all repeated, zero advantage everywhere), training stops: the
message is printed once and written to RUN/online/stopped.json (`evo show` says it) and the
search goes on with the policy frozen.

`online_policy` builds it from the run's own loop settings (the lag, the completions per
prompt), for `evo run --train` and `evo compare --spec --train` alike. State in RUN/online/:
settings.json, groups/ITERATION.json (prompt token ids and completions, written before the
loop journals them), state.pt (weights, optimizer, step; replaced atomically after each step),
metrics.jsonl (one line per step) and stopped.json; each is typed and checked on read (evo/training_log.py, training/online_files.py). Every setting is checked when the
settings are made, before any work (OnlineSettings); a step whose loss or gradient is not
finite stops the run before the optimizer applies it.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from contextlib import closing
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from evo.database import DB_FILE
from evo.database.journal import CandidateJournal
from evo.database.store import Store
from evo.errors import UserError
from evo.training_log import (DIRECTORY, METRICS_FILE, Settings, damaged, move_online, read_metrics,
                              read_stopped, truncate_metrics, write_stopped)
from evo.policies.base import Completion
from evo.scores import scalarize
from training import advantages, rates, search_signal
from training.config import TrainConfig
from training.online_files import GROUPS, Group, load_state, save_state
from training.rollouts import Rollouts

if TYPE_CHECKING:
    from tasks import Task

TRAIN_FIELDS = ("lr", "weight_decay", "max_grad_norm", "eps_low", "eps_high", "entropy_coef", "kl_coef", "max_new_tokens",
                "duplicates", "failures", "idle_steps")
# `evo run --train` without --train-option lr: a tenth of the offline rate for the model's size
# (2e-5 for the tiny models). At the offline rate (2e-4) online training made the search worse on
# fresh maze-clusters instances (136 paired runs: success -0.103 [-0.184, -0.022],
# examples/maze/results-online-pilot/) and on maze-notes; at a tenth it did no harm in the pilots.
ONLINE_LR_FACTOR = 0.1
LOSS_TOKENS = 64  # TrainConfig.max_new_tokens here: only the loss's normalizer (rollouts x this), unless given


@dataclass(frozen=True)
class OnlineSettings(Settings):
    """The run's training settings (RUN/online/settings.json), every value checked when made:
    on the command line before any work, and when read back on --resume."""

    def __post_init__(self) -> None:
        if self.algo not in advantages.REGISTRY:
            raise UserError(f"--train {self.algo!r}: unknown estimator; registered: {', '.join(sorted(advantages.REGISTRY))}")
        if advantages.entry(self.algo).goal_conditioned:
            raise UserError(f"--train {self.algo}: a search prompt shows no weighting; use vpo_archive, vpo, or a "
                            "single-answer estimator such as grpo")
        if self.every < 1:
            raise UserError(f"--train-every must be >= 1, got {self.every}")
        names = advantages.option_names(advantages.entry(self.algo).function)
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

    def check_answers(self, m: int, by: str = "completion") -> int:
        """The programs per completion the estimator learns from, for a policy answering with
        `m` programs per reply (`by`: [search] answers_by); refuses a shape it cannot learn from.
        With m programs in one completion ("completion") they are one set, scored together by a
        set estimator (vpo_archive: the set's gain over the front; vpo, multi_rlvr); a
        single-answer estimator (grpo, ...) needs one program per completion."""
        per_completion = m if by == "completion" else 1
        estimator = advantages.entry(self.algo)
        if per_completion > 1 and not (estimator.multi_answer or estimator.archive):
            raise UserError(f"--train {self.algo} learns from one program per reply, and this policy answers with {m}: "
                            "train on the sets with --train vpo_archive (or vpo), or pass --answers 1")
        if per_completion == 1 and estimator.multi_answer:
            raise UserError(f"--train {self.algo} scores a set of programs per reply, and this policy answers with one: "
                            "give --answers 2 or more (a policy trained on sets), or use vpo_archive or grpo")
        return per_completion

    def check_group(self, group: int | None) -> None:
        """Refuse an estimator option's bad value; with `group` (completions per prompt) also maxk's k > G."""
        problem = advantages.option_problem(self.algo, self.options, group)
        if problem:
            raise UserError(f"--train-option {problem}")

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
            return cls(**asdict(typed))
        except UserError as error:
            raise damaged(Settings.path(run), f"not the run's training settings ({error})", move_online(run)) from None


def online_policy(policy, config, settings: OnlineSettings | None = None) -> OnlinePolicy:
    """`policy` wrapped to train itself during the run of `config` (evo.run_dir.RunConfig), with
    the lag and completions per prompt of the run's own loop settings; `settings` None: the
    run's stored ones (a resumed run)."""
    from evo.run_dir import loop_config

    spec = config.spec()
    stored = settings is None
    settings = settings or OnlineSettings.read(config.directory)
    if settings is None:
        raise UserError(f"{config.directory}: the run did not train its policy (no online/settings.json); "
                        "give --train ALGO to a new run")
    loop = loop_config(spec, config)
    if len(config.named) != 1:
        raise UserError("--train trains the policy in this process: give one --policy local:PATH (or vllm:PATH)")
    name = next(iter(config.named))
    try:
        answers = settings.check_answers(loop.answers_for(name), loop.answers_by)
    except UserError as error:
        if not stored:
            raise
        raise UserError(f"{Settings.path(config.directory)}: the run's training settings do not fit its policy ({error})") from None
    _, group = loop.asked(name)
    return OnlinePolicy(policy, config.directory, settings, seed=config.seed, lag=loop.lag,
                        objectives=spec.problem.objectives, weights=spec.problem.weights, group=group, answers=answers)


class OnlinePolicy:
    """A `local:` or `vllm:` policy that trains itself on the run's committed groups (see the module doc)."""

    def __init__(self, policy, run: Path, settings: OnlineSettings, *, seed: int, lag: int,
                 objectives: tuple[str, ...], weights: np.ndarray, group: int | None = None, answers: int = 1) -> None:
        if not (hasattr(policy, "sampler") or hasattr(policy, "load_weights")):
            raise UserError("--train needs a local:PATH or vllm:PATH policy (trained in this process)")
        self.policy, self.settings, self.seed, self.lag = policy, settings, seed, lag
        self.answers = answers  # programs per completion: a completion's m journal slots are one set
        self.d, self.weights = len(objectives), np.asarray(weights, dtype=np.float64)
        self.directory = Path(run) / DIRECTORY
        if not Settings.path(run).exists():  # a resumed run's are read from there
            settings.save(run)
        try:
            (self.directory / GROUPS).mkdir(exist_ok=True)
        except OSError as error:
            raise UserError(f"cannot create {self.directory / GROUPS} ({error.strerror}); pick a writable --out") from None
        self.database = Path(run) / DB_FILE
        if hasattr(policy, "sampler"):  # local: the torch model that samples is the one trained
            self.model, self.tokenizer = policy.sampler.model, policy.sampler.tokenizer
        else:  # vllm: a torch copy is trained and its weights pushed into the engine after each step
            from training import models

            self.model, self.tokenizer = models.load(str(policy.path))
        self.config = rates.resolved(settings.train_config(str(policy.path), str(self.directory), seed=seed, group=group),
                                     rates.parameters(self.model))
        if "lr" not in settings.train:  # the safe default: a tenth of the offline rate
            self.config = replace(self.config, lr=self.config.lr * ONLINE_LR_FACTOR)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.config.lr, weight_decay=self.config.weight_decay)
        self.reference = None  # the init weights, for kl_coef > 0 (the KL term and the KL figure)
        if self.config.kl_coef > 0:
            from training import models

            self.reference = models.load(str(policy.path), self.config.model_options)[0]
        self.step = 0
        self.seconds = 0.0
        self.history: list[dict] = []  # the steps' metrics records (what search_signal.idle_cause reads)
        self.stopped = ""  # why training stopped (nothing to learn); '' while it trains
        self._lock = threading.Lock()
        self._resume()

    # -- the Policy protocol ---------------------------------------------------------------

    def generate(self, prompts, *, n: int = 1, max_new_tokens: int = 256, temperature: float = 1.0, top_p: float = 1.0,
                 seed: int | None = None, stop=()) -> list[list[Completion]]:
        with self._lock:
            start = self._generated()
            self._catch_up(max(0, start - self.lag))
            ids = [list(x) for x in self.tokenizer(list(prompts), add_special_tokens=True).input_ids]
            options = dict(n=n, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=seed, stop=stop)
            if hasattr(self.policy, "sampler"):
                completions = self.policy.sampler.sample(ids, **options).completions
            else:
                completions = self.policy.generate(ids, **options)
            for offset, (prompt, row) in enumerate(zip(ids, completions)):
                self._record(start + offset, start, prompt, row)
            return completions

    # -- state -----------------------------------------------------------------------------

    def _resume(self) -> None:
        loaded = load_state(self.directory, self.model, self.optimizer)
        if loaded is None:
            return
        self.step, self.seconds = loaded
        self._push()
        truncate_metrics(self.directory / METRICS_FILE, self.step)  # a kill between a step's line and its state
        self.history = read_metrics(self.directory / METRICS_FILE)
        self.stopped = read_stopped(self.directory.parent) or self._idle()

    def _push(self) -> None:
        """A vllm: policy's engine gets the trained weights (a local: policy samples with them already)."""
        if not hasattr(self.policy, "sampler"):
            self.policy.load_weights(self.model)

    def _save(self, record: dict) -> None:
        """The step's metrics line, then the state (a kill between the two: the line is cut on resume)."""
        try:
            with open(self.directory / METRICS_FILE, "a") as handle:
                handle.write(json.dumps(record) + "\n")
        except OSError as error:
            raise UserError(f"cannot write {self.directory / METRICS_FILE} ({error.strerror}); free space or make it "
                            f"writable, then continue with evo run --resume {self.directory.parent}") from None
        save_state(self.directory, self.model, self.optimizer, self.step, self.seconds)

    def _record(self, iteration: int, asked: int, prompt: list[int], row: list[Completion]) -> None:
        Group(asked, tuple(prompt), tuple((c.text, tuple(c.token_ids), c.finish_reason) for c in row)).write(self.directory, iteration)

    def _generated(self) -> int:
        """The iteration the next group starts at: one past the journal's last (the loop tells
        each group before asking for the next)."""
        with closing(Store(self.database)) as store:
            return CandidateJournal(store).next_iteration()

    # -- training --------------------------------------------------------------------------

    def _catch_up(self, committed: int) -> None:
        while not self.stopped and (self.step + 1) * self.settings.every <= committed:
            self._train_step(self.step + 1)

    def _idle(self) -> str:
        """The one line when the last `idle_steps` steps taught nothing (then training stops), else ''."""
        cause = search_signal.idle_cause(self.history, self.config.idle_steps)
        if not cause:
            return ""
        line = f"{cause}; training stopped, the search goes on with the policy frozen"
        write_stopped(self.directory.parent, self.step, line)
        return line

    def _train_step(self, k: int) -> None:
        from training.engines import as_rollout
        from training.trainer import State, update

        started = time.perf_counter()
        iterations = range((k - 1) * self.settings.every, k * self.settings.every)
        vocabulary = self.model.get_input_embeddings().num_embeddings
        groups = [Group.read(self.directory, i, vocabulary) for i in iterations]
        proposals, truncated = self._proposals(iterations, groups)
        rewards, failed = set_rewards(proposals, truncated.shape[1], self.config.duplicates, self.config.failures)
        rng = np.random.default_rng([self.seed, k])
        extra = {"archive": proposals.fronts} if advantages.entry(self.settings.algo).archive else {}
        adv = advantages.compute(self.settings.algo, rewards, weights=self.weights, rng=rng, **extra, **self.settings.options)
        completions = [[Completion(t, ids, finish_reason=f) for t, ids, f in g.completions] for g in groups]
        samples = as_rollout([g.prompt for g in groups], completions, self.tokenizer.pad_token_id,
                             next(self.model.parameters()).device)
        rolls = Rollouts([], samples, [c.text for row in completions for c in row], rewards, failed, truncated)
        state = State(self.config, cast("Task", None), self.model, self.tokenizer, self.optimizer, self.reference, self.step)
        record = update(state, rolls, adv)
        if self.reference is None:
            record["kl"] = None  # not measured without a reference (kl_coef 0)
        self.step = k
        self._push()
        self.seconds += time.perf_counter() - started
        scalars = scalarize(rewards, self.weights).max(axis=2)  # a completion's best program
        record = {"step": k, "iterations": [iterations[0], iterations[-1]], "scalar": float(scalars.mean()),
                  "best": float(scalars.max()), "advantage_abs": float(np.abs(adv).mean()),
                  **search_signal.shares(proposals.kinds), **record,
                  "seconds": time.perf_counter() - started, "seconds_total": self.seconds}
        self._save(record)
        self.history.append(record)
        self.stopped = self._idle()
        if self.stopped:
            print(self.stopped, file=sys.stderr, flush=True)

    def _proposals(self, iterations: range, groups: list[Group]) -> tuple[search_signal.Proposals, np.ndarray]:
        """The step's proposals (training/search_signal.py) and its (B, G) cut-off flags."""
        g = len(groups[0].completions)
        if any(len(group.completions) != g for group in groups):
            raise damaged(self.directory / GROUPS, f"the groups of iterations {iterations[0]}-{iterations[-1]} hold "
                          "different numbers of completions", move_online(self.directory.parent))
        return read_proposals(self.database, iterations, groups, lag=self.lag, d=self.d, answers=self.answers)


def set_rewards(proposals: search_signal.Proposals, completions: int, duplicates: str = search_signal.DEFAULT_DUPLICATES,
                failures: str = search_signal.DEFAULT_FAILURES) -> tuple[np.ndarray, np.ndarray]:
    """The (B, G, m, d) rewards of a step's proposals (B, G x m journal slots: completion j's
    programs are slots j x m ... j x m + m - 1) under search_signal's rule, and the (B, G)
    completions none of whose programs is valid."""
    b, slots, d = proposals.scores.shape
    m = slots // completions
    rewards = search_signal.rewards(proposals, duplicates, failures).reshape(b, completions, m, d)
    return rewards, (proposals.kinds.reshape(b, completions, m) != search_signal.VALID).all(axis=2)


def read_proposals(database: Path, iterations: range, groups: list[Group], *, lag: int, d: int,
                   answers: int = 1) -> tuple[search_signal.Proposals, np.ndarray]:
    """The proposals of `groups` (the recorded groups of `iterations`) as the run's journal has
    them, (B, G x answers) (completion j's programs are slots j x answers ...), and the
    completions' (B, G) cut-off flags (a completion that did not end by itself). A cut-off
    single program is a CUT proposal; of a cut-off set, the loop already failed the program
    the budget cut (evo.prompt_sets.programs), and the set's complete programs stand."""
    truncated = np.array([[f != "stop" for _, _, f in group.completions] for group in groups])
    cut = truncated if answers == 1 else np.zeros((len(groups), truncated.shape[1] * answers), dtype=bool)
    with closing(Store(database)) as store:
        proposals = search_signal.read(store, list(iterations), cut, [group.asked for group in groups], lag=lag, d=d)
    return proposals, truncated
