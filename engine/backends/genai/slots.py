"""The KV cache of a continuous-batching engine: one buffer per layer and per key/value,
[slots, kv_heads, max_length, head_size], each slot one sequence's row.

A prefill (or one chunk of it) runs as batch 1 on a view of its slot's row (`cache[i:i+1]`
is contiguous, and an OrtValue made from the view shares its memory), so the prompt's keys
and values land in the big buffer in place. A decode step runs the sequences in slots
0..n-1 together on the view `cache[:n]`, with a right-padded attention mask: the demo
graph's GroupQueryAttention takes each row's length from its mask row (seqlens_k =
ReduceSum(mask) - 1), writes that row's new token at that position and attends to that
many tokens, so rows of different lengths share one pass. The caller keeps the decoding
sequences packed at the front (`move`, `swap`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from engine.backends.genai.decoder import DecoderShape, check_cache_fits, kv_dtype
from engine.errors import ConfigError, ModelError, one_line

if TYPE_CHECKING:
    import onnxruntime


class SlotCache:
    """`prefill(slot, ids, done)` and `decode(tokens, lengths)`; each returns the last
    position's logits."""

    def __init__(
        self, session: onnxruntime.InferenceSession, shape: DecoderShape, slots: int,
        max_length: int,
    ) -> None:  # fmt: skip
        import onnxruntime as ort

        dtype = kv_dtype(session, shape)  # refuses a model without the past input
        max_length = shape.capacity(max_length)
        self.session, self.shape, self.slots, self.max_length = session, shape, slots, max_length
        check_cache_fits(shape, dtype, slots, max_length, "slots (--max-seqs)")
        self.cache = [
            np.zeros((slots, shape.kv_heads, max_length, shape.head_size), dtype)
            for _ in range(2 * shape.layers)
        ]
        self._ort = ort
        self._row: dict[int, Any] = {}  # slot -> IOBinding over its row
        self._front: dict[int, Any] = {}  # n -> IOBinding over slots 0..n-1
        self.run_options = ort.RunOptions()
        self.run_options.log_severity_level = 4

    def _binding(self, lo: int, hi: int) -> Any:
        """An IOBinding with past and present bound to slots lo..hi-1 of every buffer."""
        sh = self.shape
        io = self.session.io_binding()
        io.bind_output(sh.logits, "cpu")  # first: outputs come back in binding order
        for layer in range(sh.layers):
            for j, (past, present) in enumerate(
                ((sh.past_key, sh.present_key), (sh.past_value, sh.present_value))
            ):
                view = self.cache[2 * layer + j][lo:hi]
                buf = self._ort.OrtValue.ortvalue_from_numpy(view)  # shares the view's memory
                io.bind_ortvalue_input(past % layer, buf)
                io.bind_ortvalue_output(present % layer, buf)
        return io

    def _run(self, io: Any, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        io.bind_cpu_input(self.shape.input_ids, ids)
        io.bind_cpu_input(self.shape.attention_mask, mask)
        io.bind_output(self.shape.logits, "cpu")  # anew: its shape changes every pass
        try:
            self.session.run_with_iobinding(io, self.run_options)
        except Exception as exc:  # ORT's own error types
            raise ModelError(f"ONNX Runtime failed to run a pass ({one_line(exc)})", "") from exc
        return np.asarray(io.get_outputs()[0].numpy()[:, -1, :], np.float32)

    def prefill(self, slot: int, ids: np.ndarray, done: int = 0) -> np.ndarray:
        """`ids` (1-D), the next tokens of the prompt in `slot`, whose first `done` tokens
        are already cached; the last position's logits, [vocab]."""
        total = done + ids.size
        if total > self.max_length:
            raise ConfigError(f"{total} tokens exceed the cache's {self.max_length}")
        io = self._row.get(slot)
        if io is None:
            io = self._row[slot] = self._binding(slot, slot + 1)
        ids2 = np.ascontiguousarray(ids, np.int64).reshape(1, -1)
        logits: np.ndarray = self._run(io, ids2, np.ones((1, total), np.int64))[0]
        return logits

    def decode(self, tokens: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """One token for each of the sequences in slots 0..n-1 (`lengths[i]` tokens cached
        in slot i); their logits, [n, vocab]. Each slot's length grows by one."""
        n = int(tokens.size)
        total = int(lengths.max()) + 1
        if total > self.max_length:
            raise ConfigError(f"{total} tokens exceed the cache's {self.max_length}")
        mask = (np.arange(total)[None, :] <= lengths[:, None]).astype(np.int64)  # right-padded
        io = self._front.get(n)
        if io is None:
            io = self._front[n] = self._binding(0, n)
        return self._run(io, np.ascontiguousarray(tokens, np.int64).reshape(n, 1), mask)

    def move(self, src: int, dst: int, length: int) -> None:
        """Copy the first `length` cached tokens of slot `src` into slot `dst`."""
        for buf in self.cache:
            buf[dst, :, :length] = buf[src, :, :length]

    def swap(self, a: int, len_a: int, b: int, len_b: int) -> None:
        for buf in self.cache:
            keep = buf[a, :, :len_a].copy()
            buf[a, :, :len_b] = buf[b, :, :len_b]
            buf[b, :, :len_a] = keep
