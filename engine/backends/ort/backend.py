"""The ONNX Runtime backend: load, make inputs, build the variant, open an inference
session, and run, compare or profile it. PyTorch files are exported to ONNX first."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine import cache
from engine.backends.base import PrepareRequest, feed_shapes
from engine.backends.ort.fp16_cpu import fp16_cpu_warning, optimized_graph
from engine.backends.ort.generated import (
    GeneratedFeeds,
    reference_session,
    rejected,
    rejection,
)
from engine.backends.ort.inference_session import (
    OpenSession,
    gpu_present,
    inference_fn,
    open_session,
    plan_session,
)
from engine.backends.ort.int8_choice import choose_int8
from engine.backends.ort.profiler import profile_pass
from engine.backends.ort.variants import build_variant
from engine.config import RunConfig
from engine.events import Event, ModelLoaded, Notice, Progress, RunStarted, VariantReady
from engine.measure.accuracy import compare_outputs, generated_samples
from engine.model.eval_data import EvalData, npz_files, read_eval_data
from engine.model.info import ModelInfo, files_sha256, load_model
from engine.model.inputs import Feeds, InputPlan, load_npz, plan_inputs
from engine.model.memory_need import check_need, run_shapes
from engine.model.realistic_inputs import Realistic, find_tokenizer, realistic_samples
from engine.model.sample_axis import Axes, batch_of, fit_batch, sample_axes

if TYPE_CHECKING:
    import onnx


@dataclass
class OrtPrepared:
    """A model loaded, its inputs made, its variant built and an inference session open."""

    info: ModelInfo
    config: RunConfig
    feeds: Feeds
    variant: VariantReady
    opened: OpenSession
    gpu: bool
    feeds_for: Callable[[int], Feeds]
    eval_data: EvalData | None = None  # the user's samples (all of them), when given
    # without them: generated samples that look like the model's inputs, and what they are
    generated_eval: list[Feeds] = field(default_factory=list, repr=False)
    eval_text: str = ""
    _run_once: Callable[[], object] | None = field(default=None, repr=False)
    # the variant's cache entry, held while this runs and profiles it (never evicted)
    lease: cache.Lease | None = field(default=None, repr=False)

    @property
    def batch(self) -> int:
        return batch_of(self.feeds, self.axes)

    @property
    def axes(self) -> Axes:
        """Each input's sample axis: as the user's samples were cut, else the signature's."""
        return self.eval_data.axes if self.eval_data else sample_axes(self.info)

    @property
    def provider_used(self) -> str:
        return self.opened.provider_used

    def make_feeds(self, index: int) -> Feeds:
        return self.feeds_for(index)

    def run_once(self) -> object:
        """One timed inference on `feeds` (IO binding on a GPU: no host copies timed)."""
        if self._run_once is None:
            self._run_once = inference_fn(self.opened, self.feeds)
        return self._run_once()

    def run_batch(self, feeds: Feeds) -> list[np.ndarray]:
        """One inference on any feeds of the model's signature; outputs on the host."""
        return list(self.opened.session.run(None, feeds))

    def accuracy(self, generated: bool) -> Iterator[Event]:
        """Outputs of this variant vs the FP32 model (same fusion, same provider), on every
        sample the user gave (with their labels), else on generated batches."""
        data = self.eval_data
        batches = data.batches if data else self.generated_eval
        said = f"comparing with the FP32 model on {self.eval_text}"
        yield Progress("accuracy", 0, len(batches), said)
        base_cfg = dataclasses.replace(self.config, precision="fp32")
        base = open_session(self.info.path, plan_session(base_cfg, gpu_present=self.gpu))
        ref, got = [], []
        for i, f in enumerate(batches):
            ref.append(base.session.run(None, f))
            got.append(self.opened.session.run(None, f))
            if i % 16 == 15:
                yield Progress("accuracy", i + 1, len(batches), "comparing with the FP32 model")
        names = [o.name for o in self.opened.session.get_outputs()]
        labels = data.labels if data else None
        result = compare_outputs(names, ref, got, labels, self.info.vector_outputs, batches)
        yield dataclasses.replace(result, data=self.eval_text)

    def profile(self, runs: int, timed_mean_ms: float | None) -> Iterator[Event]:
        """A separate session with ONNX Runtime's profiler on (timing never sees it)."""
        return profile_pass(
            self.variant.path,
            self.config,
            self.feeds,
            runs=runs,
            gpu_present=self.gpu,
            timed_mean_ms=timed_mean_ms,
        )

    def close(self) -> None:
        self._run_once = None
        self.opened.session = None
        if self.lease is not None:
            self.lease.release()
            self.lease = None


def prepare(req: PrepareRequest) -> Generator[Event, None, OrtPrepared]:
    """Load, make inputs, build the variant, open the session, check the inputs fit."""
    exported: dict[str, object] = {}
    from engine.backends import exporter_for  # the registry, which imports this package

    work, given = req.workload, req.workload.inputs
    path = work.model  # the ONNX file run
    exporter = exporter_for(path)
    if exporter is not None:  # another backend's file (PyTorch): exported once (cached)
        path, exported = yield from exporter.export(path, work.config.batch, given.shapes)
        req = dataclasses.replace(req, workload=dataclasses.replace(work, model=path))
    yield Progress("load", 0, None, f"loading {Path(path).name}")
    model, info = load_model(path)
    if exported:  # consumers see the PyTorch file; the engine keeps running the ONNX one
        yield ModelLoaded(
            dataclasses.replace(
                info, path=str(exported["source"]), sha256=str(exported["source_sha256"])
            )
        )
    else:
        yield ModelLoaded(info)
    if info.checker_warning:
        yield Notice("warning", f"onnx checker: {info.checker_warning}")
    config = work.config.resolved()

    eval_data: EvalData | None = None
    if given.inputs_npz:
        eval_data = _eval_data(given.inputs_npz, given.labels_npy, info, config.batch)
        feeds = fit_batch(eval_data.batches[0], info, config.batch, eval_data.axes)
        check_need(model, info, run_shapes(feeds), f"inputs from {Path(given.inputs_npz).name}")
        yield Notice("info", _eval_note(eval_data, given.inputs_npz))

        def make_feeds(i: int) -> Feeds:
            return feeds
    else:
        plan = plan_inputs(info, config.batch, given.shapes, given.dims)
        for note in plan.notes:
            yield Notice("info", f"input dim {note}")
        generated = GeneratedFeeds(model, info, plan, req.seed)
        if config.precision.startswith("int8"):  # its search runs them before the session
            grown = generated.fit(reference_session(path), config.batch, given.shapes)
            if grown:
                yield Notice("warning", grown)
        feeds = generated.feeds(0)
        make_feeds = generated.feeds

    variant_plan = None if eval_data is not None else generated.plan  # INT8's shapes
    if req.variant_shapes is not None and eval_data is None and config.precision.startswith("int8"):
        at = GeneratedFeeds(
            model, info, plan_inputs(info, config.batch, req.variant_shapes), req.seed
        )
        at.fit(reference_session(path), config.batch, req.variant_shapes)
        variant_plan = at.plan
    tokenizer = find_tokenizer(path, given.tokenizer) if eval_data is None else None
    realistic: Realistic | None = None
    generated_eval: list[Feeds] = []
    if eval_data is not None:
        eval_text = f"your data: {_eval_note(eval_data, given.inputs_npz or '')[12:]}"
    else:
        assert variant_plan is not None
        realistic = yield from _realistic(
            model, info, variant_plan, config.batch, req, tokenizer, "evaluation"
        )
        generated_eval, eval_text = realistic.batches, realistic.description
        if realistic.kind != "random":
            yield Notice("info", f"accuracy on {eval_text}")
    calibration, cal_id, cal_count = yield from _calibration_source(
        req, info, config, model, variant_plan, tokenizer
    )
    if config.precision in ("int8", "int8-static") and given.calibration_npz is None:
        plain = ":random:" in cal_id  # (random inputs, not samples that look like real ones)
        yield Notice(
            "warning" if plain else "info",
            f"INT8 static calibrated on generated {'data' if plain else 'samples'}: give real "
            "samples (--calibration FILE.npz, or Calibration data… in the window) for "
            "ranges that fit your traffic",
        )
    gpu = config.provider != "cpu" and gpu_present()
    variant: VariantReady | None = None
    if config.precision.startswith("int8"):  # one that meets config.min_cosine
        if eval_data is None:
            assert realistic is not None
            eval_feeds = generated_eval
            eval_id = f"generated:seed{req.seed}:{_identity(realistic, tokenizer)}"
        else:  # the search scores each attempt on up to SEARCH_SAMPLES of them
            eval_feeds = _first_samples(eval_data, SEARCH_SAMPLES)
            eval_id = "npz:" + files_sha256(npz_files(str(given.inputs_npz)))
        variant = yield from choose_int8(
            info, config, calibration, cal_id, cal_count, eval_feeds, eval_id, gpu,
            time_feed=feeds, eval_text=eval_text,
        )  # fmt: skip
    else:
        for ev in build_variant(info, config.precision, calibration, cal_id, cal_count):
            if isinstance(ev, VariantReady):
                variant = ev
            else:
                yield ev
    assert variant is not None

    yield Progress("session", 0, None, "creating the inference session")
    with tempfile.TemporaryDirectory(prefix="opscope-opt-") as tmp:
        optimized = str(Path(tmp) / "optimized.onnx")
        splan = plan_session(config, gpu_present=gpu, optimized_model_path=optimized)
        opened = open_session(variant.path, splan)
        nodes, casts = optimized_graph(optimized, casts=config.precision == "fp16")
        fp16_cpu = fp16_cpu_warning(config, opened.provider_used, casts)
    variant = dataclasses.replace(variant, nodes=nodes)
    if exported:
        variant = dataclasses.replace(
            variant, details={**variant.details, "torch_export": exported}
        )
    yield variant
    for note in splan.notes:
        yield Notice("info", note)
    if fp16_cpu:
        yield Notice("warning", fp16_cpu)
    if opened.fell_back:
        yield Notice(
            "warning",
            f"requested {opened.requested} but ONNX Runtime is running on "
            f"{opened.provider_used}"
            + (f": {opened.fallback_reason}" if opened.fallback_reason else ""),
        )
    # one inference checks the inputs fit: a model's first run can be long (a Loop of
    # 10^12 iterations never ends), so it is a step of its own that the printer can watch
    yield Progress("session", 0, None, "running the model once on its inputs")
    if eval_data is None:
        grown = generated.fit(opened.session, config.batch, given.shapes)
        if grown:
            yield Notice("warning", grown)
            feeds = generated.feeds(0)
    else:
        why = rejection(opened.session, feeds)
        if why is not None:
            raise rejected(info, feeds, why)
    yield RunStarted(
        config,
        opened.requested,
        opened.provider_used,
        opened.providers_obtained,
        feed_shapes(feeds),
        batch_of(feeds, eval_data.axes if eval_data else sample_axes(info)),
        opened.create_s,
    )
    lease = cache.lease(Path(variant.path).parent)
    return OrtPrepared(
        info, config, feeds, variant, opened, gpu, make_feeds, eval_data,
        generated_eval=generated_eval, eval_text=eval_text, lease=lease,
    )  # fmt: skip


SEARCH_SAMPLES = 256  # samples each INT8 attempt is scored on (accuracy uses them all)


def _eval_data(path: str, labels: str | None, info: ModelInfo, batch: int) -> EvalData:
    """The samples of a file or folder (and their `labels`), in batches of the run's batch
    (a model with a fixed batch takes its own), along each input's sample axis."""
    return read_eval_data(path, lambda f: load_npz(f, info), info, batch, labels)


def _eval_note(data: EvalData, path: str) -> str:
    labels = " with their labels" if data.labels is not None else ""
    cut = (
        f" (the first {data.samples:,}; {data.truncated:,} more left out)" if data.truncated else ""
    )
    n = f"{data.samples:,} sample" + ("" if data.samples == 1 else "s")
    return f"accuracy on {n}{labels} from {Path(path).name}{cut}"


def _first_samples(data: EvalData, limit: int) -> list[Feeds]:
    out, n = [], 0
    for b in data.batches:
        if n >= limit:
            break
        out.append(b)
        n += batch_of(b, data.axes)
    return out


def _calibration_source(
    req: PrepareRequest,
    info: ModelInfo,
    config: RunConfig,
    model: onnx.ModelProto,
    plan: InputPlan | None,
    tokenizer: Path | None,
) -> Generator[Event, None, tuple[Callable[[], Iterator[Feeds]] | None, str, int]]:
    if config.precision not in ("int8", "int8-static"):
        return None, "", 0
    given = req.workload.inputs
    if given.calibration_npz:
        data = _eval_data(given.calibration_npz, None, info, config.batch)

        def from_file() -> Iterator[Feeds]:
            yield from data.batches

        sha = files_sha256(npz_files(given.calibration_npz))
        return from_file, f"npz:{sha}:batch{config.batch}", len(data.batches)
    if plan is None:  # the user's evaluation data, no calibration data: plan from the model
        plan = plan_inputs(info, config.batch, given.shapes, given.dims)
    samples = yield from _realistic(model, info, plan, config.batch, req, tokenizer, "calibration")
    # (every calibration batch one shape: ORT's Percentile and Entropy stack them)

    def generated() -> Iterator[Feeds]:
        yield from samples.batches

    cal_id = f"generated:seed{req.seed}:{_identity(samples, tokenizer)}"
    return generated, cal_id, len(samples.batches)


def _realistic(
    model: onnx.ModelProto,
    info: ModelInfo,
    plan: InputPlan,
    batch: int,
    req: PrepareRequest,
    tokenizer: Path | None,
    purpose: str,
) -> Generator[Event, None, Realistic]:
    """Generated samples that look like the model's inputs (engine/model/realistic_inputs),
    checked by running the first batch: a model that rejects them (a text shorter than it
    accepts) gets the plain generated inputs of the run's plan instead, with a notice."""
    count = generated_samples()  # (calibration: as many other samples; 64 by default)
    yield Progress("inputs", 0, None, f"making {count} {purpose} samples")
    made = realistic_samples(
        model, info, plan, count, batch, req.seed, purpose, tokenizer,
        uniform=purpose == "calibration",
    )  # fmt: skip
    if made.kind == "random":
        return made
    why = rejection(reference_session(req.workload.model), made.batches[0])
    if why is None:
        return made
    plain = GeneratedFeeds(model, info, plan, req.seed)
    batches = [plain.feeds(i + (0 if purpose == "evaluation" else 1000))
               for i in range(max(1, count // max(batch, 1)))]  # fmt: skip
    said = f"generated: {len(batches)} batch(es) of random inputs"
    yield Notice("warning", f"the model rejected {made.description} ({why}): {purpose} on "
                 f"{said[11:]} instead")  # fmt: skip
    return Realistic(batches, len(batches) * batch, said, "random")


def _identity(made: Realistic, tokenizer: Path | None) -> str:
    """What makes generated samples what they are (a cache key's part): their description,
    shapes and the tokenizer's content."""
    shapes = ";".join(str(feed_shapes(b)) for b in made.batches[:1] + made.batches[-1:])
    words = files_sha256([tokenizer])[:16] if tokenizer is not None and made.kind == "texts" else ""
    return f"{REALISTIC_VERSION}:{made.kind}:{made.samples}:{shapes}:{words}:{made.description}"


REALISTIC_VERSION = 1
