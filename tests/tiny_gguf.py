"""A tiny Llama written as a GGUF file (random float32 weights, a 512-token byte-level BPE
trained offline on the demo LLM's corpus), for tests of importing GGUF files: the same
metadata keys and tensor names llama.cpp's converter writes, so transformers' GGUF loader
reads it as it reads a real one."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HIDDEN, INTER, LAYERS, HEADS, KV_HEADS, CONTEXT = 64, 128, 2, 4, 2, 256


def write_tiny_gguf(path: Path, tokenizer_json: dict, seed: int = 0) -> Path:  # type: ignore[type-arg]
    import gguf

    model = tokenizer_json["model"]
    vocab = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    tokens = [t for t, _ in vocab]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    rng = np.random.default_rng(seed)
    head = HIDDEN // HEADS

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-llama")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(HIDDEN)
    writer.add_feed_forward_length(INTER)
    writer.add_block_count(LAYERS)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_dimension_count(head)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t.startswith("<|") else 1 for t in tokens])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(0)
    writer.add_tensor("token_embd.weight", w(len(tokens), HIDDEN))
    for i in range(LAYERS):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(HIDDEN, np.float32))
        writer.add_tensor(f"blk.{i}.attn_q.weight", w(HIDDEN, HIDDEN))
        writer.add_tensor(f"blk.{i}.attn_k.weight", w(KV_HEADS * head, HIDDEN))
        writer.add_tensor(f"blk.{i}.attn_v.weight", w(KV_HEADS * head, HIDDEN))
        writer.add_tensor(f"blk.{i}.attn_output.weight", w(HIDDEN, HIDDEN))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(HIDDEN, np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", w(INTER, HIDDEN))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", w(INTER, HIDDEN))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", w(HIDDEN, INTER))
    writer.add_tensor("output_norm.weight", np.ones(HIDDEN, np.float32))
    writer.add_tensor("output.weight", w(len(tokens), HIDDEN))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def tokenizer_dict(folder: Path) -> dict:  # type: ignore[type-arg]
    data: dict = json.loads((folder / "tokenizer.json").read_text())  # type: ignore[type-arg]
    return data
