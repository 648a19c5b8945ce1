"""Build the demo LLM: a small Llama-style decoder as an onnxruntime-genai folder.

Run from the repository root: ``.venv/bin/python resources/models/build_demo_llm.py``.
Needs numpy, onnx and tokenizers only (no torch, no network); the check at the end also
uses onnxruntime and, when installed, onnxruntime-genai (the ``genai`` extra). The folder
(``resources/models/demo_llm/``) is not committed: ``make`` builds it at set-up, and
``--if-stale`` skips the build when ``build.sha256`` there matches this script, its
corpus and the library versions.

The weights are seeded random numbers. So that greedy decoding walks through the
vocabulary instead of repeating one token, the LM head is mostly the token embeddings in
a fixed random cyclic order: the residual stream of token t points at the token after t
in that cycle, and the attention layers perturb it. The special tokens are never chosen.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "demo_llm_corpus.txt"  # README.md + docs/*.md of the day it was added
DEFAULT_OUT = HERE / "demo_llm"
MODEL_FILE = "model.onnx"
STAMP_FILE = "build.sha256"

SEED = 0
VOCAB_TARGET = 4096
HIDDEN = 256
LAYERS = 4
HEADS = 8
KV_HEADS = 2
HEAD_SIZE = HIDDEN // HEADS
FFN = 704
CONTEXT = 2048
ROPE_THETA = 10000.0
EPS = 1e-5
OPSET = 21
SPECIALS = ("<|pad|>", "<|bos|>", "<|eos|>")  # ids 0, 1, 2
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
LM_HEAD_CYCLE = (
    0.5  # weight of the "next token in the cycle" part of the LM head (1.0: context is ignored)
)
LAYER_OUT_SCALE = 0.5  # output projections (o_proj, down_proj) relative to 1/sqrt(fan_in)
CHECK_PROMPTS = ("The session file", "OpScope measures latency")
CHECK_NEW_TOKENS = 16


def inputs_hash() -> str:
    """What the folder is built from: this script, the corpus and the library versions."""
    h = hashlib.sha256()
    h.update(Path(__file__).read_bytes())
    h.update(CORPUS.read_bytes())
    for dist in ("numpy", "onnx", "tokenizers"):
        h.update(f"{dist}=={metadata.version(dist)}".encode())
    return h.hexdigest()


def is_up_to_date(out: Path) -> bool:
    stamp = out / STAMP_FILE
    needed = [out / n for n in (MODEL_FILE, "genai_config.json", "tokenizer.json")]
    return (
        stamp.is_file()
        and all(p.is_file() for p in needed)
        and stamp.read_text().strip() == inputs_hash()
    )


# ---- tokenizer ------------------------------------------------------------------------


def train_tokenizer() -> Any:
    """A byte-level BPE trained on the corpus (deterministic for a given tokenizers version)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_TARGET,
        min_frequency=1,
        special_tokens=list(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = CORPUS.read_text(encoding="utf-8").splitlines(keepends=True)
    tok.train_from_iterator(lines, trainer=trainer, length=len(lines))
    ids = [tok.token_to_id(s) for s in SPECIALS]
    if ids != [PAD_ID, BOS_ID, EOS_ID]:
        raise RuntimeError(f"special token ids {ids}, expected {[PAD_ID, BOS_ID, EOS_ID]}")
    return tok


def write_tokenizer(tok: Any, out: Path) -> None:
    tok.save(str(out / "tokenizer.json"))
    pad, bos, eos = SPECIALS
    config = {
        "tokenizer_class": "GPT2Tokenizer",
        "bos_token": bos,
        "eos_token": eos,
        "pad_token": pad,
        "add_bos_token": False,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": CONTEXT,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


# ---- weights and graph ----------------------------------------------------------------


def make_weights(vocab: int) -> dict[str, np.ndarray]:
    """Seeded random weights, scaled so the residual stream stays near unit RMS."""
    rng = np.random.default_rng(SEED)

    def normal(shape: tuple[int, ...], std: float) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float32)

    w: dict[str, np.ndarray] = {}
    embed = normal((vocab, HIDDEN), 1.0)
    w["model.embed_tokens.weight"] = embed
    for i in range(LAYERS):
        p = f"model.layers.{i}"
        w[f"{p}.input_layernorm.weight"] = np.ones(HIDDEN, np.float32)
        w[f"{p}.post_attention_layernorm.weight"] = np.ones(HIDDEN, np.float32)
        w[f"{p}.attn.q_proj.weight"] = normal((HIDDEN, HEADS * HEAD_SIZE), HIDDEN**-0.5)
        w[f"{p}.attn.k_proj.weight"] = normal((HIDDEN, KV_HEADS * HEAD_SIZE), HIDDEN**-0.5)
        w[f"{p}.attn.v_proj.weight"] = normal((HIDDEN, KV_HEADS * HEAD_SIZE), HIDDEN**-0.5)
        w[f"{p}.attn.o_proj.weight"] = normal(
            (HEADS * HEAD_SIZE, HIDDEN), LAYER_OUT_SCALE * (HEADS * HEAD_SIZE) ** -0.5
        )
        w[f"{p}.mlp.gate_proj.weight"] = normal((HIDDEN, FFN), HIDDEN**-0.5)
        w[f"{p}.mlp.up_proj.weight"] = normal((HIDDEN, FFN), HIDDEN**-0.5)
        w[f"{p}.mlp.down_proj.weight"] = normal((FFN, HIDDEN), LAYER_OUT_SCALE * FFN**-0.5)
    w["model.norm.weight"] = np.ones(HIDDEN, np.float32)
    # LM head: column j is the embedding of the token before j in a random cycle over the
    # ordinary tokens, plus noise; the special tokens' columns are zero (never the argmax).
    order = rng.permutation(np.arange(len(SPECIALS), vocab))
    before = np.zeros(vocab, np.int64)
    before[order] = np.roll(order, 1)
    head = LM_HEAD_CYCLE * embed[before].T + normal((HIDDEN, vocab), 1.0)
    head[:, : len(SPECIALS)] = 0.0
    w["lm_head.weight"] = (head * np.float32(HIDDEN**-0.5)).astype(np.float32)
    # Rotary caches for GroupQueryAttention: [max positions, head_size / 2].
    inv_freq = 1.0 / ROPE_THETA ** (np.arange(0, HEAD_SIZE, 2, dtype=np.float64) / HEAD_SIZE)
    angles = np.outer(np.arange(CONTEXT, dtype=np.float64), inv_freq)
    w["cos_cache"] = np.cos(angles).astype(np.float32)
    w["sin_cache"] = np.sin(angles).astype(np.float32)
    return w


def make_model(weights: dict[str, np.ndarray], vocab: int) -> Any:
    """The decoder graph, laid out and named as onnxruntime-genai's builder does for llama."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[onnx.NodeProto] = []
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64

    def node(op: str, inputs: list[str], name: str, n_out: int = 1, **attrs: Any) -> list[str]:
        domain = (
            "com.microsoft"
            if op in ("SkipSimplifiedLayerNormalization", "GroupQueryAttention")
            else ""
        )
        outputs = [f"{name}/output_{k}" for k in range(n_out)]
        nodes.append(helper.make_node(op, inputs, outputs, name=name, domain=domain, **attrs))
        return outputs

    def rms_norm(x: str, gamma: str, name: str) -> str:
        return node(
            "SimplifiedLayerNormalization", [x, gamma], name, axis=-1, epsilon=EPS, stash_type=1
        )[0]

    def skip_rms_norm(x: str, skip: str, gamma: str, name: str) -> tuple[str, str]:
        """(normalized x + skip, x + skip): the norm and the new residual stream."""
        outs = node(
            "SkipSimplifiedLayerNormalization", [x, skip, gamma], name, n_out=4, epsilon=EPS
        )
        return outs[0], outs[3]

    consts = [
        numpy_helper.from_array(np.array([1], np.int64), "/model/constants/INT64/[1]"),
        numpy_helper.from_array(np.array(1, np.int64), "/model/constants/INT64/1"),
    ]
    one_vec, one = consts[0].name, consts[1].name
    # GQA's seqlens_k and total_sequence_length, from attention_mask (the builder's subgraph).
    base = "/model/attn_mask_reformat/attn_mask_subgraph"
    total = node("ReduceSum", ["attention_mask", one_vec], f"{base}/ReduceSum", keepdims=0)[0]
    sub = node("Sub", [total, one_vec], f"{base}/Sub")[0]
    seqlens_k = node("Cast", [sub], f"{base}/Sub/Cast", to=TensorProto.INT32)[0]
    shape = node("Shape", ["attention_mask"], f"{base}/Shape")[0]
    total_len = node("Gather", [shape, one], f"{base}/Gather", axis=0)[0]
    total_seq = node("Cast", [total_len], f"{base}/Gather/Cast", to=TensorProto.INT32)[0]

    hidden = node(
        "Gather", ["model.embed_tokens.weight", "input_ids"], "/model/embed_tokens/Gather"
    )[0]
    residual = hidden
    x = ""  # the last block's output, added to the residual by the next norm
    for i in range(LAYERS):
        p, q = f"model.layers.{i}", f"/model/layers.{i}"
        if i == 0:
            normed = rms_norm(
                hidden, f"{p}.input_layernorm.weight", f"{q}/input_layernorm/LayerNorm"
            )
        else:
            normed, residual = skip_rms_norm(
                x, residual, f"{p}.input_layernorm.weight", f"{q}/input_layernorm/SkipLayerNorm"
            )
        qkv = [
            node("MatMul", [normed, f"{p}.attn.{n}_proj.weight"], f"{q}/attn/{n}_proj/MatMul")[0]
            for n in ("q", "k", "v")
        ]
        attn, present_k, present_v = (
            f"{q}/attn/GroupQueryAttention/output_0",
            f"present.{i}.key",
            f"present.{i}.value",
        )
        past = [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
        nodes.append(
            helper.make_node(
                "GroupQueryAttention",
                [*qkv, *past, seqlens_k, total_seq, "cos_cache", "sin_cache"],
                [attn, present_k, present_v],
                name=f"{q}/attn/GroupQueryAttention",
                domain="com.microsoft",
                num_heads=HEADS,
                kv_num_heads=KV_HEADS,
                scale=HEAD_SIZE**-0.5,
                do_rotary=1,
                rotary_interleaved=0,
                local_window_size=-1,
            )
        )
        o = node("MatMul", [attn, f"{p}.attn.o_proj.weight"], f"{q}/attn/o_proj/MatMul")[0]
        normed, residual = skip_rms_norm(
            o,
            residual,
            f"{p}.post_attention_layernorm.weight",
            f"{q}/post_attention_layernorm/SkipLayerNorm",
        )
        gate = node("MatMul", [normed, f"{p}.mlp.gate_proj.weight"], f"{q}/mlp/gate_proj/MatMul")[0]
        up = node("MatMul", [normed, f"{p}.mlp.up_proj.weight"], f"{q}/mlp/up_proj/MatMul")[0]
        sig = node("Sigmoid", [gate], f"{q}/mlp/act_fn/Sigmoid")[0]
        silu = node("Mul", [gate, sig], f"{q}/mlp/act_fn/Mul")[0]
        prod = node("Mul", [silu, up], f"{q}/mlp/Mul")[0]
        x = node("MatMul", [prod, f"{p}.mlp.down_proj.weight"], f"{q}/mlp/down_proj/MatMul")[0]
    normed, _ = skip_rms_norm(
        x, residual, "model.norm.weight", "/model/layers.final_norm_layernorm/SkipLayerNorm"
    )
    nodes.append(
        helper.make_node("MatMul", [normed, "lm_head.weight"], ["logits"], name="/lm_head/MatMul")
    )

    kv_past = ["batch_size", KV_HEADS, "past_sequence_length", HEAD_SIZE]
    kv_present = ["batch_size", KV_HEADS, "total_sequence_length", HEAD_SIZE]
    inputs = [
        helper.make_tensor_value_info("input_ids", i64, ["batch_size", "sequence_length"]),
        helper.make_tensor_value_info(
            "attention_mask", i64, ["batch_size", "total_sequence_length"]
        ),
    ]
    outputs = [
        helper.make_tensor_value_info("logits", f32, ["batch_size", "sequence_length", vocab])
    ]
    for i in range(LAYERS):
        for kind in ("key", "value"):
            inputs.append(
                helper.make_tensor_value_info(f"past_key_values.{i}.{kind}", f32, kv_past)
            )
            outputs.append(helper.make_tensor_value_info(f"present.{i}.{kind}", f32, kv_present))
    initializers = consts + [numpy_helper.from_array(a, n) for n, a in weights.items()]
    graph = helper.make_graph(nodes, "demo_llm", inputs, outputs, initializers)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)],
        producer_name="opscope build_demo_llm",
        ir_version=10,
    )
    return model


def genai_config(vocab: int) -> dict[str, Any]:
    """genai_config.json as onnxruntime-genai's builder writes it for llama with GQA on CPU."""
    return {
        "model": {
            "bos_token_id": BOS_ID,
            "context_length": CONTEXT,
            "decoder": {
                "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
                "filename": MODEL_FILE,
                "head_size": HEAD_SIZE,
                "hidden_size": HIDDEN,
                "inputs": {
                    "input_ids": "input_ids",
                    "attention_mask": "attention_mask",
                    "past_key_names": "past_key_values.%d.key",
                    "past_value_names": "past_key_values.%d.value",
                },
                "outputs": {
                    "logits": "logits",
                    "present_key_names": "present.%d.key",
                    "present_value_names": "present.%d.value",
                },
                "num_attention_heads": HEADS,
                "num_hidden_layers": LAYERS,
                "num_key_value_heads": KV_HEADS,
            },
            "eos_token_id": EOS_ID,
            "pad_token_id": PAD_ID,
            "type": "llama",
            "vocab_size": vocab,
        },
        "search": {
            "diversity_penalty": 0.0,
            "do_sample": False,
            "early_stopping": True,
            "length_penalty": 1.0,
            "max_length": CONTEXT,
            "min_length": 0,
            "no_repeat_ngram_size": 0,
            "num_beams": 1,
            "num_return_sequences": 1,
            "past_present_share_buffer": True,
            "repetition_penalty": 1.0,
            "temperature": 1.0,
            "top_k": 50,
            "top_p": 1.0,
        },
    }


# ---- decoding, for the checks ---------------------------------------------------------


def ort_greedy(
    folder: Path, prompt: list[int], new_tokens: int, *, share_buffer: bool = True
) -> tuple[list[int], list[np.ndarray]]:
    """Greedy decoding with plain onnxruntime: the prompt in one run, then a token a run.

    ``share_buffer``: past and present are one preallocated [1, kv, max_length, head]
    buffer per cache, bound as input and output through IOBinding (as onnxruntime-genai
    does with past_present_share_buffer); otherwise present = past + new, fed back.
    Returns the new tokens (stopping at EOS) and each run's last-position logits.
    """
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(str(folder / MODEL_FILE), so, providers=["CPUExecutionProvider"])
    names = [f"{i}.{k}" for i in range(LAYERS) for k in ("key", "value")]
    max_length = len(prompt) + new_tokens
    if share_buffer:
        cache = {
            n: ort.OrtValue.ortvalue_from_numpy(
                np.zeros((1, KV_HEADS, max_length, HEAD_SIZE), np.float32)
            )
            for n in names
        }
    else:
        past = {n: np.zeros((1, KV_HEADS, 0, HEAD_SIZE), np.float32) for n in names}
    tokens: list[int] = []
    step_logits: list[np.ndarray] = []
    ids, total = list(prompt), len(prompt)
    while len(tokens) < new_tokens:
        input_ids = np.array([ids], np.int64)
        mask = np.ones((1, total), np.int64)
        if share_buffer:
            io = sess.io_binding()
            io.bind_cpu_input("input_ids", input_ids)
            io.bind_cpu_input("attention_mask", mask)
            io.bind_output("logits")  # first bound, so first in get_outputs()
            for n in names:
                io.bind_ortvalue_input(f"past_key_values.{n}", cache[n])
                io.bind_ortvalue_output(f"present.{n}", cache[n])
            sess.run_with_iobinding(io)
            logits = io.get_outputs()[0].numpy()
        else:
            feeds: dict[str, np.ndarray] = {"input_ids": input_ids, "attention_mask": mask}
            feeds.update({f"past_key_values.{n}": past[n] for n in names})
            out = sess.run(None, feeds)
            logits = out[0]
            past = dict(zip(names, out[1:], strict=True))
        last = logits[0, -1].copy()
        step_logits.append(last)
        token = int(np.argmax(last))
        if token == EOS_ID:
            break
        tokens.append(token)
        ids, total = [token], total + 1
    return tokens, step_logits


def og_greedy(
    folder: Path, prompt: str, new_tokens: int
) -> tuple[list[int], list[int], list[np.ndarray]]:
    """(prompt ids, new tokens, each step's logits) from onnxruntime-genai's Generator, greedy.

    Import onnxruntime_genai from outside its own folder: started there, it aborts.
    """
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    tokenizer = og.Tokenizer(model)
    ids = [int(t) for t in tokenizer.encode(prompt)]
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(ids) + new_tokens, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(ids)  # runs the prompt
    step_logits: list[np.ndarray] = []
    while not generator.is_done():
        step_logits.append(np.asarray(generator.get_logits(), np.float32).reshape(-1).copy())
        generator.generate_next_token()
    seq = [int(t) for t in generator.get_sequence(0)]
    return ids, seq[len(ids) :], step_logits


def same_logits(a: list[np.ndarray], b: list[np.ndarray], atol: float = 1e-4) -> bool:
    return len(a) == len(b) and all(
        np.allclose(x, y, rtol=0, atol=atol) for x, y in zip(a, b, strict=True)
    )


def check(folder: Path) -> str:
    """Greedy tokens agree between onnxruntime-genai and plain onnxruntime, and do not
    collapse onto one token. Returns a one-line description of what was checked."""
    from tokenizers import Tokenizer

    with_og = importlib.util.find_spec("onnxruntime_genai") is not None

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    for prompt in CHECK_PROMPTS:
        ids = tok.encode(prompt).ids
        tokens, logits = ort_greedy(folder, ids, CHECK_NEW_TOKENS)
        grown, grown_logits = ort_greedy(folder, ids, CHECK_NEW_TOKENS, share_buffer=False)
        if not all(np.isfinite(x).all() for x in logits):
            raise RuntimeError(f"{prompt!r}: non-finite logits")
        if grown != tokens or not same_logits(logits, grown_logits):
            raise RuntimeError(f"{prompt!r}: shared buffer and growing past differ")
        if len(set(tokens)) < CHECK_NEW_TOKENS // 2:
            raise RuntimeError(f"{prompt!r}: greedy decoding collapses: {tokens}")
        if with_og:
            og_ids, og_tokens, og_logits = og_greedy(folder, prompt, CHECK_NEW_TOKENS)
            if og_ids != ids:
                raise RuntimeError(f"{prompt!r}: og.Tokenizer {og_ids} != tokenizers {ids}")
            if og_tokens != tokens or not same_logits(og_logits, logits):
                raise RuntimeError(f"{prompt!r}: og.Generator {og_tokens} != onnxruntime {tokens}")
    what = "og.Generator == onnxruntime" if with_og else "onnxruntime only, no onnxruntime_genai"
    return f"{what}, {len(CHECK_PROMPTS)} prompts x {CHECK_NEW_TOKENS} tokens"


# ---- build ----------------------------------------------------------------------------


def build(out: Path) -> dict[str, Any]:
    """Write the folder; returns sizes for the summary line."""
    import onnx

    out.mkdir(parents=True, exist_ok=True)
    (out / STAMP_FILE).unlink(missing_ok=True)
    tok = train_tokenizer()
    vocab = tok.get_vocab_size()
    write_tokenizer(tok, out)
    weights = make_weights(vocab)
    model = make_model(weights, vocab)
    onnx.save_model(model, str(out / MODEL_FILE))
    (out / "genai_config.json").write_text(json.dumps(genai_config(vocab), indent=4) + "\n")
    params = sum(a.size for n, a in weights.items() if n not in ("cos_cache", "sin_cache"))
    return {"vocab": vocab, "params": params, "mb": (out / MODEL_FILE).stat().st_size / 1e6}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder to write")
    ap.add_argument("--if-stale", action="store_true", help="do nothing if the folder is current")
    ap.add_argument("--no-check", action="store_true", help="skip the decoding check")
    args = ap.parse_args(argv)
    if args.if_stale and is_up_to_date(args.out):
        print(f"demo_llm: {args.out} is up to date")
        return 0
    t0 = time.perf_counter()
    info = build(args.out)
    built = time.perf_counter() - t0
    checked = "not checked" if args.no_check else check(args.out)
    (args.out / STAMP_FILE).write_text(inputs_hash() + "\n")
    print(
        f"demo_llm: {info['params'] / 1e6:.2f} M params, {info['mb']:.1f} MB, vocab "
        f"{info['vocab']}, {LAYERS} layers; built in {built:.1f} s, checked in "
        f"{time.perf_counter() - t0 - built:.1f} s ({checked}) -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
