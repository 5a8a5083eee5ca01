"""Random prompts whose lengths are the server's tokens, not words. In order
of preference:

1. a local tokenizer (``--tokenizer``, through the ``tokenizers`` package):
   prompts built the way ``vllm bench serve``'s ``random`` dataset builds
   them: a run of token ids from a random offset, decoded, re-encoded and
   padded or cut until it encodes to the length asked;
2. the server's tokenize endpoint (vLLM, SGLang, llama.cpp, TGI,
   llama-cpp-python): random words, added or removed until the server counts
   the length asked;
3. otherwise, the words per token measured on the server's ``usage`` of a
   few requests sent first (said in the report: lengths are then right on
   average only)."""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path

from .._exceptions import WorkloadError
from . import client

# Short common words: random prompts when no tokenizer builds them from token ids.
WORDS = ("the of and to in is you that it he was for on are as with his they at be this have from or one had "
         "by word but not what all were we when your can said there use an each which she do how their if will "
         "up other about out many then them these so some her would make like him into time has look two more "
         "write go see number no way could people my than first water been call who oil its now find long down "
         "day did get come made may part over new sound take only little work know place year live me back give "
         "most very after thing our just name good sentence man think say great where help through much before "
         "line right too mean old any same tell boy follow came want show also around form three small set put "
         "end does another well large must big even such because turn here why ask went men read need land").split()


FILLERS = ("the", "a", "of", "and", "to", "in", "is", "it", ",", ".")
FILLER_GAP = 8  # a gap this short is filled with the filler, a longer one with random words
MAX_FIT = 20  # tokenize requests a prompt may take to fit
MAX_RETRY = 10  # decode/re-encode rounds, as vLLM's gen_prompt_decode_to_target_len
CALIBRATION_REQUESTS = 4


@dataclass
class Prompt:
    text: str
    output_len: int
    input_len: int | None = None  # the tokens asked (random prompts)
    tokens: int | None = None  # the tokens it has, as the tokenizer used counts them


def lengths(count: int, input_len: int, output_len: int, range_ratio: float, seed: int) -> list[tuple[int, int]]:
    """(input, output) lengths a prompt, uniform over [floor(L·(1-r)), ceil(L·(1+r))]
    as vLLM's --random-range-ratio draws them (output at least 1)."""
    if not 0.0 <= range_ratio < 1.0:
        raise WorkloadError(f"--random-range-ratio must be in [0, 1), not {range_ratio:g}")
    rng = random.Random(seed)
    in_low, in_high = math.floor(input_len * (1 - range_ratio)), math.ceil(input_len * (1 + range_ratio))
    out_low = max(1, math.floor(output_len * (1 - range_ratio)))
    out_high = max(1, math.ceil(output_len * (1 + range_ratio)))
    if in_high < 1:
        raise WorkloadError("--input-len must be at least 1")
    return [(max(1, rng.randint(in_low, in_high)), rng.randint(out_low, out_high)) for _ in range(count)]


class Tokenizer:
    """A Hugging Face fast tokenizer (tokenizer.json) read with the ``tokenizers`` package."""

    def __init__(self, path: str):
        try:
            from tokenizers import Tokenizer as _Tokenizer
        except ImportError:
            raise WorkloadError("--tokenizer needs the tokenizers package: pip install 'firedup[tokenizer]'") from None
        file = Path(path) / "tokenizer.json" if Path(path).is_dir() else Path(path)
        try:
            self._tok = _Tokenizer.from_file(str(file))
        except Exception as e:  # the package raises a bare Exception for a missing or malformed file
            raise WorkloadError(f"cannot read a tokenizer from {file}: {e}") from None
        self.path = str(path)
        special = {i for i, token in self._tok.get_added_tokens_decoder().items() if token.special}
        # as vLLM: the base vocabulary (without added tokens), less the special tokens
        self.allowed = [i for i in range(self._tok.get_vocab_size(with_added_tokens=False)) if i not in special]
        processor = self._tok.post_processor
        self.special_added = processor.num_special_tokens_to_add(False) if processor else 0

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids, skip_special_tokens=False)


def from_tokenizer(tokenizer: Tokenizer, sizes: list[tuple[int, int]], seed: int) -> list[Prompt]:
    """vLLM's random dataset: ids ``allowed[(offset + i + k) % len(allowed)]``,
    decoded, then re-encoded and padded (random ids) or cut until the text
    encodes to the length asked, at most MAX_RETRY times. The tokens the
    tokenizer adds itself (a BOS) count in the length asked, as in vLLM."""
    rng = random.Random(seed)
    allowed = tokenizer.allowed
    out = []
    for i, (input_len, output_len) in enumerate(sizes):
        target = max(1, input_len - tokenizer.special_added)
        offset = rng.randrange(len(allowed))
        ids = [allowed[(offset + i + k) % len(allowed)] for k in range(target)]
        for attempt in range(MAX_RETRY + 1):
            text = tokenizer.decode(ids)
            ids = tokenizer.encode(text)
            if len(ids) == target or attempt == MAX_RETRY:
                break
            ids = ids[:target] if len(ids) > target else ids + [rng.choice(allowed) for _ in range(target - len(ids))]
        out.append(Prompt(text, output_len, input_len, len(ids) + tokenizer.special_added))
    return out


class ServerTokenizer:
    """A server's own tokenize endpoint, found by trying each family's."""

    # (path, request body, where the tokens are in the answer). Counted with
    # the special tokens the server adds itself (a BOS), as its usage counts them.
    ENDPOINTS = (
        ("/tokenize", lambda model, text: {"model": model, "prompt": text}, "tokens"),  # vLLM
        ("/v1/tokenize", lambda model, text: {"model": model, "prompt": text}, "tokens"),  # SGLang
        ("/tokenize", lambda model, text: {"content": text, "add_special": True}, "tokens"),  # llama.cpp server
        ("/tokenize", lambda model, text: {"inputs": text}, None),  # TGI: a list of tokens
        ("/extras/tokenize", lambda model, text: {"input": text}, "tokens"),  # llama-cpp-python
    )

    def __init__(self, endpoint: client.Endpoint, model: str):
        self.endpoint = endpoint
        self.model = model
        self.found: tuple | None = None
        self.conn: client.Connection | None = None
        self.filler: str | None = None  # a word that is one token wherever it stands

    async def _ask(self, spec: tuple, text: str) -> int | None:
        path, body, key = spec
        if self.conn is None or self.conn.closed:
            self.conn = await self.endpoint.connect()
        response = await self.conn.request("POST", path, json.dumps(body(self.model, text)).encode())
        if response.status != 200:
            return None
        try:
            answer = json.loads(response.body)
            tokens = answer[key] if key else answer
        except (ValueError, KeyError, TypeError):
            return None
        return len(tokens) if isinstance(tokens, list) else None

    async def find(self) -> str | None:
        """The endpoint that answers (its path), or None."""
        for spec in self.ENDPOINTS:
            try:
                if await self._ask(spec, "hello world") is not None:
                    self.found = spec
                    self.filler = await self._one_token_word()
                    return spec[0]
            except client.NoAnswer:
                raise  # a server that answers nothing answers no other endpoint either
            except (OSError, client.HttpError):
                self.close()
        return None

    async def _one_token_word(self) -> str | None:
        # Random words of two or three tokens can step over the length asked
        # and back again; a one-token word pads to it exactly.
        for word in FILLERS:
            if await self.count(" ".join([word] * 9)) - await self.count(word) == 8:
                return word
        return None

    async def count(self, text: str) -> int:
        assert self.found is not None, "find() first"
        n = await self._ask(self.found, text)
        if n is None:
            raise client.HttpError(f"POST {self.found[0]} stopped answering")
        return n

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def words(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(WORDS) for _ in range(max(1, n))]


async def fitted(counter: ServerTokenizer, sizes: list[tuple[int, int]], seed: int) -> list[Prompt]:
    """Random words, cut or added to until the server counts the tokens asked.
    A cut keeps the share of words the length asked is of the count; the last
    few tokens are the one-token filler, since a random word of two or three
    tokens can step over the length and back again."""
    rng = random.Random(seed)
    out = []
    for input_len, output_len in sizes:
        chosen = words(rng, input_len)
        n = await counter.count(" ".join(chosen))
        for _ in range(MAX_FIT):
            if n == input_len:
                break
            gap = input_len - n
            if gap < 0:
                keep = len(chosen) * input_len // n
                chosen = chosen[:keep] if keep >= 1 else [counter.filler or chosen[0]]
            elif gap >= FILLER_GAP or not counter.filler:
                chosen += words(rng, gap // 2)
            else:
                chosen += [counter.filler] * gap
            n = await counter.count(" ".join(chosen))
        out.append(Prompt(" ".join(chosen), output_len, input_len, n))
    return out


def scaled(sizes: list[tuple[int, int]], seed: int, tokens_per_word: float) -> list[Prompt]:
    """Random words, as many as the tokens asked at ``tokens_per_word``."""
    rng = random.Random(seed)
    return [Prompt(" ".join(words(rng, round(input_len / tokens_per_word))), output_len, input_len)
            for input_len, output_len in sizes]
