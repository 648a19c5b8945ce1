"""Serving within bounds: a large --max-batch is estimated before it runs (simulate
times what it can afford and extrapolates the rest; load refuses what would not fit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine import backends
from engine.backends.base import Prepared, PrepareRequest
from engine.config import RunConfig
from engine.errors import InputError
from engine.model.workload import Workload
from engine.serve import setup
from engine.serve.batching import BatchPolicy
from engine.serve.setup import prepare_serving
from tests.conftest import DEMO_CNN


def prepare(path: Path) -> Prepared:
    return backends.prepare(PrepareRequest(Workload(str(path), RunConfig(threads=1))))


def recording(prepared: Prepared) -> list[int]:
    """The batch sizes `prepared` runs from now on."""
    sizes: list[int] = []
    run = prepared.run_batch

    def counted(feeds: Any) -> object:
        sizes.append(int(next(iter(feeds.values())).shape[0]))
        return run(feeds)

    prepared.run_batch = counted  # type: ignore[method-assign]
    return sizes


def test_simulate_times_only_the_batches_it_can_afford(
    zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of 4,096 of the demo transformer took 17.5 s and 6.3 GB: every warm-up and
    calibration run of it made `simulate --max-batch 4096` take 4.5 min and 15.7 GB."""
    monkeypatch.setattr(setup, "TIMED_BATCH_S", 0.0)  # any batch past the probe is too slow
    prepared = prepare(zoo["dims_named"])
    sizes = recording(prepared)
    serving = prepare_serving(
        prepared, BatchPolicy(max_batch=4096), str(zoo["dims_named"]), timed_only=True
    )
    assert serving.policy.max_batch == 4096  # served (simulated) up to it
    assert serving.largest_timed() == setup.PROBE_BATCH
    assert max(sizes) == setup.PROBE_BATCH
    assert serving.cost is not None and "a batch of 4,096 would take" in serving.cost.describe(4096)
    prepared.close()


def test_cost_picks_the_largest_power_of_two_within_budget() -> None:
    cost = setup.BatchCost(bytes_per_sample=1e6, s_per_sample=4e-3)  # 1 s at 250
    assert cost.largest(4096) == 128
    assert setup.BatchCost(1e6, 1e-6).largest(4096) == 512  # 1 GB at 1,000
    assert setup.BatchCost(0.0, 0.0).largest(3000) == 3000


def test_load_refuses_batches_that_would_not_fit_before_running_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from engine.model import sizes

    monkeypatch.setattr(sizes, "MEMORY_SHARE", 1e-3)  # a request fits, 4,096 do not
    prepared = prepare(DEMO_CNN)
    sizes = recording(prepared)
    with pytest.raises(InputError, match=r"batches of 4,096 .* MB a sample.*lower --max-batch"):
        prepare_serving(prepared, BatchPolicy(max_batch=4096, instances=2), str(DEMO_CNN))
    assert max(sizes) == setup.PROBE_BATCH  # refused before the large ones ran
    prepared.close()


def test_a_warmup_that_keeps_every_request_out_is_refused_or_dropped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`load --warmup-s 1e9` exited 0 with nan figures and "batches 0" although every
    request was served."""
    import numpy as np

    from engine.cli.serve_cmds import check_warmup
    from engine.errors import ConfigError
    from engine.serve.traffic.schedule import Schedule

    schedule = Schedule(np.linspace(0.0, 0.8, 40), np.zeros(40, np.int64))
    assert check_warmup(schedule, 0.5) == 0.5  # some requests stay in the figures
    with pytest.raises(ConfigError, match=r"--warmup-s 3 keeps all 40 requests out"):
        check_warmup(schedule, 3.0)
    assert check_warmup(schedule, 1.0, default=True) == 0.0  # the default: dropped, said
    assert "inside the default warm-up of 1 s" in capsys.readouterr().err


def test_the_cli_refuses_a_warmup_past_the_traffic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from engine.cli.main import main

    trace = tmp_path / "t.csv"
    trace.write_text("time\n0\n0.1\n0.2\n")
    code = main(["load", str(DEMO_CNN), "--traffic", f"trace:{trace}", "--warmup-s", "60"])
    err = capsys.readouterr().err
    assert code == 2 and "--warmup-s 60 keeps all 3 requests out of the figures" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_closed_loop_run_inside_its_warmup_says_why_its_figures_are_empty(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from engine.cli.main import main

    args = ["load", str(DEMO_CNN), "--traffic", "closed:1", "--closed-requests", "5"]
    assert main([*args, "--warmup-s", "100"]) == 0
    out = capsys.readouterr().out
    assert "none of the 5 completed requests is in the figures: 5 were due in the warm-up" in out
