"""Signals against every long-running command (#30): SIGINT, SIGTERM and SIGKILL x load
(quiet and overloaded), load --llm, generate, tune, sweep and the app, each a real process
sent a real signal a few seconds in; and (#54) each command during its longest native
step: `bench`, `memory` and `graph` inside a session.run of a Loop of 10^12 iterations,
`memory` and `graph` while ONNX Runtime makes a session of a 100,000-node chain (graph's
layout of it is the graph view's part), where no Python signal handler can run.

Each cell records: the exit status, the time from the signal to the exit, whether the
command's summary printed, the status of each run in its session file, `PRAGMA
integrity_check`, the -wal/-shm files left beside it (checked before anything opens the
file), the command's child processes still alive after it exited, and for a killed load
how long before the kill the last recorded request was scheduled (README: a kill loses
about the last half second). An rc of -6 or "terminate called" in stderr is an abort.

Run: .venv/bin/python bench/signal_matrix.py [--only load] [--out bench/results/signal_matrix.md]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402

MODELS = ROOT / "resources" / "models"
CNN = str(MODELS / "demo_cnn.onnx")
TRANSFORMER = str(MODELS / "demo_transformer.onnx")
LLM = str(MODELS / "demo_llm")
CLI = [sys.executable, "-m", "engine.cli.main"]


@dataclass(frozen=True)
class Cell:
    name: str
    argv: list[str]  # {session} is replaced by the file
    after_s: float  # the signal comes this long after the session shows a run
    summary: str  # a line of stdout that starts so: the summary printed
    env: tuple[tuple[str, str], ...] = ()
    ready: str = ""  # the signal's delay counts from when stderr first says this
    signals: tuple[signal.Signals, ...] = ()  # () for all three


NATIVE = Path(tempfile.gettempdir()) / "opscope-signal-models"
LOOP = str(NATIVE / "loop_1e12.onnx")
CHAIN = str(NATIVE / "chain_100k.onnx")
BURST = str(NATIVE / "burst_1m_at_0.csv")  # a million arrivals at t=0
AZURE = str(NATIVE / "azure_1m.csv")  # an Azure-style LLM trace of a million rows


def traces() -> None:
    """The replay cells' traces: a million requests due at once (`load`: their backlog
    recorded as it arrives), and a million-row Azure LLM trace at 200/s (`simulate --llm`:
    minutes of simulation)."""
    import numpy as np

    NATIVE.mkdir(exist_ok=True)
    if not Path(BURST).exists():
        Path(BURST).write_text("time\n" + "0\n" * 1_000_000)
    if not Path(AZURE).exists():
        n = 1_000_000
        rng = np.random.default_rng(0)
        t = np.cumsum(rng.exponential(1 / 200, n))
        stamps = np.datetime64("2023-11-16T18:00:00", "ns") + (t * 1e9).astype("timedelta64[ns]")
        rows = zip(stamps.astype(str).tolist(), rng.integers(64, 512, n).tolist(),
                   rng.integers(16, 128, n).tolist(), strict=True)  # fmt: skip
        text = "".join(f"{s.replace('T', ' ')},{p},{o}\n" for s, p, o in rows)
        Path(AZURE).write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + text)


def native_models() -> None:
    """The long-native-step models: a Loop of 10^12 iterations (one run of hours) and a
    100,000-node Relu chain (ONNX Runtime takes 10-60 s to make its session)."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    NATIVE.mkdir(exist_ok=True)
    if not Path(LOOP).exists():
        body = h.make_graph(
            [
                h.make_node("Identity", ["c"], ["c_out"]),
                h.make_node("Add", ["v", "one"], ["v_out"]),
            ],
            "body",
            [
                h.make_tensor_value_info("i", T.INT64, []),
                h.make_tensor_value_info("c", T.BOOL, []),
                h.make_tensor_value_info("v", T.FLOAT, [1]),
            ],
            [
                h.make_tensor_value_info("c_out", T.BOOL, []),
                h.make_tensor_value_info("v_out", T.FLOAT, [1]),
            ],
            initializer=[h.make_tensor("one", T.FLOAT, [1], [1.0])],
        )
        g = h.make_graph(
            [h.make_node("Loop", ["M", "cond", "x"], ["y"], body=body)],
            "g",
            [h.make_tensor_value_info("x", T.FLOAT, [1])],
            [h.make_tensor_value_info("y", T.FLOAT, [1])],
            initializer=[
                h.make_tensor("M", T.INT64, [], [10**12]),
                h.make_tensor("cond", T.BOOL, [], [True]),
            ],
        )
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.save(m, LOOP)
    if not Path(CHAIN).exists():
        n = 100_000
        nodes = [h.make_node("Relu", [f"t{i}"], [f"t{i + 1}"]) for i in range(n)]
        g = h.make_graph(
            nodes,
            "g",
            [h.make_tensor_value_info("t0", T.FLOAT, [1, 4])],
            [h.make_tensor_value_info(f"t{n}", T.FLOAT, [1, 4])],
        )
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.save(m, CHAIN)


CELLS = [
    Cell("load quiet", [*CLI, "load", TRANSFORMER, "--traffic", "poisson:50", "--duration",
         "60", "--session", "{session}"], 4.0, "requests "),
    Cell("load overloaded", [*CLI, "load", TRANSFORMER, "--traffic", "poisson:3000",
         "--duration", "60", "--session", "{session}"], 4.0, "requests "),
    Cell("load --llm", [*CLI, "load", LLM, "--llm", "--traffic", "poisson:20", "--duration",
         "60"], 12.0, "layout "),  # records nothing: the signal comes 12 s after the start
    Cell("generate", [*CLI, "generate", LLM, "--duration", "60", "--session", "{session}"],
         4.0, "ttft "),
    Cell("tune", [*CLI, "tune", CNN, "--duration", "4", "--budget", "6", "--session",
         "{session}"], 7.0, "best "),
    Cell("sweep", [*CLI, "sweep", TRANSFORMER, "--vary", "sequence=16,32,64,128",
         "--duration", "4", "--session", "{session}"], 5.0, "growth "),
    Cell("app", [sys.executable, "-m", "app.entry", "gui", CNN, "--session", "{session}"],
         8.0, "", (("QT_QPA_PLATFORM", "offscreen"),)),
    # the longest native step: signalled this long after the start (no session to watch)
    Cell("bench Loop 1e12", [*CLI, "bench", LOOP, "--no-live"], 15.0, ""),
    Cell("memory Loop 1e12", [*CLI, "memory", LOOP], 15.0, ""),
    Cell("graph Loop 1e12", [*CLI, "graph", LOOP], 15.0, ""),
    Cell("memory chain 100k (session)", [*CLI, "memory", CHAIN], 12.0, ""),
    Cell("graph chain 100k", [*CLI, "graph", CHAIN], 12.0, ""),
    # a replay of a million requests at t=0: the signal while their backlog is recorded
    # (3 s after the engine is chosen: serving has begun, the first write of the backlog not
    # yet ended)
    Cell("load replay 1M at t=0", [*CLI, "load", CNN, "--traffic", f"trace:{BURST}",
         "--threads", "1", "--session", "{session}"], 3.0, "requests ",
         ready="info: provider", signals=(signal.SIGINT, signal.SIGTERM)),
    # simulate --llm on a million-row trace: the signal 10 s into the simulation itself
    Cell("simulate --llm 1M rows", [*CLI, "simulate", LLM, "--llm", "--traffic",
         f"trace:{AZURE}", "--duration", "100000", "--layout", "colocated"], 10.0, "",
         ready="[simulate]", signals=(signal.SIGINT, signal.SIGTERM)),
]  # fmt: skip
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)


def descendants(pid: int) -> set[int]:
    """Every process below `pid` (from /proc)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                parent[int(entry.name)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
    out: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {c for c, p in parent.items() if p in frontier} - out
        out |= frontier
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def cpu_seconds(pid: int) -> float | None:
    """The CPU time `pid` has used so far (user + system, its threads together)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def reaped(proc: subprocess.Popen[bytes], timeout_s: float) -> tuple[int, float | None]:
    """`proc`'s exit status and the CPU time it used in all (killed past `timeout_s`):
    the CPU seconds from the signal to the exit do not depend on how busy the machine was,
    where exit_s does."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage.ru_utime + usage.ru_stime
        time.sleep(0.02)
    proc.kill()
    return proc.wait(), None


def has_run(session: Path) -> bool:
    if not session.exists():
        return False
    try:
        with contextlib.closing(sqlite3.connect(f"file:{session}?mode=ro", uri=True)) as conn:
            return bool(conn.execute("SELECT count(*) FROM runs").fetchone()[0])
    except sqlite3.Error:
        return False


def file_facts(session: Path, killed_wall_ns: int | None) -> dict[str, str]:
    left = [s for s in ("-wal", "-shm") if Path(f"{session}{s}").exists()]
    facts = {"left": ",".join(left) or "none"}
    if not session.exists():
        return {**facts, "status": "no file", "integrity": "-", "lag": "-"}
    from engine.session.reader import SessionReader

    with contextlib.closing(sqlite3.connect(f"file:{session}?mode=ro", uri=True)) as conn:
        facts["integrity"] = conn.execute("PRAGMA integrity_check").fetchone()[0]
        lag = "-"
        if killed_wall_ns is not None:
            row = conn.execute(
                "SELECT s.origin_ns, max(r.scheduled_ns), count(*), "
                "sum(r.outcome = 3) FROM serving s JOIN requests r ON r.run_id = s.run_id"
            ).fetchone()
            if row and row[0] is not None and row[1] is not None:
                lag = f"{(killed_wall_ns - row[0] - row[1]) / 1e9:.2f} s ({row[3]:,} unserved)"
        facts["lag"] = lag
    try:
        with SessionReader.open(session) as reader:
            facts["status"] = ", ".join(r.status for r in reader.runs()) or "no run"
    except Exception as exc:  # the cell reports it; the matrix goes on
        facts["status"] = f"unreadable: {exc}"
    return facts


def run_cell(cell: Cell, sig: signal.Signals, folder: Path) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    session = folder / f"{cell.name.replace(' ', '_').replace('-', '')}_{sig.name}.opscope"
    argv = [a.replace("{session}", str(session)) for a in cell.argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT), **dict(cell.env)}
    out_path, err_path = session.with_suffix(".out"), session.with_suffix(".err")
    with out_path.open("w") as out, err_path.open("w") as err:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=err, env=env)
        start = time.monotonic()
        uses_session = "{session}" in " ".join(cell.argv)
        while uses_session and not has_run(session) and time.monotonic() - start < 120:
            time.sleep(0.2)
        while cell.ready and cell.ready not in err_path.read_text() and proc.poll() is None:
            time.sleep(0.2)
        time.sleep(cell.after_s)
        children = descendants(proc.pid)
        busy = os.getloadavg()[0]  # others' work too: the machine is shared
        cpu_at = cpu_seconds(proc.pid)
        sent = time.monotonic()
        killed_wall = time.time_ns() if sig == signal.SIGKILL else None
        proc.send_signal(sig)
        rc, cpu = reaped(proc, 120)
        took = time.monotonic() - sent
    time.sleep(1.0)  # a child told of its parent's death gets a moment to go
    survivors = sorted(p for p in children if alive(p))
    for pid in survivors:  # cleaned up after counting, so the next cell starts clean
        os.kill(pid, signal.SIGKILL)
    stdout, stderr = out_path.read_text(), err_path.read_text()
    facts = file_facts(session, killed_wall) if uses_session else {
        "left": "-", "status": "(no session)", "integrity": "-", "lag": "-"}  # fmt: skip
    aborted = rc == -6 or "terminate called" in stderr
    summary = bool(cell.summary) and any(ln.startswith(cell.summary) for ln in stdout.splitlines())
    last = next((ln for ln in reversed(stderr.splitlines()) if ln.strip()), "")
    return {
        "cell": cell.name,
        "signal": sig.name,
        "rc": str(rc),
        "exit_s": f"{took:.2f}",
        "exit_cpu_s": f"{cpu - cpu_at:.2f}" if cpu is not None and cpu_at is not None else "-",
        "load1": f"{busy:.1f}",
        "summary": ("yes" if summary else "no") if cell.summary else "-",
        "abort": "ABORT" if aborted else "no",
        "traceback": "yes" if "Traceback" in stderr else "no",
        "survivors": str(len(survivors)),
        **facts,
        "stderr": last[:90].replace("|", "/"),
    }


COLUMNS = ("cell", "signal", "rc", "exit_s", "exit_cpu_s", "load1", "summary", "abort",
           "traceback", "status", "integrity", "left", "survivors", "lag", "stderr")  # fmt: skip


def table(rows: list[dict[str, str]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(r[c] for c in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def kill_lags(rounds: int, out: str) -> None:
    """kill -9 of a recording load, `rounds` times quiet and overloaded: how long before
    the kill the last recorded request was scheduled (README: about half a second)."""
    lines = ["| cell | round | lag (unserved recorded) |", "|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="opscope-kills-") as tmp:
        for cell in CELLS[:2]:
            for k in range(rounds):
                row = run_cell(cell, signal.SIGKILL, Path(tmp) / str(k))
                print(cell.name, k, row["lag"], flush=True)
                lines.append(f"| {cell.name} | {k + 1} | {row['lag']} |")
    head = (
        "# kill -9 during `load --session` (bench/signal_matrix.py --kills)\n\n"
        "lag: from the last recorded request's scheduled time to the kill (wall clock).\n\n"
    )
    publish(head + "\n".join(lines), out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="cells whose name contains this")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "signal_matrix.md"))
    ap.add_argument("--kills", type=int, default=0,
                    help="instead: kill -9 each load cell N times; the lag of each")  # fmt: skip
    args = ap.parse_args()
    cells = [c for c in CELLS if not args.only or args.only in c.name]
    if args.kills:
        kill_lags(args.kills, args.out)
        return
    rows = []
    native_models()
    traces()
    with tempfile.TemporaryDirectory(prefix="opscope-signals-") as tmp:
        for cell in cells:
            for sig in cell.signals or SIGNALS:
                row = run_cell(cell, sig, Path(tmp))
                print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
                rows.append(row)
    head = (
        "# Signal matrix (bench/signal_matrix.py)\n\n"
        f"{len(rows)} cells on {os.cpu_count()} CPUs (a shared machine). exit_s: signal to "
        "exit; exit_cpu_s: the CPU seconds the command used meanwhile (not slowed by others' "
        "work). load1: the 1-minute load average at the signal (above the "
        "CPU count: other work waited). status: each run in the session file as a reader "
        "sees it (`interrupted`: "
        "left `running` by a killed writer). left: -wal/-shm beside the file after the "
        "exit (a SIGKILLed writer leaves them; the next open checkpoints). survivors: the "
        "command's child processes alive 1 s after it exited. lag: for a killed load, how "
        "long before the kill the last recorded request was scheduled (unserved: arrived "
        "and recorded, not yet served: the backlog).\n\n"
    )
    publish(head + table(rows), args.out)


if __name__ == "__main__":
    main()
