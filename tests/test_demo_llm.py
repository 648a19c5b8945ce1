"""The demo LLM folder (resources/models/demo_llm/, built at set-up by
resources/models/build_demo_llm.py): its interface, a numpy reference of its maths, the
shared-buffer and growing-past KV caches, onnxruntime-genai against plain onnxruntime, and
a byte-identical rebuild."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from engine.model.genai_config import read_genai_config
from resources.models import build_demo_llm as b

PROMPTS = ("The session file", "OpScope measures latency")
Tokenize = Callable[[str], list[int]]


@pytest.fixture(scope="module")
def folder() -> Path:
    if not b.is_up_to_date(b.DEFAULT_OUT):
        pytest.fail(f"{b.DEFAULT_OUT} is missing or stale: run make (or the builder script)")
    return b.DEFAULT_OUT


@pytest.fixture(scope="module")
def tokenize(folder: Path) -> Tokenize:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    return lambda text: list(tok.encode(text).ids)


def test_folder_loads_with_the_genai_interface(folder: Path) -> None:
    cfg = read_genai_config(folder)
    assert (cfg.model_type, cfg.num_layers, cfg.num_heads) == ("llama", b.LAYERS, b.HEADS)
    assert (cfg.num_kv_heads, cfg.head_size, cfg.max_length) == (b.KV_HEADS, b.HEAD_SIZE, 2048)
    assert cfg.past_present_share_buffer and cfg.eos_token_ids == (b.EOS_ID,)
    sess = ort.InferenceSession(str(cfg.model_file), providers=["CPUExecutionProvider"])
    inputs = {i.name: (i.type, i.shape) for i in sess.get_inputs()}
    outputs = {o.name: (o.type, o.shape) for o in sess.get_outputs()}
    assert inputs.pop(cfg.input_ids_name) == ("tensor(int64)", ["batch_size", "sequence_length"])
    assert inputs.pop(cfg.attention_mask_name) == (
        "tensor(int64)",
        ["batch_size", "total_sequence_length"],
    )
    logits = outputs.pop(cfg.logits_name)
    assert logits == ("tensor(float)", ["batch_size", "sequence_length", cfg.vocab_size])
    for layer in range(cfg.num_layers):
        for past in cfg.past_names(layer):
            assert inputs.pop(past) == (
                "tensor(float)",
                ["batch_size", b.KV_HEADS, "past_sequence_length", b.HEAD_SIZE],
            )
        for present in cfg.present_names(layer):
            assert outputs.pop(present)[1][1:] == [b.KV_HEADS, "total_sequence_length", b.HEAD_SIZE]
    assert inputs == {} and outputs == {}
    ops = [(n.op_type, n.domain) for n in onnx.load(str(cfg.model_file)).graph.node]
    assert ops.count(("GroupQueryAttention", "com.microsoft")) == b.LAYERS
    gqa = next(
        n for n in onnx.load(str(cfg.model_file)).graph.node if n.op_type == "GroupQueryAttention"
    )
    assert {a.name: onnx.helper.get_attribute_value(a) for a in gqa.attribute}["do_rotary"] == 1


def reference_logits(weights: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """The Llama forward pass in numpy (float64), every position at once: [len(ids), vocab]."""
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    n, group = len(ids), b.HEADS // b.KV_HEADS

    def rms(x: np.ndarray, g: np.ndarray) -> np.ndarray:
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + b.EPS) * g

    def rope(x: np.ndarray) -> np.ndarray:  # [heads, n, head_size], halves rotated
        cos, sin = w["cos_cache"][:n], w["sin_cache"][:n]
        x1, x2 = x[..., : b.HEAD_SIZE // 2], x[..., b.HEAD_SIZE // 2 :]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    x = w["model.embed_tokens.weight"][ids]
    causal = np.triu(np.full((n, n), -np.inf), k=1)
    for i in range(b.LAYERS):
        p = f"model.layers.{i}"
        h = rms(x, w[f"{p}.input_layernorm.weight"])
        q = (h @ w[f"{p}.attn.q_proj.weight"]).reshape(n, b.HEADS, -1).transpose(1, 0, 2)
        k = (h @ w[f"{p}.attn.k_proj.weight"]).reshape(n, b.KV_HEADS, -1).transpose(1, 0, 2)
        v = (h @ w[f"{p}.attn.v_proj.weight"]).reshape(n, b.KV_HEADS, -1).transpose(1, 0, 2)
        q, k = rope(q), np.repeat(rope(k), group, axis=0)
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(b.HEAD_SIZE) + causal
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        attn = (probs @ np.repeat(v, group, axis=0)).transpose(1, 0, 2).reshape(n, -1)
        x = x + attn @ w[f"{p}.attn.o_proj.weight"]
        h = rms(x, w[f"{p}.post_attention_layernorm.weight"])
        gate = h @ w[f"{p}.mlp.gate_proj.weight"]
        silu = gate / (1.0 + np.exp(-gate))
        x = x + (silu * (h @ w[f"{p}.mlp.up_proj.weight"])) @ w[f"{p}.mlp.down_proj.weight"]
    return rms(x, w["model.norm.weight"]) @ w["lm_head.weight"]


@pytest.mark.parametrize("share_buffer", [True, False], ids=["shared-buffer", "growing-past"])
def test_decoding_matches_a_numpy_reference(
    folder: Path, tokenize: Tokenize, share_buffer: bool
) -> None:
    """The prompt run and three one-token runs give the logits of the whole sequence at once."""
    ids = tokenize(PROMPTS[0])
    tokens, step_logits = b.ort_greedy(folder, ids, 4, share_buffer=share_buffer)
    vocab = read_genai_config(folder).vocab_size
    assert vocab is not None
    expected = reference_logits(b.make_weights(vocab), ids + tokens[:3])
    for step, logits in enumerate(step_logits):
        np.testing.assert_allclose(logits, expected[len(ids) - 1 + step], rtol=0, atol=1e-4)


def test_shared_buffer_equals_growing_past(folder: Path, tokenize: Tokenize) -> None:
    ids = tokenize(PROMPTS[1])
    shared_tokens, shared = b.ort_greedy(folder, ids, 4, share_buffer=True)
    grown_tokens, grown = b.ort_greedy(folder, ids, 4, share_buffer=False)
    assert shared_tokens == grown_tokens and len(shared) == 4
    for s, g in zip(shared, grown, strict=True):
        np.testing.assert_allclose(s, g, rtol=0, atol=1e-5)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_genai_generator_equals_plain_onnxruntime(
    folder: Path, tokenize: Tokenize, prompt: str
) -> None:
    pytest.importorskip("onnxruntime_genai", reason="the genai extra is not installed")
    ids = tokenize(prompt)
    tokens, logits = b.ort_greedy(folder, ids, 16)
    og_ids, og_tokens, og_logits = b.og_greedy(folder, prompt, 16)
    assert og_ids == ids  # og.Tokenizer reads tokenizer.json as the tokenizers library does
    assert len(tokens) == 16 and og_tokens == tokens
    assert b.same_logits(og_logits, logits)
    assert len(set(tokens)) >= 8, f"greedy decoding collapses: {tokens}"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_rebuild_is_byte_identical(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t0 = time.perf_counter()
    assert b.main(["--out", str(tmp_path), "--no-check"]) == 0
    assert time.perf_counter() - t0 < 15
    for name in ("model.onnx", "tokenizer.json", "tokenizer_config.json", "genai_config.json"):
        assert digest(tmp_path / name) == digest(folder / name), name
    assert b.main(["--out", str(tmp_path), "--if-stale"]) == 0
    assert "is up to date" in capsys.readouterr().out
