import pytest

from engine.config import RunConfig
from engine.errors import ConfigError


def test_defaults_resolve_threads() -> None:
    cfg = RunConfig()
    assert cfg.threads == 0
    assert cfg.resolved().threads >= 1
    assert RunConfig(threads=3).resolved().threads == 3


@pytest.mark.parametrize(
    "kwargs",
    [
        {"precision": "int4"},
        {"fusion": "max"},
        {"batch": 0},
        {"threads": -1},
        {"provider": "rocm"},
        {"engine": "tvm"},
    ],
)
def test_invalid_values_are_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        RunConfig(**kwargs)  # type: ignore[arg-type]


def test_json_round_trip_ignores_unknown_keys() -> None:
    cfg = RunConfig(precision="int8-dynamic", batch=8, spinning=True)
    data = cfg.to_json() | {"future_knob": 1}
    assert RunConfig.from_json(data) == cfg


def test_describe_change_names_what_moved() -> None:
    old = RunConfig()
    assert RunConfig(precision="int8-dynamic").describe_change(old) == "INT8 dynamic"
    assert RunConfig(batch=8, fusion="off").describe_change(old) == "fusion off, batch 8"
    assert old.describe_change(old) == "no change"
    torch_compiled = RunConfig(engine="torch", precision="bf16")
    assert torch_compiled.describe_change(old) == "PyTorch compiled, BF16"
    eager = RunConfig(engine="torch", precision="bf16", fusion="off")
    assert eager.describe_change(torch_compiled) == "eager"
    assert old.describe_change(eager) == "ONNX Runtime, FP32, fusion all"
