"""The rooms of the live window, in the order their docks are placed: each a feature
folder whose `install(desk)` makes its dock, its controller and its menu entries. A new
dock is one folder and one line here."""

from __future__ import annotations

from collections.abc import Callable

from app import graph, llm_serving, memory, messages, runs, scaling, traffic, tune
from app.desk import Desk

ROOMS: tuple[Callable[[Desk], object], ...] = (
    traffic.install,
    tune.install,
    scaling.install,
    memory.install,
    graph.install,
    runs.install,
    messages.install,
    llm_serving.install,
)
