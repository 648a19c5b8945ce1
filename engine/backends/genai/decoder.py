"""A generating model on ONNX Runtime: the KV cache in one preallocated buffer per layer
and per key/value (past and present bound to the same memory through IOBinding, as
onnxruntime-genai's shared buffer does, so no step copies the cache), the prompt in one
forward pass (prefill), then one token per pass (decode)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from engine.errors import ConfigError, ModelError, one_line

if TYPE_CHECKING:
    import onnxruntime


@dataclass(frozen=True)
class DecoderShape:
    """What the cache needs: layers, KV heads, head size, and the names to bind."""

    layers: int
    kv_heads: int
    head_size: int
    input_ids: str = "input_ids"
    attention_mask: str = "attention_mask"
    past_key: str = "past_key_values.%d.key"
    past_value: str = "past_key_values.%d.value"
    present_key: str = "present.%d.key"
    present_value: str = "present.%d.value"
    logits: str = "logits"
    # a sliding-window model's attention (Gemma 3's local layers) needs a cache of at least
    # its window, however short the sequences: ORT's GroupQueryAttention refuses a smaller one
    min_cache: int = 0

    def capacity(self, max_length: int) -> int:
        """The tokens a cache for sequences of `max_length` holds."""
        return max(max_length, self.min_cache)

    def kv_bytes_per_token(self, itemsize: int = 4) -> int:
        """Cache bytes one token of one sequence takes: keys and values, every layer."""
        return 2 * self.layers * self.kv_heads * self.head_size * itemsize


def kv_dtype(session: onnxruntime.InferenceSession, shape: DecoderShape) -> np.dtype:
    """The cache's element type, as the model declares its past (fp16 models keep an fp16
    cache: half the bytes per token); a model without that past input is refused."""
    kinds = {i.name: i.type for i in session.get_inputs()}
    past = shape.past_key % 0
    if past not in kinds:
        raise ConfigError(f"the model has no input {past!r} (a decoder's past)")
    declared = kinds[past]
    if declared == "tensor(float16)":
        return np.dtype(np.float16)
    if declared == "tensor(float)":
        return np.dtype(np.float32)
    raise ConfigError(f"the model's past is {declared}; a float or float16 cache is supported")


def check_cache_fits(
    shape: DecoderShape, dtype: np.dtype, rows: int, max_length: int, what: str
) -> None:
    """Refuse, before allocating it, a KV cache that would not fit in memory: `rows`
    sequences (or slots) of `max_length` tokens each."""
    from engine.model.sizes import check_memory

    need = float(rows) * max_length * shape.kv_bytes_per_token(dtype.itemsize)
    check_memory(
        need,
        f"a KV cache of {rows:,} {what} x {max_length:,} tokens",
        "fewer sequences, or shorter prompts and outputs",
    )


class Decoder:
    """`prefill(ids)` then `step(tokens)`, for `batch` sequences of at most `max_length`
    tokens; each returns the last position's logits, [batch, vocab]."""

    def __init__(
        self, session: onnxruntime.InferenceSession, shape: DecoderShape, batch: int,
        max_length: int, vocab: int = 0,
    ) -> None:  # fmt: skip
        import onnxruntime as ort

        max_length = shape.capacity(max_length)
        self.session, self.shape, self.batch, self.max_length = session, shape, batch, max_length
        self.vocab = vocab  # known: a prefill's logits are estimated before they are made
        dtype = kv_dtype(session, shape)
        check_cache_fits(shape, dtype, batch, max_length, "sequences")
        self.cache = [
            np.zeros((batch, shape.kv_heads, max_length, shape.head_size), dtype)
            for _ in range(2 * shape.layers)
        ]
        self.io = session.io_binding()
        self.io.bind_output(shape.logits, "cpu")  # first: outputs come back in binding order
        for layer in range(shape.layers):
            for j, (past, present) in enumerate(
                ((shape.past_key, shape.present_key), (shape.past_value, shape.present_value))
            ):
                buf = ort.OrtValue.ortvalue_from_numpy(self.cache[2 * layer + j])
                self.io.bind_ortvalue_input(past % layer, buf)
                self.io.bind_ortvalue_output(present % layer, buf)
        self.length = 0  # tokens in the cache
        self.run_options = ort.RunOptions()
        self.run_options.log_severity_level = 4  # a failed step is our one line, not ORT's log

    def _run(self, ids: np.ndarray, all_positions: bool = False) -> np.ndarray:
        total = self.length + ids.shape[1]
        if total > self.max_length:
            raise ConfigError(f"{total} tokens exceed the cache's {self.max_length}")
        self.io.bind_cpu_input(self.shape.input_ids, np.ascontiguousarray(ids, np.int64))
        self.io.bind_cpu_input(self.shape.attention_mask, np.ones((self.batch, total), np.int64))
        self.io.bind_output(self.shape.logits, "cpu")  # anew: its shape changes every step
        try:
            self.session.run_with_iobinding(self.io, self.run_options)
        except Exception as exc:  # ORT's own error types
            raise ModelError(f"ONNX Runtime failed to run a step ({one_line(exc)})", "") from exc
        self.length = total
        logits = self.io.get_outputs()[0].numpy()  # float32 for sampling (an fp16 model's too)
        return np.asarray(logits if all_positions else logits[:, -1, :], np.float32)

    def prefill(self, ids: np.ndarray, all_positions: bool = False) -> np.ndarray:
        """The prompt, [batch, length] token ids, in one pass (the cache starts empty); the
        last position's logits, or every position's ([batch, length, vocab])."""
        self.length = 0
        if self.vocab:  # ORT returns every position's float32 logits, then we copy them
            from engine.model.sizes import check_memory

            rows = ids.shape[0] * ids.shape[1]
            check_memory(
                2.0 * rows * self.vocab * 4,
                f"the prefill's logits ({ids.shape[0]:,} x {ids.shape[1]:,} tokens x "
                f"{self.vocab:,} vocabulary)",
                "fewer sequences or a shorter prompt",
            )
        return self._run(ids, all_positions)

    def step(self, tokens: np.ndarray) -> np.ndarray:
        """One new token per sequence, [batch]."""
        return self._run(tokens.reshape(self.batch, 1))
