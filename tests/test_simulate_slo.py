"""A p99 target no setting can meet (issue 53: `simulate --tune-batching --slo-p99
0.000001` ran with no end): refused in one line before any search, from the calibration's
quickest batch."""

from __future__ import annotations

import numpy as np
import pytest

from engine.errors import ConfigError
from engine.serve.sim.capacity_search import check_reachable, slo_floor_ms
from engine.serve.sim.service import ServiceModel
from tests.conftest import DEMO_CNN


def test_the_floor_is_the_quickest_batch_unless_hits_could_be_the_p99() -> None:
    service = ServiceModel({1: np.array([0.002, 0.001, 0.003]), 4: np.array([0.004])}, {})
    assert slo_floor_ms(service) == pytest.approx(1.0)
    assert slo_floor_ms(service, repeat=0.995) == 0.0
    check_reachable(1.0, 1.0)
    with pytest.raises(ConfigError, match="below the quickest a request is served"):
        check_reachable(0.5, 1.0)


@pytest.mark.parametrize("search", ["--tune-batching", "--find"])
def test_an_unreachable_slo_is_one_line_not_a_search_with_no_end(
    search: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI in this process (as a caller runs it: `main` leaves the process as it was),
    batches up to 4: --tune-batching calibrates each instance count (1 and 2) before it
    refuses, and --find then takes the 1-instance calibration from this process's cache."""
    from engine.cli.main import main

    code = main(["simulate", str(DEMO_CNN), "--traffic", "poisson:100", search,
                 *(["max-rate"] if search == "--find" else []), "--max-batch", "4",
                 "--slo-p99", "0.000001"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    assert "--slo-p99 1e-06 ms: below the quickest a request is served" in err
    assert "Traceback" not in err
