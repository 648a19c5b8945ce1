"""Calibrating the simulator on the real engine: batch service times for each size,
measured once per model, config, machine and instance count, and cached on disk."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from engine.cache import cache_key, cache_root
from engine.events import Event, Notice
from engine.files import write_atomic
from engine.hostinfo import cpu_model, ort_version, package_version
from engine.serve.service import ServiceModel, calibrate, calibration_sizes
from engine.serve.setup import Serving

VERSION = 4  # 2: idle penalties; 3: fresh batches; 4: idle slowdown as a ratio


def calibration_context(
    model_sha256: str, config: dict[str, Any], provider: str, max_batch: int, instances: int
) -> dict[str, Any]:
    """What a calibration depends on (its cache key)."""
    import platform

    return {
        "version": VERSION,
        "model_sha256": model_sha256,
        "config": config,
        "provider": provider,
        "sizes": calibration_sizes(max_batch),
        "instances": instances,
        "cpu": cpu_model(),
        "host": platform.node(),
        "onnxruntime": ort_version(),
        "torch": package_version("torch"),
    }


def load_or_calibrate(
    serving: Serving, context: dict[str, Any], remeasure: bool = False
) -> Iterator[Event | ServiceModel]:
    """The cached calibration for `context`, or a new one (progress events, then the
    ServiceModel). With several instances, each size is timed with that many batches
    running at once, as they do when the server is busy."""
    path = cache_root() / "calibration" / f"{cache_key(context)}.json"
    if path.is_file() and not remeasure:
        try:
            cached = ServiceModel.from_json(json.loads(path.read_text()))
            yield Notice("info", f"calibration from the cache ({path.name})")
            yield cached
            return
        except Exception as exc:  # a damaged or foreign file: measure again
            yield Notice("warning", f"cached calibration unreadable ({exc}); measuring again")
    instances = int(context["instances"])
    rng = np.random.default_rng(0)

    def make(n: int) -> Any:
        keys = rng.integers(0, 1 << 30, n * instances)
        return [
            serving.stack([int(k) for k in keys[i * n : (i + 1) * n]]) for i in range(instances)
        ]

    def run(batches: list[Any]) -> object:
        """One batch per instance, at once (as a busy server runs them)."""
        threads = [threading.Thread(target=serving.run_batch, args=(b,)) for b in batches[1:]]
        for th in threads:
            th.start()
        out = serving.run_batch(batches[0])
        for th in threads:
            th.join()
        return out

    model: ServiceModel | None = None
    for item in calibrate(run, make, list(context["sizes"]), context):
        if isinstance(item, ServiceModel):
            model = item
        else:
            yield item
    assert model is not None
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(model.to_json())
    write_atomic(str(path), lambda fh: fh.write(text))
    yield model
