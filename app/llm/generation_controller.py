"""A generating model in the window: its live TTFT/TPOT figures in the Generation dock,
each generation's TTFT, TPOT and end to end as points on the latency plot, and its two
profiled phases: the op table shows the phase picked, the roofline both at
once (prefill's ops near the compute roof, decode's on the memory slope)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject

from app.live.live_controller import without_trace
from engine.api import GenerationStarted, GenerationSteps, ModelLoaded, OpProfile
from widgets.models.generation_stats import GenerationStats

if TYPE_CHECKING:
    from app.host.engine_client import EngineClient
    from app.live.live_controller import LiveController
    from app.shell.main_window import MainWindow


class GenerationController(QObject):
    def __init__(self, view: MainWindow, live: LiveController, client: EngineClient) -> None:
        super().__init__()
        self.view = view
        self.live = live  # the LiveController: it draws the roofline with the peaks
        self.stats = GenerationStats()
        self.phases: dict[str, OpProfile] = {}
        self.client = client
        client.events.connect(self.on_events)
        view.op_table.phase_changed.connect(self.show_phase)
        view.generation.lengths_changed.connect(self.set_lengths)

    def on_events(self, batch: list[Any]) -> None:
        fresh = False
        for ev in batch:
            if isinstance(ev, GenerationSteps):
                self.stats.add(ev.steps_ns)
                # one point per generation on the latency plot, at its start on the
                # plot's clock (as its end-to-end sample from the LatencyBatch)
                t_s = (ev.origin_ns + ev.start_ns - self.live.t0_ns) / 1e9
                self.view.latency.append_generation(t_s, ev.steps_ns / 1e6, self.stats.batch)
                fresh = True
            elif isinstance(ev, GenerationStarted):
                self.stats.reset(ev.prompt_len, ev.batch)
                self.view.show_generation(True)
                self.view.latency.set_generation(True)
                self.view.generation.set_shape(
                    ev.prompt_len, ev.new_tokens, ev.batch, ev.kv_bytes_per_token,
                    ev.context_length,
                )  # fmt: skip
                fresh = True
            elif isinstance(ev, ModelLoaded):  # another model: its phases are not these
                self.phases.clear()
                self.view.op_table.set_phases([])
                self.view.show_generation(False)
                self.view.latency.set_generation(False)
            elif isinstance(ev, OpProfile) and ev.phase is not None:
                self.phases[ev.phase] = without_trace(ev)  # its figures: the trace is recorded
                self.view.op_table.set_phases(list(self.phases))
                if ev.phase == self.view.op_table.phase:
                    self.show_phase(ev.phase)
                self._roofline()
        if fresh:
            self.view.generation.set_figures(self.stats.figures())

    def set_lengths(self, prompt_len: int, new_tokens: int) -> None:
        """The user's prompt and output lengths: a new run, marked on the curve."""
        self.client.set_generation(prompt_len, new_tokens)

    def show_phase(self, name: str) -> None:
        profile = self.phases.get(name)
        if profile is None:
            return
        self.view.op_table.set_ops(profile.ops, profile.op_types)
        self.view.profile_ready(profile)

    def _roofline(self) -> None:
        """Both phases' nodes, named and coloured by phase ('decode MatMul')."""
        self.live.roof_ops = [
            dataclasses.replace(op, name=f"{phase}: {op.name}", op_type=f"{phase} {op.op_type}")
            for phase, profile in self.phases.items()
            for op in profile.ops
        ]
        self.live.show_roofline()
