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


def test_the_clock_is_the_maximum_else_the_base_else_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The maximum clock where the OS gives it; in a VM that gives none, the base clock the
    model name or "cpu MHz" says (a turbo may exceed it, so a check allows TURBO_ALLOWANCE);
    with no clock at all, no ceiling rather than a guessed one."""
    import psutil

    monkeypatch.setattr(psutil, "cpu_freq", lambda: psutil._common.scpufreq(2100.0, 0.0, 0.0))
    monkeypatch.setattr(th, "MAX_FREQ", tmp_path / "missing")
    info = tmp_path / "cpuinfo"
    monkeypatch.setattr(th, "CPUINFO", info)
    try:
        info.write_text("model name\t: Some CPU\nflags\t\t: fpu sse avx avx2 fma\n")
        th.cpu_ceiling.cache_clear()
        assert th.cpu_theoretical() is None and th.cpu_ceiling() is None
        info.write_text("model name\t: Intel(R) Xeon(R) Processor\ncpu MHz\t\t: 2100.000\n"
                        "flags\t\t: fpu sse avx avx2 fma avx512f\n")  # fmt: skip
        th.cpu_ceiling.cache_clear()
        base = th.cpu_ceiling()
        assert base is not None and base.base_clock and "2.10 GHz" in base.text
        assert "base clock" in base.text and "16 float32 lanes" in base.text
        assert base.fp32_limit == pytest.approx(base.gflops * th.TURBO_ALLOWANCE)
        info.write_text("model name\t: Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz\n"
                        "cpu MHz\t\t: 800.000\nflags\t\t: avx\n")  # fmt: skip
        th.cpu_ceiling.cache_clear()
        named = th.cpu_ceiling()
        assert named is not None and "2.10 GHz" in named.text and "8 float32 lanes" in named.text
        freq = tmp_path / "cpuinfo_max_freq"
        freq.write_text("3500000\n")
        monkeypatch.setattr(th, "MAX_FREQ", freq)
        th.cpu_ceiling.cache_clear()
        got = th.cpu_theoretical()
        assert got is not None and got[0] > 0 and "3.50 GHz" in got[1] and "assumed" in got[1]
        ceiling = th.cpu_ceiling()
        assert ceiling is not None and not ceiling.base_clock
        assert ceiling.fp32_limit == ceiling.gflops
    finally:
        th.cpu_ceiling.cache_clear()


def test_the_integer_ceiling_follows_the_instruction_set() -> None:
    """VNNI: 4 u8 x s8 multiply-adds per float32 FMA; AMX tiles 32x; neither: 2x."""
    assert th.INT8_FACTOR["vnni"] == 4 and th.INT8_FACTOR["amx"] == 32
    assert th.INT8_FACTOR["avx2"] == 2
    c = th.Ceiling(100.0, "x", False, "vnni")
    assert c.int8_factor == 4 and th.Ceiling(1.0, "x", True, "?").int8_factor == 4


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
