import pytest

from engine.backends import describe_change
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
        {"engine": "Not An Engine"},
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
    assert describe_change(RunConfig(precision="int8-dynamic"), old) == "INT8 dynamic"
    assert describe_change(RunConfig(batch=8, fusion="off"), old) == "fusion off, batch 8"
    assert describe_change(old, old) == "no change"
    torch_compiled = RunConfig(engine="torch", precision="bf16")
    assert describe_change(torch_compiled, old) == "PyTorch compiled, BF16"
    eager = RunConfig(engine="torch", precision="bf16", fusion="off")
    assert describe_change(eager, torch_compiled) == "eager"
    assert describe_change(old, eager) == "ONNX Runtime, FP32, fusion all"
