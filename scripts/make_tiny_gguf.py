#!/usr/bin/env python3
"""Write the tiny Llama made by make_tiny_model.py as a GGUF file for llama.cpp,
with the `gguf` package (llama.cpp's own writer library). The weights are stored
as F32, which holds every bf16 value exactly, so llama.cpp computes with the same
numbers as the servers that read the safetensors.

Usage: python scripts/make_tiny_gguf.py MODEL_DIR OUT.gguf   (needs torch, safetensors, gguf)
"""

import json
import sys
from pathlib import Path

import gguf
import numpy as np
from safetensors.torch import load_file


def permute(w: np.ndarray, heads: int) -> np.ndarray:
    """Hugging Face's Llama rotates the two halves of each head; llama.cpp's rope
    rotates adjacent pairs: reorder q/k rows the way llama.cpp's converter does."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def tensors(model: Path, cfg: dict) -> dict[str, np.ndarray]:
    hf = {}
    for shard in sorted(model.glob("model-*.safetensors")):
        hf.update({k: v.float().numpy() for k, v in load_file(shard).items()})
    out = {"token_embd.weight": hf.pop("model.embed_tokens.weight"),
           "output_norm.weight": hf.pop("model.norm.weight"),
           "output.weight": hf.pop("lm_head.weight")}
    names = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
             "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down"}
    for i in range(cfg["num_hidden_layers"]):
        for hf_name, name in names.items():
            w = hf.pop(f"model.layers.{i}.{hf_name}.weight")
            if name == "attn_q":
                w = permute(w, cfg["num_attention_heads"])
            elif name == "attn_k":
                w = permute(w, cfg["num_key_value_heads"])
            out[f"blk.{i}.{name}.weight"] = w
    if hf:
        sys.exit(f"make_tiny_gguf: tensors this writer does not know: {', '.join(sorted(hf))}")
    return out


def main(model: Path, out: Path) -> None:
    cfg = json.loads((model / "config.json").read_text())
    if cfg.get("model_type") != "llama":
        sys.exit(f"make_tiny_gguf: {model} is a {cfg.get('model_type')!r} model; this writer knows only llama")
    tok = json.loads((model / "tokenizer.json").read_text())
    vocab = sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])
    special = {t["content"] for t in tok["added_tokens"] if t["special"]}
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]

    w = gguf.GGUFWriter(out, "llama")
    w.add_name(model.name)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_dimension_count(cfg["hidden_size"] // cfg["num_attention_heads"])
    w.add_rope_freq_base(cfg["rope_parameters"]["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_vocab_size(len(vocab))
    # A byte-level BPE like GPT-2's: llama.cpp's "gpt2" tokenizer with its "gpt-2" pre-tokenizer.
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list([t for t, _ in vocab])
    w.add_token_types([gguf.TokenType.CONTROL if t in special else gguf.TokenType.NORMAL for t, _ in vocab])
    w.add_token_merges(merges)
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])
    w.add_pad_token_id(cfg["pad_token_id"])
    w.add_add_bos_token(False)  # as the Hugging Face tokenizer: no BOS in front of a prompt
    w.add_chat_template((model / "chat_template.jinja").read_text())
    for name, data in tensors(model, cfg).items():
        w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{out}: {out.stat().st_size} bytes")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: make_tiny_gguf.py MODEL_DIR OUT.gguf")
    main(Path(sys.argv[1]), Path(sys.argv[2]))
