"""What a benchmark sends: seeded random prompts, a JSONL prompt file, or a
ShareGPT file; and how: a fixed concurrency or a request rate (Poisson, or
gamma with burstiness)."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from .prompts import Prompt, Tokenizer, WorkloadError, lengths


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
    random_range_ratio: float = 0.0
    tokenizer: str | None = None  # a tokenizer.json or a model folder holding one

    def __post_init__(self) -> None:
        if self.request_rate == math.inf and self.duration:
            # every request at once, for as long as the duration lasts, is requests without end
            raise WorkloadError("--request-rate inf sends every request at once: give --num-prompts, not --duration "
                                "(or --concurrency N --duration S)")

    @cached_property
    def local_tokenizer(self) -> Tokenizer | None:
        """The --tokenizer, loaded once for every repeat (None without one)."""
        return Tokenizer(self.tokenizer) if self.tokenizer else None

    def sizes(self) -> list[tuple[int, int]]:
        """(input tokens, output tokens) of each random prompt, enough for the run."""
        return lengths(self.num_prompts or 1000, self.input_len, self.output_len, self.random_range_ratio, self.seed)

    def describe(self) -> dict[str, Any]:
        """What must match for two runs to be comparable: a dataset by its
        content as well as its path."""
        out = asdict(self)
        if self.request_rate == math.inf:  # as vllm bench serve writes it: JSON has no infinity
            out["request_rate"] = "inf"
        if self.dataset:
            out["dataset_sha256"] = self._dataset[1]
        return out

    @cached_property
    def _dataset(self) -> tuple[list[tuple[str, int]], str]:
        """The dataset's prompts and its sha256, read once for every repeat."""
        assert self.dataset is not None
        return load_dataset(self.dataset, self.output_len)

    def dataset_prompts(self) -> list[Prompt]:
        """The dataset's prompts, enough for the run."""
        items = [Prompt(text, n) for text, n in self._dataset[0]]
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
        return _parse_dataset(path, data.decode("utf-8"), default_output), hashlib.sha256(data).hexdigest()
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise WorkloadError(f"{path} is neither JSONL prompts nor a ShareGPT file: {e}") from None


def _parse_dataset(path: str, text: str, default_output: int) -> list[tuple[str, int]]:
    items = []
    if text.lstrip().startswith("["):
        for conv in json.loads(text):
            turns = conv.get("conversations") or conv.get("conversation") or []
            human = next((t["value"] for t in turns if t.get("from") in ("human", "user")), None)
            reply = next((t["value"] for t in turns if t.get("from") in ("gpt", "assistant")), None)
            if human:
                items.append((human, max(1, len(reply.split())) if reply else default_output))
        return items
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            row = json.loads(line)
            prompt = row.get("prompt") or row.get("text")
            if not isinstance(prompt, str) or not prompt:
                raise WorkloadError(f'{path}, line {number}: no "prompt" (a string): {line.strip()[:80]}')
            items.append((prompt, int(row.get("output_len") or row.get("max_tokens") or default_output)))
    return items
