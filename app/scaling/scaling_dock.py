"""The Scaling dock: a sweep of the loaded model over one dim's sizes, run as a job in the
engine host (app/host/job_runner.py; live timing paused; its points and the sweep as a whole
recorded in the window's session), drawn point by point on log-log axes with each op type's
growth exponent. For a generating model, "prompt tokens" first: whole generations timed at
each prompt length (the prompt sweep job, as `opscope generate --sweep-prompt`; each
length's run recorded), TTFT fitted as a + b*L + c*L^2 to show attention's quadratic
share, and TPOT against the context."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engine.api import (
    GenerateRequest,
    ModelInfo,
    Notice,
    OpScopeError,
    Progress,
    PromptPoint,
    PromptSweep,
    PromptSweepRequest,
    SweepPoint,
    SweepRequest,
    SweepStored,
    genai_folder,
    parse_vary,
    read_config,
    sweep_result_of,
)
from widgets.scaling_plot import ScalingPlot

CONCERN = "sweep"
NO_MODEL = "load a model, pick a dim and sizes"
PROMPT_DIM = "prompt tokens"  # a generating model's own sweep: whole generations
POINT_S = 2.0  # seconds of generations per prompt length


class ScalingDock(QWidget):
    def __init__(self, workbench: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.wb = workbench
        self.dim = QComboBox()
        self.dim.setEditable(True)
        # wide enough for a dim's name ("sequence", "batch_size"): an editable combo box
        # otherwise starts narrow and clips it ("equence" at 1600 px)
        self.dim.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.dim.setMinimumContentsLength(9)
        self.dim.setToolTip("A symbolic dim of the model's inputs (or an input's name)")
        self.values = QLineEdit("64,128,256,512")
        self.values.setToolTip("Sizes to time and profile, comma-separated")
        self.run_button = QPushButton("Run sweep")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.status = QLabel(NO_MODEL)
        self.status.setWordWrap(True)
        self.plot = ScalingPlot()
        row = QHBoxLayout()
        row.addWidget(QLabel("Vary"))
        row.addWidget(self.dim)
        row.addWidget(QLabel("over"))
        row.addWidget(self.values, 1)
        row.addWidget(self.run_button)
        row.addWidget(self.cancel_button)
        layout = QVBoxLayout()  # set once filled (tests/test_widget_items.py)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(row)
        layout.addWidget(self.status)
        layout.addWidget(self.plot, 1)
        self.setLayout(layout)
        self.points: list[SweepPoint] = []
        self.prompt_points: list[PromptPoint] = []
        self.kept_partial = False  # the running sweep said it stored its points done
        self.run_button.clicked.connect(self.run)
        self.cancel_button.clicked.connect(self.cancel)

    @property
    def running(self) -> bool:
        return bool(self.wb.jobs.busy(CONCERN))

    def model_loaded(self, info: ModelInfo) -> None:
        dims = sorted({d for v in info.inputs for d in (v.shape or ()) if isinstance(d, str)})
        dims = [d for d in dims if d != "batch"] + (["batch"] if "batch" in dims else [])
        self.dim.clear()
        lengths = self._prompt_lengths()
        if lengths:  # a generating model: its prompt first, the decoder's own dims after
            self.dim.addItem(PROMPT_DIM)
            self.values.setText(lengths)
        self.dim.addItems(dims or [v.name for v in info.inputs])
        if self.status.text() == NO_MODEL:  # the first hint only: a sweep's result stays
            self.status.setText(f"{info.name}: pick a dim and sizes, then Run sweep")

    def _prompt_lengths(self) -> str:
        """Four prompt lengths that fit the loaded generating model's context with the new
        tokens ("" for a model that does not generate)."""
        load = self.wb.client.last_load
        folder = genai_folder(load[0]) if load else None
        if folder is None:
            return ""
        try:
            context = read_config(folder).context_length
        except OpScopeError:
            return ""
        top = max(min(1024, context - self.wb.window.generation.new_tokens.value()), 8)
        return ",".join(str(top >> k) for k in (3, 2, 1, 0))

    def run(self) -> None:
        load = self.wb.client.last_load
        if not load or self.running:
            self.status.setText("load a model first" if not load else "a sweep is running")
            return
        dim = self.dim.currentText()
        if dim == PROMPT_DIM:
            self._run_prompt(load[0])
            return
        try:
            _, values = parse_vary(f"{dim}={self.values.text()}")
        except OpScopeError as exc:
            self.status.setText(str(exc))
            return
        self.wb.recording.flush()
        inputs = self.wb.client.job_inputs()  # the shapes and data on screen
        request = SweepRequest.of(
            load[0],
            self.wb.window.config_panel.config(),
            inputs,  # (the sweep sets the varied dim itself)
            dim,
            values,
            str(self.wb.recording.path),
        )
        self._start(request)

    def _run_prompt(self, model: str) -> None:
        """Whole generations at each prompt length, with the config and new tokens shown."""
        try:
            lengths = tuple(int(v) for v in self.values.text().split(",") if v.strip())
        except ValueError:
            self.status.setText(f"prompt lengths: whole numbers separated by commas, got "
                                f"{self.values.text()!r}")  # fmt: skip
            return
        self.wb.recording.flush()
        config = self.wb.window.config_panel.config()
        generate = GenerateRequest(
            model_path=model,
            config=config,
            new_tokens=self.wb.window.generation.new_tokens.value(),
            batch=config.batch,
            duration_s=POINT_S * max(len(lengths), 1),
        )
        self._start(PromptSweepRequest(generate, lengths, str(self.wb.recording.path)))

    def _start(self, request: SweepRequest | PromptSweepRequest) -> None:
        self.wb.pause_for(CONCERN, "paused: scaling sweep")  # the sweep gets the cores
        self.points, self.prompt_points, self.kept_partial = [], [], False
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.status.setText("sweeping: live timing is paused")
        self.wb.jobs.start(
            CONCERN,
            request,
            on_done=self._done,
            on_failed=lambda why: self._end(f"sweep failed: {why}"),
            on_events=self._events,
            on_cancelled=self._cancelled,
        )

    def cancel(self) -> None:
        """The sweep stops as on Ctrl+C and keeps the points done in the session."""
        self.wb.jobs.cancel(CONCERN)

    def _events(self, batch: list[Any]) -> None:
        for item in batch:
            if isinstance(item, SweepPoint):
                self.points.append(item)
                self.plot.set_sweep(sweep_result_of(self.dim.currentText(), self.points).to_json())
                self.status.setText(self._last_point())
            elif isinstance(item, PromptPoint):
                self.prompt_points.append(item)
                self.kept_partial = True  # each length's run is recorded as it ends
                self.plot.set_prompt_sweep([p.to_json() for p in self.prompt_points])
                self.status.setText(self._last_point())
            elif isinstance(item, SweepStored):
                self.kept_partial = item.partial
            elif isinstance(item, Progress) and item.stage == "sweep":
                now = f"{item.message} ({item.done + 1} of {item.total})"
                last = self._last_point()
                self.status.setText(f"{last} · now {now}" if last else f"sweeping {now}")
            elif isinstance(item, Notice) and item.level in ("warning", "info"):
                last = self._last_point()  # the last point stays first in the line
                self.status.setText(f"{last} · {item.message}" if last else item.message)

    def _last_point(self) -> str:
        if self.prompt_points:
            q = self.prompt_points[-1]
            return (f"prompt {q.prompt_len}: TTFT p50 {q.ttft_p50_ms:.3f} ms, TPOT p50 "
                    f"{q.tpot_p50_ms:.3f} ms (n={q.generations})")  # fmt: skip
        if not self.points:
            return ""
        p = self.points[-1]
        return f"point {p.value}: p50 {p.p50_ms:.3f} ms (n={p.samples})"

    def _cancelled(self) -> None:
        kept = self.kept_partial and (self.points or self.prompt_points)
        self._end("sweep cancelled" + (": the points done are in the session" if kept else ""))

    def _end(self, text: str) -> None:
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        self.wb.resume_after(CONCERN)
        self.status.setText(text)

    def _done(self, result: Any) -> None:
        if isinstance(result, PromptSweep):
            self._prompt_done(result)
            return
        data = result.to_json()
        self.plot.set_sweep(data)
        g = data["growth"]
        soft = g["op_types"].get("Softmax")
        self._end(
            f"total ~ {data['vary']['dim']}^{g['total']:.2f}"
            + (f"; Softmax ~ ^{soft:.2f}" if soft is not None else "")
            + " (fitted over the upper half of the sizes"
            + (f"; {g['caveat']}" if g.get("caveat") else "")
            + "); the sweep is in the session"
        )

    def _prompt_done(self, s: PromptSweep) -> None:
        data = s.to_json()
        self.plot.set_prompt_sweep(data["points"], s.fit)
        longest = s.points[-1].prompt_len
        self._end(
            f"{s.fit_text()}: the quadratic term "
            f"(attention over the prompt) is {s.quadratic_share:.0%} of TTFT at {longest} "
            f"tokens; TPOT {s.tpot_per_context_token_us:+.3f} us per token of context; each "
            "length's run is in the session"
        )
