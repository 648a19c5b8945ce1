"""The LLM Serving dock's data, without Qt: summary rows (simulated and real) of each
layout, kept in layout order with a real row right after the simulated row of the same
layout, the table's cells, the bar chart's values and a one-line verdict."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

LAYOUT_ORDER = ("colocated", "chunked", "disaggregated")
HEADERS = ("Layout", "Run", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "Goodput/s",
           "Tokens/s", "p99 in SLOs", "Prefix cache")  # fmt: skip
SHORT = {"colocated": "colo", "chunked": "chunk"}  # the chart's axis labels


@dataclass(frozen=True)
class ServingRow:
    """One layout's summary: latencies in ms, rates per second; NaN where not known."""

    layout: str  # colocated | chunked | disaggregated
    label: str  # "chunked 256", "disagg 1P+1D"
    instances: int
    simulated: bool
    requests: int
    ttft_p50: float
    ttft_p99: float
    tpot_p50: float
    tpot_p99: float
    goodput_per_s: float
    goodput_share: float
    tokens_per_s: float
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None
    prefix_hit: float = math.nan  # share of prompt tokens the prefix cache gave
    ttft_p50_without: float = math.nan  # the same requests without it (simulated)

    @property
    def key(self) -> tuple[int, str, int, bool]:
        order = LAYOUT_ORDER.index(self.layout) if self.layout in LAYOUT_ORDER else 99
        return (order, self.label, self.instances, not self.simulated)

    def within_slos(self) -> bool | None:
        """p99 TTFT and p99 TPOT within their SLOs (None: no SLO given)."""
        checks = [
            (v, s)
            for v, s in ((self.ttft_p99, self.slo_ttft_ms), (self.tpot_p99, self.slo_tpot_ms))
            if s is not None
        ]
        if not checks:
            return None
        return all(math.isfinite(v) and v <= s for v, s in checks)

    def cells(self) -> list[str]:
        ok = self.within_slos()
        good = _num(self.goodput_per_s, 2)
        if math.isfinite(self.goodput_share):
            good += f" ({_share(self.goodput_share)})"
        return [
            self.name, "sim" if self.simulated else "real",
            _ms(self.ttft_p50), _ms(self.ttft_p99), _ms(self.tpot_p50), _ms(self.tpot_p99),
            good, _num(self.tokens_per_s, 0), "–" if ok is None else ("yes" if ok else "no"),
            self._prefix(),
        ]  # fmt: skip

    def _prefix(self) -> str:
        """'63% hit; TTFT p50 45.3 without' ('–' without a prefix cache)."""
        if not math.isfinite(self.prefix_hit):
            return "–"
        text = f"{_share(self.prefix_hit)} hit"
        if math.isfinite(self.ttft_p50_without):
            text += f"; TTFT p50 {_ms(self.ttft_p50_without)} without"
        return text

    @property
    def name(self) -> str:
        """The layout with its engines: 'colocated ×2', 'chunked 128 ×1', 'disagg 1P+1D'."""
        return self.label if self.layout == "disaggregated" else f"{self.label} ×{self.instances}"

    @property
    def short(self) -> str:
        """For the chart's axis: 'colo ×2', 'chunk ×1', '1P+1D'."""
        if self.layout == "disaggregated":
            return self.label.rsplit(" ", 1)[-1]
        return f"{SHORT.get(self.layout, self.label)} ×{self.instances}"


def row_from_summary(r: dict[str, Any]) -> ServingRow:
    """A row from `engine.serve.llm.study`'s summary dict."""
    c = r["layout_config"]
    name = str(r["layout"])
    insts = (
        int(c["prefill_instances"]) + int(c["decode_instances"])
        if name == "disaggregated"
        else int(c["instances"])
    )
    good = r.get("goodput") or {}
    return ServingRow(
        layout=name,
        label=str(c.get("label", name)),
        instances=insts,
        simulated=bool(r["simulated"]),
        requests=int(r["requests"]["count"]),
        ttft_p50=_f(r["ttft_ms"]["p50"]),
        ttft_p99=_f(r["ttft_ms"]["p99"]),
        tpot_p50=_f(r["tpot_ms"]["p50"]),
        tpot_p99=_f(r["tpot_ms"]["p99"]),
        goodput_per_s=_f(good.get("requests_per_s")),
        goodput_share=_f(good.get("share")),
        tokens_per_s=_f(r["throughput"]["tokens_per_s"]),
        slo_ttft_ms=good.get("slo_ttft_ms"),
        slo_tpot_ms=good.get("slo_tpot_ms"),
        prefix_hit=_f((r.get("prefix_cache") or {}).get("hit_rate")),
        ttft_p50_without=_f(
            ((r.get("without_prefix_cache") or {}).get("ttft_ms") or {}).get("p50")
        ),
    )


@dataclass(frozen=True)
class ChartData:
    """Per layout label, the p99s of its simulated and real rows (NaN: no such row)."""

    labels: list[str]
    ttft_sim: list[float]
    ttft_real: list[float]
    tpot_sim: list[float]
    tpot_real: list[float]


class LLMServingTable:
    """The rows shown: a simulation replaces them all; a real run adds its simulated and
    real rows (replacing an earlier pair of the same layout and instances)."""

    def __init__(self) -> None:
        self.rows: list[ServingRow] = []

    def set_simulated(self, summaries: list[dict[str, Any]]) -> None:
        self.rows = sorted((row_from_summary(r) for r in summaries), key=lambda x: x.key)

    def add(self, summaries: list[dict[str, Any]]) -> None:
        new = [row_from_summary(r) for r in summaries]
        keys = {x.key for x in new}
        self.rows = sorted([x for x in self.rows if x.key not in keys] + new, key=lambda x: x.key)

    def clear(self) -> None:
        self.rows = []

    def cells(self) -> list[list[str]]:
        return [r.cells() for r in self.rows]

    def pending_cells(self) -> list[list[str]]:
        """Before any study: one row per layout a study compares, each waiting for it (an
        empty table read as a broken one)."""
        wait = ["not yet", *["–"] * (len(HEADERS) - 2)]
        return [[layout, *wait] for layout in LAYOUT_ORDER]

    def chart(self) -> ChartData:
        labels: list[str] = []
        for r in self.rows:
            name = r.short
            if name not in labels:
                labels.append(name)

        def pick(label: str, simulated: bool, attr: str) -> float:
            for r in self.rows:
                if r.short == label and r.simulated == simulated:
                    return float(getattr(r, attr))
            return math.nan

        return ChartData(
            labels,
            [pick(x, True, "ttft_p99") for x in labels],
            [pick(x, False, "ttft_p99") for x in labels],
            [pick(x, True, "tpot_p99") for x in labels],
            [pick(x, False, "tpot_p99") for x in labels],
        )

    def verdict(self) -> str:
        """One line: which layouts keep p99 within the SLOs, the best goodput, and how the
        real runs compare with their simulations."""
        sims = [r for r in self.rows if r.simulated]
        if not sims:
            return ""
        parts = []
        if sims[0].slo_ttft_ms is not None or sims[0].slo_tpot_ms is not None:
            ok = [r.name for r in sims if r.within_slos()]
            parts.append(
                f"simulated p99 within the SLOs: {', '.join(ok)}"
                if ok
                else "no layout's simulated p99 is within the SLOs"
            )
            best = max(sims, key=lambda r: _or(r.goodput_per_s, -1.0))
            if math.isfinite(best.goodput_per_s):
                parts.append(
                    f"best goodput {best.name} ({best.goodput_per_s:.2f}/s, "
                    f"{_share(best.goodput_share)})"
                )
        for real in (r for r in self.rows if not r.simulated):
            sim = next((r for r in sims if r.key[:3] == real.key[:3]), None)
            if sim is not None:
                within = {None: "", True: "p99 within the SLOs, ", False: "p99 beyond the SLOs, "}
                parts.append(
                    f"real {real.name}: {within[real.within_slos()]}TTFT p99 "
                    f"{_ratio(real.ttft_p99, sim.ttft_p99)}, TPOT p99 "
                    f"{_ratio(real.tpot_p99, sim.tpot_p99)} the simulated"
                )
        return " · ".join(parts)


def _f(value: Any) -> float:
    return math.nan if value is None else float(value)


def _or(value: float, fallback: float) -> float:
    return value if math.isfinite(value) else fallback


def _ms(value: float) -> str:
    if not math.isfinite(value):
        return "–"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _num(value: float, digits: int) -> str:
    return f"{value:,.{digits}f}" if math.isfinite(value) else "–"


def _share(value: float) -> str:
    return f"{value:.0%}" if math.isfinite(value) else "–"


def _ratio(real: float, sim: float) -> str:
    if not (math.isfinite(real) and math.isfinite(sim)) or sim <= 0:
        return "–"
    return f"{real / sim:.2f}x"
