"""The `generate` command line."""

from __future__ import annotations

import argparse
from typing import Any

from engine.backends.genai import CAPABILITIES as GENAI
from engine.cli.arg_types import float_in, int_in, nonneg_int, seconds, unit_interval
from engine.cli.common import add_json_flag, add_seed_flag, add_session_flag
from engine.cli.remote_cmd import add_host_flag
from engine.config import DEFAULT_MIN_COSINE, DEFAULT_MIN_TOKEN_AGREEMENT

SHORT = {"int8": "int8-weights", "int4": "int4-weights"}  # the weight-only precisions' short names


def _precision(text: str) -> str:
    """A generating model's precision, as its backend names it (int8 and int4 accepted)."""
    return SHORT.get(text, text)


MAX_TOKENS = 1 << 20  # prompt and output lengths (the model's context bounds them further)
MAX_SEQUENCES = 65_536  # --batch (the KV cache's estimate bounds it further)
MAX_TEMPERATURE = 100.0  # far past uniform sampling


def add_generate_parser(sub: Any) -> None:
    p = sub.add_parser(
        "generate",
        help="time a generating model (LLM): time to first token, time per output token, "
        "prefill and decode tokens/s, the KV cache",
    )
    p.add_argument("model", help="a genai-format folder (genai_config.json, model.onnx)")
    prompt = p.add_mutually_exclusive_group()
    prompt.add_argument(
        "--prompt-len", type=int_in(1, MAX_TOKENS), default=128, metavar="L",
        help="a prompt of L generated tokens (default 128)",
    )  # fmt: skip
    prompt.add_argument("--prompt", metavar="TEXT", help="a prompt text (the model's tokenizer)")
    prompt.add_argument(
        "--prompts", metavar="FILE.jsonl",
        help='prompts, one JSON object per line: {"prompt": "text"} or {"tokens": [ids]}; '
        "each timed generation takes the next one",
    )  # fmt: skip
    p.add_argument(
        "--new-tokens", type=int_in(1, MAX_TOKENS), default=32, metavar="N",
        help="tokens generated per sequence (default 32; the end-of-text token does not stop "
        "a timed generation, so every generation has the same length)",
    )  # fmt: skip
    p.add_argument(
        "--batch", type=int_in(1, MAX_SEQUENCES), default=1, help="sequences at once (default 1)"
    )
    p.add_argument(
        "--precision", type=_precision, choices=GENAI.precisions, default="fp32",
        metavar="{" + ",".join(GENAI.precisions) + "}",
        help="fp16: weights, activations and KV cache (pays on a GPU); int8-weights, "
        "int4-weights (or int8, int4): weight-only (MatMulNBits), the cheapest build (block "
        "size, accuracy level, MatMuls kept at a higher precision) that meets the accuracy "
        "target (--token-agreement, --min-cosine); each judged against FP32 token by token",
    )  # fmt: skip
    p.add_argument(
        "--token-agreement", type=unit_interval, default=DEFAULT_MIN_TOKEN_AGREEMENT,
        metavar="X",
        help="weights other than FP32 keep FP32's next token at >= X of the positions, "
        f"teacher-forced (default {DEFAULT_MIN_TOKEN_AGREEMENT:g})",
    )  # fmt: skip
    p.add_argument(
        "--min-cosine", type=unit_interval, default=DEFAULT_MIN_COSINE, metavar="X",
        help="... and logit cosine >= X against FP32 at the worst position (default "
        f"{DEFAULT_MIN_COSINE:g}, the encoders' target too)",
    )  # fmt: skip
    p.add_argument("--fusion", choices=GENAI.fusions, default="all")
    p.add_argument(
        "--threads", type=nonneg_int, default=0,
        help="intra-op threads (default 0: one per physical core)",
    )  # fmt: skip
    p.add_argument("--spinning", choices=("on", "off"), default="off")
    p.add_argument("--provider", choices=GENAI.providers, default="auto")
    p.add_argument(
        "--duration", type=seconds, default=10.0, metavar="S",
        help="seconds of whole generations timed after the warm-up (default 10)",
    )  # fmt: skip
    p.add_argument(
        "--warmup", type=int_in(0, 100_000), default=2, metavar="K",
        help="generations run first and discarded (default 2)",
    )  # fmt: skip
    p.add_argument(
        "--temperature", type=float_in(0.0, MAX_TEMPERATURE), default=0.0,
        help="0: greedy (default); above 0: sampled from the top 50, seeded",
    )  # fmt: skip
    add_seed_flag(p, "seed of the prompt and the sampling")
    p.add_argument(
        "--profile", action="store_true",
        help="then profile prefill and decode apart (a session of its own, after the timing): "
        "op types, bytes, FLOPs and arithmetic intensity per phase",
    )  # fmt: skip
    p.add_argument(
        "--sweep-prompt", metavar="L1,L2,...",
        help="then time prefill and decode at each prompt length (e.g. 32,128,512,2048) and "
        "fit TTFT ~ a + b*L + c*L^2: how much of it is the quadratic term",
    )  # fmt: skip
    add_session_flag(
        p, "record the run (kind generate: every generation's passes) in a session file"
    )
    add_json_flag(p)
    add_host_flag(p)
    p.set_defaults(handler=_cmd_generate)


def _cmd_generate(args: argparse.Namespace) -> int:
    if args.host:
        from engine.cli.remote_cmd import cmd_remote

        return cmd_remote(args)
    from engine.cli.generate_cmds import cmd_generate

    return cmd_generate(args)


def add_import_parser(sub: Any) -> None:
    p = sub.add_parser(
        "import-hf",
        help="build a genai-format folder from a Hugging Face model folder or a GGUF file "
        "(offline, with onnxruntime-genai's builder; a GGUF file is unpacked by transformers' "
        "GGUF loader first; needs the hf extra: torch, transformers, gguf)",
    )
    p.add_argument("source", metavar="SOURCE",
                   help="a Hugging Face folder (config.json, *.safetensors, tokenizer) or a "
                   "GGUF file")  # fmt: skip
    p.add_argument("output", metavar="OUT_FOLDER", nargs="?", default="",
                   help="the genai folder to write (new or empty); default: OpScope's cache, "
                   "reused the next time the same source is imported or opened")  # fmt: skip
    p.add_argument(
        "--precision", choices=("fp32", "fp16", "int4"), default="fp32",
        help="weights as built (default fp32; fp16 for --provider cuda; int4: MatMulNBits). "
        "`opscope generate --precision int8|int4` also quantizes an fp32 import itself",
    )  # fmt: skip
    p.add_argument("--provider", choices=("cpu", "cuda"), default="cpu",
                   help="the execution provider it is built for (default cpu)")  # fmt: skip
    p.set_defaults(handler=_cmd_import)


def _cmd_import(args: argparse.Namespace) -> int:
    from engine.backends.genai.hf_import import ImportRequest, import_hf
    from engine.cli.common import EXIT_OK
    from engine.cli.printer import LivePrinter
    from engine.events import drive

    printer = LivePrinter()
    req = ImportRequest(args.source, args.output, args.precision, args.provider)
    out = drive(import_hf(req), printer.feed)
    print(f"imported   {out}  (open it: opscope generate {out}, or opscope {out})")
    return EXIT_OK
