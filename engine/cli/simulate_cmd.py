"""`opscope simulate`: predict serving with the discrete-event simulator, calibrated on the
real engine (a model file) or on what a session recorded (FILE.opscope[:ID])."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

import numpy as np

from engine import interrupt
from engine.cli.common import EXIT_OK, write_json
from engine.cli.printer import LivePrinter
from engine.cli.serve_cmds import (
    Prepare,
    describe_run,
    policy_from_args,
    print_serving,
    traffic_from_args,
    yield_model,
)
from engine.cli.serve_replay import Replay, fill_serving_args, is_session_ref, read_replay
from engine.cli.simulate_print import print_answers, print_honesty, print_replayed
from engine.errors import ConfigError
from engine.events import Event, Notice, RunEnded, RunStarted, ServingSummary
from engine.measure.contention import Window
from engine.serve.batching import BatchPolicy
from engine.serve.loop import ServingLoop
from engine.serve.records import (
    ServeRecords,
    latency_batch,
    served_requests,
    steady_ok,
    summarize,
    timing_done,
)
from engine.serve.setup import Serving, check_batch_fits, prepare_serving, warm, warmup_sizes
from engine.serve.sim.calibration import calibration_context, load_or_calibrate
from engine.serve.sim.capacity_search import (
    Scenario,
    capacity_curve,
    check_reachable,
    max_rate_on,
    slo_floor_ms,
    tune_batching,
)
from engine.serve.sim.service import ServiceModel
from engine.serve.sim.simulate import simulate
from engine.serve.sim.slow_stretches import stretches_text, summary
from engine.serve.sim.what_if_flags import calibration_line, flags, range_flags
from engine.serve.summary import ANSWER_KEYS, figures, hit_rate, serving_started
from engine.serve.traffic.schedule import TrafficSpec, make_schedule
from engine.session.recording import recording

SEARCH_REQUESTS = 20_000  # requests per simulated trial in --find, --tune-batching, --curve
DURATION_S = 60.0  # simulated seconds when neither --duration nor a recorded run says
TUNE_BATCHES = (1, 2, 4, 8, 16, 32)
TUNE_DELAYS_MS = (0.0, 1.0, 2.0, 5.0, 10.0)
TUNE_INSTANCES = (1, 2)


class Calibrated:
    """Where the service times come from: a model calibrated here (`serving` set, so
    --confirm can serve it), or a recorded simulated run's calibration (no model needed)."""

    def __init__(
        self,
        args: argparse.Namespace,
        policy: BatchPolicy,
        printer: LivePrinter,
        replay: Replay | None,
    ) -> None:
        self.args, self.printer = args, printer
        self.services: dict[int, ServiceModel] = {}
        self.prep: Prepare | None = None
        self.serving: Serving | None = None
        self.replay = replay
        stored = replay.serving.calibration if replay else None
        if replay is not None and stored is not None:
            service = ServiceModel.from_json(stored)
            self.services[int(service.context.get("instances") or policy.instances)] = service
            self.top = self.timed = max(service.sizes)
            self.model_path = replay.run.model_path or replay.ref
            return
        if replay is not None:  # a load run: calibrate its model, as it was configured
            path = replay.run.model_path
            if not path or not Path(path).is_file():
                raise ConfigError(
                    f"{replay.label} stored no calibration (it served the real engine) and "
                    f"its model {path or '(unknown)'} is not on this machine: simulate the "
                    "model file, or a simulate run of the same model"
                )
            args.model = path
        self.model_path = args.model
        self.prep = Prepare(args, printer, config=replay.run.config if replay else None)
        # tuning searches batch sizes up to --max-batch when given, else up to 32
        tune_top = policy.max_batch if policy.max_batch > 1 else max(TUNE_BATCHES)
        top = tune_top if args.tune_batching else policy.max_batch
        self.serving = prepare_serving(
            self.prep.prepared,
            dataclasses.replace(policy, max_batch=top),
            args.model,
            timed_only=True,
            warm_all=False,  # the calibration warms the sizes it times; --confirm the rest
        )
        for note in self.serving.notices:
            printer.feed(note)
        self.top = self.serving.policy.max_batch
        self.timed = self.serving.largest_timed()
        cost = self.serving.cost
        if self.timed < self.top and cost is not None:
            printer.feed(
                Notice(
                    "info",
                    f"batches are timed up to {self.timed:,} and extrapolated beyond: "
                    f"{cost.describe(self.top)} each to time",
                )
            )

    def service_for(self, instances: int) -> ServiceModel:
        if instances not in self.services:
            if self.prep is None or self.serving is None:
                have = ", ".join(str(k) for k in sorted(self.services))
                raise ConfigError(
                    f"the recorded calibration was measured with {have} instance(s); "
                    f"{instances} need the model file (simulate the model itself)"
                )
            prep = self.prep
            context = calibration_context(
                prep.model.info.sha256 if prep.model else "",
                prep.prepared.config.to_json(),
                prep.prepared.provider_used,
                self.timed,
                instances,
            )
            with interrupt.deferred():  # Ctrl-C stops it between batches, threads joined
                service = yield_model(
                    load_or_calibrate(
                        self.serving, context, self.args.recalibrate, interrupt.received.is_set
                    ),
                    self.printer,
                )
            if service is None:
                stopped = "calibration stopped before it ended: nothing was cached"
                self.printer.feed(Notice("warning", stopped))
                raise KeyboardInterrupt(interrupt.signal_name or "SIGINT")
            self.services[instances] = service
        return self.services[instances]

    def instance_choices(self) -> list[int]:
        return list(TUNE_INSTANCES) if self.prep is not None else sorted(self.services)

    def header(self) -> dict[str, Any]:
        if self.prep is not None:
            return self.prep.header()
        run = self.replay.run if self.replay else None
        return {
            "model": {"path": self.model_path, "name": run.model_name if run else None},
            "config": run.config.to_json() if run and run.config else None,
            "provider_used": run.provider_used if run else None,
        }

    def facts(self) -> list[Event]:
        """What a session needs to file the simulated run."""
        if self.prep is not None:
            return self.prep.facts
        run = self.replay.run if self.replay else None
        if run is None or run.config is None:
            return []
        return [
            RunStarted(
                run.config,
                run.provider_requested or "",
                run.provider_used or "",
                run.providers,
                {},
                run.batch or 1,
                0.0,
            )
        ]

    def close(self) -> None:
        if self.prep is not None:
            self.prep.prepared.close()


def cmd_simulate(args: argparse.Namespace) -> int:
    replay = read_replay(args.model) if is_session_ref(args.model) else None
    fill_serving_args(args, replay)
    if args.duration is None:
        args.duration = DURATION_S
    if (args.find or args.tune_batching) and args.slo_p99 is None:
        raise ConfigError("--find and --tune-batching need --slo-p99 MS")
    if args.confirm and not args.find:
        raise ConfigError("--confirm goes with --find max-rate")
    spec, schedule = traffic_from_args(args)
    if spec.closed and (args.find or args.tune_batching or args.curve):
        raise ConfigError("--find, --tune-batching and --curve scale a rate: not closed:N")
    # a trace is scaled by replaying it faster or slower (its arrivals' shape kept)
    policy = policy_from_args(args)
    printer = LivePrinter()
    try:
        source = Calibrated(args, policy, printer, replay)
        if args.confirm and source.serving is None:
            raise ConfigError("--confirm serves the real engine: give the model file")
        top = source.top
        if source.prep is not None:
            policy = dataclasses.replace(
                policy,
                max_batch=min(policy.max_batch, top),
                preferred=tuple(p for p in policy.preferred if p <= top),
            )
        elif policy.max_batch > top:
            printer.feed(
                Notice(
                    "warning",
                    f"the recorded calibration timed batches up to {top}: larger ones are "
                    "extrapolated from the last two sizes",
                )
            )
        tune_batches = [b for b in TUNE_BATCHES if b < top] + [top]
        service = source.service_for(policy.instances)
        result = {**source.header(), **describe_run(spec, policy, args)}
        rec = simulate(
            schedule,
            policy,
            service,
            cache_size=args.cache,
            closed_clients=spec.clients if spec.closed else 0,
            closed_requests=args.closed_requests if spec.closed else 0,
            seed=args.seed,
            slow_stretches=args.slow_stretches,
        )
        result.update(summarize(rec, args.warmup_s, args.slo_p99))
        result["simulated"] = True
        result["calibration"] = _calibration_json(service)
        if spec.closed:  # a closed loop never runs past capacity: its clients wait
            result.update({"past_capacity": False, "utilisation": None,
                           "flags": range_flags(service, policy)})  # fmt: skip
        else:
            result.update(flags(spec.mean_rate(), result, service, policy))
        if replay is not None:
            result["replayed"] = _replayed(replay)
        hit_rate(result)
        if args.find or args.tune_batching:  # before any search: one line, not no end
            services = [service] + ([source.service_for(k) for k in source.instance_choices()]
                                    if args.tune_batching else [])  # fmt: skip
            repeat = args.repeat if args.cache else 0.0
            check_reachable(args.slo_p99, min(slo_floor_ms(s, repeat) for s in services))
        work = Scenario(
            spec, args.requests or SEARCH_REQUESTS, args.seed, args.cache, args.repeat,
            args.warmup_s, args.slow_stretches,
        )  # fmt: skip
        curve = None
        if args.curve or args.find:  # the max rate is read off the curve (the one printed)
            points = 16 if args.curve else 12
            curve = capacity_curve(work, policy, service, points, slo_ms=args.slo_p99)
        if args.find and curve is not None:
            got = max_rate_on(work, policy, service, args.slo_p99, curve)
            curve, rate = got.curve, got.rate
            result["max_rate"] = rate
            result["find"] = {"slo_p99_ms": args.slo_p99, "at_max_rate": got.summary,
                              "steps": got.tried, "beyond": got.beyond}  # fmt: skip
            if args.confirm and rate > 0 and source.serving is not None:
                result["find"]["confirmed"] = _confirm(
                    service, source.serving, spec, policy, rate, args, printer
                )
        if args.tune_batching:
            outcome = yield_model(
                tune_batching(work, policy, source.service_for, args.slo_p99, tune_batches,
                              list(TUNE_DELAYS_MS), source.instance_choices()),
                printer,
            )  # fmt: skip
            result.update(outcome)
        if args.curve:
            result["curve"] = curve
        if args.session:  # a run of kind simulate: every predicted request and batch
            _record(args, source, rec, result, service)
        source.close()
    finally:
        printer.close()
    out = sys.stdout if args.json != "-" else sys.stderr
    print_serving(result, out)
    print_honesty(result, out)
    if args.slow_stretches:
        st = result["calibration"]["slow_stretches"]
        result["slow_stretches"] = bool(st)
        print(f"service    {stretches_text(st)}", file=out)
    print_replayed(result, out)
    print_answers(result, out)
    if args.session:
        print(f"recorded   {args.session} (run kind simulate: every predicted request and "
              "batch)", file=out)  # fmt: skip
    if args.json:
        write_json(args.json, result)
    return EXIT_OK


def _replayed(replay: Replay) -> dict[str, Any]:
    """The recorded run simulated again, with what it measured (or predicted)."""
    summary = replay.serving.summary or {}
    machine = summary.get("machine") if isinstance(summary.get("machine"), dict) else {}
    return {
        "contention": (machine or {}).get("contention"),
        "session": replay.ref,
        "run": replay.run.id,
        "kind": replay.run.kind,
        "simulated": replay.serving.simulated,
        "latency_ms": summary.get("latency_ms"),
        "throughput": summary.get("throughput"),
    }


def _record(
    args: argparse.Namespace,
    source: Calibrated,
    rec: ServeRecords,
    result: dict[str, Any],
    service: ServiceModel,
) -> None:
    with recording(args.session, model_path=source.model_path, kind="simulate") as record:
        for ev in source.facts():
            record(ev)
        record(serving_started(result, args.warmup_s, service.to_json()))
        record(served_requests(rec, np.arange(len(rec))))
        record(latency_batch(rec, steady_ok(rec, args.warmup_s)))
        record(timing_done(rec, args.warmup_s))
        answers = {k: result[k] for k in ANSWER_KEYS if k in result}
        record(ServingSummary(figures(result), answers))
        record(RunEnded("ok"))


def _calibration_json(service: ServiceModel) -> dict[str, Any]:
    ctx = service.context
    return {
        "sizes": service.sizes,
        "median_ms": {str(s): service.median(s) * 1e3 for s in service.sizes},
        "samples": {str(s): int(service.samples[s].size) for s in service.sizes},
        "instances": ctx.get("instances"),
        "provider": ctx.get("provider"),
        "cpu": ctx.get("cpu"),
        "slow_stretches": summary(service.stretches),
        # how busy the machine was while it was measured (None: before OpScope measured it)
        "contention": service.contention.to_json() if service.contention else None,
        "contention_line": calibration_line(service.contention),
    }


def _confirm(
    service: ServiceModel,
    serving: Serving,
    spec: TrafficSpec,
    policy: BatchPolicy,
    rate: float,
    args: argparse.Namespace,
    printer: LivePrinter,
) -> dict[str, Any]:
    """Serve the found rate on the real engine for `--confirm` seconds: measured against
    predicted, on the same schedule; whether the real p99 met the SLO, and how much slower
    than calibrated the real batches ran (1.1: 10% slower; what a miss usually comes from)."""
    seconds = float(args.confirm)
    scaled = spec.scaled(rate / spec.mean_rate())
    schedule = make_schedule(scaled, seconds + args.warmup_s, args.seed, args.repeat)
    check_batch_fits(serving, policy.max_batch, policy.instances, args.model)
    serving = dataclasses.replace(serving, policy=policy)
    warm(serving, warmup_sizes(policy.max_batch), args.model)  # every shape the loop forms
    loop = ServingLoop(serving.run_batch, serving.request_feeds, schedule, policy,
                       cache_size=args.cache)  # fmt: skip
    window = Window()
    for ev in loop.run():
        printer.feed(ev)
    contention = window.done()
    measured = summarize(loop.records(), args.warmup_s)
    predicted = summarize(
        simulate(
            schedule,
            policy,
            service,
            cache_size=args.cache,
            seed=args.seed,
            slow_stretches=args.slow_stretches,
        ),
        args.warmup_s,
    )
    rec = loop.records()
    p99 = measured["latency_ms"]["p99"]
    return {
        "rate": rate,
        "seconds": seconds,
        "measured": {k: measured[k] for k in ("requests", "latency_ms", "throughput")},
        "predicted": {k: predicted[k] for k in ("requests", "latency_ms", "throughput")},
        "slo_p99_ms": args.slo_p99,
        "meets_slo": bool(p99 <= args.slo_p99),
        "service_ratio": service.speed_ratio(rec.batch_size, rec.batch_end - rec.batch_start),
        "contention": contention.to_json() if contention else None,
    }
