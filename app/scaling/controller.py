"""The Scaling room's controller: a sweep of the desk's workload over one dim's sizes, run
as a job in the engine host through the desk (live timing paused; its points and the sweep
as a whole recorded in the window's session), drawn point by point with each op type's
growth exponent. For a generating model, "prompt tokens" first: whole generations timed at
each prompt length (the prompt sweep job, as `opscope generate --sweep-prompt`; each
length's run recorded), TTFT fitted as a + b*L + c*L^2 to show attention's quadratic
share, and TPOT against the context. Another model opened clears the last one's sweep; each
exponent comes with its error bar, and a fit whose points did not grow or whose error spans a
power is named in the status line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject

from app.desk import NO_MODEL, Desk
from app.scaling.port import ScalingViewPort
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
    Workload,
    genai_folder,
    parse_vary,
    read_config,
    sweep_result_of,
)
from widgets.models.growth_text import flagged_text, k_text

CONCERN = "sweep"
PROMPT_DIM = "prompt tokens"  # a generating model's own sweep: whole generations
POINT_S = 2.0  # seconds of generations per prompt length
NEW_TOKENS = GenerateRequest.new_tokens  # a generation's new tokens before any is run or asked


class ScalingController(QObject):
    def __init__(self, desk: Desk, view: ScalingViewPort) -> None:
        super().__init__()
        self.desk, self.view = desk, view
        self.points: list[SweepPoint] = []
        self.prompt_points: list[PromptPoint] = []
        self.kept_partial = False  # the running sweep said it stored its points done
        self.said = False  # the status line says more than the view's first hint
        self.model: str | None = None  # the model the dims and the sweep shown are of
        view.run_requested.connect(self.run)
        view.cancel_requested.connect(self.cancel)
        desk.model_loaded.connect(self.model_loaded)

    @property
    def running(self) -> bool:
        return bool(self.desk.jobs.busy(CONCERN))

    def _say(self, text: str) -> None:
        self.said = True
        self.view.set_status(text)

    def model_loaded(self, info: ModelInfo) -> None:
        """The model's dims to vary; another model (not the same one re-announced when
        timing resumes) clears the last one's sweep and its words."""
        other = self.model is not None and info.path != self.model and not self.running
        if other or self.model is None:
            self.model = info.path
        if other:
            self.points, self.prompt_points, self.said = [], [], False
            self.view.set_sweep({})
        dims = sorted({d for v in info.inputs for d in (v.shape or ()) if isinstance(d, str)})
        dims = [d for d in dims if d != "batch"] + (["batch"] if "batch" in dims else [])
        lengths = self._prompt_lengths()
        # a generating model: its prompt first, the decoder's own dims after
        first = [PROMPT_DIM] if lengths else []
        self.view.set_dims(first + (dims or [v.name for v in info.inputs]))
        if lengths:
            self.view.set_values(lengths)
        if not self.said:  # the first hint only: a sweep's result stays
            self._say(f"{info.name}: pick a dim and sizes, then Run sweep")

    def _new_tokens(self) -> int:
        """A generating model's new tokens as it runs (or as asked for in the Generation
        dock)."""
        shape = self.desk.generation_shape
        return shape[1] if shape else NEW_TOKENS

    def _prompt_lengths(self) -> str:
        """Four prompt lengths that fit the loaded generating model's context with the new
        tokens ("" for a model that does not generate)."""
        workload = self.desk.workload
        folder = genai_folder(workload.model) if workload is not None else None
        if folder is None:
            return ""
        try:
            context = read_config(folder).context_length
        except OpScopeError:
            return ""
        top = max(min(1024, context - self._new_tokens()), 8)
        return ",".join(str(top >> k) for k in (3, 2, 1, 0))

    def run(self) -> None:
        if self.running:
            self._say("a sweep is running")
            return
        dim = self.view.dim_text()
        if dim == PROMPT_DIM:
            self._run_prompt()
            return
        try:
            _, values = parse_vary(f"{dim}={self.view.values_text()}")
        except OpScopeError as exc:
            self._say(str(exc))
            return
        # the shapes and data on screen (the sweep sets the varied dim itself)
        self._start(lambda w: SweepRequest.of(w, dim, values, session=self.desk.session_path))

    def _run_prompt(self) -> None:
        """Whole generations at each prompt length, with the config and new tokens shown."""
        text = self.view.values_text()
        try:
            lengths = tuple(int(v) for v in text.split(",") if v.strip())
        except ValueError:
            self._say(f"prompt lengths: whole numbers separated by commas, got {text!r}")
            return
        new_tokens = self._new_tokens()

        def request(w: Workload) -> PromptSweepRequest:
            generate = GenerateRequest(
                Workload(w.model, w.config),  # the model at the config shown: no data files
                new_tokens=new_tokens,
                batch=w.config.batch,
                duration_s=POINT_S * max(len(lengths), 1),
            )
            return PromptSweepRequest(generate, lengths, self.desk.session_path)

        self._start(request)

    def _start(self, request: Callable[[Workload], object]) -> None:
        # running before the job starts: a job refused at once (no model, no engine host)
        # ends it inside run_on_workload
        self.points, self.prompt_points, self.kept_partial = [], [], False
        self.view.set_running(True)
        self._say("sweeping: live timing is paused")
        self.desk.run_on_workload(
            CONCERN,
            request,
            on_done=self._done,
            on_failed=self._failed,
            on_events=self._events,
            on_cancelled=self._cancelled,
            pause="paused: scaling sweep",  # the sweep gets the cores
        )

    def cancel(self) -> None:
        """The sweep stops as on Ctrl+C and keeps the points done in the session."""
        self.desk.jobs.cancel(CONCERN)

    def _events(self, batch: list[Any]) -> None:
        for item in batch:
            if isinstance(item, SweepPoint):
                self.points.append(item)
                self.view.set_sweep(sweep_result_of(self.view.dim_text(), self.points).to_json())
                self._say(self._last_point())
            elif isinstance(item, PromptPoint):
                self.prompt_points.append(item)
                self.kept_partial = True  # each length's run is recorded as it ends
                self.view.set_prompt_sweep([p.to_json() for p in self.prompt_points])
                self._say(self._last_point())
            elif isinstance(item, SweepStored):
                self.kept_partial = item.partial
            elif isinstance(item, Progress) and item.stage == "sweep":
                now = f"{item.message} ({item.done + 1} of {item.total})"
                last = self._last_point()
                self._say(f"{last} · now {now}" if last else f"sweeping {now}")
            elif isinstance(item, Notice) and item.level in ("warning", "info"):
                last = self._last_point()  # the last point stays first in the line
                self._say(f"{last} · {item.message}" if last else item.message)

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

    def _failed(self, why: str) -> None:
        self._end(why if why == NO_MODEL else f"sweep failed: {why}")

    def _end(self, text: str) -> None:
        self.view.set_running(False)
        self._say(text)

    def _done(self, result: Any) -> None:
        if isinstance(result, PromptSweep):
            self._prompt_done(result)
            return
        data = result.to_json()
        self.view.set_sweep(data)
        g = data["growth"]
        fits = g.get("fits") or {}
        soft = g["op_types"].get("Softmax")
        last = data["points"][-1]["op_types"] if data["points"] else {}
        flagged = flagged_text(g, sorted(last, key=lambda t: -last[t]))
        self._end(
            f"total ~ {data['vary']['dim']}^{k_text(fits.get('total'), g['total'])}"
            + (f"; Softmax ~ ^{k_text(fits.get('Softmax'), soft)}" if soft is not None else "")
            + " (fitted over the upper half of the sizes"
            + (f"; {g['caveat']}" if g.get("caveat") else "")
            + "); the sweep is in the session"
            + (f". Doubtful (!): {flagged}" if flagged else "")
        )

    def _prompt_done(self, s: PromptSweep) -> None:
        data = s.to_json()
        self.view.set_prompt_sweep(data["points"], s.fit)
        longest = s.points[-1].prompt_len
        self._end(
            f"{s.fit_text()}: the quadratic term "
            f"(attention over the prompt) is {s.quadratic_share:.0%} of TTFT at {longest} "
            f"tokens; TPOT {s.tpot_per_context_token_us:+.3f} us per token of context; each "
            "length's run is in the session"
        )
