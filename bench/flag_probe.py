"""Hostile flag values and trace files against the serving commands (load, simulate,
simulate --llm, load --llm, and simulate --tune-batching): each command in its own
process, under a 60 s timeout and a 4 GB address-space limit, recording its exit status,
wall time, peak RSS and whether stderr held a traceback. Writes the table to
bench/results/flag_probe.md.

    PYTHONPATH=. .venv/bin/python bench/flag_probe.py [--only SUBSTRING] [--out FILE]

The traces are generated in a temporary folder: ten million rows, a million requests at
one instant, size columns holding -5, 0, 1e300, nan, a string, and a time column that
goes back, one line of 1 GB (written sparsely: 64 MB at a time)."""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CNN = str(ROOT / "resources" / "models" / "demo_cnn.onnx")
TRANSFORMER = str(ROOT / "resources" / "models" / "demo_transformer.onnx")
LLM = str(ROOT / "resources" / "models" / "demo_llm")
TIMEOUT_S = 60
MEMORY = 4 << 30  # RLIMIT_AS


@dataclass
class Result:
    name: str
    argv: list[str]
    rc: int | None  # None: timed out
    wall_s: float
    peak_mb: float
    traceback: bool
    last: str  # the last line of stderr


def traces(folder: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}

    def write(name: str, text: str) -> None:
        out[name] = folder / f"{name}.csv"
        out[name].write_text(text)

    step = 1e-4
    with (folder / "10m.csv").open("w") as fh:
        fh.write("time\n")
        for start in range(0, 10_000_000, 100_000):
            fh.write("".join(f"{(start + i) * step:.4f}\n" for i in range(100_000)))
    out["10m_rows"] = folder / "10m.csv"
    write("1m_same_instant", "time\n" + "0\n" * 1_000_000)
    for label, value in [
        ("size_negative", "-5"),
        ("size_zero", "0"),
        ("size_1e300", "1e300"),
        ("size_nan", "nan"),
        ("size_string", "abc"),
    ]:
        write(label, f"time,size\n0,10\n0.1,20\n0.2,{value}\n0.3,10\n")
    write("time_back", "time\n0\n0.5\n0.2\n")
    write("time_nan", "time\n0\nnan\n")
    write("time_1e300", "time\n0\n1e300\n")
    line = folder / "1g_line.csv"
    with line.open("wb") as fh:
        fh.write(b"time\n0\n")
        chunk = b"1" * (64 << 20)
        for _ in range(16):
            fh.write(chunk)
        fh.write(b"\n")
    out["1g_line"] = line
    return out


def cases(tr: dict[str, Path]) -> list[tuple[str, list[str]]]:
    c: list[tuple[str, list[str]]] = []
    short = ["--duration", "2"]
    for name in tr:
        spec = f"trace:{tr[name]}"
        c.append((f"load {name}", ["load", CNN, "--traffic", spec, *short]))
        c.append((f"simulate {name}", ["simulate", CNN, "--traffic", spec, *short]))
        c.append((f"simulate --llm {name}", ["simulate", LLM, "--llm", "--traffic", spec]))
        c.append((f"load --llm {name}", ["load", LLM, "--llm", "--traffic", spec, *short]))
    c += [
        ("simulate --max-batch 4096", ["simulate", TRANSFORMER, "--max-batch", "4096",
                                       "--traffic", "poisson:200"]),
        ("load --warmup-s 1e9", ["load", CNN, "--traffic", "poisson:50", "--duration", "1",
                                 "--warmup-s", "1e9"]),
        ("load --warmup-s 600", ["load", CNN, "--traffic", "poisson:50", "--duration", "1",
                                 "--warmup-s", "600"]),
        ("simulate --tune-batching --slo-p99 50",
         ["simulate", TRANSFORMER, "--traffic", "poisson:100", "--tune-batching",
          "--slo-p99", "50"]),
        ("simulate --tune-batching --slo-p99 1e9",
         ["simulate", CNN, "--traffic", "poisson:100", "--tune-batching", "--slo-p99", "1e9"]),
        ("simulate --tune-batching --slo-p99 0.000001",
         ["simulate", CNN, "--traffic", "poisson:100", "--tune-batching",
          "--slo-p99", "0.000001"]),
        ("simulate --find --slo-p99 50",
         ["simulate", CNN, "--traffic", "poisson:100", "--find", "max-rate", "--slo-p99", "50"]),
        ("load --seed -1", ["load", CNN, "--traffic", "poisson:50", "--seed", "-1"]),
        ("simulate --llm --max-seqs 1e9",
         ["simulate", LLM, "--llm", "--traffic", "poisson:5", "--max-seqs", "1000000000"]),
        ("load --llm --max-seqs 1e9",
         ["load", LLM, "--llm", "--traffic", "poisson:5", "--max-seqs", "1000000000"]),
        ("simulate --llm --chunk-tokens 0",
         ["simulate", LLM, "--llm", "--traffic", "poisson:5", "--layout", "chunked",
          "--chunk-tokens", "0"]),
        ("simulate --llm --prefill-tokens 0",
         ["simulate", LLM, "--llm", "--traffic", "poisson:5", "--prefill-tokens", "0"]),
        ("load --traffic poisson:1e9", ["load", CNN, "--traffic", "poisson:1e9"]),
        ("load --duration 1e9", ["load", CNN, "--traffic", "poisson:5", "--duration", "1e9"]),
        ("load --timeout-ms nan", ["load", CNN, "--traffic", "poisson:5", "--timeout-ms", "nan"]),
    ]  # fmt: skip
    return c


def limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def run(name: str, argv: list[str], cache: str) -> Result:
    fd, stats_name = tempfile.mkstemp(suffix=".time")
    os.close(fd)
    cmd = ["/usr/bin/time", "-f", "%M", "-o", stats_name, sys.executable, "-m",
           "engine.cli.main", *argv]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPSCOPE_CACHE_DIR": cache}
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env,
                             preexec_fn=limit, cwd=ROOT)  # fmt: skip
        try:
            rc: int | None = p.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            rc = None
        wall = time.perf_counter() - t0
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    try:
        peak = float(Path(stats_name).read_text().split()[-1]) / 1024
    except (OSError, ValueError, IndexError):
        peak = float("nan")
    os.unlink(stats_name)
    lines = [ln for ln in text.replace("\r", "\n").splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith(("Command exited", "Command terminated"))]
    return Result(name, argv, rc, wall, peak, "Traceback" in text, lines[-1] if lines else "")


def table(results: list[Result]) -> str:
    rows = ["| case | rc | wall s | peak RSS MB | traceback | last stderr line |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    for r in results:
        rc = "timeout" if r.rc is None else str(r.rc)
        last = r.last.replace("|", "\\|")[:160]
        rows.append(f"| {r.name} | {rc} | {r.wall_s:.1f} | {r.peak_mb:.0f} | "
                    f"{'yes' if r.traceback else 'no'} | {last} |")  # fmt: skip
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="run the cases whose name holds this")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "flag_probe.md"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="opscope-probe-") as tmp:
        folder = Path(tmp)
        todo = [(n, argv) for n, argv in cases(traces(folder)) if a.only in n]
        results = []
        for name, argv in todo:
            r = run(name, argv, str(folder / "cache"))
            results.append(r)
            rc = "timeout" if r.rc is None else r.rc
            print(f"{name:48s} rc {rc!s:7s} {r.wall_s:5.1f} s {r.peak_mb:6.0f} MB "
                  f"{'TRACEBACK ' if r.traceback else ''}{r.last[:90]}", flush=True)  # fmt: skip
    bad_tb = [r.name for r in results if r.traceback]
    bad_to = [r.name for r in results if r.rc is None]
    text = (
        "# Flag and trace probe\n\n"
        f"`python bench/flag_probe.py` on this machine: {len(results)} cases, each its own "
        f"process, timeout {TIMEOUT_S} s, RLIMIT_AS {MEMORY >> 30} GB. Tracebacks: "
        f"{len(bad_tb)}{' (' + ', '.join(bad_tb) + ')' if bad_tb else ''}; timeouts: "
        f"{len(bad_to)}{' (' + ', '.join(bad_to) + ')' if bad_to else ''}.\n\n"
        + table(results)
        + "\n"
    )
    if a.only:
        print(text)
    else:
        Path(a.out).write_text(text)
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
