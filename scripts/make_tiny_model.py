#!/usr/bin/env python3
"""Write two tiny random-weight models, OUT/tiny-llama and OUT/tiny-qwen2, that
real servers load like any Hugging Face checkpoint. Nothing is downloaded: the
tokenizer is trained here, on the server logs this repository captured.

The weights are random but made decisive (see `decisive`), so that greedy output
is the same text on every server despite each one's own rounding.

What the tests rely on: 2 layers, hidden size 256, bf16, a 2048-token byte-level
BPE tokenizer with a ChatML chat template, and exactly 12 safetensors shards
(tests truncate shard 3 or swap a shard for a FIFO; loaders print shard progress).

Usage: python scripts/make_tiny_model.py OUT   (needs torch, transformers, tokenizers)
"""

import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (
    GenerationConfig,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

REPO = Path(__file__).resolve().parents[1]
VOCAB = 2048
SHARDS = 12
BOS, EOS, PAD = "<|endoftext|>", "<|im_end|>", "<|pad|>"
SPECIAL = [BOS, "<|im_start|>", EOS, PAD]
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def training_text() -> list[str]:
    """The logs captured from real servers, in a fixed order: every clone trains
    the same tokenizer without reaching outside it, and a change to the code or
    the docs leaves the model as it was (trained on them, every commit made a
    new model, and what its greedy replies happen to do moved with it)."""
    return [str(f) for f in sorted(REPO.glob("tests/fixtures/captured/*.log"))]


def tokenizer() -> PreTrainedTokenizerFast:
    # Byte-level like GPT-2, so llama.cpp reads it as its "gpt2" tokenizer with the "gpt-2" pre-tokenizer.
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.train(training_text(), trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=SPECIAL, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if tok.get_vocab_size() != VOCAB:
        sys.exit(f"make_tiny_model: the tokenizer has {tok.get_vocab_size()} tokens, not {VOCAB}: "
                 "too little training text")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD)
    fast.chat_template = CHATML
    return fast


def decisive(model, tok: PreTrainedTokenizerFast) -> None:
    """Random layers over a random next-token table. With std-0.02 weights every
    logit is within rounding noise of the others, and transformers (bf16) and
    llama.cpp (f32) part ways after a few tokens. Here the embeddings are large, so
    the residual stream stays mostly the current token, and each row of the output
    head points at the embeddings of the tokens it follows: the chosen token wins
    by ~10x the spread of the rest. Targets are printable ASCII tokens, never EOS,
    so replies run to max_tokens and decode to the same text everywhere."""
    emb = model.model.embed_tokens.weight.data
    emb.normal_(0, 1)
    targets = torch.tensor([i for i in range(VOCAB) if i not in tok.all_special_ids
                            and (s := tok.decode([i])).isascii() and s.isprintable()])
    follows = targets[torch.randint(len(targets), (VOCAB,))]
    head = torch.zeros_like(model.lm_head.weight.data)
    head.index_add_(0, follows, emb / emb.norm(dim=1, keepdim=True))
    model.lm_head.weight.data = head


def main(out: Path) -> None:
    torch.manual_seed(0)
    tok = tokenizer()
    ids = {t: tok.convert_tokens_to_ids(t) for t in (BOS, EOS, PAD)}
    shape = dict(vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                 rope_theta=10000.0, tie_word_embeddings=False,
                 bos_token_id=ids[BOS], eos_token_id=ids[EOS], pad_token_id=ids[PAD])
    for name, config, model_class in (("tiny-llama", LlamaConfig, LlamaForCausalLM),
                                      ("tiny-qwen2", Qwen2Config, Qwen2ForCausalLM)):
        model = model_class(config(**shape))
        decisive(model, tok)
        model = model.to(torch.bfloat16).eval()
        model.generation_config = GenerationConfig(bos_token_id=ids[BOS], eos_token_id=ids[EOS],
                                                   pad_token_id=ids[PAD])
        d = out / name
        # ~4.6 MB of weights: 300 KB shards give the 12 files the tests name.
        model.save_pretrained(d, max_shard_size="300KB")
        tok.save_pretrained(d)
        shards = sorted(d.glob("model-*.safetensors"))
        if len(shards) != SHARDS:
            sys.exit(f"make_tiny_model: {name} was saved in {len(shards)} shards, not {SHARDS}")
        print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters in {len(shards)} shards, {d}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_tiny_model.py OUT")
    main(Path(sys.argv[1]))
