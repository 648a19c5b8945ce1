"""`opscope load` (the real serving loop) and `opscope simulate` (its simulator)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from engine import backends
from engine.backends.base import Prepared, PrepareRequest
from engine.cli.common import EXIT_OK, config_from_args, write_json
from engine.cli.printer import LivePrinter
from engine.cli.results import RunResult
from engine.errors import ConfigError
from engine.events import (
    Event,
    ModelLoaded,
    Notice,
    Progress,
    RunEnded,
)
from engine.model.inputs import parse_shape_override
from engine.serve.batching import BatchPolicy
from engine.serve.calibration import calibration_context, load_or_calibrate
from engine.serve.loop import ServingLoop
from engine.serve.records import latency_batch, steady_ok, summarize, timing_done
from engine.serve.search import Workload, capacity_curve, max_rate, tune_batching
from engine.serve.service import ServiceModel
from engine.serve.setup import Serving, prepare_serving
from engine.serve.simulate import simulate
from engine.serve.traffic import Schedule, TrafficSpec, make_schedule, parse_traffic
from engine.session.recorder import recording

SEARCH_REQUESTS = 20_000  # requests per simulated trial in --find, --tune-batching, --curve
CONFIRM_S = 10.0  # seconds of real traffic that --confirm serves (after --warmup-s)
TUNE_BATCHES = (1, 2, 4, 8, 16, 32)
TUNE_DELAYS_MS = (0.0, 1.0, 2.0, 5.0, 10.0)
TUNE_INSTANCES = (1, 2)


def policy_from_args(args: argparse.Namespace) -> BatchPolicy:
    try:
        preferred = tuple(int(x) for x in args.preferred.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"--preferred {args.preferred!r}: expected sizes like 4,8") from None
    return BatchPolicy(
        max_batch=args.max_batch,
        preferred=preferred,
        delay_ms=args.delay_ms,
        queue_limit=args.queue_limit,
        timeout_ms=args.timeout_ms,
        instances=args.instances,
    )


def traffic_from_args(args: argparse.Namespace) -> tuple[TrafficSpec, Schedule]:
    spec = parse_traffic(args.traffic)
    if args.repeat >= 1:
        raise ConfigError(f"--repeat must be below 1, got {args.repeat:g}")
    if spec.closed:
        schedule = make_schedule(parse_traffic("constant:1"), 0, args.seed, args.repeat,
                                 requests=args.closed_requests)  # fmt: skip
    else:
        schedule = make_schedule(
            spec, args.duration, args.seed, args.repeat, requests=getattr(args, "requests", None)
        )
    return spec, schedule


class Prepare:
    """The model prepared for serving: one sample per request, the backend's facts kept."""

    def __init__(
        self,
        args: argparse.Namespace,
        printer: LivePrinter,
        record: Callable[[Event], None] = lambda ev: None,
    ) -> None:
        config = config_from_args(args)
        if config.batch != 1:
            printer.feed(Notice("info", "each request is one sample; batching is --max-batch"))
            config = dataclasses.replace(config, batch=1)
        req = PrepareRequest(
            args.model,
            config,
            shapes=dict(parse_shape_override(s) for s in args.shape),
            inputs_npz=args.inputs,
            seed=args.seed,
        )
        self.printer = printer
        self.record = record
        self.result = RunResult()  # the run's facts, folded as bench folds them
        self.prepared: Prepared = backends.prepare(req, self._keep)

    def _keep(self, ev: Event) -> None:
        self.printer.feed(ev)
        self.record(ev)
        self.result.feed(ev)

    @property
    def model(self) -> ModelLoaded | None:
        return self.result.model

    @property
    def facts(self) -> list[Event]:
        """What a session needs to file the run: the model, its variant, how it started."""
        r = self.result
        return [ev for ev in (r.model, r.variant, r.started) if ev is not None]

    def header(self) -> dict[str, Any]:
        """The model, config and provider, as `bench --json` writes them."""
        full = self.result.to_json()
        return {k: full[k] for k in ("model", "config", "provider_used") if k in full}


def cmd_load(args: argparse.Namespace) -> int:
    spec, schedule = traffic_from_args(args)
    policy = policy_from_args(args)
    printer = LivePrinter()
    try:
        with recording(args.session, model_path=args.model, kind="load") as record:
            prep = Prepare(args, printer, record)
            serving = prepare_serving(prep.prepared, policy, args.model)
            for note in serving.notices:
                printer.feed(note)
                record(note)
            loop = _loop(serving, spec, schedule, args)
            for ev in loop.run():
                printer.feed(ev)
                record(ev)  # end-to-end latencies, committed as they come
            record(RunEnded("ok"))
        prep.prepared.close()
    finally:
        printer.close()
    result = {
        **prep.header(),
        **_describe_run(spec, serving.policy, args),
        **summarize(loop.records(), args.warmup_s),
        "simulated": False,
    }
    _hit_rate(result)
    out = sys.stdout if args.json != "-" else sys.stderr
    print_serving(result, out)
    if args.session:
        print(f"recorded   {args.session} (run kind load: end-to-end latencies)", file=out)
    if args.json:
        write_json(args.json, result)
    return EXIT_OK


def _loop(
    serving: Serving, spec: TrafficSpec, schedule: Schedule, args: argparse.Namespace
) -> ServingLoop:
    return ServingLoop(
        serving.run_batch,
        serving.request_feeds,
        schedule,
        serving.policy,
        cache_size=args.cache,
        closed_clients=spec.clients if spec.closed else 0,
        closed_requests=args.closed_requests if spec.closed else 0,
        warmup_s=args.warmup_s,
    )


def _describe_run(
    spec: TrafficSpec, policy: BatchPolicy, args: argparse.Namespace
) -> dict[str, Any]:
    return {
        "traffic": {**spec.to_json(), "closed_loop": spec.closed, "seed": args.seed},
        "batching": policy.to_json(),
        "cache": {"size": args.cache, "repeat": args.repeat},
    }


def _hit_rate(result: dict[str, Any]) -> None:
    req = result["requests"]
    result["cache"]["hit_rate"] = req["cache_hits"] / req["sent"] if req["sent"] else 0.0


def print_serving(r: dict[str, Any], out: TextIO) -> None:
    w = out.write
    req, lat, b = r["requests"], r["latency_ms"], r["batching"]
    kind = "simulated" if r.get("simulated") else "served"
    loop = "closed loop" if r["traffic"]["closed_loop"] else "open loop"
    w(f"traffic    {r['traffic']['spec']} ({loop})\n")
    preferred = f", preferred {','.join(map(str, b['preferred']))}" if b["preferred"] else ""
    w(
        f"batching   max batch {b['max_batch']}{preferred}, delay {b['delay_ms']:g} ms, "
        f"{b['instances']} instance(s)\n"
    )
    w(
        f"requests   {req['sent']:,} sent: {req['completed']:,} completed "
        f"({req['cache_hits']:,} from cache), {req['rejected']:,} rejected, "
        f"{req['timed_out']:,} timed out\n"
    )
    w(
        f"latency    p50 {lat['p50']:.3f} ms  p90 {lat['p90']:.3f} ms  p99 {lat['p99']:.3f} ms  "
        f"max {lat['max']:.3f} ms (n={lat['count']:,}; {kind}, end to end from each "
        "request's scheduled time)\n"
    )
    q, s, bs, depth = r["queue_ms"], r["service_ms"], r["batch_size"], r["queue_depth"]
    w(
        f"queue      wait p50 {q['p50']:.3f} ms  p99 {q['p99']:.3f} ms; "
        f"depth max {depth['max']}, p99 {depth['p99']:g}\n"
    )
    w(
        f"batches    {bs['count']:,}, mean size {bs['mean']:.2f}; "
        f"service p50 {s['p50']:.3f} ms  p99 {s['p99']:.3f} ms\n"
    )
    if req.get("warmup"):
        w(f"warm-up    {req['warmup']:,} requests in the first {r['warmup_s']:g} s: served, "
          "not in the figures above\n")  # fmt: skip
    w(f"throughput {r['throughput']['requests_per_s']:.1f} requests/s")
    if not r.get("simulated"):
        w(f"; generator lateness p99 {r['generator']['lateness_p99_ms']:.3f} ms")
    w("\n")


def cmd_simulate(args: argparse.Namespace) -> int:
    if (args.find or args.tune_batching) and args.slo_p99 is None:
        raise ConfigError("--find and --tune-batching need --slo-p99 MS")
    if args.confirm and not args.find:
        raise ConfigError("--confirm goes with --find max-rate")
    spec, schedule = traffic_from_args(args)
    if spec.closed and (args.find or args.tune_batching or args.curve):
        raise ConfigError("--find, --tune-batching and --curve scale a rate: not closed:N")
    if spec.kind == "trace" and (args.find or args.tune_batching or args.curve):
        raise ConfigError("--find, --tune-batching and --curve scale a rate: not a trace")
    policy = policy_from_args(args)
    printer = LivePrinter()
    try:
        prep = Prepare(args, printer)
        # tuning searches batch sizes up to --max-batch when given, else up to 32
        tune_top = policy.max_batch if policy.max_batch > 1 else max(TUNE_BATCHES)
        top = tune_top if args.tune_batching else policy.max_batch
        serving = prepare_serving(
            prep.prepared, dataclasses.replace(policy, max_batch=top), args.model
        )
        for note in serving.notices:
            printer.feed(note)
        top = serving.policy.max_batch
        policy = dataclasses.replace(
            policy,
            max_batch=min(policy.max_batch, top),
            preferred=tuple(p for p in policy.preferred if p <= top),
        )
        tune_batches = [b for b in TUNE_BATCHES if b < top] + [top]
        services: dict[int, ServiceModel] = {}

        def service_for(instances: int) -> ServiceModel:
            if instances not in services:
                context = calibration_context(
                    prep.model.info.sha256 if prep.model else "",
                    prep.prepared.config.to_json(),
                    prep.prepared.provider_used,
                    top,
                    instances,
                )
                services[instances] = yield_model(
                    load_or_calibrate(serving, context, args.recalibrate), printer
                )
            return services[instances]

        service = service_for(policy.instances)
        result = {**prep.header(), **_describe_run(spec, policy, args)}
        rec = simulate(
            schedule,
            policy,
            service,
            cache_size=args.cache,
            closed_clients=spec.clients if spec.closed else 0,
            closed_requests=args.closed_requests if spec.closed else 0,
            seed=args.seed,
        )
        result.update(summarize(rec, args.warmup_s))
        if args.session:  # a run of kind simulate: its predicted end-to-end latencies
            with recording(args.session, model_path=args.model, kind="simulate") as record:
                for ev in prep.facts:
                    record(ev)
                record(latency_batch(rec, steady_ok(rec, args.warmup_s)))
                record(timing_done(rec, args.warmup_s))
                record(RunEnded("ok"))
        result["simulated"] = True
        result["calibration"] = _calibration_json(service)
        _hit_rate(result)
        work = Workload(
            spec, args.requests or SEARCH_REQUESTS, args.seed, args.cache, args.repeat,
            args.warmup_s,
        )  # fmt: skip
        if args.find:
            rate, found, steps = max_rate(work, policy, service, args.slo_p99)
            result["max_rate"] = rate
            result["find"] = {"slo_p99_ms": args.slo_p99, "at_max_rate": found, "steps": steps}
            if args.confirm and rate > 0:
                result["find"]["confirmed"] = _confirm(
                    service, serving, spec, policy, rate, args, printer
                )
        if args.tune_batching:
            outcome = yield_model(
                tune_batching(work, policy, service_for, args.slo_p99, tune_batches,
                              list(TUNE_DELAYS_MS), list(TUNE_INSTANCES)),
                printer,
            )  # fmt: skip
            result.update(outcome)
        if args.curve:
            result["curve"] = capacity_curve(work, policy, service)
        prep.prepared.close()
    finally:
        printer.close()
    out = sys.stdout if args.json != "-" else sys.stderr
    print_serving(result, out)
    _print_answers(result, out)
    if args.json:
        write_json(args.json, result)
    return EXIT_OK


def yield_model(items: Iterator[Any], printer: LivePrinter) -> Any:
    """Drive an iterator of events that ends with one result (not an event); the result."""
    result = None
    for item in items:
        if isinstance(item, Progress | Notice):
            printer.feed(item)
        else:
            result = item
    return result


def _calibration_json(service: ServiceModel) -> dict[str, Any]:
    ctx = service.context
    return {
        "sizes": service.sizes,
        "median_ms": {str(s): service.median(s) * 1e3 for s in service.sizes},
        "samples": {str(s): int(service.samples[s].size) for s in service.sizes},
        "instances": ctx.get("instances"),
        "provider": ctx.get("provider"),
        "cpu": ctx.get("cpu"),
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
    """Serve the found rate on the real engine for CONFIRM_S seconds: measured against
    predicted, on the same schedule."""
    scaled = spec.scaled(rate / spec.mean_rate())
    schedule = make_schedule(scaled, CONFIRM_S + args.warmup_s, args.seed, args.repeat)
    serving = dataclasses.replace(serving, policy=policy)
    loop = ServingLoop(serving.run_batch, serving.request_feeds, schedule, policy,
                       cache_size=args.cache)  # fmt: skip
    for ev in loop.run():
        printer.feed(ev)
    measured = summarize(loop.records(), args.warmup_s)
    predicted = summarize(
        simulate(schedule, policy, service, cache_size=args.cache, seed=args.seed),
        args.warmup_s,
    )
    return {
        "rate": rate,
        "seconds": CONFIRM_S,
        "measured": {k: measured[k] for k in ("requests", "latency_ms", "throughput")},
        "predicted": {k: predicted[k] for k in ("requests", "latency_ms", "throughput")},
    }


def _print_answers(r: dict[str, Any], out: TextIO) -> None:
    w = out.write
    if "max_rate" in r:
        find = r["find"]
        w(f"max rate   {r['max_rate']:.1f} requests/s meets p99 <= {find['slo_p99_ms']:g} ms")
        at = find["at_max_rate"]
        w(f" (simulated p99 {at['latency_ms']['p99']:.3f} ms)\n" if at else " (none does)\n")
        conf = find.get("confirmed")
        if conf:
            m, p = conf["measured"]["latency_ms"], conf["predicted"]["latency_ms"]
            w(
                f"confirmed  {conf['seconds']:g} s served at {conf['rate']:.1f}/s: p50 "
                f"{m['p50']:.3f} ms (predicted {p['p50']:.3f}), p99 {m['p99']:.3f} ms "
                f"(predicted {p['p99']:.3f})\n"
            )
    if r.get("trials"):
        w("tuning     max batch x delay x instances, by capacity under the SLO:\n")
        for trial in r["trials"][:8]:
            w(
                f"           max batch {trial['max_batch']:>3}  delay {trial['delay_ms']:>4g} ms  "
                f"{trial['instances']} inst  ->  {trial['max_rate']:9.1f} requests/s  "
                f"(p99 {trial['p99_ms']:.3f} ms)\n"
            )
    for point in r.get("curve", []):
        w(
            f"curve      offered {point['offered_per_s']:9.1f}/s  served "
            f"{point['throughput_per_s']:9.1f}/s  p50 {point['p50_ms']:8.3f} ms  p99 "
            f"{point['p99_ms']:9.3f} ms{'  <- knee' if point['knee'] else ''}\n"
        )
