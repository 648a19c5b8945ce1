"""A memory report as the memory job writes it (engine/run/memory_job.py), for tests that
draw, store or merge one without measuring."""

from __future__ import annotations

from typing import Any

MEMORY_REPORT: dict[str, Any] = {
    "provider_used": "CPUExecutionProvider",
    "weights_bytes": {"total": 324_000.0, "by_dtype": {"int8": 316_000.0, "float32": 8_000.0},
                      "as_loaded": {"float32": 1_270_000.0}},
    "activations": {
        "as_loaded": {"peak_bytes": 1_100_000.0, "at_node": "bn", "unknown_tensors": 2,
                      "alive_at_peak": [], "timeline": [{"node": "a", "bytes": 1.0}]},
        "as_run": {"peak_bytes": 258_000.0, "at_node": "conv_2", "unknown_tensors": 0,
                   "alive_at_peak": [{"tensor": "t", "bytes": 200_000.0, "producer": "conv_1"}],
                   "timeline": [{"node": "conv_1", "bytes": 100_000.0},
                                {"node": "conv_2", "bytes": 258_000.0}]},
    },
    "measured": {"held_bytes": 16_000_000, "estimate_bytes": 582_000.0,
                 "estimate_over_measured": 582_000.0 / 16_000_000, "rss_bytes": {}},
    "load": {"read_s": 0.02, "variant_s": 4.2, "variant_cached": False, "session_s": 0.03,
             "model_loading_s": 0.002, "session_initialization_s": 0.021},
}  # fmt: skip
