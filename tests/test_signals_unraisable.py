"""A stopping signal whose KeyboardInterrupt lands in a finalizer or a weakref callback:
Python prints it as "Exception ignored in: ..." with a traceback and goes on, so the
command did not stop (the probe fuzz, stop 62: SIGTERM inside WeakKeyDictionary's callback
during `report`). It is raised again in the main thread, and nothing is printed."""

from __future__ import annotations

import signal
import subprocess
import sys

CHILD = """
import os, signal, sys, time, weakref
import engine.cli.main as cli

class Thing:
    pass

def callback(_ref):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.2)  # our handler runs here, inside the callback

with cli._stops_like_ctrl_c():
    try:
        thing = Thing()
        ref = weakref.ref(thing, callback)
        del thing
        for _ in range(200):
            time.sleep(0.01)
        print("not stopped")
    except KeyboardInterrupt as exc:
        print("stopped", exc)
"""


def _default_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def test_a_signal_inside_a_weakref_callback_still_stops_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        capture_output=True, text=True, timeout=120, preexec_fn=_default_signals,
    )  # fmt: skip
    assert done.stdout.strip() == "stopped SIGTERM", (done.stdout, done.stderr)
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr
