"""What an LLM engine iteration costs, from times measured on the real engine: a prefill
pass over prompt chunks (a + b*tokens + c*attention scores + the cached tokens read, the
quadratic fitted on whole prompts; a chunked engine's passes, and a later chunk anywhere,
from passes timed as such) and a decode step over B sequences (a per-batch-size base,
interpolated between measured sizes, plus a cost per token of context the step attends
to, summed over the sequences), plus the extra time of the first decode steps after a
prefill pass, and of the first passes (decode steps, prompt passes) after the engine sat
idle, an idle engine's start of new work, and the serving loop's own work in each
iteration. Deterministic medians: the simulator draws no spread."""

from __future__ import annotations

import bisect
import functools
import itertools
import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

SETTLED = 1 << 30  # a step index past every calibrated one: nothing left to pay


class Warmth(NamedTuple):
    """Where an engine stands in the extras that follow a prefill pass and an idle pause
    (`LLMCost.iteration_extra_ms` and `decode_extras_s` charge them): the last prefill's
    prompt tokens and the decode steps since it, the pause's length (ms) and the passes
    since it. The simulator's instances and the bench that checks the real loop's
    iterations walk the same states."""

    tokens: int = 0
    step: int = SETTLED
    idle_ms: float = 0.0
    idle_step: int = SETTLED

    def paused(self, idle_ms: float) -> Warmth:
        """After the engine sat idle `idle_ms`: its next pass is the pause's first."""
        return Warmth(self.tokens, self.step, idle_ms, 0)

    def stepped(self, steps: int) -> Warmth:
        """After `steps` decode-only steps."""
        return Warmth(self.tokens, self.step + steps, self.idle_ms, self.idle_step + steps)


SETTLED_WARMTH = Warmth(0, SETTLED, -1.0, SETTLED)  # LLMCost.settle's: nothing left to pay

CONTINUING_KEYS = ("a_ms", "b_ms_per_token", "c_ms_per_score", "d_ms_per_cached_token")


def _continuing(data: Any) -> tuple[float, float, float, float] | None:
    """The continuing passes' fit from JSON (absent before calibration 6: None)."""
    if data is None:
        return None
    if not isinstance(data, dict) or set(data) != set(CONTINUING_KEYS):
        raise ValueError(f"continuing_fit: wants exactly {', '.join(CONTINUING_KEYS)}")
    a, b, c, d = (float(data[k]) for k in CONTINUING_KEYS)
    if not all(0.0 <= x < 1e6 for x in (a, b, c, d)):  # NaN fails too
        raise ValueError("continuing_fit: every term a non-negative time")
    return a, b, c, d


@dataclass(frozen=True)
class LLMCost:
    """Prefill ~ a + b*L + c*L^2 ms for one prompt of L tokens; decode step ~
    base(B) + slope * (context tokens summed over the B sequences) ms."""

    prefill_a_ms: float
    prefill_b_ms: float  # per prompt token
    prefill_c_ms: float  # per token^2 (attention over the prompt so far)
    decode_ms: dict[int, float]  # batch size -> step time at decode_ref_context per sequence
    decode_ref_context: int  # context of each sequence when decode_ms was measured
    decode_slope_ms: float  # per token of context, per sequence
    kv_bytes_per_token: int = 0
    # the decode steps right after a prefill pass run slower (the pass evicted the weights
    # from the caches): extra ms of the j-th step after a pass of L prompt tokens,
    # after_prefill_ms[i][j] for L = after_prefill_lengths[i] (interpolated in L)
    after_prefill_lengths: tuple[int, ...] = ()
    after_prefill_ms: tuple[tuple[float, ...], ...] = ()
    # a pass after the engine sat idle runs slower (its caches and the core went cold while
    # its thread waited): extra ms of the j-th decode step after a pause of at least
    # after_idle_pauses_ms[i] ms, after_idle_ms[i][j] (the longest pause not longer applies)
    after_idle_pauses_ms: tuple[float, ...] = ()
    after_idle_ms: tuple[tuple[float, ...], ...] = ()
    # and the first prompt passes after such a pause: extra ms of the j-th pass since the
    # pause, after_idle_prompt_ms[i][j] (calibration 7: passes of 64 tokens; empty before:
    # the first prompt pass paid the decode steps' step-0 extra and warmed the engine)
    after_idle_prompt_ms: tuple[tuple[float, ...], ...] = ()
    # True: every prompt (or chunk) is its own pass, each paying `a` (this engine: the real
    # loop prefills a prompt as batch 1 on its KV slot); False: one pass holds them all
    prefill_pass_per_prompt: bool = False
    # the serving loop's own work in each iteration beyond the engine's passes (planning
    # it, packing the batch, the tokens chosen and stamped), ms
    iteration_ms: float = 0.0
    # an idle engine's start of a request that arrives: from its scheduled time to the
    # iteration's start (the sender's lateness, the engine thread's wake-up), ms
    idle_start_ms: float = 0.0
    # a pass that continues a prompt (a later chunk), timed as such: (a, b, c, d), k more
    # tokens after `done` cost a + b*k + c*k*(done + k) + d*done ms; None: charged from
    # the whole-prompt fit (`prefill_chunk_ms`), as before calibration 6
    continuing: tuple[float, float, float, float] | None = None
    context: dict[str, Any] = field(default_factory=dict)  # what it was measured on
    points: dict[str, Any] = field(default_factory=dict)  # the raw medians behind the fits
    _extras_memo: dict[Warmth, tuple[tuple[float, ...], ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )  # decode_extras_rows, by state
    _prefill_rows: dict[int, tuple[float, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )  # _after_prefill_row, by prompt tokens

    def prefill_chunk_ms(self, done: int, tokens: int) -> float:
        """The variable part of prefilling `tokens` more of a prompt `done` tokens in:
        linear in the new tokens; the attention scores they compute, each new token
        against every token so far, tokens x (done + tokens) (the pass computes the masked
        square too: a whole prompt's L x L, the fit's L^2 term); and reading the `done`
        cached tokens' keys and values, decode's cost per token of context.
        Charging a chunk (end^2 - done^2) instead, as the whole-prompt fit might suggest,
        counted its past twice: on the demo LLM a 64-token chunk after 896 cached tokens
        took 5.34 ms, predicted 7.32 ms that way and 5.70 ms this way (128 after 832: 9.40
        ms, 13.18 and 9.89)."""
        return (
            self.prefill_b_ms * tokens
            + self.prefill_c_ms * tokens * (done + tokens)
            + self.decode_slope_ms * done
        )

    def prefill_ms(self, lengths: list[int]) -> float:
        """One iteration's prefill of whole prompts (none: 0)."""
        return self.prefill_pass_ms([(0, n) for n in lengths])

    def continuing_ms(self, done: int, tokens: int) -> float:
        """A pass of `tokens` more of a prompt `done` tokens in (done 0: a chunked prompt's
        first chunk), from its own fit, timed on the loop's slots in the loop's order. On
        the demo LLM (Intel Xeon, one thread) such passes took 0.45-1.0 of what the
        whole-prompt fit charged (16 tokens 0.45, 64 after 64 cached 0.7, 256 whole 1.0: its
        fixed cost is 1.7-2.1 ms, theirs 0.2-0.35; and its L^2 term, fitted up to 1,024
        tokens, charges a chunk more than the passes took)."""
        assert self.continuing is not None
        a, b, c, d = self.continuing
        return a + b * tokens + c * tokens * (done + tokens) + d * done

    def _chunked_fit(self, split: bool) -> bool:
        """Whether a prompt's first pass is charged from the continuing fit too: in a
        chunked engine (`split`) whose every pass is its own, with that fit measured."""
        return split and self.prefill_pass_per_prompt and self.continuing is not None

    def prefill_pass_ms(self, chunks: list[tuple[int, int]], split: bool = False) -> float:
        """One iteration's prefill of (tokens done, tokens now) chunks (none: 0): the fixed
        cost once, or once per chunk when each is its own pass; with a fit of its own
        (`continuing`), each pass that continues a prompt costs what it says, and in a
        chunked engine (`split`) every pass does, a first chunk too."""
        if not chunks:
            return 0.0
        if self._chunked_fit(split):
            return sum(self.continuing_ms(done, k) for done, k in chunks)
        if self.prefill_pass_per_prompt and self.continuing is not None:
            return sum(
                self.continuing_ms(done, k)
                if done
                else self.prefill_a_ms + self.prefill_chunk_ms(0, k)
                for done, k in chunks
            )
        fixed = self.prefill_a_ms * (len(chunks) if self.prefill_pass_per_prompt else 1)
        return fixed + sum(self.prefill_chunk_ms(done, k) for done, k in chunks)

    def prefill_sums_ms(self, passes: Any, tokens: Any, scores: Any, past: Any,
                        later: tuple[Any, Any, Any], split: bool) -> Any:  # fmt: skip
        """What `prefill_pass_ms` charges an iteration, from its sums over the passes: their
        count, new tokens, attention scores (each pass's k x (done + k)) and cached tokens
        read (done), and `later`, the same count, tokens and scores of the passes that
        continue a prompt (done > 0); numbers or numpy arrays (one per iteration, as the
        real loop logs them)."""
        if self._chunked_fit(split):
            a, b, c, d = self.continuing  # type: ignore[misc]
            return a * passes + b * tokens + c * scores + d * past
        if self.prefill_pass_per_prompt and self.continuing is not None:
            a, b, c, d = self.continuing
            l_pass, l_tok, l_sco = later
            return (
                self.prefill_a_ms * (passes - l_pass)
                + self.prefill_b_ms * (tokens - l_tok)
                + self.prefill_c_ms * (scores - l_sco)  # the first passes, whole-prompt
                + a * l_pass
                + b * l_tok
                + c * l_sco
                + d * past
            )
        fixed = self.prefill_a_ms * (passes if self.prefill_pass_per_prompt else passes > 0)
        return (
            fixed
            + self.prefill_b_ms * tokens
            + self.prefill_c_ms * scores
            + self.decode_slope_ms * past
        )

    def base_ms(self, batch: int) -> float:
        """A decode step of `batch` sequences with no context, ms (0 for none)."""
        if batch <= 0:
            return 0.0
        sizes = sorted(self.decode_ms)
        ref = [self.decode_ms[s] - self.decode_slope_ms * s * self.decode_ref_context
               for s in sizes]  # fmt: skip
        if len(sizes) == 1:
            return max(0.0, ref[0] * batch / sizes[0])
        if batch > sizes[-1]:
            slope = (ref[-1] - ref[-2]) / (sizes[-1] - sizes[-2])
            return max(0.0, ref[-1] + max(0.0, slope) * (batch - sizes[-1]))
        if batch < sizes[0]:
            return max(0.0, ref[0])
        return max(0.0, float(np.interp(batch, sizes, ref)))

    def base_table(self, max_batch: int) -> list[float]:
        """base_ms for 0..max_batch, looked up by the simulator's inner loop."""
        return [self.base_ms(b) for b in range(max_batch + 1)]

    def decode_step_ms(self, batch: int, context_sum: int) -> float:
        if batch <= 0:
            return 0.0
        return self.base_ms(batch) + self.decode_slope_ms * context_sum

    @property
    def after_prefill_steps(self) -> int:
        """How many decode steps after a prefill pass pay extra (0: none modelled)."""
        return len(self.after_prefill_ms[0]) if self.after_prefill_ms else 0

    def after_prefill_extra_ms(self, tokens: int, step: int) -> float:
        """The extra time of decode step `step` (0: the one in the pass's own iteration)
        after a prefill of `tokens` prompt tokens in all."""
        if tokens <= 0 or step >= self.after_prefill_steps:
            return 0.0
        # plain Python, not numpy: the simulator asks once per iteration near a prefill
        lengths = self.after_prefill_lengths
        rows = self.after_prefill_ms
        if tokens <= lengths[0]:  # shorter than measured: a share of the shortest's
            return max(0.0, rows[0][step] * tokens / lengths[0])
        i = bisect.bisect_left(lengths, tokens)
        if i == len(lengths):  # longer than measured: the longest's
            return max(0.0, rows[-1][step])
        lo, hi = lengths[i - 1], lengths[i]
        a, b = rows[i - 1][step], rows[i][step]
        return max(0.0, a + (b - a) * (tokens - lo) / (hi - lo))

    @property
    def after_idle_steps(self) -> int:
        """How many passes after an idle pause pay extra (0: none modelled)."""
        return len(self.after_idle_ms[0]) if self.after_idle_ms else 0

    def after_idle_extra_ms(self, idle_ms: float, step: int) -> float:
        """The extra time of pass `step` (0: the first) after the engine sat idle for
        `idle_ms`: that of the longest calibrated pause not longer (none below the
        shortest)."""
        pauses = self.after_idle_pauses_ms
        if not pauses or idle_ms < pauses[0] or step >= self.after_idle_steps:
            return 0.0
        return self.after_idle_ms[bisect.bisect_right(pauses, idle_ms) - 1][step]

    def iteration_extra_ms(
        self, warmth: Warmth, prompt_passes: int, prompt_tokens: int, decode: bool, split: bool
    ) -> tuple[float, Warmth]:
        """The extras of an iteration with `prompt_passes` prompt passes of `prompt_tokens`
        in all and (`decode`) a decode step, from `warmth`, and the warmth after it. A
        prompt iteration: its decode step is step 0 after its own prefill, its prompt passes
        pay the pause's extras (`after_idle_prompt_passes_ms`). A decode-only one: the
        larger of the step's extras after the last prefill and after the pause."""
        if prompt_passes:
            row = self._after_prefill_row(prompt_tokens) if decode else ()
            extra = row[0] if row else 0.0
            idle_extra, idle_next = self.after_idle_prompt_passes_ms(
                warmth.idle_ms, warmth.idle_step, prompt_passes, split
            )
            nxt = Warmth(prompt_tokens, 1 if decode else 0, warmth.idle_ms, idle_next)
            return extra + idle_extra, nxt
        after = self._after_prefill_row(warmth.tokens)
        extra = max(after[warmth.step] if warmth.step < len(after) else 0.0,
                    self.after_idle_extra_ms(warmth.idle_ms, warmth.idle_step))  # fmt: skip
        return extra, warmth.stepped(1)

    def decode_extras_s(self, warmth: Warmth, steps: int) -> tuple[tuple[float, ...], ...]:
        """The extras of up to `steps` decode-only steps from `warmth` (each as
        `iteration_extra_ms` charges one, in seconds), to the last that pays one, and their
        running sums: the simulator advances a decode-only stretch in one event with them.
        Remembered per state (a row paid to its end is left out of the state)."""
        extra_s, cum_s = self.decode_extras_rows(warmth)
        return (extra_s, cum_s) if steps >= len(extra_s) else (extra_s[:steps], cum_s[:steps])

    def decode_extras_rows(self, warmth: Warmth) -> tuple[tuple[float, ...], ...]:
        """decode_extras_s for as many steps as pay one: the same two tuples for the same
        state (the simulator books a row once and refers to it). Remembered by the state
        as given and by its settled form (`settle`), which states that charge alike share."""
        memo = self._extras_memo
        got = memo.get(warmth)
        if got is None:
            settled = self.settle(warmth)
            got = memo.get(settled)
            if got is None:
                got = memo[settled] = self._extras_of(settled)
            memo[warmth] = got
        return got

    def _extras_of(self, settled: Warmth) -> tuple[tuple[float, ...], ...]:
        """decode_extras_rows from a settled state (a pause's length is a calibrated one)."""
        tokens, step, idle_ms, idle_step = settled
        after = self._after_prefill_row(tokens)[step:] if step < self.after_prefill_steps else ()
        idle: tuple[float, ...] = ()
        if idle_step < self.after_idle_steps:
            pauses = self.after_idle_pauses_ms
            idle = self.after_idle_ms[bisect.bisect_right(pauses, idle_ms) - 1][idle_step:]
        extra = [max(a, b) / 1e3 for a, b in itertools.zip_longest(after, idle, fillvalue=0.0)]
        while extra and extra[-1] == 0.0:
            extra.pop()
        return tuple(extra), tuple(itertools.accumulate(extra))

    @functools.cached_property
    def _settle_limits(self) -> tuple[int, int, float]:
        """settle's: the steps after a prefill that pay, the passes after a pause that pay
        (decode steps or prompt passes), the shortest pause that does (none: infinite)."""
        prompt_rows = len(self.after_idle_prompt_ms[0]) if self.after_idle_prompt_ms else 0
        pauses = self.after_idle_pauses_ms
        shortest = pauses[0] if pauses else math.inf
        return self.after_prefill_steps, max(self.after_idle_steps, prompt_rows), shortest

    def settle(self, warmth: Warmth) -> Warmth:
        """The state `warmth` in a canonical form that charges the same: a row paid to its
        end, or a pause shorter than any calibrated one, dropped (SETTLED), and the pause's
        length as the calibrated pause whose row it pays. The simulator's instances walk
        settled states, so that its lookups by state hit."""
        tokens, step, idle_ms, idle_step = warmth
        p_steps, idle_rows, shortest = self._settle_limits
        if step >= p_steps:
            tokens, step = 0, SETTLED
        if idle_step >= idle_rows or idle_ms < shortest:
            idle_ms, idle_step = -1.0, SETTLED
        else:
            pauses = self.after_idle_pauses_ms
            idle_ms = pauses[bisect.bisect_right(pauses, idle_ms) - 1]
        return Warmth(tokens, step, idle_ms, idle_step)

    def _after_prefill_row(self, tokens: int) -> tuple[float, ...]:
        """after_prefill_extra_ms(tokens, j) for every calibrated step j, remembered."""
        row = self._prefill_rows.get(tokens)
        if row is None:
            steps = range(self.after_prefill_steps)
            row = self._prefill_rows[tokens] = tuple(
                self.after_prefill_extra_ms(tokens, j) for j in steps
            )
        return row

    def after_idle_prompt_passes_ms(
        self, idle_ms: float, step: int, passes: int, split: bool
    ) -> tuple[float, int]:
        """The extra time of an iteration's `passes` prompt passes, the first of them pass
        `step` since the engine sat idle for `idle_ms`, and the step the next iteration's
        first pass is. A chunked engine's passes (`split`, charged from the continuing fit,
        timed warm) each pay their own calibrated extra (on the demo LLM, Intel Xeon: a
        64-token chunk after 50-100 ms idle took 1.35, 0.73, 0.41 ms more, passes 0-2; a
        decode step 0.6). Whole prompts, and every pass of older calibrations, pay the
        decode steps' extra at `step`, once, and the pass warms the engine: the whole-prompt
        fit is timed in rotation after longer prompts and carries part of that cost already
        (charged pass by pass, the colocated layout's prompt iterations came out 0.91-0.98
        of the model, against 1.00-1.02)."""
        if not (split and self.after_idle_prompt_ms):
            return self.after_idle_extra_ms(idle_ms, step), SETTLED
        pauses = self.after_idle_pauses_ms
        if idle_ms < pauses[0]:
            return 0.0, step + passes
        row = self.after_idle_prompt_ms[bisect.bisect_right(pauses, idle_ms) - 1]
        return sum(row[step : step + passes]), step + passes

    def to_json(self) -> dict[str, Any]:
        return {
            "prefill_fit": {
                "a_ms": self.prefill_a_ms,
                "b_ms_per_token": self.prefill_b_ms,
                "c_ms_per_token2": self.prefill_c_ms,
            },
            "decode": {
                "step_ms": {str(k): v for k, v in sorted(self.decode_ms.items())},
                "ref_context": self.decode_ref_context,
                "us_per_context_token": self.decode_slope_ms * 1e3,
            },
            "after_prefill": {
                "lengths": list(self.after_prefill_lengths),
                "extra_ms": [list(row) for row in self.after_prefill_ms],
            },
            "after_idle": {
                "pauses_ms": list(self.after_idle_pauses_ms),
                "extra_ms": [list(row) for row in self.after_idle_ms],
                **(
                    {"prompt_extra_ms": [list(row) for row in self.after_idle_prompt_ms]}
                    if self.after_idle_prompt_ms
                    else {}
                ),
            },
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "prefill_pass_per_prompt": self.prefill_pass_per_prompt,
            "iteration_ms": self.iteration_ms,
            "idle_start_ms": self.idle_start_ms,
            **(
                {}
                if self.continuing is None
                else {"continuing_fit": dict(zip(CONTINUING_KEYS, self.continuing, strict=True))}
            ),
            "points": self.points,
            "context": self.context,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LLMCost:
        fit, dec = data["prefill_fit"], data["decode"]
        after = data.get("after_prefill") or {}
        idle = data.get("after_idle") or {}
        pauses = tuple(float(x) for x in idle.get("pauses_ms", []))
        idle_ms = tuple(tuple(float(x) for x in row) for row in idle.get("extra_ms", []))
        if len(pauses) != len(idle_ms) or list(pauses) != sorted(pauses):
            raise ValueError("after_idle: one row of extras per pause, pauses ascending")
        prompt_ms = tuple(tuple(float(x) for x in row) for row in idle.get("prompt_extra_ms", []))
        bad = len(prompt_ms) != len(pauses) or not all(0 <= x < 1e3 for r in prompt_ms for x in r)
        if prompt_ms and bad:
            raise ValueError(
                "after_idle: prompt_extra_ms wants a row of times (ms, >= 0) per pause"
            )
        iteration_ms = float(data.get("iteration_ms", 0.0))  # before version 5: none
        if not 0.0 <= iteration_ms < 1e3:
            raise ValueError(f"iteration_ms {iteration_ms!r}: not a time per iteration")
        idle_start_ms = float(data.get("idle_start_ms", 0.0))  # before version 7: none
        if not 0.0 <= idle_start_ms < 1e3:
            raise ValueError(f"idle_start_ms {idle_start_ms!r}: not a time to start")
        return cls(
            continuing=_continuing(data.get("continuing_fit")),
            prefill_a_ms=float(fit["a_ms"]),
            prefill_b_ms=float(fit["b_ms_per_token"]),
            prefill_c_ms=float(fit["c_ms_per_token2"]),
            decode_ms={int(k): float(v) for k, v in dec["step_ms"].items()},
            decode_ref_context=int(dec["ref_context"]),
            decode_slope_ms=float(dec["us_per_context_token"]) / 1e3,
            kv_bytes_per_token=int(data.get("kv_bytes_per_token", 0)),
            after_prefill_lengths=tuple(int(n) for n in after.get("lengths", [])),
            after_prefill_ms=tuple(
                tuple(float(x) for x in row) for row in after.get("extra_ms", [])
            ),
            after_idle_pauses_ms=pauses,
            after_idle_ms=idle_ms,
            after_idle_prompt_ms=prompt_ms,
            prefill_pass_per_prompt=bool(data.get("prefill_pass_per_prompt", False)),
            iteration_ms=iteration_ms,
            idle_start_ms=idle_start_ms,
            context=dict(data.get("context") or {}),
            points=dict(data.get("points") or {}),
        )

    @classmethod
    def constant(cls, prefill_ms: float, step_ms: float, kv_bytes_per_token: int = 0) -> LLMCost:
        """Fixed times whatever the lengths and batch (hand-computed cases, tests)."""
        return cls(prefill_ms, 0.0, 0.0, {1: step_ms, 2: step_ms}, 0, 0.0, kv_bytes_per_token)
