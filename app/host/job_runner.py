"""The window's one way to run a long engine job (a tune, a sweep, an LLM serving study, a
model import): `runner.start(concern, request, ...)` sends the job's request to the engine
host, which runs it in a process of its own (engine/run/host_jobs.py); its events, then its
result, one line of failure, or its cancellation come back on the GUI thread.

One job per concern: a newer start cancels the older, whose late updates are dropped.
`cancel(concern)` asks the job to stop as Ctrl+C stops a command (it keeps what it
measured); `on_cancelled` follows once it has. A host that dies or restarts ends its jobs:
each hears why in one line."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QObject

from app.host.engine_client import EngineClient
from engine.api import JobUpdate, commands, job_name


def _nothing(*_args: object) -> None:
    return None


@dataclass
class Ticket:
    """A job the window started: who hears of it."""

    job_id: int
    concern: str
    name: str
    on_done: Callable[[Any], None]
    on_failed: Callable[[str], None]
    on_events: Callable[[list[Any]], None] = _nothing
    on_cancelled: Callable[[], None] = _nothing
    cancelling: bool = field(default=False)


class JobRunner(QObject):
    def __init__(self, client: EngineClient, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.client = client
        self._next_id = 0
        self._tickets: dict[int, Ticket] = {}
        client.events.connect(self._events)
        client.host_died.connect(self._host_died)
        client.host_started.connect(lambda: self._host_gone("the engine host restarted"))

    def start(
        self,
        concern: str,
        request: object,
        on_done: Callable[[Any], None],
        on_failed: Callable[[str], None],
        on_events: Callable[[list[Any]], None] = _nothing,
        on_cancelled: Callable[[], None] = _nothing,
    ) -> int:
        """Run `request`'s job; an older job for `concern` is cancelled, unheard."""
        older = self.ticket(concern)
        if older is not None:
            self._drop(older)
            self.client.send(commands.CancelJob(older.job_id))
        self._next_id += 1
        ticket = Ticket(
            self._next_id, concern, job_name(request), on_done, on_failed, on_events, on_cancelled
        )
        self._tickets[ticket.job_id] = ticket
        if not self.client.alive:
            self._drop(ticket)
            on_failed("the engine host is not running")
            return ticket.job_id
        self.client.send(commands.RunJob(ticket.job_id, request))
        return ticket.job_id

    def cancel(self, concern: str) -> None:
        """Ask the concern's job to stop; `on_cancelled` (or its result) follows."""
        ticket = self.ticket(concern)
        if ticket is not None and not ticket.cancelling:
            ticket.cancelling = True
            self.client.send(commands.CancelJob(ticket.job_id))

    def forget(self, concern: str) -> None:
        """Stop the concern's job and hear nothing more of it (its dock is closing)."""
        ticket = self.ticket(concern)
        if ticket is not None:
            self._drop(ticket)
            self.client.send(commands.CancelJob(ticket.job_id))

    def busy(self, concern: str) -> bool:
        return self.ticket(concern) is not None

    def ticket(self, concern: str) -> Ticket | None:
        return next((t for t in self._tickets.values() if t.concern == concern), None)

    # -- the host's answers ---------------------------------------------------------------
    def _events(self, batch: list[Any]) -> None:
        for ev in batch:
            if isinstance(ev, JobUpdate):
                self._update(ev)

    def _update(self, ev: JobUpdate) -> None:
        ticket = self._tickets.get(ev.job_id)
        if ticket is None:
            return  # superseded or forgotten
        if ev.kind == "events":
            ticket.on_events(ev.payload)
            return
        self._drop(ticket)
        if ev.kind == "done":
            ticket.on_done(ev.payload)
        elif ev.kind == "cancelled":
            ticket.on_cancelled()
        else:
            ticket.on_failed(str(ev.payload))

    def _host_died(self, why: str) -> None:
        if not self.client.alive:  # (a recording failure is told this way too; jobs go on)
            self._host_gone(why)

    def _host_gone(self, why: str) -> None:
        for ticket in list(self._tickets.values()):
            self._drop(ticket)
            if ticket.cancelling:
                ticket.on_cancelled()
            else:
                ticket.on_failed(f"{why}; the {ticket.name} ended with it")

    def _drop(self, ticket: Ticket) -> None:
        self._tickets.pop(ticket.job_id, None)
