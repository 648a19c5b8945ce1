"""A GGUF file as a Hugging Face folder, by transformers' own GGUF loader (run as
`python gguf_to_hf.py FILE.gguf OUT`, in a child process: a crash in a loader must not take
OpScope down). Quantized GGUF weights (Q4_K, Q4_1, ...) are unpacked to float32 by the
loader; the tokenizer is rebuilt from the file's metadata. What the onnxruntime-genai
builder then reads is an ordinary folder.

This file imports nothing from OpScope. A failure it knows prints one line that starts with
`OPSCOPE-ERROR: ` and exits 2."""

from __future__ import annotations

import sys
from pathlib import Path

ERROR = "OPSCOPE-ERROR: "


def fail(message: str) -> None:
    print(ERROR + message, flush=True)
    raise SystemExit(2)


def convert(src: Path, out: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig
    from transformers.modeling_gguf_pytorch_utils import (
        GGUF_SUPPORTED_ARCHITECTURES,
        load_gguf_checkpoint,
    )

    print("step 1/3: reading the GGUF metadata", flush=True)
    try:
        meta = load_gguf_checkpoint(str(src), return_tensors=False)  # type: ignore[no-untyped-call]
    except ValueError as exc:  # an architecture the loader does not know
        fail(f"transformers' GGUF loader cannot read it ({str(exc).splitlines()[0][:200]}); "
             f"it reads {', '.join(sorted(GGUF_SUPPORTED_ARCHITECTURES))}")  # fmt: skip
    arch = str(meta.get("config", {}).get("model_type", "?"))
    print(f"step 2/3: unpacking the weights to float32 ({arch})", flush=True)
    tokenizer = AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name)
    model = AutoModelForCausalLM.from_pretrained(
        str(src.parent), gguf_file=src.name, dtype="float32",
        quantization_config=GgufConfig(dequantize=True),
    )  # fmt: skip
    # the weights are plain float32 now: the GGUF quantizer only blocks saving them
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    print("step 3/3: writing the Hugging Face folder", flush=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def main() -> None:
    if len(sys.argv) != 3:
        fail("usage: gguf_to_hf.py FILE.gguf OUT")
    convert(Path(sys.argv[1]), Path(sys.argv[2]))


if __name__ == "__main__":
    main()
