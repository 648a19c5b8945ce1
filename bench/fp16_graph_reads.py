"""FP16 on the CPU provider: the optimized graph ONNX Runtime saved is read once, for its
node count and its inserted Casts together (before, the node count read it and the FP16
warning's check read it a second time). For the demo transformer and MiniLM: the graph a
real FP16 prepare saved, read both ways in interleaved rounds (one read, then the two
reads as before, alternating which goes first), quiet and beside one spinning process per
CPU; the ratio is of medians taken side by side, of wall time and of the thread's CPU time
(which other processes' load inflates less). The whole prepare (with today's code) is
timed too (a few rounds), to show what share of it the saved read was. Each case says how
busy the machine was: other processes' CPU over its rounds (engine/measure/contention.py),
the spinners included where they ran.

    .venv/bin/python bench/fp16_graph_reads.py [--rounds N] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from results_file import publish  # noqa: E402

MODELS = {
    "demo transformer": ROOT / "resources/models/demo_transformer.onnx",
    "MiniLM": Path.home() / ".cache/opscope-bench/minilm/model.onnx",
}


@contextlib.contextmanager
def spinning(per_cpu: int) -> Iterator[None]:
    procs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(per_cpu * (os.cpu_count() or 1))
    ]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def prepared_graph(model: Path, keep: Path) -> tuple[Path, float]:
    """The optimized graph a real FP16 CPU prepare saved (copied to `keep`), and the
    prepare's wall time."""
    from engine import backends
    from engine.backends.base import PrepareRequest
    from engine.backends.ort import backend as ort_backend
    from engine.backends.ort.fp16_cpu import optimized_graph as real
    from engine.config import RunConfig
    from engine.events import drive
    from engine.model.workload import Workload

    def keeping(optimized: str | Path, casts: bool) -> tuple[int | None, int | None]:
        shutil.copy(optimized, keep)
        return real(optimized, casts)

    setattr(ort_backend, "optimized_graph", keeping)  # noqa: B010
    try:
        config = RunConfig(precision="fp16", provider="cpu", threads=1)
        start = time.perf_counter()
        prepared = drive(
            backends.backend_for(config).prepare(PrepareRequest(Workload(str(model), config)))
        )
        wall = time.perf_counter() - start
        prepared.close()
    finally:
        setattr(ort_backend, "optimized_graph", real)  # noqa: B010
    return keep, wall


def two_reads(path: Path) -> tuple[int, int]:
    """Before: the node count, then the warning's check, each loading the graph."""
    import onnx

    from engine.backends.ort.fp16_cpu import INSERTED
    from engine.model.info import count_nodes

    nodes = count_nodes(path)
    graph = onnx.load(str(path), load_external_data=False).graph
    return nodes, sum(1 for n in graph.node if n.op_type == "Cast" and n.name.startswith(INSERTED))


def one_read(path: Path) -> tuple[int | None, int | None]:
    from engine.backends.ort.fp16_cpu import optimized_graph

    return optimized_graph(path, casts=True)


def case(name: str, model: Path, rounds: int, load: str, tmp: Path) -> str:
    from engine.measure.contention import Window

    graph, _ = prepared_graph(model, tmp / f"{name.replace(' ', '_')}.onnx")
    assert one_read(graph) == two_reads(graph)  # the same figures, from one load
    window = Window()
    once: list[tuple[float, float]] = []  # (wall s, CPU s) of each read
    twice: list[tuple[float, float]] = []
    prepares: list[float] = []
    for i in range(rounds):
        order = ((one_read, once), (two_reads, twice))
        for fn, out in order if i % 2 == 0 else order[::-1]:
            start, cpu = time.perf_counter(), time.thread_time()
            fn(graph)
            out.append((time.perf_counter() - start, time.thread_time() - cpu))
        if i < 3:  # a few whole prepares, for the share the saved read was of one
            prepares.append(prepared_graph(model, tmp / "again.onnx")[1])
    busy = window.done()
    others = f"others {busy.others_cpu:.2f} of {busy.cpus} CPUs" if busy else "not measured"
    nodes, casts = one_read(graph)
    one, two = (statistics.median(w for w, _ in v) * 1e3 for v in (once, twice))
    one_cpu, two_cpu = (statistics.median(c for _, c in v) * 1e3 for v in (once, twice))
    whole = statistics.median(prepares) * 1e3
    return (
        f"| {name} | {load} | {nodes} / {casts} | {one:.2f} ({one_cpu:.2f}) | "
        f"{two:.2f} ({two_cpu:.2f}) | {two / one:.2f}x ({two_cpu / one_cpu:.2f}x) | "
        f"{two - one:.2f} ms of {whole:.0f} ms | {others} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--out", default=str(ROOT / "bench/results/fp16_graph_reads.md"))
    args = parser.parse_args()
    rows = [
        "| model | load | nodes / Casts inserted | one read, ms (CPU) | two reads (before), "
        "ms (CPU) | ratio (CPU) | saved per FP16 CPU prepare, wall | how busy |",
        "|---|---|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory(prefix="fp16-reads-") as tmp:
        for name, model in MODELS.items():
            if not model.exists():
                rows.append(f"| {name} | - | {model} is missing | | | | | |")
                continue
            rows.append(case(name, model, args.rounds, "quiet", Path(tmp)))
            with spinning(1):
                rows.append(case(name, model, args.rounds, "1 spinner per CPU", Path(tmp)))
    from engine.hostinfo import cpu_model

    text = (
        "# FP16 on the CPU: the optimized graph read once\n\n"
        f"CPU: {cpu_model()}; {args.rounds} interleaved rounds a case (medians); "
        "`python bench/fp16_graph_reads.py`\n\n" + "\n".join(rows)
    )
    publish(text, args.out)


if __name__ == "__main__":
    main()
