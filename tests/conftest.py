"""Shared fixtures: the test model zoo, the bundled demo models, a private variant cache."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.model_zoo import ZOO

ROOT = Path(__file__).resolve().parent.parent
DEMO_TRANSFORMER = ROOT / "resources" / "models" / "demo_transformer.onnx"
DEMO_CNN = ROOT / "resources" / "models" / "demo_cnn.onnx"
DEMO_LLM = ROOT / "resources" / "models" / "demo_llm"


@contextmanager
def one_at_a_time(lock_file: Path) -> Iterator[None]:
    """Held by one test process at a time (`make test` runs a worker per core): for what
    the workers share, as the installer build or the machine's one Ray head."""
    import fcntl

    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


# The files that hold the suite's longest items (seconds of setup or call in the last
# fresh-clone run on a 2-vCPU machine): the installer build (156 s of setup, then the tests
# on the bundle), the afternoon in one window (69), the remote tune/gate/generate (53) and
# the windows over SSH (37, 32). `make test` runs pytest-xdist's worksteal: each worker starts on
# a contiguous share of the collected order and steals from the end of the other's, so an
# item collected late can end the run alone while the other worker idles. Collected first,
# they start when the run does, and what is left at the end is short items.
LONGEST_FIRST = (
    "test_packaging.py",
    "test_afternoon.py",
    "test_remote.py",
    "test_app_remote.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Whole files moved (their module fixtures stay built once), the rest kept in order."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Variants built by tests go to a temporary cache, never the user's."""
    os.environ["OPSCOPE_CACHE_DIR"] = str(tmp_path_factory.mktemp("opscope-cache"))
    # The app's autosaved sessions and QSettings go to temporary folders too.
    os.environ["OPSCOPE_SESSION_DIR"] = str(tmp_path_factory.mktemp("opscope-sessions"))
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("xdg-config"))
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    # 16 generated samples for accuracy and calibration, not the product's 64: the suite's
    # speed (test_int8_detector.py runs the default)
    os.environ.setdefault("OPSCOPE_GENERATED_SAMPLES", "16")


@pytest.fixture(autouse=True)
def _gc_on_the_gui_thread(request: pytest.FixtureRequest) -> Iterator[None]:
    """As the app does (app/shell/launch.py, gui_thread_gc): in a Qt test, cyclic garbage
    is collected on the GUI thread only, and a test's leftovers before the next test
    (collected on a worker thread, a cycle holding a Qt object crashes Qt)."""
    if not {"qtbot", "qapp"} & set(request.fixturenames):
        yield
        return
    request.getfixturevalue("qapp")
    from app.shell.launch import gui_thread_gc

    collector: Any = gui_thread_gc()
    try:
        yield
    finally:
        collector.timer.stop()
        gc.enable()
        gc.collect()


@pytest.fixture
def first_start(qtbot: Any, tmp_path: Path) -> Iterator[Any]:
    """The window as on a first start (no saved layout, not another test's), on the CPU,
    recording into this test's own session file; shut down after the test."""
    from PySide6.QtCore import QSettings

    from app.shell.workbench import Workbench

    QSettings("OpScope", "OpScope").clear()
    bench = Workbench(session_path=str(tmp_path / "first.opscope"), usable=["cpu"])
    qtbot.addWidget(bench.window)
    yield bench
    bench.shutdown()


@pytest.fixture(scope="session")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every model of tests/model_zoo.py, built once per test session."""
    out = tmp_path_factory.mktemp("zoo")
    return {name: build(out) for name, build in ZOO.items()}


@pytest.fixture(scope="session")
def llm() -> Path:
    """The demo LLM's folder, which the README's set-up builds (a failure, not a skip)."""
    if not (DEMO_LLM / "genai_config.json").is_file():
        pytest.fail(f"{DEMO_LLM} is missing: the README's set-up builds it (make test)")
    return DEMO_LLM


@pytest.fixture(scope="module")
def ssh_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real SSH server on localhost, one per test module (tests/ssh_server.py)."""
    from tests.ssh_server import ssh_host

    with ssh_host(tmp_path_factory.mktemp("ssh")) as server:
        yield server


from tests.in_process import cli  # noqa: E402, F401  (the fixture: `opscope` in this process)
