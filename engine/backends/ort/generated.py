"""Generated inputs for an ONNX model, checked by running them once: when the model
rejects the default sizes (an audio window longer than 16 samples), larger ones are tried
for the dims the user did not set (engine/model/input_growth.py) and the size that ran is
said; the user's own shapes and data are never changed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.backends.ort.inference_session import explain_ort_error, stoppable_run_options
from engine.errors import InputError, ModelError
from engine.model.info import ModelInfo
from engine.model.input_growth import grow
from engine.model.inputs import Feeds, InputPlan, describe_feeds, generate_inputs

if TYPE_CHECKING:
    import onnx


class GeneratedFeeds:
    """Seeded inputs of the current plan (`feeds(i)` for the i-th batch); the plan may
    grow once, before anything is timed."""

    def __init__(self, model: onnx.ModelProto, info: ModelInfo, plan: InputPlan, seed: int):
        self.model, self.info, self.plan, self.seed = model, info, plan, seed
        self._first = generate_inputs(model, info, plan, seed=seed)

    def feeds(self, i: int) -> Feeds:
        if i == 0:
            return self._first
        return generate_inputs(self.model, self.info, self.plan, seed=self.seed + i)

    def fit(self, session: Any, batch: int, overrides: Mapping[str, tuple[int, ...]]) -> str | None:
        """Run the inputs once on `session`; when rejected, grow the plan until the model
        runs (a note saying so is returned) or raise the rejection as an InputError."""
        why = rejection(session, self._first)
        if why is None:
            return None
        if not self.plan.defaulted:
            raise rejected(self.info, self._first, why)

        def rejects(plan: InputPlan) -> str | None:
            return rejection(session, generate_inputs(self.model, self.info, plan, self.seed))

        grown = grow(self.info, self.plan, batch, overrides, rejects)
        if grown is None:
            raise rejected(self.info, self._first, why, tried=True)
        before, self.plan = self.plan, grown.plan
        self._first = generate_inputs(self.model, self.info, grown.plan, seed=self.seed)
        return grown.note(why, before)


def rejection(session: Any, feeds: Feeds) -> str | None:
    """Why the model cannot run `feeds` (one inference, ONNX Runtime's log kept quiet);
    None when it ran."""
    quiet = stoppable_run_options()  # its message is folded into our line, never printed raw
    try:
        session.run(None, feeds, quiet)
    except Exception as exc:
        return explain_ort_error(exc, "run")
    return None


def rejected(info: ModelInfo, feeds: Feeds, why: str, *, tried: bool = False) -> InputError:
    more = "; larger sizes for the dims you did not set failed too" if tried else ""
    return InputError(
        f"the model rejected inputs {describe_feeds(feeds)}: {why}{more}; "
        "set shapes with --shape NAME=AxB or give real data with --inputs FILE.npz",
        info.path,
    )


def reference_session(path: str) -> Any:
    """A plain CPU session of the original model, to check generated inputs before an
    INT8 search runs them (that search runs the model before the timed session exists)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 4  # its refusal is our one line, never ORT's log besides
    try:
        return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # a model ONNX Runtime refuses (a weight's bytes damaged)
        raise ModelError(explain_ort_error(exc), path) from exc
