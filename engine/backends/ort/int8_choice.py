"""The ONNX Runtime side of INT8 with an accuracy target (int8_target.py orders the
search): building each attempt with ORT's quantizer, scoring it against the FP32 model on
the evaluation inputs, timing it, ranking its nodes, and caching the choice per model,
target, evaluation data, calibration and instruction set."""

from __future__ import annotations

import dataclasses
import statistics
import tempfile
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

from engine import cache
from engine.backends.ort.activation_matmuls import activation_matmuls
from engine.backends.ort.inference_session import open_session, plan_session
from engine.backends.ort.int8_loo import leave_one_out
from engine.backends.ort.int8_sensitivity import node_errors
from engine.backends.ort.int8_target import (
    Attempt,
    Outcome,
    Search,
    kind_of,
    meet_target,
    speed_alternatives,
    starting_settings,
    summary,
)
from engine.backends.ort.mixed_heads import head_nodes
from engine.backends.ort.variants import (
    VARIANT_PARAMS,
    Reuse,
    build_variant,
)
from engine.config import RunConfig
from engine.events import Event, Notice, Progress, VariantReady, drive
from engine.hostinfo import cpu_isa, ort_version
from engine.measure.accuracy import AccuracyResult, compare_outputs
from engine.measure.interleave import Timed, honest_clock
from engine.measure.interleave import rank as interleaved
from engine.measure.output_parts import channel_groups
from engine.model.info import ModelInfo
from engine.model.inputs import Feeds

CHOICE_VERSION = 15  # 14: judged per output, part and task; "int8" tries both kinds; 15: pruning
TIME_S = 0.3  # timing per attempt: enough to rank settings whose speeds differ by 10%+
RACE_WINDOW_S = 0.25  # each variant's turn per interleaved round of the race
# Up to this many quantizable nodes, each is tried alone in FP32 (int8_loo.py: one session
# per node, no rebuild): on a MiniLM the node that matters (an FFN output fed by the [CLS]
# token's outlier) is first by this measure and invisible to the activation comparison
ONE_BY_ONE_LIMIT = 64
GAIN = 1e-4  # cosine gained by one node alone in FP32 that counts
RANK_SAMPLES = 8  # evaluation samples the node ranking runs on (MiniLM: 8 sentences)


def choose_int8(
    info: ModelInfo,
    config: RunConfig,
    calibration: Callable[[], Iterator[Feeds]] | None,
    calibration_id: str,
    calibration_count: int,
    eval_feeds: Sequence[Feeds],
    eval_id: str,
    gpu: bool,
    time_feed: Feeds | None = None,
    eval_text: str = "",
) -> Generator[Event, None, VariantReady]:
    """The INT8 variant that meets `config.min_cosine` on every check of every output
    (engine/measure/accuracy.py: worst sample's cosine per output and channel group, top-1
    agreement, detections kept), or the most accurate one, with a warning; its
    `details["int8"]` says how it was chosen and keeps every attempt. `precision` "int8"
    searches dynamic and static both. Timed on `time_feed` (the run's inputs; default the
    first evaluation batch); `eval_text` says what the evaluation samples were."""
    t0 = time.perf_counter()  # "built in" is the whole search's time, not its last build's
    precision = config.precision
    isa = cpu_isa()
    key = cache.cache_key(
        {
            "model": info.sha256,
            "precision": precision,
            "min_cosine": config.min_cosine,
            "eval": eval_id,
            "calibration": calibration_id,
            "isa": isa,
            "ort": ort_version(),
            "version": CHOICE_VERSION,
        }
    )

    reuse: list[Reuse] = []  # the search's, while its folder lives
    heads: list[str] = []  # nodes assembling mixed-scale outputs: FP32 under static INT8
    said: set[str] = set()  # the builds' notices so far

    def build(
        settings: dict[str, Any], excluded: list[str]
    ) -> Generator[Event, None, VariantReady]:
        variant = None
        settings = dict(settings)
        kind = str(settings.pop("precision", precision))
        if kind == "int8-static" and heads:
            excluded = [*excluded, *(n for n in heads if n not in excluded)]
        for ev in build_variant(
            info, kind, calibration, calibration_id, calibration_count, settings, excluded,
            reuse[0] if reuse else None,
        ):  # fmt: skip
            if isinstance(ev, VariantReady):
                variant = ev
            elif isinstance(ev, Notice):
                if ev.message not in said:  # each attempt's build says the same: once
                    said.add(ev.message)
                    yield ev
            else:
                yield ev
        assert variant is not None
        return variant

    hit = cache.cached_entry("int8-choice", key)
    if hit is not None:
        meta = cache.read_meta(hit)
        try:
            # the head the choice kept in FP32 (a static detector's), as it was chosen
            heads.extend(str(n) for n in meta.get("head_in_fp32") or [])
            variant = yield from build(dict(meta["settings"]), list(meta["excluded_nodes"]))
        except (KeyError, TypeError, ValueError):
            heads.clear()  # a damaged entry: choose again
        else:
            level = "info" if meta.get("met") else "warning"
            yield Notice(level, f"{summary(meta)} (chosen earlier on this machine)")
            return _with_details(variant, meta)

    plan = plan_session(config, gpu_present=gpu)
    base = open_session(info.path, plan_session(dataclasses.replace(config, precision="fp32"),
                                                gpu_present=gpu))  # fmt: skip
    reference = [base.session.run(None, f) for f in eval_feeds]
    names_out = [o.name for o in base.session.get_outputs()]
    base.session = None
    feed = time_feed if time_feed is not None else eval_feeds[0]
    mixed = [
        name for j, name in enumerate(names_out)
        if all(hasattr(r[j], "shape") for r in reference)
        and channel_groups([r[j] for r in reference]) is not None
    ]  # fmt: skip

    last: dict[str, Any] = {}  # the last session opened, by path: scored, then timed

    def session(path: str) -> Any:
        if path not in last:
            last.clear()
            last[path] = open_session(path, plan).session
        return last[path]

    results: dict[str, AccuracyResult] = {}  # each attempt's, by its file
    # each attempt's figure per evaluation batch: the node ranking runs on its worst batches
    # (the samples that miss the target; a MiniLM's worst text was not among the first 8)
    per_batch: dict[str, list[float]] = {}

    def score(variant: VariantReady) -> float:
        if variant.details.get("all_excluded"):  # every node in FP32: not INT8, never met
            return 0.0
        run = session(variant.path).run
        got = [run(None, f) for f in eval_feeds]
        result = compare_outputs(
            names_out, reference, got, vectors=info.vector_outputs, feeds=eval_feeds
        )
        results[variant.path] = result
        per_batch[variant.path] = [
            compare_outputs(names_out, [r], [g], vectors=info.vector_outputs, feeds=[f]).score
            for r, g, f in zip(reference, got, eval_feeds, strict=True)
        ]
        return result.score

    def timed(path: str) -> float:
        run = session(path).run
        return p50_ms(lambda: run(None, feed))

    fp32_plan = plan_session(dataclasses.replace(config, precision="fp32"), gpu_present=gpu)

    def race(
        pool: list[Attempt],
    ) -> Generator[Event, None, tuple[int, list[float], float, dict[str, Any]]]:
        """The variants that meet the target and FP32, in interleaved rounds (one session
        each, open together): the fastest that separates from the rest, or on a tie the
        most accurate (listed first)."""
        last.clear()
        runs = [open_session(a.variant.path, plan).session for a in pool]
        ref = open_session(info.path, fp32_plan).session
        cands = [Timed(_label(a), _caller(r, feed)) for a, r in zip(pool, runs, strict=True)]
        cands.append(Timed("fp32", _caller(ref, feed), reference=True))
        clock, why = honest_clock([config.threads], [config.spinning])
        ranking = interleaved(cands, clock=clock, window_s=RACE_WINDOW_S)
        n = 0
        while True:
            try:
                line = next(ranking)
            except StopIteration as stop:
                result = stop.value
                break
            n += 1
            yield Progress("variant", n, n + 1, f"timing side by side: {line}")
        runs.clear()
        wall = [_wall(result.by_index(i), clock) for i in range(len(pool))]
        out = result.to_json()
        out["clock_why"] = why
        speed, lo, hi = result.speedup(len(pool))
        out["speedup_fp32"] = {"median": speed, "spread": [lo, hi], "clock": clock}
        assert result.pick is not None
        return result.pick, wall, _wall(result.by_index(len(pool)), clock), out

    with tempfile.TemporaryDirectory(prefix="opscope-int8-") as tmp:
        reuse.append(Reuse(Path(tmp)))
        if mixed and precision in ("int8", "int8-static"):
            source = yield from reuse[0].prepare(info)
            heads.extend(head_nodes(str(source), mixed))
            if heads:
                yield Notice("info", f"static INT8 keeps {len(heads)} node(s) assembling "
                             f"{', '.join(mixed)} in FP32: its channels mix scales (boxes "
                             "beside scores), and one INT8 scale would round the small ones "
                             "to 0")  # fmt: skip
        floats: list[str] = []
        one_by_one: dict[str, list[tuple[list[str], float]]] = {}  # per INT8 kind

        def rank(
            variant: VariantReady, settings: dict[str, Any], excluded: list[str]
        ) -> Generator[Event, None, list[tuple[list[str], float]]]:
            if not floats:  # the model the quantizer saw: its node names are the ones to exclude
                src = reuse[0].source
                if src is None:  # (every build so far was cached)
                    src = drive(reuse[0].prepare(info))
                floats.append(str(src))
            kind = kind_of(settings, precision)
            types = VARIANT_PARAMS[kind].get("op_types")
            op_types = settings.get("op_types", types)  # the candidate's, if it narrows them
            names = _node_names(floats[0], op_types)
            if settings.get("activation_matmuls") is False:  # kept in FP32 already
                fp32 = set(activation_matmuls(floats[0]))
                names = [n for n in names if n not in fp32]
            # ranking orders (the attempts are scored on all): on the worst batches
            order = _worst_first(per_batch.get(variant.path), len(eval_feeds))
            picked = _first_rows([eval_feeds[i] for i in order], RANK_SAMPLES)
            few = picked
            few_ref = [reference[i] for i in order[: len(picked)]]
            one_by_one_fits = len(names) <= ONE_BY_ONE_LIMIT
            measured: list[tuple[list[str], float]] = []
            if kind == "int8-static" or not one_by_one_fits:
                # (dynamic INT8 folds nothing into a node: its units are single nodes, which
                # leave-one-out measures directly)
                measured = node_errors(
                    floats[0], variant.path, few, set(op_types) if op_types else None,
                    with_producers=kind == "int8-static",
                )  # fmt: skip
            if op_types:  # a unit's nodes the quantizer does not touch: nothing to gain
                known = set(names)
                measured = [([n for n in u if n in known], e) for u, e in measured]
                measured = [(u, e) for u, e in measured if u]
            if not one_by_one_fits:  # too many to try one by one
                return measured
            if kind not in one_by_one:  # once a kind: each node alone in FP32, the gain
                one_by_one[kind] = (yield from leave_one_out(
                    floats[0], variant.path, names, few,
                    lambda got: compare_outputs(
                        names_out, few_ref[: len(got)], got, vectors=info.vector_outputs,
                        feeds=few[: len(got)],
                    ).score,
                    Path(tmp) / f"loo-{kind}",
                ))  # fmt: skip
            # what helps alone, by its gain; and the groups the activations blame (a tensor
            # quantized at its producer needs producer and consumers kept together), by the
            # error they add; a single node that did not help alone is not tried again
            alone = one_by_one[kind]
            units = [u for u in alone if u[1] > GAIN] + [u for u in measured if len(u[0]) > 1]
            return sorted(units, key=lambda u: -u[1])

        ops = {op.split(".")[-1] for op in info.op_types}  # "com.microsoft.X" -> "X"
        start = starting_settings(precision, isa, ops)
        start_types = VARIANT_PARAMS[kind_of(start, precision)].get("op_types")
        how = Search(
            build,
            score,
            timed,
            rank,
            _quantizable(info.path, start.get("op_types", start_types)),
            info.path,
            start,
            race=race,
            alternatives=speed_alternatives(precision, isa, ops),
            op_types=ops,
        )
        outcome: Outcome = yield from meet_target(precision, config.min_cosine, isa, how)
        last.clear()
        shared = reuse.pop()
    details = outcome.details()
    chosen_result = results.get(outcome.chosen.variant.path)
    if chosen_result is not None:
        details["worst"] = chosen_result.worst_text()
        details["checks"] = chosen_result.checks
    details["data"] = eval_text
    details["head_in_fp32"] = heads if kind_of(outcome.chosen.settings, precision) == (
        "int8-static") else []  # fmt: skip
    details["search"] = {
        "build_s": time.perf_counter() - t0,
        "preprocessed": shared.preprocessed,
        "calibrations": shared.calibrations,
    }
    staging = cache.Staging("int8-choice", key)
    staging.commit(details)
    yield Notice("info" if outcome.met else "warning", summary(details))
    if outcome.ranking and outcome.ranking.get("line"):
        yield Notice("info", f"INT8 {outcome.ranking['line']}")
    slower = slower_than_fp32(outcome.ranking)
    if slower:
        yield Notice("warning", slower)
    chosen = dataclasses.replace(
        outcome.chosen.variant, build_s=time.perf_counter() - t0, cached=False
    )
    return _with_details(chosen, details)


def slower_than_fp32(ranking: dict[str, Any] | None) -> str | None:
    """A warning when the INT8 picked runs slower than FP32 beyond the race's spread (a
    small CNN whose Q/DQ overhead outweighs its integer kernels): INT8 buys nothing here."""
    speed = (ranking or {}).get("speedup_fp32") or {}
    spread = speed.get("spread") or [None, None]
    high = spread[1] if len(spread) == 2 else None
    if not isinstance(high, int | float) or high >= 1.0:
        return None
    return (
        f"the fastest INT8 that meets the target runs {speed.get('median', high):.2f}x FP32 "
        f"([{spread[0]:.2f}-{high:.2f}] over the race's rounds): FP32 is faster on this model "
        "and this CPU"
    )


def p50_ms(run: Callable[[], object], budget_s: float = TIME_S) -> float:
    """Median of back-to-back runs after a short warm-up."""
    for _ in range(3):
        run()
    samples: list[float] = []
    end = time.perf_counter() + budget_s
    while time.perf_counter() < end or len(samples) < 5:
        t0 = time.perf_counter()
        run()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def _worst_first(scores: list[float] | None, n: int) -> list[int]:
    """Batch indices, the lowest figure first (in order when there are no figures)."""
    if not scores or len(scores) != n:
        return list(range(n))
    return sorted(range(n), key=lambda i: scores[i])


def _first_rows(feeds: Sequence[Feeds], rows: int) -> list[Feeds]:
    """The first batches holding at least `rows` samples (each batch's leading dim)."""
    out: list[Feeds] = []
    n = 0
    for f in feeds:
        if n >= rows:
            break
        out.append(f)
        n += max((a.shape[0] for a in f.values() if a.ndim), default=1)
    return out


def _label(a: Attempt) -> str:
    """An attempt as the race names it: its settings and the nodes it keeps in FP32."""
    parts = [f"{k}={v}" for k, v in sorted(a.settings.items())] or ["defaults"]
    return f"{', '.join(parts)}; {len(a.excluded)} in FP32"


def _caller(session: Any, feed: Feeds) -> Callable[[], object]:
    return lambda: session.run(None, feed)


def _wall(s: Any, clock: str) -> float:
    """A standing's wall-time median, whichever clock ranked it."""
    return float(s.median if clock == "wall" else s.other_median)


def _node_names(path: str, op_types: Sequence[str] | None) -> list[str]:
    """Named nodes the quantizer may touch (of its op types; static: every node)."""
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    wanted = set(op_types) if op_types else None
    return [n.name for n in graph.node if n.name and (wanted is None or n.op_type in wanted)]


def _quantizable(path: str, op_types: Sequence[str] | None) -> int:
    """Nodes the quantizer may touch: of its op types, or (static: all types) every node."""
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    if op_types is None:
        return len(graph.node)
    return sum(1 for n in graph.node if n.op_type in set(op_types))


def _with_details(variant: VariantReady, int8: dict[str, Any]) -> VariantReady:
    return dataclasses.replace(variant, details={**variant.details, "int8": int8})
