"""What a benchmark sends: seeded random prompts, a JSONL prompt file, or a
ShareGPT file; and how: a fixed concurrency or a request rate (Poisson, or
gamma with burstiness)."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

# Short common words: about one token each for most tokenizers.
WORDS = ("the of and to in is you that it he was for on are as with his they at be this have from or one had "
         "by word but not what all were we when your can said there use an each which she do how their if will "
         "up other about out many then them these so some her would make like him into time has look two more "
         "write go see number no way could people my than first water been call who oil its now find long down "
         "day did get come made may part over new sound take only little work know place year live me back give "
         "most very after thing our just name good sentence man think say great where help through much before "
         "line right too mean old any same tell boy follow came want show also around form three small set put "
         "end does another well large must big even such because turn here why ask went men read need land").split()


class WorkloadError(ValueError):
    pass


@dataclass
class Workload:
    input_len: int = 256
    output_len: int = 128
    num_prompts: int | None = 100
    duration: float | None = None
    concurrency: int | None = None
    request_rate: float | None = None
    burstiness: float = 1.0
    dataset: str | None = None
    chat: bool = False
    seed: int = 0
    warmup: int = 2
    temperature: float = 0.0
    ignore_eos: bool = False

    def describe(self) -> dict[str, Any]:
        """What must match for two runs to be comparable: a dataset by its
        content as well as its path."""
        out = asdict(self)
        if self.dataset:
            out["dataset_sha256"] = self._dataset[1]
        return out

    @cached_property
    def _dataset(self) -> tuple[list[tuple[str, int]], str]:
        """The dataset's prompts and its sha256, read once for every repeat."""
        return load_dataset(self.dataset, self.output_len)

    def prompts(self) -> list[tuple[str, int]]:
        """(prompt, max output tokens) pairs, enough for the run."""
        if self.dataset:
            items = self._dataset[0]
        else:
            rng = random.Random(self.seed)
            count = self.num_prompts or 1000
            items = [(" ".join(rng.choice(WORDS) for _ in range(self.input_len)), self.output_len)
                     for _ in range(count)]
        if not items:
            raise WorkloadError("the dataset holds no prompts")
        if self.num_prompts and len(items) < self.num_prompts:
            items = (items * (self.num_prompts // len(items) + 1))[:self.num_prompts]
        return items[:self.num_prompts] if self.num_prompts else items

    def payload(self, model: str, prompt: str, max_tokens: int) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "temperature": self.temperature,
                                "stream": True, "stream_options": {"include_usage": True}}
        if self.ignore_eos:
            body["ignore_eos"] = True
        if self.chat:
            body["messages"] = [{"role": "user", "content": prompt}]
            return "/v1/chat/completions", body
        body["prompt"] = prompt
        return "/v1/completions", body


def load_dataset(path: str, default_output: int) -> tuple[list[tuple[str, int]], str]:
    """JSONL ({"prompt": ..., "output_len": ...} a line) or ShareGPT (a JSON
    list of conversations): (prompt, max output tokens) pairs, and the file's sha256."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise WorkloadError(f"cannot read {path}: {e.strerror}") from None
    try:
        return _parse_dataset(data.decode("utf-8"), default_output), hashlib.sha256(data).hexdigest()
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise WorkloadError(f"{path} is neither JSONL prompts nor a ShareGPT file: {e}") from None


def _parse_dataset(text: str, default_output: int) -> list[tuple[str, int]]:
    items = []
    if text.lstrip().startswith("["):
        for conv in json.loads(text):
            turns = conv.get("conversations") or conv.get("conversation") or []
            human = next((t["value"] for t in turns if t.get("from") in ("human", "user")), None)
            reply = next((t["value"] for t in turns if t.get("from") in ("gpt", "assistant")), None)
            if human:
                items.append((human, max(1, len(reply.split())) if reply else default_output))
        return items
    for line in text.splitlines():
        if line.strip():
            row = json.loads(line)
            prompt = row.get("prompt") or row.get("text")
            if prompt:
                items.append((prompt, int(row.get("output_len") or row.get("max_tokens") or default_output)))
    return items
