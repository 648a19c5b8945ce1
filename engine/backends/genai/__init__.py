"""Generating models (LLMs) in onnxruntime-genai's folder format, run on ONNX Runtime with
the KV cache in a preallocated shared buffer: prefill, then one token per step. Used by
`opscope generate`; not (yet) a registered backend of single-forward runs, so it exports
no BACKEND."""
