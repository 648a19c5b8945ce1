"""A command that ends (code 0, 2, ...) while a daemon thread of its is still inside ONNX
Runtime (a session run or a session being made on a worker it stopped waiting for) ended
in "terminate called without an active exception" and -6: in the interpreter's teardown
the thread, back from the library, asks for the GIL; CPython 3.11 ends it with
pthread_exit, whose forced unwinding through the library's noexcept frames calls
std::terminate (bench/results/signal_exit_window.md: the one unexplained -6 of 8 SIGINT
cases; the probe fuzz's `remote host` aborts). end_process now ends such a process with its
code after the atexit handlers, without that teardown; with no thread in native code the
teardown runs as before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "resources" / "models" / "demo_cnn.onnx"

# argv: code, "native" (the thread loops on session.run) or "python" (it sleeps)
SCRIPT = f"""
import atexit, os, sys, threading, time
from engine.cli.process_exit import end_process
import numpy as np, onnxruntime as ort

code, kind = int(sys.argv[1]), sys.argv[2]
session = ort.InferenceSession({str(MODEL)!r}, providers=["CPUExecutionProvider"])
feeds = {{
    i.name: np.zeros([d if isinstance(d, int) else 1 for d in i.shape], np.float32)
    for i in session.get_inputs()
}}
running = threading.Event()

def work():
    while True:
        if kind == "native":
            session.run(None, feeds)
        else:
            time.sleep(0.001)
        running.set()

def torn(event, _args, write=os.write):  # the interpreter's teardown, not an atexit hook
    if event == "cpython.PyInterpreterState_Clear":
        write(1, b"teardown ran\\n")

sys.addaudithook(torn)
atexit.register(lambda: print("atexit ran", flush=True))
threading.Thread(target=work, daemon=True).start()
running.wait(30)
time.sleep(0.05)
print("measured", end="")
end_process(code)
"""


def _end(code: int, kind: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(code), kind],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


@pytest.mark.parametrize("code", [0, 2, 0])
def test_a_thread_inside_onnxruntime_at_the_end_does_not_abort_the_process(code: int) -> None:
    done = _end(code, "native")
    assert "terminate called" not in done.stderr, done.stderr
    assert done.returncode == code, done.stderr
    assert done.stdout.startswith("measuredatexit ran\n")  # output and atexit handlers kept


def test_with_no_thread_in_native_code_the_teardown_runs_as_before() -> None:
    done = _end(0, "python")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "measuredatexit ran\nteardown ran\n"
