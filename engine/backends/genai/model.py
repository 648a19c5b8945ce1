"""A generating model opened for timing: its genai-format folder read (genai_config.json,
the ONNX decoder, tokenizer.json), an ONNX Runtime session planned from the run config,
and the decoder to run it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.backends.genai.decoder import Decoder, DecoderShape, kv_dtype
from engine.backends.genai.json_file import read_json
from engine.config import RunConfig
from engine.errors import ConfigError, ModelError, one_line

CONFIG_FILE = "genai_config.json"
MAX_CONFIG_BYTES = 1 << 20


def genai_folder(path: str | Path) -> Path | None:
    """The folder of a genai-format model given as the folder or its config file."""
    p = Path(path)
    if p.is_dir() and (p / CONFIG_FILE).is_file():
        return p
    if p.name == CONFIG_FILE and p.is_file():
        return p.parent
    return None


@dataclass(frozen=True)
class LLMConfig:
    """What genai_config.json says that timing needs (read, never executed)."""

    folder: Path
    model_file: Path
    shape: DecoderShape
    context_length: int
    vocab_size: int
    eos: tuple[int, ...]
    kind: str
    special: tuple[int, ...] = ()


def read_config(path: str | Path) -> LLMConfig:
    folder = genai_folder(path)
    if folder is None:
        from engine.model.llm_sources import import_hint

        hint = import_hint(path)
        raise ModelError(hint or f"not a generating model folder (no {CONFIG_FILE})", str(path))
    cfg_path = folder / CONFIG_FILE
    data = read_json(cfg_path, MAX_CONFIG_BYTES, ModelError)
    try:
        model = data["model"]
        dec = model["decoder"]
        ins, outs = dec.get("inputs", {}), dec.get("outputs", {})
        shape = DecoderShape(
            layers=_positive(dec["num_hidden_layers"], "num_hidden_layers"),
            kv_heads=_positive(dec["num_key_value_heads"], "num_key_value_heads"),
            head_size=_positive(dec["head_size"], "head_size"),
            input_ids=str(ins.get("input_ids", "input_ids")),
            attention_mask=str(ins.get("attention_mask", "attention_mask")),
            past_key=str(ins.get("past_key_names", "past_key_values.%d.key")),
            past_value=str(ins.get("past_value_names", "past_key_values.%d.value")),
            present_key=str(outs.get("present_key_names", "present.%d.key")),
            present_value=str(outs.get("present_value_names", "present.%d.value")),
            logits=str(outs.get("logits", "logits")),
            min_cache=_window(dec.get("sliding_window")),
        )
        eos_raw = model.get("eos_token_id", [])
        eos = tuple(int(e) for e in (eos_raw if isinstance(eos_raw, list) else [eos_raw]))
        special = tuple(
            int(model[k]) for k in ("bos_token_id", "pad_token_id") if isinstance(model.get(k), int)
        )
        file = Path(str(dec["filename"]))
        config = LLMConfig(
            folder=folder,
            model_file=folder / file.name,  # within the folder, whatever the file says
            shape=shape,
            context_length=_positive(model["context_length"], "context_length"),
            vocab_size=_positive(model["vocab_size"], "vocab_size"),
            eos=eos,
            kind=str(model.get("type", "decoder")),
            special=special + eos,
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelError(f"unusable config ({one_line(exc)})", str(cfg_path)) from exc
    for template in (shape.past_key, shape.past_value, shape.present_key, shape.present_value):
        if template.count("%d") != 1:
            raise ModelError(f"unusable config (name template {template!r})", str(cfg_path))
    if not config.model_file.is_file():
        raise ModelError(f"the decoder file {config.model_file.name} is missing", str(folder))
    return config


def _window(sliding: Any) -> int:
    """The attention window a cache must hold (0: no sliding window)."""
    if not isinstance(sliding, dict) or sliding.get("window_size") is None:
        return 0
    return _positive(sliding["window_size"], "sliding_window.window_size")


def _positive(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive whole number, got {value!r}")
    return value


@dataclass
class OpenedLLM:
    config: LLMConfig
    opened: Any  # backends.ort.inference_session.OpenSession: the session, where it runs
    tokenizer: Any = None  # tokenizers.Tokenizer, when the folder has one
    notes: list[str] = field(default_factory=list)

    @property
    def session(self) -> Any:
        return self.opened.session

    @property
    def provider_used(self) -> str:
        return str(self.opened.provider_used)

    @property
    def shape(self) -> DecoderShape:
        return self.config.shape

    @property
    def context_length(self) -> int:
        return self.config.context_length

    @property
    def kv_bytes_per_token(self) -> int:
        """Cache bytes per token of one sequence, in the element type the model declares."""
        return self.shape.kv_bytes_per_token(kv_dtype(self.session, self.shape).itemsize)

    @property
    def vocab_size(self) -> int:
        return self.config.vocab_size

    @property
    def first_plain_token(self) -> int:
        """Generated prompts avoid the special tokens (kept at the start of the vocab)."""
        return min(max(self.config.special, default=-1) + 1, self.vocab_size - 1)

    @property
    def can_decode(self) -> bool:
        return self.tokenizer is not None

    def encode(self, text: str) -> list[int]:
        if self.tokenizer is None:
            raise ConfigError(f"{self.config.folder}: no tokenizer.json to encode --prompt with")
        return list(self.tokenizer.encode(text).ids)

    def decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids)) if self.tokenizer is not None else ""

    def decoder(self, batch: int, max_length: int) -> Decoder:
        return Decoder(self.session, self.config.shape, batch, max_length, self.vocab_size)


def open_llm(
    path: str | Path,
    config: RunConfig,
    profile_prefix: str | None = None,
    optimized_model_path: str | None = None,
) -> OpenedLLM:
    """Open for timing, or with the profiler on when `profile_prefix` is given (and the
    graph ONNX Runtime runs saved to `optimized_model_path`: the memory probe's)."""
    from engine.backends.ort.inference_session import gpu_present, open_session, plan_session

    llm = read_config(path)
    ort_config = dataclasses.replace(config, engine="onnxruntime")
    plan = plan_session(
        ort_config,
        gpu_present=gpu_present(),
        profiling=profile_prefix is not None,
        profile_prefix=profile_prefix,
        optimized_model_path=optimized_model_path,
    )
    opened = open_session(llm.model_file, plan)
    tokenizer = None
    tok_file = llm.folder / "tokenizer.json"
    if tok_file.is_file():
        try:
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(tok_file))
        except Exception as exc:  # the library raises its own Exception kinds
            raise ModelError(
                f"the tokenizer does not parse ({one_line(exc)})", str(tok_file)
            ) from exc
    return OpenedLLM(llm, opened, tokenizer, list(plan.notes))
