"""The window's engine host over SSH against the local pipe: the delay each event batch
adds and the engine's throughput with the window connected (issue 27's goals: 1 ms or less
added per batch at the window's rate; throughput at least 0.95 of the local host's).

Each round runs the demo CNN live for --seconds in an engine host, either a child process
over a pipe (as the window's local host) or `opscope remote host` through a real SSH server
on localhost (tests/ssh_server.py: asyncssh, in a process of its own), both speaking wire
messages; local and SSH rounds alternate. A batch's delay: its receipt here minus the end
of its newest sample on the host (one machine, one monotonic clock), so the host's 50 ms
batching is in both and the difference is the link's. Throughput: samples per second
after the first 3 s. Run:
    .venv/bin/python bench/remote_events.py [--seconds 20] [--rounds 2] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402
from sshd_server import sshd  # noqa: E402

from engine.events import LatencyBatch, RunStarted  # noqa: E402
from engine.remote.target import Target  # noqa: E402
from engine.remote.window_host import FileSender, SshHost  # noqa: E402
from engine.run import host_commands as cmds  # noqa: E402
from engine.run.host import host_main  # noqa: E402
from engine.run.wire import PipeConnection  # noqa: E402
from tests.ssh_server import ssh_host  # noqa: E402

MODEL = ROOT / "resources/models/demo_cnn.onnx"
WARMUP_S = 3.0


def _round(conn: Any, model: str, seconds: float) -> tuple[list[float], float]:
    """(delays in ms, samples/s) of one live run."""
    conn.send(cmds.Load(model))
    delays: list[float] = []
    samples = 0
    t_start: float | None = None
    end = time.monotonic() + 120
    while time.monotonic() < end:
        if not conn.poll(0.2):
            continue
        batch = conn.recv()
        now = time.perf_counter_ns()
        for ev in batch:
            if isinstance(ev, RunStarted) and t_start is None:
                t_start = time.monotonic()
                end = t_start + WARMUP_S + seconds
            if isinstance(ev, LatencyBatch) and ev.latencies_ns.size and t_start is not None:
                if time.monotonic() - t_start < WARMUP_S:
                    continue
                last = ev.origin_ns + int(ev.starts_ns[-1]) + int(ev.latencies_ns[-1])
                delays.append((now - last) / 1e6)
                samples += int(ev.latencies_ns.size)
    conn.send(cmds.Shutdown())
    return delays, samples / seconds


def local_round(seconds: float) -> tuple[list[float], float]:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=host_main, args=(child, 0.1, 0), daemon=True)
    proc.start()
    child.close()
    try:
        return _round(PipeConnection(parent), str(MODEL), seconds)
    finally:
        proc.join(20)


def ssh_round(target: Target, seconds: float) -> tuple[list[float], float]:
    host = SshHost(target)
    conn = host.start()
    try:
        return _round(conn, FileSender(target).path(str(MODEL)), seconds)
    finally:
        host.close_input()
        host.join(20)


def _serve(tmp: str, conn: Any) -> None:
    """The SSH server in a process of its own (not competing with the measuring one)."""
    with ssh_host(Path(tmp)) as server:
        conn.send((server.port, server.client_env))
        conn.recv()  # until told to stop


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench/results/remote_events.md"))
    ap.add_argument(
        "--sshd", action="store_true", help="OpenSSH's sshd, not the asyncssh test server"
    )
    args = ap.parse_args()
    results: dict[str, list[tuple[list[float], float]]] = {"local": [], "ssh": []}
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        here, there = ctx.Pipe()
        if args.sshd:
            server_proc, port, env = sshd(tmp)
        else:
            server = ctx.Process(target=_serve, args=(tmp, there), daemon=True)
            server.start()
            port, env = here.recv()
        os.environ.update(env)
        target = Target.parse(f"127.0.0.1:{port}")
        for k in range(2 * args.rounds):
            ssh_first = k // 2 % 2 == 1
            mode = ("ssh" if k % 2 == 0 else "local") if ssh_first else (
                "local" if k % 2 == 0 else "ssh")  # fmt: skip
            got = ssh_round(target, args.seconds) if mode == "ssh" else local_round(args.seconds)
            results[mode].append(got)
            print(mode, f"{statistics.median(got[0]):.2f} ms", f"{got[1]:.0f}/s", flush=True)
        if args.sshd:
            server_proc.terminate()
            server_proc.wait(10)
        else:
            here.send("stop")
            server.join(30)

    def pooled(mode: str) -> tuple[float, float, int, float]:
        d = sorted(x for delays, _ in results[mode] for x in delays)
        rate = statistics.median(r for _, r in results[mode])
        return statistics.median(d), d[int(0.9 * (len(d) - 1))], len(d), rate

    server_kind = "OpenSSH sshd" if args.sshd else "asyncssh in a process of its own"
    lm, l90, ln, lr = pooled("local")
    sm, s90, sn, sr = pooled("ssh")
    lines = [
        f"# The window's engine host over SSH against the local pipe ({time.strftime('%Y-%m-%d')})",
        "",
        f"The demo CNN live for {args.seconds:.0f} s per round after {WARMUP_S:.0f} s, "
        f"{args.rounds} rounds each, local and SSH alternating (SSH: a real server on "
        f"localhost, {server_kind}). Delay: an event batch's receipt "
        "minus the end of its newest sample on the host (the host's 50 ms batching is in "
        "both).",
        "",
        "| host | batches | delay p50 ms | delay p90 ms | samples/s |",
        "|---|---|---|---|---|",
        f"| local pipe | {ln} | {lm:.2f} | {l90:.2f} | {lr:.0f} |",
        f"| SSH | {sn} | {sm:.2f} | {s90:.2f} | {sr:.0f} |",
        "",
        f"Added by SSH per batch: p50 {sm - lm:+.2f} ms, p90 {s90 - l90:+.2f} ms (goal: 1 ms "
        f"or less). Throughput with the window connected over SSH: {sr / lr:.3f} of the "
        "local host's (goal: at least 0.95).",
        "",
        f"CPU: {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f} at the end.",
    ]
    publish("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
