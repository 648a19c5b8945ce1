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


# one summary row of an LLM serving study, as engine/serve/llm/study.py records it
LLM_ROW = {
    "layout": "chunked",
    "layout_config": {"name": "chunked", "label": "chunked 256", "instances": 1},
    "simulated": False,
    "requests": {"count": 16, "prompt_tokens_mean": 150.0, "output_tokens_mean": 8.0},
    "ttft_ms": {"count": 16, "p50": 7.2, "p90": 10.0, "p99": 11.6, "mean": 7.5, "max": 11.7},
    "tpot_ms": {"count": 16, "p50": 0.9, "p90": 2.0, "p99": 2.6, "mean": 1.1, "max": 2.7},
    "throughput": {"tokens_per_s": 58.0, "prompt_tokens_per_s": 1090.0, "requests_per_s": 7.2},
    "prefix_cache": {"blocks": 64, "hit_rate": 0.62, "requests_hit": 15, "cached_tokens": 1440},
    "without_prefix_cache": {"ttft_ms": {"p50": 15.5, "p99": 30.1}},
    "tokens_identical": {"requests": 16, "same": 16},
}
