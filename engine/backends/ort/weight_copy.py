"""The weights' copy to a GPU, measured: each initializer of the model run (the variant:
INT8 moves fewer bytes) copied from host memory to the device by ONNX Runtime's own copy
(`OrtValue.ortvalue_from_numpy`, the path a session's initializers take: pageable host
memory, one synchronous copy per tensor), timed tensor by tensor. The memory probe runs it
after its readings, so the copies it makes never enter them. With device "cpu" the same
steps run on a machine without a GPU (the tests): the bytes are the weights', the time is
a host copy's."""

from __future__ import annotations

import time
from typing import Any


def copy_to_device(path: str, device: str = "cuda", device_id: int = 0) -> dict[str, Any]:
    """{bytes, seconds, gb_s, tensors, device} of copying `path`'s weights to `device`;
    each copy is freed before the next, so the device holds one tensor more at most."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    model = onnx.load(path)  # with external data: the bytes a session reads
    total_bytes = 0
    seconds = 0.0
    tensors = 0
    for t in model.graph.initializer:
        arr = numpy_helper.to_array(t)
        if arr.nbytes == 0:
            continue
        t0 = time.perf_counter()
        value = ort.OrtValue.ortvalue_from_numpy(arr, device, device_id)
        seconds += time.perf_counter() - t0
        del value
        total_bytes += int(arr.nbytes)
        tensors += 1
    return {
        "bytes": total_bytes,
        "seconds": seconds,
        "gb_s": total_bytes / seconds / 1e9 if seconds > 0 else None,
        "tensors": tensors,
        "device": device,
    }
