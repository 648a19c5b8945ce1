"""OpScope's inference engine: models, configs, variants, timing, profiling.

Plain Python. Never imports Qt (an import-linter contract in pyproject.toml and
tests/test_architecture.py keep it that way). Heavy libraries (onnxruntime, onnx,
torch) are imported inside the functions that need them so that `opscope --help`
stays instant.
"""

__version__ = "0.1.0"
