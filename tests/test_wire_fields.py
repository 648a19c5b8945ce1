"""What a peer sends is checked field by field before a dataclass is built
(engine/run/wire_fields.py): a value that cannot be what its field holds is named, with the
type the field declares; the host's own events are not checked."""

from __future__ import annotations

import numpy as np

from engine.config import RunConfig
from engine.events import Notice
from engine.model.workload import Workload
from engine.run.wire_fields import misfit


def test_a_field_that_cannot_hold_the_value_is_named_with_its_type() -> None:
    assert misfit(RunConfig, {"batch": 4, "precision": "fp16"}) is None
    said = misfit(RunConfig, {"batch": "four"})
    assert said is not None and said.startswith("batch is a str, not what the field holds")
    assert misfit(Workload, {"config": "fp16"}) == (
        "config is a str, not what the field holds (RunConfig)"
    )
    assert misfit(Workload, {"config": None}) is not None
    assert misfit(Workload, {"model": np.zeros(2)}) is not None


def test_the_hosts_own_events_are_not_checked() -> None:
    assert misfit(Notice, {"level": 3, "message": None}) is None
