"""The roofline view: points, roofs, click and selection, and its wiring in the window."""

from __future__ import annotations

import math

import pytest

from engine.measure.roofline import MemoryRoof, Roofs, simple_roofs

pytest.importorskip("PySide6")
from pytestqt.qtbot import QtBot

from engine.events import OpProfile
from engine.measure.op_stats import OpStat
from widgets.roofline import RooflinePlot


def op(
    name: str, op_type: str, intensity: float | None, gflops: float | None, share: float = 0.2
) -> OpStat:
    return OpStat(
        name=name,
        op_type=op_type,
        provider="CPUExecutionProvider",
        calls=1,
        time_ms=share,
        p50_ms=share,
        p99_ms=share,
        share=share,
        bytes=1000,
        gbps=1.0,
        flops=None if gflops is None else 10,
        gflops=gflops,
        intensity=intensity,
    )


OPS = [
    op("mm1", "MatMul", 30.0, 40.0, 0.5),
    op("mm2", "MatMul", 20.0, 35.0, 0.2),
    op("add", "Add", 0.1, 0.5, 0.1),
    op("reshape", "Reshape", None, None, 0.2),
]
CPU_PEAKS = {"cpu": {"memory_gbps": 10.0, "gflops": 100.0}, "gpu": None}
ROOFS = simple_roofs(10.0, 100.0)

PROFILE = OpProfile(ops=OPS, op_types=[], coverage=1.0, runs=1, provider_nodes={}, trace=None)


def controller_drawing_into(
    calls: list[tuple[int, Roofs | None]], monkeypatch: pytest.MonkeyPatch
) -> object:
    """A LiveController whose roofline records its set_ops calls; CPU peaks cached only."""
    from types import SimpleNamespace

    from PySide6.QtCore import QObject, Signal

    import app.host.peaks_loader
    from app.live.live_controller import LiveController
    from engine import api as peaks  # the window calls the engine through engine.api

    class Client(QObject):
        events = Signal(list)
        host_died = Signal(str)

    view = SimpleNamespace(
        roofline=SimpleNamespace(set_ops=lambda ops, r: calls.append((len(ops), r))),
        op_table=SimpleNamespace(set_ops=lambda *a: None, set_roofs=lambda r: None),
        profile_ready=lambda ev: None,
        show_notice=lambda *a: None,
    )
    monkeypatch.setattr(app.host.peaks_loader, "_shared", None)  # no peaks from earlier tests
    monkeypatch.setattr(peaks, "cached_peaks", lambda: dict(CPU_PEAKS))
    return LiveController(view, Client())


def test_points_and_roofs(qtbot: QtBot) -> None:
    plot = RooflinePlot()
    qtbot.addWidget(plot)
    plot.set_ops(OPS, ROOFS)
    assert plot.point_count() == 3  # Reshape has no FLOP model: not placeable
    assert "1 without FLOPs" in plot.caption.text()
    assert plot.plot.getPlotItem().getViewBox().viewRange()[1][1] > 2.0  # fitted at once
    (bname, bx, by), (cname, cx, cy) = plot.roofs()
    ridge = math.log10(100.0 / 10.0)
    assert (bname, cname) == ("DRAM", "fp32")
    assert bx[-1] == pytest.approx(ridge) and by[-1] == pytest.approx(2.0)
    assert by[0] == pytest.approx(bx[0] + 1.0)  # log10(I * 10 GB/s)
    assert list(cy) == [pytest.approx(2.0)] * 2 and cx[0] == pytest.approx(ridge)
    sizes = {p.data(): p.size() for p in plot.scatter.points()}
    assert sizes["mm1"] > sizes["mm2"] > sizes["add"]
    brushes = {p.data(): p.brush().color().name() for p in plot.scatter.points()}
    assert brushes["mm1"] == brushes["mm2"] != brushes["add"]
    assert "compute-bound" in plot._tip(0, 0, "mm1") and "memory-bound" in plot._tip(0, 0, "add")


def test_no_peaks_no_roofs(qtbot: QtBot) -> None:
    plot = RooflinePlot()
    qtbot.addWidget(plot)
    plot.set_ops(OPS, None)
    assert plot.point_count() == 3
    assert plot.roofs() == []
    assert "measuring" in plot.caption.text()


def test_click_emits_and_select_highlights(qtbot: QtBot) -> None:
    plot = RooflinePlot()
    qtbot.addWidget(plot)
    plot.set_ops(OPS, ROOFS)
    point = next(p for p in plot.scatter.points() if p.data() == "add")
    with qtbot.waitSignal(plot.op_clicked) as blocker:
        plot._on_clicked(plot.scatter, [point])
    assert blocker.args == ["add"]
    assert plot.selected == "add" and len(plot.highlight.points()) == 1
    assert plot.select_op("mm1")
    (hx, hy) = plot.highlight.points()[0].pos()
    assert (hx, hy) == (pytest.approx(math.log10(30.0)), pytest.approx(math.log10(40.0)))
    assert not plot.select_op("reshape") and len(plot.highlight.points()) == 0


def test_window_links_table_and_roofline(qtbot: QtBot) -> None:
    from app.shell.main_window import MainWindow

    win = MainWindow(["cpu"])
    qtbot.addWidget(win)
    win.op_table.set_ops(OPS, [])
    win.roofline.set_ops(OPS, ROOFS)
    win.roofline._on_clicked(
        win.roofline.scatter, [p for p in win.roofline.scatter.points() if p.data() == "mm2"]
    )
    assert win.op_table.selected_op() == "mm2"
    table = win.op_table
    row = next(r for r in range(table.proxy.rowCount()) if table.proxy.index(r, 0).data() == "add")
    table.view.selectRow(row)  # as a user's click does
    assert win.roofline.selected == "add" and len(win.roofline.highlight.points()) == 1
    table.set_ops(list(reversed(OPS)), [])  # a new pass: the row and its ring stay
    assert table.selected_op() == "add" and len(win.roofline.highlight.points()) == 1
    table.filter_edit.setText("no such op")  # the row is hidden: the ring goes with it
    assert table.selected_op() is None and len(win.roofline.highlight.points()) == 0
    assert win.roofline_dock.windowTitle() == "Roofline"


def test_controller_draws_profile_with_cached_peaks(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:

    calls: list[tuple[int, Roofs | None]] = []
    ctl = controller_drawing_into(calls, monkeypatch)
    ctl.provider = "CPUExecutionProvider"  # type: ignore[attr-defined]
    ctl._one(PROFILE)
    ((count, roofs),) = calls
    assert count == 4 and roofs is not None and roofs.caveat is None
    assert (roofs.memory, roofs.compute) == (ROOFS.memory, ROOFS.compute)


def test_a_tiny_op_reads_overhead_in_its_tooltip(qtbot: QtBot) -> None:
    plot = RooflinePlot()
    qtbot.addWidget(plot)
    tiny = op("tiny", "Add", 0.1, 0.001, 0.000002)  # 2 ns: its work is nothing beside a kernel's
    plot.set_ops([*OPS, tiny], ROOFS)
    assert "overhead: its time is a kernel's fixed cost" in plot._tip(0, 0, "tiny")
    assert "compute-bound" in plot._tip(0, 0, "mm1")


def test_provisional_roofs_say_so_over_the_plot(qtbot: QtBot) -> None:
    """Roofs measured on a busy machine are drawn, and the caption says they are provisional
    and why, with the numbers (the roofs' own figures are in the tooltip)."""
    import dataclasses

    plot = RooflinePlot()
    qtbot.addWidget(plot)
    plot.set_ops(OPS, ROOFS)
    assert "provisional" not in plot.caption.text().lower()
    why = "measured busy (other processes used 1.90 of 2 CPUs over 6.0 s)"
    plot.set_ops(OPS, dataclasses.replace(ROOFS, caveat=why))
    assert plot.roofs()  # still drawn
    text = plot.caption.text()
    assert "PROVISIONAL" in text and "1.90 of 2 CPUs" in text
    assert "again when the machine is quiet" in plot.caption.toolTip()


def test_late_peaks_after_window_closed_are_ignored(qtbot: QtBot) -> None:
    from types import SimpleNamespace

    from PySide6.QtCore import QObject, Signal

    from app.live.live_controller import LiveController

    class Client(QObject):
        events = Signal(list)
        host_died = Signal(str)

    plot = RooflinePlot()
    ctl = LiveController(SimpleNamespace(roofline=plot), Client())
    ctl.last_profile = PROFILE
    import shiboken6

    shiboken6.delete(plot)
    ctl.peaks.peaks = {"cpu": {"memory_gbps": 1.0, "gflops": 1.0}}
    ctl.show_roofline()  # must not raise


def test_gpu_run_gets_roofs_when_the_host_measures_gpu_peaks(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CUDA run with only CPU peaks cached shows no roofs (CPU roofs would mislead) until
    the engine host sends the GPU's measured peaks."""
    from engine.events import PeaksMeasured
    from engine.machine import peaks

    calls: list[tuple[int, Roofs | None]] = []
    ctl = controller_drawing_into(calls, monkeypatch)
    ctl.provider = "CUDAExecutionProvider"  # type: ignore[attr-defined]
    ctl._one(PROFILE)
    ctl._one(
        PeaksMeasured(
            {
                **CPU_PEAKS,  # type: ignore[attr-defined]
                "gpu": {"memory_gbps": 4000.0, "gflops": 700_000.0},
            }
        )
    )
    assert calls == [(4, None), (4, simple_roofs(4000.0, 700_000.0))]
    assert peaks.on_gpu("torch-cuda") and not peaks.on_gpu("CPUExecutionProvider")


def test_decade_labels_are_plain_and_minor_ticks_unlabelled() -> None:
    from widgets.roofline import DecadeAxis, decade_label

    assert [decade_label(e) for e in (-2, -1, 0, 1, 2, 3, 4, 6)] == [
        "0.01",
        "0.1",
        "1",
        "10",
        "100",
        "1k",
        "10k",
        "1M",
    ]
    axis = DecadeAxis("left")
    assert axis.logTickStrings([0.0, 0.30103, 1.0], 1.0, 1.0) == ["1", "", "10"]


def test_the_window_leaves_measuring_to_its_engine_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Measured beside the running engine, peaks come out far too low: without a cache the
    window knows none and measures nothing (the host sends PeaksMeasured)."""
    from app.host.peaks_loader import PeaksLoader
    from engine import api as peaks  # the window calls the engine through engine.api

    monkeypatch.setattr(peaks, "cached_peaks", lambda: None)
    loader = PeaksLoader()
    assert loader.request() is None
    loader.peaks = {"cpu": {"memory_gbps": 5.0, "gflops": 50.0}, "gpu": None}  # as sent
    assert loader.request() is loader.peaks


def test_legend_colours_are_stable_across_plots_and_passes(qtbot: QtBot) -> None:
    """Each op type keeps its colour whatever the order ops arrive in, in a second plot
    too (a relaunch): the colour is a function of the type's name."""
    from widgets.models.op_colors import op_type_color

    first, second = RooflinePlot(), RooflinePlot()
    qtbot.addWidget(first)
    qtbot.addWidget(second)
    first.set_ops(OPS, ROOFS)
    second.set_ops(list(reversed(OPS)), ROOFS)
    entries = dict(first.legend_entries())
    assert entries and entries == dict(second.legend_entries())
    for op_type, color in entries.items():
        assert color == op_type_color(op_type)
    placed = {o.op_type for o in OPS if o.intensity and o.gflops}
    assert set(entries) == placed
    brushes = {p.data(): p.brush().color().name() for p in first.scatter.points()}
    by_name = {o.name: o.op_type for o in OPS}
    assert all(color == op_type_color(by_name[name]) for name, color in brushes.items())
    assert op_type_color("SomeCustomOp") == op_type_color("SomeCustomOp")  # hashed, fixed


def test_repeated_passes_reuse_the_rendered_symbols(qtbot: QtBot) -> None:
    """Live profiling redraws the roofline every pass with new shares: pyqtgraph keeps one
    rendered symbol per (size, pen, brush), so the set of symbols must stop growing (it
    grew by one per point per pass, and the window's memory with it)."""
    import random

    plot = RooflinePlot()
    qtbot.addWidget(plot)
    rng = random.Random(0)
    atlas = plot.scatter.fragmentAtlas
    sizes = []
    for _ in range(60):
        shares = [rng.random() for _ in range(40)]
        ops = [
            op(f"n{i}", ("MatMul", "Add", "Softmax")[i % 3], 1.0 + i, 2.0 + i, s / sum(shares))
            for i, s in enumerate(shares)
        ]
        plot.set_ops(ops, ROOFS)
        sizes.append(len(atlas))
    assert max(sizes) <= 3 * 35  # op types x whole-pixel sizes, at most


def test_a_hierarchy_draws_a_roof_per_level_and_an_integer_roof(qtbot: QtBot) -> None:
    """L1, L2 and DRAM slanted (DRAM first, solid), fp32 and int8 flat; each op's tip names
    the level its working set fits in."""
    from tests.test_roofline import LEVELS as roofs

    plot = RooflinePlot()
    qtbot.addWidget(plot)
    plot.set_ops(OPS, roofs)
    drawn = plot.roofs()
    assert [name for name, _, _ in drawn] == ["DRAM", "L1", "L2", "fp32", "int8"]
    top = math.log10(400.0)
    for _name, _x, y in drawn[:3]:  # every slanted roof rises to the highest compute roof
        assert y[-1] == pytest.approx(top)
    (_, fx, fy), (_, _ix, iy) = drawn[3:]
    assert fy[0] == pytest.approx(2.0) and iy[0] == pytest.approx(top)
    assert fx[0] == pytest.approx(2.0 - math.log10(200.0))  # where L1 meets it
    assert plot.caption.text().endswith("roofs: L1, L2, DRAM; fp32, int8")
    tip = plot.caption.toolTip()
    assert "L1 200 GB/s (64 KiB)" in tip and "int8 400 GOP/s" in tip
    assert "(L1, fp32)" in plot._tip(0, 0, "mm1")


def test_levels_of_one_bandwidth_share_a_roof(qtbot: QtBot) -> None:
    roofs = Roofs(
        (MemoryRoof("L1", 64 * 1024, 200.0), MemoryRoof("L2", 2 * 2**20, 200.0),
         MemoryRoof("DRAM", math.inf, 10.0)),
        100.0,
    )  # fmt: skip
    plot = RooflinePlot()
    qtbot.addWidget(plot)
    plot.set_ops(OPS, roofs)
    assert [name for name, _, _ in plot.roofs()] == ["DRAM", "L1/L2", "fp32"]
