"""What a test module builds by running real commands (a recorded session, its report), built
once per test run and read by every pytest-xdist worker: `make test` runs a worker per core,
and worksteal hands one module's tests to both, so a module-scoped fixture ran its recording
once per worker. The first worker to ask builds under a lock in the run's shared temporary
folder; the others wait for it and read the same files. A failed build leaves nothing behind
(the next worker to ask builds again). What a test is given here is shared: a test that
writes to a file copies it first."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import one_at_a_time

Built = tuple[Path, dict[str, Any]]  # the built file, and what the build said about it


def shared_root(factory: pytest.TempPathFactory) -> Path:
    """The temporary folder of this test run that all its workers see."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], Built]) -> Built:
    """`build(folder)` -> (a file inside folder, JSON-able notes), run by one worker only."""
    return built_in(shared_root(factory), name, build)


def built_in(root: Path, name: str, build: Callable[[Path], Built]) -> Built:
    """built_once in the folder `root` that the processes asking share."""
    folder = root / f"built-{name}"
    done = root / f"built-{name}.json"
    with one_at_a_time(root / f"built-{name}.lock"):
        if done.is_file():
            said = json.loads(done.read_text())
            return folder / said["file"], said["notes"]
        shutil.rmtree(folder, ignore_errors=True)  # a build that failed part-way
        folder.mkdir(parents=True)
        path, notes = build(folder)
        said = {"file": path.relative_to(folder).as_posix(), "notes": notes}
        done.write_text(json.dumps(said))
        return path, notes


def demo_session_once(factory: pytest.TempPathFactory) -> tuple[Path, str | None]:
    """tests/recorded_sessions.py's demo session, recorded once per test run, and why its
    runs 1-2 are not a same-machine pair (None when they are)."""
    from tests.recorded_sessions import demo_session, pair_note

    def record(folder: Path) -> Built:
        src = demo_session(factory)
        path = folder / "demo.opscope"
        path.write_bytes(src.read_bytes())
        return path, {"pair_note": pair_note.get(src)}

    path, notes = built_once(factory, "demo-session-shared", record)
    return path, notes["pair_note"]
