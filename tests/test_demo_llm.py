"""The demo LLM folder (resources/models/demo_llm/, built at set-up by
resources/models/build_demo_llm.py): its interface, a numpy reference of its maths, the
shared-buffer and growing-past KV caches, onnxruntime-genai against plain onnxruntime, and
a byte-identical rebuild."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

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
    """Names, shapes and dtypes as onnxruntime-genai's builder makes them for llama with GQA."""
    config = json.loads((folder / "genai_config.json").read_text())
    model, dec = config["model"], config["model"]["decoder"]
    assert model["type"] == "llama" and model["context_length"] == b.CONTEXT
    assert (dec["num_hidden_layers"], dec["num_attention_heads"]) == (b.LAYERS, b.HEADS)
    assert (dec["num_key_value_heads"], dec["head_size"]) == (b.KV_HEADS, b.HEAD_SIZE)
    assert config["search"]["past_present_share_buffer"] is True
    assert (model["bos_token_id"], model["eos_token_id"], model["pad_token_id"]) == (1, 2, 0)
    sess = ort.InferenceSession(str(folder / dec["filename"]), providers=["CPUExecutionProvider"])
    inputs = {i.name: (i.type, i.shape) for i in sess.get_inputs()}
    outputs = {o.name: (o.type, o.shape) for o in sess.get_outputs()}
    assert dec["inputs"]["input_ids"] == "input_ids"
    assert inputs.pop("input_ids") == ("tensor(int64)", ["batch_size", "sequence_length"])
    assert dec["inputs"]["attention_mask"] == "attention_mask"
    assert inputs.pop("attention_mask") == (
        "tensor(int64)",
        ["batch_size", "total_sequence_length"],
    )
    assert dec["outputs"]["logits"] == "logits"
    vocab = model["vocab_size"]
    assert outputs.pop("logits") == ("tensor(float)", ["batch_size", "sequence_length", vocab])
    kv = ["batch_size", b.KV_HEADS, "past_sequence_length", b.HEAD_SIZE]
    for layer in range(b.LAYERS):
        for kind in ("key", "value"):
            past = dec["inputs"][f"past_{kind}_names"] % layer
            present = dec["outputs"][f"present_{kind}_names"] % layer
            assert (
                past == f"past_key_values.{layer}.{kind}" and present == f"present.{layer}.{kind}"
            )
            assert inputs.pop(past) == ("tensor(float)", kv)
            assert outputs.pop(present) == (
                "tensor(float)",
                [*kv[:2], "total_sequence_length", kv[3]],
            )
    assert inputs == {} and outputs == {}
    nodes = onnx.load(str(folder / dec["filename"])).graph.node
    gqa = [n for n in nodes if (n.op_type, n.domain) == ("GroupQueryAttention", "com.microsoft")]
    assert len(gqa) == b.LAYERS
    assert {a.name: onnx.helper.get_attribute_value(a) for a in gqa[0].attribute}["do_rotary"] == 1


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
    vocab = json.loads((folder / "genai_config.json").read_text())["model"]["vocab_size"]
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
