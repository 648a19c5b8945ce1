"""Run configuration: a frozen, validated dataclass every other part plans from."""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from typing import Any, Literal, get_args

from engine.errors import ConfigError

# Every precision any backend offers; each backend's capabilities say which it runs.
# int8-weights, int4-weights: weight-only (MatMulNBits), for generating models
# int8: dynamic or static, whichever is fastest while it meets the accuracy target
Precision = Literal[
    "fp32", "fp16", "int8", "int8-dynamic", "int8-static", "bf16", "int8-weights", "int4-weights"
]
Fusion = Literal["off", "basic", "extended", "layout", "all"]
Provider = Literal["auto", "cpu", "cuda", "tensorrt"]

PRECISIONS: tuple[str, ...] = get_args(Precision)
FUSIONS: tuple[str, ...] = get_args(Fusion)
PROVIDERS: tuple[str, ...] = get_args(Provider)
ENGINE_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")

DEFAULT_MIN_COSINE = 0.99
DEFAULT_MIN_TOKEN_AGREEMENT = 0.90
MAX_THREADS = 1024  # intra-op threads; more than the largest machines have


def oversubscribed(threads: int) -> str | None:
    """A warning when `threads` exceed the logical CPUs (they take turns), else None."""
    cpus = os.cpu_count() or 1
    if threads > cpus:
        return (
            f"{threads} threads on {cpus} logical CPUs: they take turns on the cores, which "
            "slows every inference; at most one per CPU"
        )
    return None


PRECISION_LABELS = {
    "fp32": "FP32",
    "fp16": "FP16",
    "int8": "INT8 (fastest kind)",
    "int8-dynamic": "INT8 dynamic",
    "int8-static": "INT8 static",
    "bf16": "BF16",
    "int8-weights": "INT8 weights",
    "int4-weights": "INT4 weights",
}


def provider_label(name: str | None) -> str:
    """A provider as people read it: 'CUDA' for 'CUDAExecutionProvider' ('-' for none)."""
    return (name or "-").replace("ExecutionProvider", "") or "-"


def default_threads() -> int:
    """Intra-op threads ORT would pick by itself: the physical core count."""
    try:
        import psutil

        physical = psutil.cpu_count(logical=False)
    except ImportError:  # pragma: no cover - psutil is a dependency
        physical = None
    return max(1, physical or os.cpu_count() or 1)


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Everything that changes what is measured. `threads=0` means 'the default'.

    `engine` names a backend (engine/backends/); whether it exists, and offers the other
    values, is the backend registry's to check (`engine.backends.backend_for`)."""

    engine: str = "onnxruntime"
    precision: Precision = "fp32"
    fusion: Fusion = "all"
    batch: int = 1
    threads: int = 0
    spinning: bool = False
    provider: Provider = "auto"
    # INT8 must keep cosine >= this against FP32 (worst output): the quantization settings
    # that suit the CPU are searched, and sensitive nodes kept in FP32, until it does
    min_cosine: float = DEFAULT_MIN_COSINE
    # a generating model's weights (fp16, int8/int4-weights) must keep this share of FP32's
    # next tokens, teacher-forced, and min_cosine on the worst position's logits
    min_token_agreement: float = DEFAULT_MIN_TOKEN_AGREEMENT

    def __post_init__(self) -> None:
        if not isinstance(self.engine, str) or not ENGINE_NAME.fullmatch(self.engine):
            raise ConfigError(f"engine must be a backend's name; got {self.engine!r}")
        _check_choice("precision", self.precision, PRECISIONS)
        _check_choice("fusion", self.fusion, FUSIONS)
        _check_choice("provider", self.provider, PROVIDERS)
        if not isinstance(self.batch, int) or self.batch < 1:
            raise ConfigError(f"batch must be a positive integer, got {self.batch!r}")
        if not isinstance(self.threads, int) or self.threads < 0:
            raise ConfigError(f"threads must be 0 (default) or positive, got {self.threads!r}")
        if self.threads > MAX_THREADS:  # thousands of threads exhaust the process limit
            raise ConfigError(
                f"threads {self.threads:,} is more than {MAX_THREADS:,}: this machine has "
                f"{os.cpu_count() or 1} logical CPUs"
            )
        if (
            not isinstance(self.min_cosine, int | float)
            or isinstance(self.min_cosine, bool)
            or not 0.0 < float(self.min_cosine) <= 1.0
        ):
            raise ConfigError(f"min cosine must be within (0, 1], got {self.min_cosine!r}")
        if (
            not isinstance(self.min_token_agreement, int | float)
            or isinstance(self.min_token_agreement, bool)
            or not 0.0 < float(self.min_token_agreement) <= 1.0
        ):
            raise ConfigError(
                f"min token agreement must be within (0, 1], got {self.min_token_agreement!r}"
            )

    def resolved(self) -> RunConfig:
        """The same config with defaults made explicit (threads as actually used)."""
        if self.threads:
            return self
        return dataclasses.replace(self, threads=default_threads())

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunConfig:
        """Build from untrusted JSON: unknown keys are ignored, values are validated."""
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})

    def short_label(self) -> str:
        """The knobs that shape a run, as tables print them:
        'INT8 dynamic fusion=all batch=8 threads=2' (' spin' when spinning)."""
        return (
            f"{PRECISION_LABELS[self.precision]} fusion={self.fusion} batch={self.batch} "
            f"threads={self.threads or 'default'}{' spin' if self.spinning else ''}"
        )

    def label(self) -> str:
        """One-line summary for tables and markers."""
        spin = "spin" if self.spinning else "nospin"
        return (
            f"{self.engine} {PRECISION_LABELS[self.precision]} fusion={self.fusion} "
            f"batch={self.batch} threads={self.threads or 'default'} {spin} {self.provider}"
        )


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
