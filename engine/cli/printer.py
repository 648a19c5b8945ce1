"""Terminal rendering of engine events: a progress/live line on TTYs, a summary at the end."""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, TextIO

import numpy as np

from engine.backends.ort.quant_counts import quantized_summary
from engine.cli.results import RunResult
from engine.cli.step_watch import StepWatch
from engine.errors import escape_controls as safe  # one escaping for every printer
from engine.events import Event, LatencyBatch, Notice, Progress, RunStarted
from engine.measure.accuracy import check_target, describe_check
from engine.measure.roofline import Roofs
from engine.model.info import ModelInfo

PIPE_PROGRESS_S = 5.0  # off a terminal: a progress line at most this often
STILL_S = 5.0  # a step announced and then quiet this long says it is still running


class LivePrinter:
    """Shows progress and, during timing, a live line of rolling latency statistics. On a
    terminal the line is redrawn in place; on a pipe or a log file, long work still says
    how far it is, one plain line at most every PIPE_PROGRESS_S (none for quick work). A
    step that then goes quiet (one long native call) says every STILL_S that it is still
    running, and for how long (engine/cli/step_watch.py). Without a stream of its own it
    writes to its own copy of stderr's descriptor (`_own_stderr`)."""

    def __init__(self, stream: TextIO | None = None, live: bool | None = None) -> None:
        owned = _own_stderr() if stream is None else None
        if owned is not None:
            weakref.finalize(self, _close_quietly, owned)
        self.stream = stream or owned or sys.stderr
        self.tty = self.stream.isatty()
        self.live = self.tty if live is None else live
        self._recent: deque[np.ndarray] = deque(maxlen=20)  # ~2 s of batches
        self._count = 0
        self._t0 = 0.0
        self._last_print = 0.0
        self._batch = 1
        self._line_open = False
        self._last_progress = time.monotonic()
        self._said: set[str] = set()  # info lines said once (a sweep's points repeat them)
        self._write = threading.Lock()  # the step watch's thread writes too
        self._watch = StepWatch(self._still, STILL_S)

    def feed(self, ev: Event) -> None:
        with self._write:
            self._feed(ev)
        if isinstance(ev, Progress):
            self._watch.started(ev.stage, safe(ev.message) or _progress_count(ev))
        else:
            self._watch.moved()

    def _still(self, stage: str, text: str, running_s: float) -> None:
        with self._write:
            said = f"[{stage}] {text}: still running, {running_s:.0f} s"
            if self.tty:
                self._status(said)
            else:
                self.stream.write(said + "\n")
            self.stream.flush()

    def _feed(self, ev: Event) -> None:
        if isinstance(ev, Notice):
            if ev.level == "info" and ev.message in self._said:
                return
            self._said.add(ev.message)
            self._clear()
            self.stream.write(f"{ev.level}: {safe(ev.message)}\n")
        elif isinstance(ev, Progress):
            count = _progress_count(ev)
            if self.tty:
                self._status(f"[{ev.stage}] {safe(ev.message) or count}")
            elif time.monotonic() - self._last_progress >= PIPE_PROGRESS_S:
                self._last_progress = time.monotonic()
                said = (
                    f"{count}: {safe(ev.message)}" if ev.message and ev.total else safe(ev.message)
                )
                self.stream.write(f"[{ev.stage}] {said or count}\n")
        elif isinstance(ev, RunStarted):
            self._batch = ev.batch
        elif isinstance(ev, LatencyBatch):
            if not self._count:
                self._t0 = time.perf_counter()
            self._count += ev.latencies_ns.size
            self._recent.append(ev.latencies_ns)
            now = time.perf_counter()
            if self.live and now - self._last_print >= (0.25 if self.tty else 1.0):
                self._last_print = now
                self._live_line(now)
        self.stream.flush()

    def _live_line(self, now: float) -> None:
        recent = np.concatenate(self._recent) / 1e6
        p50, p90, p99 = np.percentile(recent, [50, 90, 99])
        rate = self._count / max(now - self._t0, 1e-9)
        text = (
            f"[timing] n={self._count:<7d} p50 {p50:7.3f} ms  p90 {p90:7.3f} ms  "
            f"p99 {p99:7.3f} ms  {rate * self._batch:9.1f} samples/s (last {recent.size})"
        )
        if self.tty:
            self._status(text)
        else:
            self.stream.write(text + "\n")

    def _status(self, text: str) -> None:
        self.stream.write("\r\x1b[2K" + text[:160])
        self._line_open = True

    def _clear(self) -> None:
        if self._line_open:
            self.stream.write("\r\x1b[2K")
            self._line_open = False

    def close(self) -> None:
        """The live line cleared and the step watch stopped. What the printer is fed
        after still shows (`opscope graph` closes it before its first part and goes on);
        its own stream closes with the printer (`_own_stderr`)."""
        self._watch.stop()
        with self._write:
            self._clear()
            self.stream.flush()


def _close_quietly(stream: TextIO) -> None:
    with contextlib.suppress(OSError, ValueError):
        stream.close()


def _own_stderr() -> TextIO | None:
    """A stream on a duplicate of stderr's descriptor, or None where stderr has no real one
    (a test's capture, a closed stderr). ONNX Runtime's native log is kept from the user
    by pointing fd 2 itself at a temporary file while a session is made
    (`CapturedStderr`); that can take minutes (a 100,000-node chain), and what the printer
    said meanwhile ("still running") went into that file. Its own descriptor still points
    where stderr pointed when the printer was made."""
    err = sys.stderr
    try:
        fd = os.dup(err.fileno())
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is an OSError
        return None
    try:
        err.flush()
        return open(  # closed with the printer (weakref.finalize)
            fd, "w", encoding=err.encoding or "utf-8", errors=err.errors or "backslashreplace"
        )
    except (OSError, ValueError, LookupError):
        os.close(fd)
        return None


def _progress_count(ev: Progress) -> str:
    return _count(ev.done) + (f"/{_count(ev.total)}" if ev.total else "")


def run_printed(request: object) -> Any:
    """Run `request`'s job (engine/run/jobs.py), its progress and notices on the live line;
    its result."""
    from engine.events import drive
    from engine.run.jobs import run_job

    printer = LivePrinter()
    try:
        return drive(
            run_job(request),
            lambda ev: printer.feed(ev) if isinstance(ev, Progress | Notice) else None,
        )
    finally:
        printer.close()


LONG_DIM = 24  # a symbolic dim longer than this (an exporter's formula) is named, not shown
_NOT_DIMS = frozenset({"floor", "ceil", "min", "max", "Mod", "mod", "Max", "Min", "sqrt"})


def short_type(v: Any, notes: list[str]) -> str:
    """`v`'s type with each long symbolic dim named N0, N1...; each name's note (what the
    formula is of, and how long) added to `notes`."""
    if v.kind != "tensor" or v.shape is None:
        return str(v.type_text())
    dims = []
    for d in v.shape:
        if isinstance(d, str) and len(d) > LONG_DIM:
            name = f"N{len(notes)}"
            of = sorted(set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", d)) - _NOT_DIMS)
            notes.append(
                f"{name} = a formula of {', '.join(of) or 'constants'} ({len(d):,} characters; "
                "--verbose or --json shows it)"
            )
            dims.append(name)
        else:
            dims.append("?" if d is None else str(d))
    return f"{v.dtype}[{', '.join(dims)}]"


def print_info(info: ModelInfo, out: TextIO, verbose: bool = False) -> None:
    """The model's facts; a long symbolic dim (a YOLO export's 500-character output
    size) named, with its formula in full only when `verbose`."""
    w = out.write
    w(f"model      {safe(info.path)}\n")
    w(f"sha256     {info.sha256}\n")
    w(
        f"size       {_bytes(info.file_bytes)}"
        + (f" (external data: {safe(', '.join(info.external_data))})" if info.external_data else "")
        + "\n"
    )
    w(
        f"producer   {safe(info.producer) or '-'}   ir {info.ir_version}   opset "
        + ", ".join(f"{safe(d)} {v}" for d, v in info.opset.items())
        + "\n"
    )
    for label, values in (("inputs", info.inputs), ("outputs", info.outputs)):
        for i, v in enumerate(values):
            notes: list[str] = []
            kind = v.type_text() if verbose else short_type(v, notes)
            w(f"{label if i == 0 else '':<10} {safe(v.name)}: {safe(kind)}\n")
            for note in notes:
                w(f"{'':<10}   {safe(note)}\n")
    w(
        f"nodes      {info.nodes}"
        + (f" (+{info.subgraph_nodes} in subgraphs)" if info.subgraph_nodes else "")
        + "\n"
    )
    w(f"params     {info.params:,} ({_bytes(info.param_bytes)})\n")
    hist = ", ".join(f"{safe(k)} {v}" for k, v in list(info.op_types.items())[:12])
    more = len(info.op_types) - 12
    w(f"op types   {hist}{f', ... {more} more' if more > 0 else ''}\n")
    if info.checker_warning:
        w(f"checker    {safe(info.checker_warning)}\n")


def print_summary(result: RunResult, out: TextIO, top: int = 15) -> None:
    w = out.write
    if result.model:
        w(f"model      {safe(result.model.info.name)}  sha256 {result.model.info.sha256[:12]}\n")
    if result.started:
        s = result.started
        w(f"config     {s.config.label()}\n")
        w(
            f"provider   {s.provider_used}"
            + (
                ""
                if s.provider_used == s.provider_requested
                else f"  (requested {s.provider_requested})"
            )
            + "\n"
        )
        w(
            "inputs     "
            + ", ".join(
                f"{safe(k)} {d}[{'x'.join(map(str, sh))}]" for k, (sh, d) in s.inputs.items()
            )
            + "\n"
        )
    if result.variant:
        v = result.variant
        nodes = (
            f"{v.nodes_original} nodes -> {v.nodes if v.nodes is not None else '?'} after fusion"
        )
        if v.precision == "fp32":
            how = "the original model"
        else:
            how = f"{'cached; built' if v.cached else 'built'} in {v.build_s:.2f} s"
        quantized = quantized_summary(v.details) if v.precision.startswith("int8") else ""
        w(f"variant    {v.precision}: {nodes}; {how}{f'; {quantized}' if quantized else ''}\n")
        weights = v.details.get("weights")  # a generating model's weight search
        if isinstance(weights, dict) and weights.get("summary"):
            w(f"weights    {safe(str(weights['summary']))}\n")
        int8 = v.details.get("int8")
        if int8:
            kept = int8.get("excluded_nodes") or []
            settings = int8.get("settings") or {}
            said = ", ".join(f"{k}={val}" for k, val in settings.items()) or "defaults"
            heads = int8.get("head_in_fp32") or []
            head = f"; {len(heads)} head node(s) in FP32" if heads else ""
            w(
                f"int8       target {int8.get('min_cosine')} on every check: "
                f"{'met' if int8.get('met') else 'MISSED'} with {said}{head}"
                f"{f'; {len(kept)} node(s) in FP32: ' + safe(', '.join(kept[:6])) if kept else ''}"
                f"{' ...' if len(kept) > 6 else ''}; {len(int8.get('attempts') or [])} "
                "attempt(s)\n"
            )
    if result.timing:
        t = result.timing
        lat = t.latency
        w(
            f"latency    p50 {lat.p50:.3f} ms {interval_text(lat.p50_ci)} p90 {lat.p90:.3f}  "
            f"p95 {lat.p95:.3f}  p99 {lat.p99:.3f} {interval_text(lat.p99_ci)} "
            f"(mean {lat.mean:.3f} ± {lat.std:.3f}, min {lat.min:.3f}, "
            f"max {lat.max:.3f}; n={lat.count} after {t.warmup_runs} warm-up; "
            "[95% intervals of independent samples])\n"
        )
        w(
            f"throughput {t.throughput.inferences_per_s:.1f} inferences/s, "
            f"{t.throughput.samples_per_s:.1f} samples/s   {stability_text(t.stable, lat)}\n"
        )
        if t.contention is not None:
            w(f"machine    {t.contention.line()}\n")
            if t.contention.busy:
                w(
                    "           these figures are the model's speed on a busy machine, not "
                    "its own: measure again when the machine is quiet\n"
                )
    if result.accuracy:
        a = result.accuracy
        target = result.started.config.min_cosine if result.started else None
        print_accuracy(a, w, target)
        if a.nonfinite:
            w(
                f"           FAILED: {a.nonfinite:,} output values are NaN or infinite where "
                "FP32's are finite (cosine counted as 0)\n"
            )
        if a.label_top1 is not None and a.baseline_label_top1 is not None:
            w(
                f"labels     top-1 accuracy {a.label_top1:.2%} (FP32 {a.baseline_label_top1:.2%}, "
                f"{(a.label_top1 - a.baseline_label_top1) * 100:+.2f} points)\n"
            )
    for profile in result.phases.values() or ([result.profile] if result.profile else []):
        print_ops(profile, out, top, machine=result.machine)


def print_accuracy(a: Any, w: Callable[[str], object], target: float | None) -> None:
    """The accuracy lines: the judged figure and what it was, then each check that fails
    `target` (or the worst one), then the raw errors and what the samples were."""
    top1 = f"  top-1 agreement {a.top1_agreement:.1%}" if a.top1_agreement is not None else ""
    data = f" on {safe(a.data)}" if a.data else f" on {a.samples} sample(s)"
    mean = a.mean_cosine if a.mean_cosine is not None else math.nan
    w(
        f"accuracy   vs fp32{data}: worst sample's cosine {a.cosine:.6f} (mean {mean:.6f})  "
        f"max abs err {a.max_abs_err:.4g}  mean abs err {a.mean_abs_err:.4g}{top1}\n"
    )
    verdict = next((str(c["verdict"]) for c in a.checks if c.get("verdict")), "")
    if verdict:  # a generating model's weights: the checks' own targets, said in a line
        w(f"verdict    {safe(verdict)}\n")
    judged = [c for c in a.checks if isinstance(c.get("worst"), int | float)]
    failing = [c for c in judged if target is not None and c["worst"] < check_target(c, target)]
    shown = failing or ([a.worst] if a.worst and len(judged) > 1 else [])
    for c in shown:
        mark = "FAILS " if c in failing else "worst "
        w(f"           {mark}{safe(describe_check(c))}\n")


def print_ops(profile: Any, out: TextIO, top: int, machine: Roofs | None = None) -> None:
    """The top nodes and op types; with the machine's roofs, each op's roofline bound."""
    w = out.write
    if machine:
        w(
            f"\nroofline   {machine.describe()} (`opscope system`); bound: the memory level "
            "or compute roof that limits the op, and % of it\n"
        )
    phase = getattr(profile, "phase", None)
    w(
        (
            f"\nprofile    {phase.upper()}: {profile.runs} profiled passes"
            if phase
            else f"\nprofile    {profile.runs} profiled inferences"
        )
        + "; node time covers "
        f"{profile.coverage:.1%} of model_run" + overhead_text(profile.profile_overhead) + "\n"
    )
    load = getattr(profile, "contention", None)
    if load is not None:
        w(f"machine    while profiling: {load.line()}\n")
    w(
        "providers  "
        + ", ".join(f"{safe(k)}: {v} nodes" for k, v in profile.provider_nodes.items())
        + "\n\n"
    )
    header = (
        f"{'name':<38} {'op':<20} {'ms':>8} {'share':>6} {'bytes':>9} {'GB/s':>7} "
        f"{'GFLOP/s':>8} {'FLOP/B':>7}" + (f" {'bound':<13}" if machine else "") + "\n"
    )
    for title, rows in (("top nodes", profile.ops[:top]), ("op types", profile.op_types[:top])):
        w(f"{title}\n{header}")
        for s in rows:
            w(
                f"{_clip(safe(s.name), 38):<38} {_clip(safe(s.op_type), 20):<20} {s.time_ms:8.3f} "
                f"{s.share:6.1%} {_bytes(s.bytes):>9} {_num(s.gbps, 7)} {_num(s.gflops, 8)} "
                f"{_num(s.intensity, 7)}" + (_bound(s, machine) if machine else "") + "\n"
            )
        w("\n")


def interval_text(ci: tuple[float, float] | None) -> str:
    """'[1.201-1.254]' for a percentile's interval; '[n too small]' without one."""
    return "[n too small] " if ci is None else f"[{ci[0]:.3f}-{ci[1]:.3f}] "


def stability_text(stable: bool, lat: Any) -> str:
    """What "stable" means here, said: the windows' medians agree; a heavy tail is named."""
    tail = ""
    if lat.p50 > 0 and lat.p99 / lat.p50 >= 3:
        tail = f"; heavy tail: p99 is {lat.p99 / lat.p50:.0f}x p50, min {lat.min:.3f} ms"
    if stable:
        return f"stable medians (3 windows within 10%){tail}"
    return f"UNSTABLE (the medians of 3 windows differ by >10%; run longer){tail}"


def overhead_text(overhead: float | None) -> str:
    """The profiler's cost against the timed pass; a negative one is not a cost but the
    machine's speed changing between the two passes, and is said so."""
    if overhead is None:
        return ""
    if overhead < -0.05:
        return (
            f"; profiler overhead not measurable (the profiled pass ran {-overhead:.0%} faster "
            "than the timed one: the machine's load changed between them)"
        )
    return f"; profiler overhead {overhead:+.0%}"


def _bound(s: Any, machine: Roofs) -> str:
    """ " L2 12%" / " compute 80%" / " int8 60%": the roof that limits the op and how close
    it gets."""
    from engine.measure.roofline import place

    return f" {place(s, machine).label:<13}"


def _count(x: float) -> str:
    """1,234 for whole numbers (request counts), else as few digits as say it (0.25)."""
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:g}"


def _num(x: float | None, width: int) -> str:
    return f"{'-':>{width}}" if x is None else f"{x:{width}.2f}"


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else "…" + text[-(n - 1) :]


def _bytes(n: float | None) -> str:
    if n is None:  # a session file without the column
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"
