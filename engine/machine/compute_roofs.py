"""Compute roofs from the engine's own kernels: ONNX Runtime's CPU MatMul (MLAS) in float32
and its integer MatMul (uint8 x int8 -> int32, the kernel INT8 models' QLinear ops use) at
several sizes, best of `repeats` each; a size's own best is kept with the figure, so a
roof says where it was reached. Integer ops are placed against the integer roof: against
the float32 one they read as running above the machine's peak."""

from __future__ import annotations

import math
import time
from typing import Any

from engine.machine.measure_stop import check as check_stop

SIZES = (256, 512, 1024)  # best at 256-1024 on the AMD EPYC measured; 2048 cost 0.6 s more
PASS_FLOPS = 2e9  # operations per timed measurement (about 10 ms)


def _matmul_model(n: int, integer: bool) -> bytes:
    from onnx import TensorProto, helper

    a, b, out = ((TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32) if integer
                 else (TensorProto.FLOAT,) * 3)  # fmt: skip
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger" if integer else "MatMul", ["x", "y"], ["out"])],
        "opscope_roof",
        [helper.make_tensor_value_info(name, t, [n, n]) for name, t in (("x", a), ("y", b))],
        [helper.make_tensor_value_info("out", out, [n, n])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def matmul_rate(n: int, integer: bool, repeats: int = 5) -> float:
    """Best GFLOP/s (GOP/s for integers: 2*n^3 per product) of ORT's CPU MatMul at n^3."""
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(_matmul_model(n, integer), opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds: dict[str, Any] = (
        {"x": rng.integers(0, 255, (n, n), dtype=np.uint8),
         "y": rng.integers(-128, 127, (n, n), dtype=np.int8)} if integer
        else {k: rng.standard_normal((n, n), dtype=np.float32) for k in ("x", "y")}
    )  # fmt: skip
    sess.run(None, feeds)
    flops = 2.0 * n**3
    inner = max(int(PASS_FLOPS / flops), 1)
    best = math.inf
    for _ in range(repeats):
        check_stop()
        t0 = time.perf_counter()
        for _ in range(inner):
            sess.run(None, feeds)
        best = min(best, (time.perf_counter() - t0) / inner)
    return flops / best / 1e9


def best_rate(integer: bool, sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    """{"rate", "n", "by_size"}: the best rate over `sizes` and where it was reached."""
    by_size = {n: round(matmul_rate(n, integer), 1) for n in sizes}
    n = max(by_size, key=lambda k: by_size[k])
    return {"rate": by_size[n], "n": n, "by_size": {str(k): v for k, v in by_size.items()}}
