"""`opscope load` (the real serving loop) and `opscope simulate` (its simulator)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from engine import backends
from engine.backends.base import Prepared, PrepareRequest
from engine.cli.common import (
    EXIT_FAULT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    config_from_args,
    workload_of,
    write_json,
)
from engine.cli.printer import LivePrinter
from engine.cli.results import RunResult
from engine.cli.serve_replay import fill_serving_args
from engine.config import RunConfig
from engine.errors import ConfigError
from engine.events import (
    Event,
    ModelLoaded,
    Notice,
    Progress,
    drive,
)
from engine.measure.contention import Contention
from engine.run.jobs import run_job
from engine.run.serving_jobs import LoadedModel, LoadRunRequest, load_schedule
from engine.serve.batching import BatchPolicy
from engine.serve.summary import describe_setup
from engine.serve.traffic.plan import plan_traffic
from engine.serve.traffic.schedule import Schedule, TrafficSpec
from engine.session.recording import recording


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
    """`opscope simulate`'s traffic and schedule (the warm-up fitted to it)."""
    spec, schedule = plan_traffic(
        args.traffic, args.duration, args.seed, args.repeat, getattr(args, "requests", None),
        args.closed_requests, "--repeat",
    )  # fmt: skip
    fit_warmup(args, spec, schedule)
    return spec, schedule


def fit_warmup(args: argparse.Namespace, spec: TrafficSpec, schedule: Schedule) -> None:
    """An open loop's warm-up, checked against its schedule's span (check_warmup)."""
    if not spec.closed:
        args.warmup_s = check_warmup(
            schedule, args.warmup_s, getattr(args, "warmup_default", False)
        )


def plan_load(args: argparse.Namespace) -> tuple[LoadRunRequest, Schedule]:
    """The load run's request from the flags, and the schedule its job will serve, planned
    by the job's own planning (load_schedule) from that request: the flags checked in their
    words and the warm-up fitted before anything is prepared."""
    req = LoadRunRequest(
        traffic=args.traffic, batching={}, duration_s=args.duration, cache=args.cache,
        repeat=args.repeat, warmup_s=args.warmup_s, seed=args.seed,
        requests=getattr(args, "requests", None), closed_requests=args.closed_requests,
        slo_ms=getattr(args, "slo_p99", None),
    )  # fmt: skip
    spec, schedule = load_schedule(req, "--repeat")
    fit_warmup(args, spec, schedule)
    policy = policy_from_args(args)
    return dataclasses.replace(req, batching=policy.to_json(), warmup_s=args.warmup_s), schedule


def check_warmup(schedule: Schedule, warmup_s: float, default: bool = False) -> float:
    """The warm-up to use: one that would keep every request out of the figures (they
    read nan and "batches 0" although every request was served) is refused when given,
    and the default one dropped, said on stderr."""
    if not len(schedule) or warmup_s <= 0:
        return warmup_s
    span = float(schedule.times[-1] - schedule.times[0])
    if span >= warmup_s:
        return warmup_s
    if default:
        print(
            f"info: the {len(schedule):,} requests arrive within {span:.3g} s, inside the "
            f"default warm-up of {warmup_s:g} s: none is kept out of the figures "
            "(--warmup-s 0)",
            file=sys.stderr,
        )
        return 0.0
    raise ConfigError(
        f"--warmup-s {warmup_s:g} keeps all {len(schedule):,} requests out of the figures: "
        f"they arrive within {span:.3g} s; give a shorter warm-up (--warmup-s 0 keeps none out)"
    )


class Prepare:
    """The model prepared for serving: one sample per request, the backend's facts kept."""

    def __init__(
        self,
        args: argparse.Namespace,
        printer: LivePrinter,
        record: Callable[[Event], None] = lambda ev: None,
        config: RunConfig | None = None,
    ) -> None:
        config = config or config_from_args(args)
        if config.batch != 1:
            printer.feed(Notice("info", "each request is one sample; batching is --max-batch"))
            config = dataclasses.replace(config, batch=1)
        req = PrepareRequest(workload_of(args, config), seed=args.seed)
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
    """The load run job (engine/run/serving_jobs.py), as the app's Traffic dock runs it, on
    the model prepared here."""
    fill_serving_args(args, None)
    req, _ = plan_load(args)  # checked here, in the flags' words (and the warm-up fitted)
    printer = LivePrinter()
    try:
        with recording(args.session, model_path=args.model, kind="load") as record:
            prep = Prepare(args, printer, record)
            model = LoadedModel(prep.prepared, args.model)

            def show(ev: Event) -> None:
                printer.feed(ev)
                record(ev)  # every request and batch, committed as they come

            figures = drive(run_job(req, model), show)
            result = {**prep.header(), **figures, "simulated": False}
        prep.prepared.close()
    finally:
        printer.close()
    out = sys.stdout if args.json != "-" else sys.stderr
    print_serving(result, out)
    if args.session:
        print(f"recorded   {args.session} (run kind load: every request and batch)", file=out)
    if args.json:
        write_json(args.json, result)
    if model.loop is not None and model.loop.interrupted:
        print("opscope: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if model.loop is not None and model.loop.timed_out:  # a backlog it could not serve
        lost = model.loop.unserved + model.loop.dropped
        print(f"opscope: stopped at the drain deadline: {lost:,} request(s) not served "
              "(counted above as unserved and dropped)", file=sys.stderr)  # fmt: skip
        return EXIT_FAULT
    return EXIT_OK


def describe_run(
    spec: TrafficSpec, policy: BatchPolicy, args: argparse.Namespace
) -> dict[str, Any]:
    return describe_setup(
        spec,
        policy,
        seed=args.seed,
        duration_s=getattr(args, "duration", None),
        cache=args.cache,
        repeat=args.repeat,
    )


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
        f"{req['timed_out']:,} timed out"
        + (
            f", {req['unserved']:,} unserved (queued when it stopped)"
            if req.get("unserved")
            else ""
        )
        + (f"; {req['dropped']:,} more never sent (dropped)" if req.get("dropped") else "")
        + "\n"
    )
    w(
        f"latency    p50 {lat['p50']:.3f} ms  p90 {lat['p90']:.3f} ms  p99 {lat['p99']:.3f} ms  "
        f"max {lat['max']:.3f} ms (n={lat['count']:,}; {kind}, end to end from each "
        "request's scheduled time)\n"
    )
    if not lat["count"] and req["completed"]:
        rest = ", the rest did not complete" if req["warmup"] < req["completed"] else ""
        w(
            f"           none of the {req['completed']:,} completed requests is in the figures: "
            f"{req['warmup']:,} were due in the warm-up of {r['warmup_s']:g} s{rest}\n"
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
        w(f"warm-up    {req['warmup']:,} requests in the first {r['warmup_s']:g} s: counted, "
          "not in the figures above\n")  # fmt: skip
    w(f"throughput {r['throughput']['requests_per_s']:.1f} requests/s")
    if not r.get("simulated"):
        w(f"; generator lateness p99 {r['generator']['lateness_p99_ms']:.3f} ms")
    w("\n")
    good = r.get("goodput")
    if good:
        w(f"goodput    {good['requests_per_s']:.1f} requests/s within {good['slo_ms']:g} ms "
          f"({good['share']:.1%} of the requests sent)\n")  # fmt: skip
    served = Contention.from_json((r.get("machine") or {}).get("contention"))
    if served is not None:  # a real run: how busy the machine was while it served
        w(f"machine    {served.line()}\n")


def yield_model(items: Iterator[Any], printer: LivePrinter) -> Any:
    """Drive an iterator of events that ends with one result (not an event); the result."""
    result = None
    for item in items:
        if isinstance(item, Progress | Notice):
            printer.feed(item)
        else:
            result = item
    return result
