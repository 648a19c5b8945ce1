"""Which warnings belong to the running config (no Qt): a build's warnings wait for its
run to start and replace the previous run's then; warnings during a run join it.

An INT8 banner must not outlive INT8: switching back to FP32 starts a run without it.
A build that fails leaves the running config, and its warnings, as they were."""

from __future__ import annotations


class RunNotices:
    """The warnings of the running config and of the one being built."""

    def __init__(self) -> None:
        self.building = False
        self.pending: list[str] = []
        self.current: list[str] = []

    def build_started(self) -> None:
        """A new config (or model, or input size) was asked for."""
        self.building, self.pending = True, []

    def warning(self, message: str) -> bool:
        """Keep `message`; True when it is about the running config (show it now)."""
        if self.building:
            if message not in self.pending:
                self.pending.append(message)
            return False
        if message not in self.current:
            self.current.append(message)
        return True

    def run_started(self) -> list[str] | None:
        """The built config runs: its warnings replace the old run's (returned); None when
        this run is the same config resumed (its warnings stand)."""
        if not self.building:
            return None
        self.building, self.current, self.pending = False, self.pending, []
        return list(self.current)

    def build_failed(self) -> None:
        self.building, self.pending = False, []
