"""The trainer's configuration: one frozen dataclass, saved next to every checkpoint."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from evo.policies import MAX_ANSWERS
from evo.policies.prompt_format import RECORD as PROMPT_RECORD
from evo.policies.prompt_format import PromptFormat
from training import advantages, precision
from training.models import ModelOptions
from training.search_signal import DEFAULT_DUPLICATES, DEFAULT_FAILURES, DUPLICATE_RULES, FAILURE_RULES, IDLE_STEPS

CONFIG_FILE = "train_config.json"
SET_SIZE = "set_size"  # train_config.json's record of the answers per completion the model was trained to write
ROLLOUTS = ("local", "vllm")  # where rollouts are sampled (training.engines)
# the field types TrainConfig checks (annotations as written, under `from __future__ import annotations`)
_TYPES = {"str": (str,), "str | None": (str, type(None)), "int": (int,), "float": (int, float), "bool": (bool,), "bool | None": (bool, type(None)),
          "dict[str, Any]": (dict,)}
_NAMES = {"str": "a string", "str | None": "a string or null", "int": "an integer", "float": "a number", "bool": "true or false",
          "bool | None": "true, false or null", "dict[str, Any]": "a table of KEY = VALUE"}


@dataclass(frozen=True)
class TrainConfig:
    task: str
    algo: str
    init: str  # the Hugging Face directory training starts from (also the KL reference)
    out: str
    steps: int = 200
    prompts: int = 16  # prompts (task instances) per step
    group: int = 8  # rollouts per prompt (G)
    answers: int = 3  # answers per rollout for multi-answer methods (vpo, multi_rlvr)
    max_new_tokens: int = 0  # 0: 1.5x the task's longest m-answer demonstration (trainer.token_budget)
    temperature: float = 1.0
    top_p: float = 1.0
    lr: float = 0.0  # 0: chosen by the model's size (training/rates.py: 2e-4 tiny, 1e-6 full fine-tuning, 1e-5 LoRA)
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    eps_low: float = 0.2
    eps_high: float = 0.2
    kl_coef: float = 0.0  # k3 KL to the frozen init model, as a loss term
    entropy_coef: float = 0.0  # entropy bonus: the loss subtracts this x token entropy (0: off)
    diversity_coef: float = 0.0  # DARLING-style reward scale 1 + this x distinctness (0: off; training/diversity.py)
    score_by_answer: bool = False  # parse a set's answers one by one: a malformed answer scores zero alone (tasks/completions.py)
    ppo_epochs: int = 1
    micro_batches: int = 0  # gradient accumulation: the step's rollouts in this many chunks (0: from the memory plan)
    memory_gib: float = 0.0  # the memory plan's budget (0: 90% of what the device can give; training/planner.py)
    loss_norm: int = 0  # summed token losses are divided by rollouts * this (0: max_new_tokens)
    bf16: bool | None = None  # bfloat16 autocast of float32 weights (None: on CUDA for a 16-bit checkpoint; training/precision.py)
    weight_dtype: str = "auto"  # auto (float32 masters for full fine-tuning) | float32 | bfloat16 (pure bf16, warned)
    seed: int = 0
    duplicates: str = DEFAULT_DUPLICATES  # a spec's duplicate proposals earn (training/search_signal.py DUPLICATE_RULES)
    failures: str = DEFAULT_FAILURES  # a spec's failed, unparseable and cut-off proposals earn (search_signal.FAILURE_RULES)
    idle_steps: int = IDLE_STEPS  # training stops after this many steps in a row with nothing to learn (0: never; search_signal.idle_cause)
    save_every: int = 50
    snapshot_every: int = 0  # also keep the weights of every Nth step in out/steps/ (0: never)
    options: dict[str, Any] = field(default_factory=dict)  # estimator options (K, alpha, sobol, k)
    rollouts: str = "local"  # local (the in-process sampler) | vllm (vLLM's engine, weights synced)
    sync_every: int = 1  # vllm rollouts: push the weights into the engine every N optimizer steps
    vllm_options: dict[str, Any] = field(default_factory=dict)  # vLLM engine options (training.engines.engine_defaults)
    vllm_sleep: bool | None = None  # vllm rollouts: the engine sleeps through each update (None: on CUDA; training.engines.sleep_mode)
    tis_cap: float = 0.0  # vllm rollouts: weight token gradients by min(exp(logp_trainer - logp_vllm), this) (0: off; training.loss.tis_weights)
    device: str = "auto"  # auto | cpu | cuda
    chat: bool | None = None  # apply the tokenizer's chat template (None: as `init` records, else when it has one)
    system: str | None = None  # the chat template's system message (None: as `init` records, else none)
    gradient_checkpointing: bool | None = None  # None: on when the memory plan needs it
    lora_rank: int = 0  # LoRA adapters of this rank (peft); 0: full fine-tuning
    lora_alpha: float = 16.0

    def __post_init__(self) -> None:
        self._check_types()
        if not math.isfinite(self.lr) or self.lr < 0:
            raise ValueError(f"lr must be a finite number > 0 (or 0: chosen by the model's size), got {self.lr!r}")
        for name, low, low_open in (("weight_decay", 0.0, False), ("max_grad_norm", 0.0, True),
                                    ("eps_low", 0.0, False), ("eps_high", 0.0, False), ("kl_coef", 0.0, False),
                                    ("entropy_coef", 0.0, False), ("diversity_coef", 0.0, False),
                                    ("temperature", 0.0, False), ("top_p", 0.0, True), ("lora_alpha", 0.0, True),
                                    ("memory_gib", 0.0, False), ("tis_cap", 0.0, False)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < low or (low_open and value == low):
                raise ValueError(f"{name} must be a finite number {'>' if low_open else '>='} {low:g}, got {value!r}")
        if self.eps_low >= 1:
            raise ValueError(f"eps_low must be < 1 (the ratio's lower clip is 1 - eps_low), got {self.eps_low}")
        if self.top_p > 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        positive = ("steps", "prompts", "group", "answers", "ppo_epochs", "save_every")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.answers > MAX_ANSWERS:  # a checkpoint's set_size above it is refused by every policy that loads it
            raise ValueError(f"answers must be <= {MAX_ANSWERS} (the most programs a search asks of one reply), got {self.answers}")
        for name in ("entropy_coef", "diversity_coef", "max_new_tokens", "idle_steps", "micro_batches"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name, rules in (("duplicates", DUPLICATE_RULES), ("failures", FAILURE_RULES)):
            if getattr(self, name) not in rules:
                raise ValueError(f"{name} must be one of {', '.join(rules)}, got {getattr(self, name)!r}")
        if self.weight_dtype not in precision.SETTINGS:
            raise ValueError(f"weight_dtype must be one of {', '.join(precision.SETTINGS)}, got {self.weight_dtype!r}")
        if self.rollouts not in ROLLOUTS:
            raise ValueError(f"rollouts must be one of {', '.join(ROLLOUTS)}, got {self.rollouts!r}")
        if self.sync_every < 1:
            raise ValueError(f"sync_every must be >= 1, got {self.sync_every}")
        if 0 < self.tis_cap < 1:
            raise ValueError(f"tis_cap must be 0 (off) or >= 1 (a cap below 1 shrinks every token's weight), got {self.tis_cap}")
        if self.system and self.chat is False:
            raise ValueError("system is the chat template's system message: it needs chat (drop --no-chat or --system)")
        if self.vllm_sleep and self.rollouts != "vllm":
            raise ValueError("vllm_sleep puts vLLM's engine to sleep during the update: it needs rollouts vllm")
        if self.tis_cap and self.rollouts != "vllm":
            raise ValueError("tis_cap corrects for vLLM's sampling: it needs rollouts vllm (the local sampler is the trained model)")
        if self.micro_batches > self.prompts * self.group:
            raise ValueError(f"micro_batches ({self.micro_batches}) exceeds the rollouts per step ({self.prompts * self.group})")
        advantages.entry(self.algo)  # the registry's check
        problem = advantages.option_problem(self.algo, self.options, group=self.group)
        if problem:
            raise ValueError(f"bad --option for {self.algo}: {problem}")

    def _check_types(self) -> None:
        """Every field holds its declared type (a value read from JSON or typed on a command line)."""
        for f in fields(self):
            value, kind = getattr(self, f.name), _TYPES.get(str(f.type))
            if kind is not None and (isinstance(value, bool) and bool not in kind or not isinstance(value, kind)):
                raise ValueError(f"{f.name} must be {_NAMES[str(f.type)]}, got {value!r}"[:200])

    @property
    def model_options(self) -> ModelOptions:
        return ModelOptions(self.device, bool(self.gradient_checkpointing), self.lora_rank, self.lora_alpha)

    @property
    def set_size(self) -> int:
        """Answers per rollout: `answers` for an estimator that trains on sets, else 1. The one
        rule for m on the training side; a checkpoint records it (train_config.json's
        "set_size"), and the search asks a checkpoint for that many programs per reply."""
        return self.answers if advantages.entry(self.algo).multi_answer else 1

    @property
    def prompt_format(self) -> PromptFormat | None:
        """How the run prompts its model; None until `trainer.setup` resolves `chat` and `system`."""
        if self.chat is None or self.system is None:
            return None
        return PromptFormat(self.chat, self.system)

    @property
    def norm(self) -> int:
        return self.loss_norm or self.max_new_tokens

    def save(self, directory: Path) -> None:
        data = {**asdict(self), SET_SIZE: self.set_size}  # what evo.policies.trained_answers reads
        if self.prompt_format is not None:  # what PromptFormat.of_checkpoint reads
            data[PROMPT_RECORD] = self.prompt_format.record()
        (directory / CONFIG_FILE).write_text(json.dumps(data, indent=2) + "\n")

    @classmethod
    def load(cls, directory: Path) -> "TrainConfig":
        """The saved config; an unreadable or invalid file is a one-line UserError."""
        from evo.errors import UserError

        path = Path(directory) / CONFIG_FILE
        try:
            raw = json.loads(path.read_text())
            if not isinstance(raw, dict):
                raise ValueError(f"expected a JSON object, found {type(raw).__name__}")
            known = {f.name for f in fields(cls)}
            if isinstance(raw.get("algo"), str):
                raw["algo"] = advantages.stored_name(raw["algo"])
            return cls(**{k: v for k, v in raw.items() if k in known})
        except (OSError, UnicodeDecodeError, ValueError, TypeError) as error:
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise UserError(f"{path}: not a valid training config ({reason[:160]}); restore it or start a new --out") from None
