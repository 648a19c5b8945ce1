"""The CPU's theoretical float32 peak (engine/machine/theoretical.py): cores x clock x
lanes x 2 x pipes where the OS gives the maximum clock, nothing where it does not; drawn on
the roofline above the measured compute roof."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import engine.machine.theoretical as th
from engine.measure.roofline import MemoryRoof, Roofs


def test_the_peak_is_cores_clock_lanes_fma_and_pipes() -> None:
    assert th.lanes({"avx512f", "avx2", "fma"}) == 16
    assert th.lanes({"avx", "sse"}) == 8 and th.lanes({"asimd"}) == 4
    # 8 cores at 3.0 GHz with AVX-512: 8 x 3 x 16 x 2 x 2 = 1536 GFLOP/s
    assert th.theoretical_gflops(8, 3_000_000, {"avx512f"}) == pytest.approx(1536.0)


def test_known_only_where_the_os_gives_the_maximum_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    th.cpu_theoretical.cache_clear()
    monkeypatch.setattr(th, "MAX_FREQ", tmp_path / "missing")
    assert th.cpu_theoretical() is None
    freq = tmp_path / "cpuinfo_max_freq"
    freq.write_text("3500000\n")
    monkeypatch.setattr(th, "MAX_FREQ", freq)
    th.cpu_theoretical.cache_clear()
    got = th.cpu_theoretical()
    assert got is not None and got[0] > 0 and "3.50 GHz" in got[1] and "assumed" in got[1]
    th.cpu_theoretical.cache_clear()


def test_the_roofline_draws_it_above_the_measured_roof(qtbot: object) -> None:
    pytest.importorskip("PySide6")
    from engine.measure.op_stats import OpStat
    from widgets.roofline import RooflinePlot

    plot = RooflinePlot()
    roofs = Roofs((MemoryRoof("DRAM", math.inf, 20.0),), 100.0, None, 400.0)
    op = OpStat(
        "mm",
        "MatMul",
        "CPUExecutionProvider",
        1,
        1.0,
        1.0,
        1.0,
        1.0,
        10**6,
        1.0,
        10**8,
        100.0,
        100.0,
    )
    plot.set_ops([op], roofs)
    names = [name for name, _x, _y in plot.roofs()]
    assert "fp32 theoretical" in names and "fp32" in names
    assert "theoretical fp32 at most 400 GFLOP/s" in roofs.describe()
