"""Ctrl-C or SIGTERM while ONNX Runtime's C extension initializes (issue 54, the probe
fuzz's `simulate --llm` hit 1.16 s after start): the command's handler raises
KeyboardInterrupt inside the extension's module init, and the extension (pybind11, ONNX
Runtime's own `import_array`) turns it into an ImportError ("initialization failed",
"import numpy failed"). That read as a traceback and exit 1; it is the interruption: one
line, 130, as every interrupted command ends. An ImportError with no signal stays a real
error (a traceback, 1).

The signal is made to land inside the real extension's init, every time: the child wraps
`builtins.__import__`, which the extension's init calls (through PyImport_ImportModule) to
import NumPy's C module once ONNX Runtime's module is registered, and sends itself the
signal there; the handler's KeyboardInterrupt then rises inside ONNX Runtime's init, as a
signal from a terminal does at that moment. A second test races a signal from outside
against the real `import onnxruntime` at several delays after it starts."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "resources" / "models" / "demo_cnn.onnx"
COMMAND = ["bench", str(MODEL), "--duration", "0.3", "--min-runs", "3", "--warmup", "1"]
EXTENSION = "onnxruntime.capi.onnxruntime_pybind11_state"

# argv: MODE (a signal's name, or "none": the import fails with no signal), then the command
INSIDE_INIT = f"""
import builtins, os, signal, sys
mode, sys.argv = sys.argv[1], ["opscope", *sys.argv[2:]]
real, fired = builtins.__import__, []

def hooked(name, *args, **kwargs):
    if not fired and {EXTENSION!r} in sys.modules and name.startswith("numpy"):
        fired.append(name)  # called from the extension's init: ONNX Runtime's numpy import
        os.write(2, b"hook: inside the extension's init\\n")
        if mode == "none":
            raise ImportError("numpy is missing")
        os.kill(os.getpid(), getattr(signal, mode))
    return real(name, *args, **kwargs)

builtins.__import__ = hooked
from app.entry import run
run()
"""


def _run_inside_init(mode: str, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", INSIDE_INIT, mode, *(command or [*COMMAND, "--no-live"])],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


@pytest.mark.parametrize("mode", ["SIGINT", "SIGTERM"])
def test_a_signal_inside_onnxruntimes_init_ends_as_an_interruption(mode: str) -> None:
    done = _run_inside_init(mode)
    assert "hook: inside the extension's init" in done.stderr  # the signal landed there
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "opscope: interrupted"


def test_the_self_test_says_so_without_a_traceback() -> None:
    done = _run_inside_init("SIGINT", "--self-test")
    assert "hook: inside the extension's init" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "opscope self-test: FAILED: interrupted"


def test_an_import_error_with_no_signal_stays_an_error() -> None:
    done = _run_inside_init("none")
    assert "hook: inside the extension's init" in done.stderr
    assert done.returncode == 1, done.stderr
    assert "Traceback" in done.stderr and "ImportError" in done.stderr
    assert "opscope: interrupted" not in done.stderr


def test_the_chain_decides_and_the_flag_decides() -> None:
    from engine.cli.process_exit import interrupted_import

    try:
        try:
            raise KeyboardInterrupt("SIGINT")
        except KeyboardInterrupt as exc:  # pybind11: raise_from(ImportError, ...)
            raise ImportError("initialization failed") from exc
    except ImportError as exc:
        disguised = exc
    assert interrupted_import(disguised)
    assert not interrupted_import(ImportError("No module named 'onnxruntime'"))
    assert not interrupted_import(ValueError("not an import"))
    from engine import interrupt

    interrupt.mark("SIGTERM")  # a handler that only marks (a serving loop's deferral)
    try:
        assert interrupted_import(ImportError("initialization failed"))
    finally:
        interrupt.unwatch()
    assert not interrupted_import(ImportError("initialization failed"))


# argv: the command; writes one byte to fd 1 as `import onnxruntime` starts
RACED = """
import builtins, os, sys
sys.argv = ["opscope", *sys.argv[1:]]
real, told = builtins.__import__, []

def hooked(name, *args, **kwargs):
    if not told and name == "onnxruntime":
        told.append(name)
        os.write(1, b"!")
    return real(name, *args, **kwargs)

builtins.__import__ = hooked
from app.entry import run
run()
"""
DELAYS_S = (0.0, 0.02, 0.05, 0.1, 0.2)  # after `import onnxruntime` starts


def test_sigint_raced_with_the_real_import_never_ends_in_a_traceback() -> None:
    env = dict(os.environ, OPSCOPE_CACHE_DIR=str(ROOT / ".pytest_cache" / "signals-import"))
    children = [
        subprocess.Popen(
            [sys.executable, "-c", RACED, *COMMAND, "--no-live"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=env,
        )
        for _ in DELAYS_S
    ]
    waiting = {
        child.stdout.fileno(): (child, delay)
        for child, delay in zip(children, DELAYS_S, strict=True)
        if child.stdout
    }
    due: list[tuple[float, subprocess.Popen[bytes]]] = []
    while waiting or due:  # each child signalled `delay` after its own import started
        ready, _, _ = select.select(list(waiting), [], [], 0.005)
        for fd in ready:
            child, delay = waiting.pop(fd)
            assert os.read(fd, 1) == b"!"  # the import is under way
            due.append((time.monotonic() + delay, child))
        for when, child in [d for d in due if d[0] <= time.monotonic()]:
            child.send_signal(signal.SIGINT)
            due.remove((when, child))
    outcomes = []
    for child, delay in zip(children, DELAYS_S, strict=True):
        _, err = child.communicate(timeout=120)
        text = err.decode(errors="replace")
        outcomes.append((delay, child.returncode, text.strip().splitlines()[-1:]))
        assert "Traceback" not in text, (delay, text)
        assert child.returncode == 130, (delay, text)
    assert all(last == ["opscope: interrupted"] for _, _, last in outcomes), outcomes
