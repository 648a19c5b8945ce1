"""PyInstaller runtime hook, GPU variant only: load the bundled CUDA and cuDNN libraries
(from the `nvidia-*` wheels of `onnxruntime-gpu[cuda,cudnn]`) before ONNX Runtime asks for
them, so a target machine needs only the NVIDIA driver. A failure leaves the CPU provider."""

import contextlib

with contextlib.suppress(Exception):
    import onnxruntime

    if hasattr(onnxruntime, "preload_dlls"):  # onnxruntime-gpu >= 1.21; present in 1.31
        onnxruntime.preload_dlls()
