"""The report's figures, drawn with matplotlib and returned as inline SVG text.

matplotlib is imported inside the functions (so `opscope --help` and the rest of the
engine never load it), and each figure is a bare `Figure` with its own Agg canvas: no
pyplot, no global backend switch, nothing left behind for other code. Labels that come
from a session file are made printable and never parsed as mathtext.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from engine.session.trust import printable

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FloatArray = npt.NDArray[np.float64]
MAX_POINTS = 1000  # per curve: quantiles of the ECDF, bins of the time series
TELEMETRY_POINTS = 400  # bins per telemetry panel: half the figure's width, ~400 pixels
RC: dict[Any, Any] = {
    "svg.fonttype": "none",
    "font.size": 8.5,
    "axes.titlesize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "svg.image_inline": True,
}


@dataclass(frozen=True)
class Margins:
    """Fixed margins around a regular grid of axes, in inches: a figure whose labels are
    known in advance needs no constrained layout, which measured every tick label twice
    and was half the cost of the report's per-run figures (#53)."""

    left: float = 0.6
    right: float = 0.15
    top: float = 0.3
    bottom: float = 0.45
    wspace: float = 0.7  # between columns
    hspace: float = 0.55  # between rows

    def apply(self, fig: Figure, rows: int = 1, cols: int = 1) -> None:
        w, h = fig.get_size_inches()
        inner_w = max(w - self.left - self.right, 0.1)
        inner_h = max(h - self.top - self.bottom, 0.1)
        fig.subplots_adjust(
            left=self.left / w,
            right=1 - self.right / w,
            top=1 - self.top / h,
            bottom=self.bottom / h,
            wspace=self.wspace * cols / max(inner_w - self.wspace * (cols - 1), 0.1),
            hspace=self.hspace * rows / max(inner_h - self.hspace * (rows - 1), 0.1),
        )


@contextmanager
def _figure(width: float, height: float, salt: str, constrained: bool = True) -> Iterator[Figure]:
    """A Figure on its own Agg canvas, with the report's style only while it is drawn
    (`constrained`: laid out by matplotlib; else the maker places its axes, `Margins`)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # svg.hashsalt keeps the ids of one figure's clip paths and markers apart from the
    # others' when several SVGs share one HTML page.
    with matplotlib.rc_context({**RC, "svg.hashsalt": salt}):
        fig = Figure(figsize=(width, height), layout="constrained" if constrained else None)
        FigureCanvasAgg(fig)
        yield fig


def to_svg(fig: Figure) -> str:
    """The figure as an <svg> element (no XML prolog, doctype or metadata)."""
    buf = io.StringIO()
    # no RDF metadata block: it only names matplotlib's and Dublin Core's web addresses
    fig.savefig(
        buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None}
    )
    text = buf.getvalue()
    return text[text.index("<svg") :]


def _svg(
    fig_maker: Any, *args: Any, width: float, height: float, key: str, constrained: bool = True
) -> str:
    salt = f"opscope-{zlib.crc32(key.encode()):08x}"
    with _figure(width, height, salt, constrained) as fig:
        fig_maker(fig, *args)
        return to_svg(fig)


def label(text: object, width: int = 48) -> str:
    """A label from the file, printable and clipped (drawn with parse_math=False, so a `$`
    in a node name is a dollar sign, not mathtext that could fail to parse)."""
    s = printable(text)
    return s if len(s) <= width else s[: width - 1] + "…"


def ecdf_points(
    latencies_ms: FloatArray, points: int = MAX_POINTS
) -> tuple[FloatArray, FloatArray]:
    """(latency, cumulative fraction) at `points` evenly spaced quantiles: the ECDF's shape
    without a vertex per sample (a million samples would make a 50 MB SVG)."""
    probs = np.linspace(0.0, 1.0, min(points, max(latencies_ms.size, 2)))
    return np.quantile(latencies_ms, probs), probs


def binned(
    x: FloatArray, y: FloatArray, bins: int = 300
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per time bin of consecutive samples: centre, median and 99th percentile of `y`
    (numpy's default, linear, percentiles). One sort for every bin at once: a percentile
    call per bin made a report's telemetry figures cost seconds each (#53)."""
    n = y.size
    if n <= bins:
        return x, y, y
    edges = np.linspace(0, n, bins + 1).astype(np.int64)
    counts = np.diff(edges)
    which = np.repeat(np.arange(bins), counts)
    centres = np.add.reduceat(np.asarray(x, dtype=np.float64), edges[:-1]) / counts
    ordered = np.asarray(y, dtype=np.float64)[np.lexsort((y, which))]  # sorted within bins
    return centres, _bin_quantile(ordered, edges, 0.5), _bin_quantile(ordered, edges, 0.99)


def _bin_quantile(ordered: FloatArray, edges: npt.NDArray[np.int64], q: float) -> FloatArray:
    """Each bin's q-quantile from values sorted within bins (`edges` bound each bin)."""
    pos = (np.diff(edges) - 1) * q
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, np.diff(edges) - 1)
    a, b = ordered[edges[:-1] + lo], ordered[edges[:-1] + hi]
    out: FloatArray = a + (b - a) * (pos - lo)
    return out


LEGEND_COLUMNS = 2
LEGEND_ROW_IN = 0.16  # inches per legend row below the plot
STYLES = ("-", "--", ":", "-.")  # beyond ten runs the colours repeat: the line style does not


def ecdf_svg(series: Sequence[tuple[str, FloatArray]]) -> str:
    """Every timed run's latency ECDF on one axis (log x when they span over 20x), its
    legend below the plot in columns, the figure as much taller as the legend needs: a
    legend inside the axes covered the curves and the title, and with ~30 runs collapsed
    the axes ("constrained_layout not applied")."""
    width, height = ecdf_size(len(series))
    return _svg(_ecdf, series, width=width, height=height, key="ecdf")


def ecdf_size(curves: int) -> tuple[float, float]:
    """The ECDF figure's (width, height) in inches: the plot, then a row per two runs."""
    return 9.0, 3.2 + LEGEND_ROW_IN * -(-curves // LEGEND_COLUMNS)


def _ecdf(fig: Figure, series: Sequence[tuple[str, FloatArray]]) -> None:
    ax = fig.add_subplot()
    lo, hi = np.inf, 0.0
    for i, (name, ms) in enumerate(series):
        x, p = ecdf_points(ms)
        style = STYLES[(i // 10) % len(STYLES)]
        ax.step(x, p, style, where="post", linewidth=1.2, label=label(name, 60))
        lo, hi = min(lo, float(x[0])), max(hi, float(x[-1]))
    if lo > 0 and hi / lo > 20:
        ax.set_xscale("log")
    ax.set_xlabel("latency per inference (ms)")
    ax.set_ylabel("fraction of inferences")
    ax.set_ylim(0, 1.02)
    ax.set_title("Latency distribution (ECDF)")
    legend = fig.legend(
        loc="outside lower center", ncols=LEGEND_COLUMNS, fontsize=7.5, frameon=False
    )
    for text in legend.get_texts():
        text.set_parse_math(False)


def run_latency_svg(
    run_id: int, starts_ns: npt.NDArray[np.int64], latencies_ns: npt.NDArray[np.int64]
) -> str:
    """One run: a histogram of its latencies and its latency over time."""
    return _svg(
        _run_latency,
        starts_ns,
        latencies_ns,
        width=9.0,
        height=2.6,
        key=f"run-{run_id}",
        constrained=False,
    )


def _run_latency(
    fig: Figure, starts_ns: npt.NDArray[np.int64], latencies_ns: npt.NDArray[np.int64]
) -> None:
    ms = latencies_ns.astype(np.float64) / 1e6
    t = starts_ns.astype(np.float64) / 1e9
    hist, over = fig.subplots(1, 2, width_ratios=[1, 2])
    Margins(bottom=0.5, top=0.15).apply(fig, 1, 2)
    top = float(np.percentile(ms, 99.9))
    clipped = int((ms > top).sum())
    hist.hist(
        ms,
        bins=60,
        range=(float(ms.min()), top if top > ms.min() else ms.max() + 1e-6),
        color="#4C72B0",
        histtype="stepfilled",
    )
    for q, style in ((50, "-"), (99, ":")):
        hist.axvline(
            float(np.percentile(ms, q)), color="#222", linestyle=style, linewidth=1, label=f"p{q}"
        )
    hist.set_xlabel("latency (ms)" + (f"; {clipped} above p99.9 not shown" if clipped else ""))
    hist.set_ylabel("inferences")
    hist.legend(fontsize=7, frameon=False, loc="upper right")
    x, p50, p99 = binned(t, ms)
    over.plot(
        x, p50, linewidth=1, color="#4C72B0", label="p50 per bin" if x.size < t.size else "latency"
    )
    if x.size < t.size:
        over.plot(x, p99, linewidth=0.8, color="#DD8452", label="p99 per bin")
    over.set_xlabel("time since the timing started (s)")
    over.set_ylabel("ms")
    over.set_ylim(bottom=0)
    over.legend(fontsize=7, frameon=False, loc="upper right")


def ops_bar_svg(run_id: int, rows: Sequence[Mapping[str, Any]], top: int = 12) -> str:
    """The `top` slowest nodes of a run, one bar each, coloured by op type."""
    height = 0.9 + 0.22 * min(top, len(rows))
    return _svg(_ops_bar, rows[:top], width=9.0, height=height, key=f"ops-{run_id}")


def _ops_bar(fig: Figure, rows: Sequence[Mapping[str, Any]]) -> None:
    ax: Axes = fig.add_subplot()
    names = [label(r["name"], 44) for r in rows][::-1]
    times = [float(r["time_ms"]) for r in rows][::-1]
    kinds = [str(r["op_type"]) for r in rows][::-1]
    palette = _palette(sorted(set(kinds)))
    y = np.arange(len(rows))
    ax.barh(y, times, color=[palette[k] for k in kinds], height=0.7)
    ax.set_yticks(y, labels=names, parse_math=False, fontsize=7.5)
    ax.set_xlabel("mean time per inference (ms)")
    ax.grid(axis="y", visible=False)
    from matplotlib.patches import Patch

    legend = ax.legend(
        handles=[Patch(color=c, label=label(k, 30)) for k, c in palette.items()],
        fontsize=7,
        frameon=False,
        loc="lower right",
    )
    for text in legend.get_texts():
        text.set_parse_math(False)


def _palette(kinds: Sequence[str]) -> dict[str, str]:
    colors = [
        "#4C72B0",
        "#DD8452",
        "#55A868",
        "#C44E52",
        "#8172B3",
        "#937860",
        "#DA8BC3",
        "#8C8C8C",
        "#CCB974",
        "#64B5CD",
    ]
    return {k: colors[i % len(colors)] for i, k in enumerate(kinds)}


def telemetry_svg(
    run_id: int, series: Mapping[str, tuple[npt.NDArray[np.int64], FloatArray]], origin_ns: int
) -> str:
    """A run's telemetry, one small panel per quantity (at most 8), against run time."""
    names = sorted(series)[:8]
    cols = 2 if len(names) > 1 else 1
    rows = -(-len(names) // cols)
    return _svg(
        _telemetry,
        {k: series[k] for k in names},
        origin_ns,
        cols,
        width=9.0,
        height=0.6 + 1.6 * rows,
        key=f"telemetry-{run_id}",
        constrained=False,
    )


def _telemetry(
    fig: Figure,
    series: Mapping[str, tuple[npt.NDArray[np.int64], FloatArray]],
    origin_ns: int,
    cols: int,
) -> None:
    rows = -(-len(series) // cols)
    axes = fig.subplots(rows, cols, squeeze=False)
    Margins(top=0.25, bottom=0.5, hspace=0.45).apply(fig, rows, cols)
    spans = [(wall_ns - origin_ns).astype(np.float64) / 1e9 for wall_ns, _ in series.values()]
    lo = min((float(t.min()) for t in spans if t.size), default=0.0)
    hi = max((float(t.max()) for t in spans if t.size), default=1.0)
    for i, (ax, (name, (_, values)), t) in enumerate(
        zip(axes.flat, series.items(), spans, strict=False)
    ):
        x, y, _ = binned(t, values, bins=TELEMETRY_POINTS)
        ax.plot(x, y, linewidth=1, color="#55A868")
        ax.set_xlim(lo, hi if hi > lo else lo + 1.0)
        title = ax.set_title(label(name, 40), loc="left")
        title.set_parse_math(False)
        if i + cols >= len(series):  # nothing drawn below it
            ax.set_xlabel("time since the run's timing origin (s)")
    for ax in axes.flat[len(series) :]:
        ax.set_visible(False)
