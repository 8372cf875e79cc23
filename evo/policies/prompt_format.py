"""How a checkpoint is prompted: the one prompt encoder of training, SFT, every policy kind and compare.

    fmt = PromptFormat.of_checkpoint(path, tokenizer)   # its train_config.json's record, else the default
    ids = fmt.encode(tokenizer, ["Solve: ..."])          # the token ids the model samples from

A format is the tokenizer's chat template (each prompt one user message, after a system
message when `system` is set, then the generation prompt; rendered, then tokenized without
added special tokens) or plain text (tokenized with the tokenizer's special tokens). A trained
checkpoint records its format in train_config.json's "prompt" (`record`); one with no record is
prompted the way training prompts by default: the chat template when its tokenizer has one,
plain text otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evo.errors import UserError

RECORD = "prompt"  # train_config.json's key: {"chat": bool, "system": str}
TRAIN_CONFIG = "train_config.json"


def has_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


@dataclass(frozen=True)
class PromptFormat:
    chat: bool = False  # the tokenizer's chat template; False: plain text
    system: str = ""  # the system message before each prompt (the chat template only)

    def __post_init__(self) -> None:
        if not isinstance(self.chat, bool) or not isinstance(self.system, str):
            raise UserError(f"a prompt format is chat (true or false) and system (a string), got {self.record()!r:.200}")
        if self.system and not self.chat:
            raise UserError("a system text needs the chat template (a plain prompt has no place for it); "
                            "use --chat or drop --system")

    def messages(self, text: str) -> list[dict[str, str]]:
        """The chat messages of one prompt (the form TRL's and veRL's datasets take)."""
        system = [{"role": "system", "content": self.system}] if self.system else []
        return [*system, {"role": "user", "content": text}]

    def encode(self, tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of prompt texts in this format."""
        if not self.chat:
            return [list(ids) for ids in tokenizer(list(texts), add_special_tokens=True).input_ids]
        if not has_template(tokenizer):
            raise UserError("the prompt format is the chat template but the tokenizer has none; use --no-chat")
        rendered = [tokenizer.apply_chat_template(self.messages(t), tokenize=False, add_generation_prompt=True)
                    for t in texts]
        return [list(ids) for ids in tokenizer(rendered, add_special_tokens=False).input_ids]

    def ids(self, tokenizer: Any, prompts: Sequence[str] | Sequence[Sequence[int]]) -> list[list[int]]:
        """Token ids of prompts: texts encoded in this format (in one batch), token ids kept as given."""
        texts = [p for p in prompts if isinstance(p, str)]
        encoded = iter(self.encode(tokenizer, texts) if texts else [])
        return [next(encoded) if isinstance(p, str) else list(p) for p in prompts]

    def record(self) -> dict[str, Any]:
        return {"chat": self.chat, "system": self.system}

    @classmethod
    def default(cls, tokenizer: Any) -> "PromptFormat":
        """The training default: the chat template when the tokenizer has one, plain text otherwise."""
        return cls(chat=has_template(tokenizer))

    @classmethod
    def recorded(cls, directory: str | Path) -> "PromptFormat | None":
        """The format a checkpoint records in its train_config.json, or None (no file, no record)."""
        path = Path(directory) / TRAIN_CONFIG
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise UserError(f"{path}: unreadable training config ({error}); restore it") from None
        value = data.get(RECORD) if isinstance(data, dict) else None
        if value is None:
            return None
        if not isinstance(value, dict) or set(value) - {"chat", "system"}:
            raise UserError(f'{path}: "{RECORD}" must be {{"chat": true or false, "system": "..."}}, found {value!r:.200}')
        try:
            return cls(**value)
        except UserError as error:
            raise UserError(f'{path}: bad "{RECORD}" record ({error})') from None

    @classmethod
    def chosen(cls, tokenizer: Any, checkpoint: str | Path | None, *, chat: bool | None = None,
               system: str | None = None) -> "PromptFormat":
        """The format to prompt the checkpoint in `checkpoint` with (its record, else `default`),
        `chat` and `system` overriding it where given; a chat template the tokenizer lacks is one line."""
        base = (cls.recorded(checkpoint) if checkpoint is not None else None) or cls.default(tokenizer)
        chosen = cls(base.chat if chat is None else chat, base.system if system is None else system)
        if chosen.chat and not has_template(tokenizer):
            raise UserError("the chat template is asked for (--chat, or the checkpoint's train_config.json) "
                            "but the tokenizer has none; use --no-chat")
        return chosen

    @classmethod
    def of_checkpoint(cls, directory: str | Path, tokenizer: Any) -> "PromptFormat":
        """How the checkpoint in `directory` was prompted (its record, else the training default)."""
        return cls.chosen(tokenizer, directory)


PLAIN = PromptFormat()
