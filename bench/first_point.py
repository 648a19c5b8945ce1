"""Time to the first latency point (issue 53): from the model chosen to the first latency
sample arriving, through the real engine host spawned as the window spawns it
(app/host/engine_client.py: a spawned process running `host_main(child, 0.1, nice)`, then
the window's config and the Load it sends, as app/shell/workbench.py does).

The host starts when the window opens, before a model is chosen; the clock starts at the
Load ("model chosen": File > Open, a recent model, a dropped file) once the host is up, and
stops when the first batch holding latency samples arrives over the pipe. The host's own
start (spawn to its first heartbeat) is reported apart: `opscope MODEL` adds it.

Two cases, each N rounds, quiet and beside a competing load (one spinning process per CPU,
`python -c 'while True: pass'`), in one script:
  cached: a later start, the machine's peaks cached (and the model's variant: a cache
          folder primed by one unmeasured round);
  first:  a first start, an empty cache folder: no peaks cached, nothing else either.
Each round also says when the first profiling pass and the peaks arrived (they come after
the first points), and how busy the machine was with other processes than ours (the
host's and the spinners' CPU time taken out of the machine's).

    .venv/bin/python bench/first_point.py [--rounds N] [--model PATH] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from results_file import publish  # noqa: E402

DEMO = ROOT / "resources/models/demo_transformer.onnx"
CPUS = os.cpu_count() or 1
SETTLE_S = 1.0  # the window open, its host up: then the user picks a model
TIMEOUT_S = 300.0
TARGETS = {"cached": 3.0, "first": 6.0}  # on a quiet machine (issue 53)
QUIET_OTHERS = 0.25  # cores other processes may use for a row of ours to count as quiet


@dataclass
class Round:
    case: str
    load: str
    ready_s: float  # spawn to the host's first heartbeat
    first_s: float  # Load to the first latency samples
    profile_s: float | None  # Load to the first OpProfile
    peaks_s: float | None  # Load to PeaksMeasured
    samples_before_profile: int
    others_cores: float  # other processes' CPU use over the round, in cores
    host_cpu_s: float  # the host's CPU time from the Load to the first point


def cpu_name() -> str:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = re.search(r"model name\s*:\s*(.+)", text)
    return f"{model.group(1).strip() if model else 'unknown CPU'}, {CPUS} CPUs"


def machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (all CPUs, /proc/stat)."""
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def cpu_s(pids: list[int]) -> float:
    import psutil

    total = 0.0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
    return total


@contextlib.contextmanager
def spinners(per_core: int) -> Iterator[list[int]]:
    """`per_core` spinning processes per CPU for the duration of the block."""
    procs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(per_core * CPUS)
    ]
    try:
        time.sleep(0.5 if procs else 0.0)
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()
        time.sleep(1.0 if procs else 0.0)


def one_round(model: Path, cache: Path, case: str, load: str, ours: list[int]) -> Round:
    """Spawn the host as the window does, let it come up, Load, and time the first point."""
    from engine.config import RunConfig
    from engine.events import Heartbeat, LatencyBatch, OpProfile, PeaksMeasured
    from engine.run import host_commands as cmds
    from engine.run.host import host_main
    from engine.run.wire import PipeConnection

    os.environ["OPSCOPE_CACHE_DIR"] = str(cache)  # the spawned host inherits it
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    conn = PipeConnection(parent)
    proc = ctx.Process(target=host_main, args=(child, 0.1, 0), name="opscope-engine")
    spawned = time.monotonic()
    proc.start()
    child.close()
    try:
        while not any(isinstance(e, Heartbeat) for e in conn.recv()):
            pass
        ready_s = time.monotonic() - spawned
        time.sleep(SETTLE_S)
        assert proc.pid is not None
        pids = [proc.pid, *ours]
        busy0, ours0, host0 = machine_busy_s(), cpu_s(pids), cpu_s(pids[:1])
        host_cpu = 0.0
        t0 = time.monotonic()
        conn.send(cmds.Apply(RunConfig()))  # the configuration shown, then the model
        conn.send(cmds.Load(str(model)))
        first_s = profile_s = peaks_s = None
        samples = 0
        while time.monotonic() - t0 < TIMEOUT_S:
            if not conn.poll(0.05):
                continue
            now = time.monotonic() - t0
            for ev in conn.recv():
                if isinstance(ev, LatencyBatch) and ev.latencies_ns.size:
                    if first_s is None:
                        first_s, host_cpu = now, cpu_s(pids[:1]) - host0
                    samples += int(ev.latencies_ns.size) if profile_s is None else 0
                elif isinstance(ev, OpProfile) and profile_s is None:
                    profile_s = now
                elif isinstance(ev, PeaksMeasured) and peaks_s is None:
                    peaks_s = now
            if first_s is not None and profile_s is not None and peaks_s is not None:
                break
        wall = time.monotonic() - t0
        others = (machine_busy_s() - busy0 - (cpu_s(pids) - ours0)) / wall
        if first_s is None:
            raise SystemExit(f"no latency point in {TIMEOUT_S:.0f} s ({case}, {load})")
        others = max(0.0, others)
        return Round(case, load, ready_s, first_s, profile_s, peaks_s, samples, others, host_cpu)
    finally:
        with contextlib.suppress(OSError):
            conn.send(cmds.Shutdown())
        proc.join(15)
        if proc.is_alive():
            proc.kill()
            proc.join()


def primed_cache(model: Path) -> Path:
    """A cache folder as after earlier work: the machine's peaks (copied from the user's
    cache when there, else measured by the priming round) and the model's variant."""
    from engine.machine.peaks import peaks_path

    folder = Path(tempfile.mkdtemp(prefix="opscope-first-point-cached-"))
    mine = peaks_path()  # the user's cache (OPSCOPE_CACHE_DIR unset yet)
    if mine.exists():
        os.environ["OPSCOPE_CACHE_DIR"] = str(folder)
        target = peaks_path()
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(mine, target)
    one_round(model, folder, "priming", "quiet", [])
    return folder


def summary(rounds: list[Round]) -> str:
    def fmt(xs: list[float]) -> str:
        if not xs:
            return "-"
        return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"

    lines = [
        "| case | load | rounds | first point, s: median (min-max) | target (quiet) | "
        "host CPU to the first point, s | profile arrives, s | peaks arrive, s | "
        "samples before the pass | host up, s | others' CPU, cores |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case in ("cached", "first"):
        for load in ("quiet", "busy"):
            rs = [r for r in rounds if r.case == case and r.load == load]
            if not rs:
                continue
            first = [r.first_s for r in rs]
            target = TARGETS[case]
            others = statistics.median(r.others_cores for r in rs)
            met = "met" if statistics.median(first) < target else "NOT met"
            if others > QUIET_OTHERS:
                met = f"not judged: others used {others:.2f} cores"
            lines.append(
                f"| {case} | {load} | {len(rs)} | {fmt(first)} | < {target:g} s"
                f"{': ' + met if load == 'quiet' else ''} | "
                f"{fmt([r.host_cpu_s for r in rs])} | "
                f"{fmt([r.profile_s for r in rs if r.profile_s is not None])} | "
                f"{fmt([r.peaks_s for r in rs if r.peaks_s is not None])} | "
                f"{min(r.samples_before_profile for r in rs)} | "
                f"{fmt([r.ready_s for r in rs])} | {fmt([r.others_cores for r in rs])} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--model", type=Path, default=DEMO)
    ap.add_argument("--out", default=str(ROOT / "bench/results/first_point.md"))
    args = ap.parse_args(argv)
    model = args.model.resolve()
    cached = primed_cache(model)
    rounds: list[Round] = []
    try:
        for load, per_core in (("quiet", 0), ("busy", 1)):
            with spinners(per_core) as ours:
                for i in range(args.rounds):  # the two cases interleaved, round by round
                    for case in ("cached", "first") if i % 2 == 0 else ("first", "cached"):
                        cache = cached
                        if case == "first":
                            cache = Path(tempfile.mkdtemp(prefix="opscope-first-point-"))
                        try:
                            r = one_round(model, cache, case, load, ours)
                        finally:
                            if case == "first":
                                shutil.rmtree(cache, ignore_errors=True)
                        rounds.append(r)
                        print(r, flush=True)
    finally:
        shutil.rmtree(cached, ignore_errors=True)
    text = "\n".join([
        "# Time to the first latency point (bench/first_point.py)",
        "",
        f"{model.name} on {cpu_name()}; {args.rounds} rounds a row, the cases interleaved; "
        f"measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "From the Load sent to a host that is up (the window's: spawned as the window "
        "spawns it) to the first batch of latency samples received. `quiet`: no load "
        "of ours; `busy`: beside one spinning process per CPU of ours. `others' CPU`: "
        "what other processes than ours (the host, the spinners) used of the machine "
        f"meanwhile, in cores; a target is judged only where that is under {QUIET_OTHERS} "
        "(a quiet machine). `host CPU`: the host's CPU time from the Load to the first "
        "point, all its threads.",
        "",
        summary(rounds),
        "",
        "Every round: " + "; ".join(
            f"{r.case}/{r.load} {r.first_s:.2f} s (others {r.others_cores:.2f})" for r in rounds
        ) + ".",
    ])  # fmt: skip
    publish(text, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
