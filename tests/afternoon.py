"""The seed's afternoon in one window and one session file, driven as a user drives it:
open a model, change an input size, INT8 held to a target, a load run and the What-if, a
tune, a sweep, the demo LLM and a serving study, a production trace dropped on it with a
prefix cache (Live), Save As, Quit. Each step's outcome and time is kept; `checks()` holds the
file and the process to what the window showed.

Shared by the suite (tests/test_afternoon.py: the demo transformer, short durations) and
bench/afternoon.py (a real-size model at real durations, results committed)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from engine.session.store import open_session_file
from tests.file_drops import file_drop

Wait = Callable[[Callable[[], bool], int], None]  # (condition, timeout ms): qtbot.waitUntil


@dataclass
class Plan:
    """The afternoon's sizes: `short` for the suite, real ones for the bench."""

    model: Path
    llm: Path
    folder: Path
    dim: str = "sequence"
    size: int = 64  # the input size set in the Inputs panel
    sweep: tuple[int, int] = (32, 64)
    load_rate: float = 100.0
    load_s: float = 2.0
    tune_s: float = 0.5
    min_cosine: float = 0.99
    llm_requests: int = 8
    timeout_ms: int = 180_000


@dataclass
class Afternoon:
    plan: Plan
    steps: list[tuple[str, float, str]] = field(default_factory=list)  # name, s, outcome
    session: Path | None = None
    copy: Path | None = None
    shown_shape: str = ""  # the Inputs panel's shape, as the Model line shows it
    host_pids: list[int] = field(default_factory=list)
    children_left: list[str] = field(default_factory=list)
    graph_inputs: dict[str, Any] = field(default_factory=dict)  # the shapes the graph drew

    def step(self, name: str, fn: Callable[[], str]) -> None:
        t = time.monotonic()
        outcome = fn()
        self.steps.append((name, time.monotonic() - t, outcome))


def run(wb: Any, wait: Wait, plan: Plan, quit_app: Callable[[], None]) -> Afternoon:
    """Drive `wb` (a Workbench, shown) through the afternoon; `quit_app` stands for the
    application's own quit (the suite cannot end its QApplication)."""
    a = Afternoon(plan, session=Path(wb.recording.path))
    w, to = wb.window, plan.timeout_ms

    def open_model() -> str:
        wb.start(str(plan.model))
        wait(lambda: wb.controller.samples > 10, to)
        return f"{wb.controller.samples} samples of {plan.model.name}"

    def change_shape() -> str:
        box = w.inputs._boxes.get(plan.dim)
        if box is None or box.value() == plan.size:  # no change would come: say so, not hang
            dims = ", ".join(w.inputs._boxes)
            raise ValueError(f"afternoon: cannot set {plan.dim} to {plan.size} (dims: {dims})")
        box.setValue(plan.size)
        wait(lambda: f"x{plan.size}, size set" in w.model_label.text(), to)
        n = wb.controller.samples
        wait(lambda: wb.controller.samples > n + 10, to)
        a.shown_shape = next(
            line for line in w.model_label.text().split("\n") if "size set" in line
        )
        return a.shown_shape

    def int8() -> str:
        w.tolerance.setValue(plan.min_cosine)
        panel = w.config_panel
        panel.precision.setCurrentIndex(panel.precision.findData("int8-dynamic"))
        wait(lambda: w.accuracy.state in ("good", "bad") and "INT8" in _last_label(wb), to)
        n = wb.controller.samples
        wait(lambda: wb.controller.samples > n + 10, to)
        return f"{w.accuracy.state}: {w.accuracy.text()}"

    def load_and_what_if() -> str:
        from app.traffic.controller import TrafficController

        dock = wb.room(TrafficController).view
        dock.rate.setValue(plan.load_rate)
        dock.duration.setValue(plan.load_s)
        dock.max_batch.setValue(4)
        dock.run_button.click()
        wait(lambda: not dock.run_button.isEnabled(), 10_000)
        wait(lambda: dock.run_button.isEnabled(), to)
        dock.calibrate_button.click()
        wait(lambda: "predicted p50" in dock.what_if.check.text(), to)
        return dock.what_if.check.text()

    def tune() -> str:
        from app.tune.controller import TuneController

        dock = wb.room(TuneController).view
        for p, box in dock.precisions.items():
            box.setChecked(p in ("fp32", "int8-dynamic"))
        for f, box in dock.fusions.items():
            box.setChecked(f == "all")
        dock.threads.setText("1")
        dock.duration.setValue(plan.tune_s)
        dock.start_button.click()
        wait(lambda: not dock.start_button.isEnabled(), 10_000)
        wait(lambda: dock.start_button.isEnabled() and dock.table.rowCount() == 2, to)
        wait(lambda: wb.running, to)
        return dock.summary.text().split("\n")[0]

    def sweep() -> str:
        from app.scaling.controller import ScalingController

        dock = wb.room(ScalingController).view
        dock.dim.setCurrentText(plan.dim)
        dock.values.setText(",".join(map(str, plan.sweep)))
        dock.run_button.click()
        wait(lambda: not dock.run_button.isEnabled(), 10_000)
        wait(lambda: dock.run_button.isEnabled(), to)
        wait(lambda: wb.running, to)
        return dock.status.text()

    def memory() -> str:
        from app.memory.controller import MemoryController

        dock = wb.room(MemoryController).view
        dock.measure_button.click()
        wait(lambda: not dock.measure_button.isEnabled(), 10_000)
        wait(lambda: dock.measure_button.isEnabled(), to)
        wait(lambda: wb.running, to)
        return f"{dock.status.text()} | {dock.view.summary.text().splitlines()[0]}"

    def graph() -> str:
        """The Graph tab: the INT8 graph as run at the size shown, the live profile on it,
        its slowest node picked there and so in the op table."""
        from app.graph.controller import GraphController

        graph = wb.room(GraphController)
        view = graph.view.view
        w.dock("Graph").raise_()
        wait(lambda: view.result is not None and not graph.running, to)
        wait(lambda: wb.running, to)
        wait(lambda: bool(view.painted.colors), to)
        a.graph_inputs = dict(view.result["inputs"])
        profiled = {s.name for s in wb.controller.last_profile.ops}
        missing = profiled - set(view.canvas.items_by_name)
        top = max(wb.controller.last_profile.ops, key=lambda s: s.share).name
        view._clicked(top)
        picked = w.op_table.selected_op() == top
        int8 = sum(1 for v in view.result["views"]["run"]["precision"].values() if v == "INT8")
        w.roofline_dock.raise_()
        return (
            f"{len(view.canvas.items_by_name)} nodes as run, {int8} INT8; "
            f"{len(missing)} profiled node(s) missing; top node picked in the table: {picked}"
        )

    def llm() -> str:
        a.host_pids.append(wb.client.pid)
        wb.open_model(str(plan.llm))
        from app.llm_serving.controller import LLMServingController

        c = wb.room(LLMServingController)
        wait(lambda: c.model is not None and w.dock("LLM Serving").isVisible(), to)
        d = c.view
        d.requests.setValue(plan.llm_requests)
        d.rate.setValue(20)
        d.prompt_len.setText("16-48")
        d.new_tokens.setText("6")
        d.max_seqs.setValue(8)
        d.simulate_button.click()
        wait(lambda: c.busy, 10_000)
        wait(lambda: not c.busy, to)
        return f"{d.table.rowCount()} layouts: {d.status.text()[:80]}"

    def llm_trace() -> str:
        """A Mooncake trace dropped on the LLM Serving dock, replayed with a prefix cache:
        its prompts share two of their three 512-token blocks. Live is ticked first, so
        the drop and the cache's size (one burst of changes) are one study by themselves."""
        from app.llm_serving.controller import LLMServingController

        c = wb.room(LLMServingController)
        d = c.view
        trace = plan.folder / "mooncake.jsonl"
        rows = [{"timestamp": 250 * i, "input_length": 1100, "output_length": 4,
                 "hash_ids": [7, 8, 100 + i]} for i in range(plan.llm_requests)]  # fmt: skip
        trace.write_text("".join(json.dumps(x) + "\n" for x in rows))
        drop = file_drop(trace)
        d.live.setChecked(True)
        d.dropEvent(drop)
        d.prefix_blocks.setValue(16)
        wait(lambda: c.busy, 10_000)
        wait(lambda: not c.busy, to)
        d.live.setChecked(False)
        col = [d.table.horizontalHeaderItem(k).text() for k in range(d.table.columnCount())]
        cells = [d.table.item(r, col.index("Prefix cache")) for r in range(d.table.rowCount())]
        return (f"dropped: {drop.isAccepted()}; {d.table.rowCount()} layouts; prefix cache: "
                f"{cells[0].text() if cells and cells[0] else '-'}")  # fmt: skip

    def save_as() -> str:
        a.copy = plan.folder / "afternoon-copy.opscope"
        wb.recording.save_as(a.copy)  # File > Save As, past its dialog
        n = wb.controller.samples
        wait(lambda: wb.controller.samples > n + 10, to)  # and records on, into the copy
        return str(a.copy)

    def quit_() -> str:
        a.host_pids.append(wb.client.pid)
        mine = psutil.Process()
        wb.quit()
        quit_app()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and _ours(mine):
            time.sleep(0.1)
        a.children_left = [f"{p.pid} {_cmd(p)}" for p in _ours(mine)]
        return f"{len(a.children_left)} child processes left"

    for name, fn in (
        ("open model", open_model),
        ("change shape", change_shape),
        ("INT8 to target", int8),
        ("load run and What-if", load_and_what_if),
        ("tune 2 trials", tune),
        ("sweep 2 points", sweep),
        ("memory", memory),
        ("graph", graph),
        ("demo LLM serving study", llm),
        ("LLM trace with a prefix cache", llm_trace),
        ("Save As", save_as),
        ("Quit", quit_),
    ):
        a.step(name, fn)
    return a


def checks(a: Afternoon) -> dict[str, Any]:
    """What must hold after the afternoon: both files pass integrity_check, every run of
    the model ran the shape the window showed (a sweep's points: the swept size), and no
    process of the app is left."""
    out: dict[str, Any] = {}
    for label, path in (("autosave", a.session), ("Save As copy", a.copy)):
        assert path is not None
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            out[f"{label} integrity_check"] = con.execute("PRAGMA integrity_check").fetchone()[0]
        finally:
            con.close()
    want = a.plan.size
    wrong: list[str] = []
    kinds: dict[str, int] = {}
    with open_session_file(a.copy) as reader:  # type: ignore[arg-type]
        swept = {rid for s in reader.sweeps() for rid in s.run_ids}
        for r in reader.runs():
            kinds[r.kind] = kinds.get(r.kind, 0) + 1
            if r.model_name != a.plan.model.name or r.kind == "simulate":
                continue
            shapes = {n: spec.get("shape") for n, spec in r.inputs.items()}
            sizes = {s[-1] for s in shapes.values() if isinstance(s, list) and s}
            expect = set(a.plan.sweep) if r.id in swept else {want}
            first = r.id == min(x.id for x in reader.runs())  # before the size was set
            if sizes and not sizes & expect and not first:
                wrong.append(f"run {r.id} ({r.kind}): {shapes}")
        for m in reader.memory():  # measured at the shape shown too
            sizes = {s[-1] for s in m.report["inputs"].values() if s}
            if not sizes & {want}:
                wrong.append(f"memory report {m.id}: {m.report['inputs']}")
        out["memory reports"] = len(reader.memory())
        out["LLM serving studies"] = [(s.kind, len(s.rows)) for s in reader.llm_studies()]
        out["LLM studies' traffic and prefix cache"] = [
            (s.plan.get("traffic", ""), s.plan.get("prefix_cache", 0)) for s in reader.llm_studies()
        ]
        graph_sizes = {s[-1] for s in a.graph_inputs.values() if s}
        if a.graph_inputs and not graph_sizes & {want}:
            wrong.append(f"graph: {a.graph_inputs}")
    out["runs by kind"] = kinds
    out["runs at another shape than the window showed"] = wrong
    out["processes left after Quit"] = a.children_left
    out["engine hosts alive after Quit"] = [p for p in a.host_pids if _alive(p)]
    return out


def _last_label(wb: Any) -> str:
    from app.runs.controller import RunsController

    rows = wb.room(RunsController).summary.rows()
    return rows[-1].label if rows else ""


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _ours(me: psutil.Process) -> list[psutil.Process]:
    """Child processes the app started (multiprocessing's resource tracker belongs to the
    interpreter: it ends with it, and outlives a Quit only in the suite's process)."""
    return [p for p in me.children(recursive=True) if "resource_tracker" not in _cmd(p)]


def _cmd(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())[:120]
    except psutil.Error:
        return "?"
