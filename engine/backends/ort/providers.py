"""Which ONNX Runtime execution providers this machine has: the cheap answer a UI lists
(`usable_providers`: no session opened) and the thorough one `opscope system` prints
(`probe_providers`: a tiny session per provider, to see which it really obtains)."""

from __future__ import annotations

import contextlib
import io

from engine.backends.ort.inference_session import CapturedStderr, gpu_present, one_node_model

KEYS = {"CUDAExecutionProvider": "cuda", "TensorrtExecutionProvider": "tensorrt"}


def usable_providers() -> tuple[str, ...]:
    """The provider keys worth offering: "cpu" always; "cuda" and "tensorrt" when a GPU
    is present and this ONNX Runtime build has them."""
    if not gpu_present():
        return ("cpu",)
    import onnxruntime as ort

    available = ort.get_available_providers()
    return ("cpu", *(key for name, key in KEYS.items() if name in available))


def probe_providers() -> dict[str, list[str]]:
    """Providers listed as available, and usable (a tiny session really obtained it)."""
    import onnxruntime as ort

    available = list(ort.get_available_providers())
    model = one_node_model("Identity", float, [1])
    usable: list[str] = []
    for name in available:
        try:
            so = ort.SessionOptions()
            so.log_severity_level = 4
            with CapturedStderr(), contextlib.redirect_stdout(io.StringIO()):
                chain = list(dict.fromkeys([name, "CPUExecutionProvider"]))
                sess = ort.InferenceSession(model, sess_options=so, providers=chain)
            if sess.get_providers()[0] == name:
                usable.append(name)
        except Exception:  # a provider whose libraries are missing is simply not usable
            continue
    return {"available": available, "usable": usable}
