"""A new model starts from the FP32 defaults unless the user carries settings over."""

from app.live.model_switch import config_for_new_model
from engine.config import RunConfig

TUNED = RunConfig(precision="int8-static", fusion="off", batch=4, min_cosine=0.995)


def test_a_new_model_starts_from_fp32_defaults_and_says_what_was_left() -> None:
    config, said = config_for_new_model(TUNED, carry=False, path="/m/det.onnx")
    assert config == RunConfig(min_cosine=0.995)  # the accuracy target is the window's
    assert said.startswith("new model: FP32 defaults")
    assert "INT8 static, fusion off, batch 4" in said


def test_carrying_settings_over_keeps_them_and_lists_them() -> None:
    config, said = config_for_new_model(TUNED, carry=True, path="/m/det.onnx")
    assert config == TUNED
    assert said == "carried over to the new model: INT8 static, fusion off, batch 4"


def test_nothing_to_say_when_already_on_the_defaults() -> None:
    assert config_for_new_model(RunConfig(), carry=False, path="/m/a.onnx") == (RunConfig(), "")
