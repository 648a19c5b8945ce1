"""How an `opscope` process ends. A command that was interrupted (Ctrl+C, SIGTERM, SIGHUP)
has already kept what it measured and printed its line when `main()` returns 130; the
interpreter's teardown after that is where ONNX Runtime's threads meet their library's
static destructors. When the signal landed just as a native call ended (a session that
failed to build on a 20,000-node chain), that teardown aborts the process ("terminate
called without an active exception", exit -6) instead of exiting 130. An interrupted
process therefore ends at once, its streams flushed, without that teardown.

Every other code ends as usual (atexit handlers run, then the interpreter's teardown, which
a closed window's session file and the engine host rely on), but a signal no longer ends a
finished command by the signal: the teardown takes a second or more (its modules, ONNX
Runtime's sessions and threads), and Python puts back the default action of every signal
it handled as the teardown starts (`_PySignal_Fini`), so a SIGTERM there ended `opscope
info` with -15 and its buffered stdout lost (bench/signal_exit_window.py: 7 of 8 after
its output). From `end_process` on, a stopping signal while Python code still runs (threads
joined, atexit handlers) ends the process at once with the command's own code, its streams
flushed; after the last atexit handler, the signals are ignored to the end (an ignored
signal is the one disposition the teardown keeps).

Only the process's own entry calls this: `main()` run inside another program (a test, a
caller) returns its code and the program goes on."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
from typing import NoReturn

INTERRUPTED = 130  # engine.cli.common.EXIT_INTERRUPTED, without that module's imports
STOPPING = ("SIGINT", "SIGTERM", "SIGHUP")  # engine.interrupt.STOPPING, without its imports

_ending = False  # end_process has started: the teardown ignores the stopping signals


def end_process(code: int) -> NoReturn:
    """Exit this process with `code`; an interrupted one without the interpreter's teardown,
    any other one with it, a signal meanwhile keeping `code`."""
    _flush()
    if code == INTERRUPTED:
        os._exit(code)
    global _ending
    _ending = True

    def finish(_signum: int, _frame: object) -> None:  # the command is over: keep its code
        _flush()
        os._exit(code)

    _set_stopping(finish)
    sys.exit(code)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _set_stopping(handler: object) -> None:
    """`handler` for each stopping signal this platform has, except one the caller ignores."""
    for name in STOPPING:
        sig = getattr(signal, name, None)
        with contextlib.suppress(ValueError, OSError):  # ValueError: not the main thread
            if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:
                signal.signal(sig, handler)  # type: ignore[arg-type]


@atexit.register
def _quiet_teardown() -> None:
    """After the atexit handlers (registered when this module is imported, first thing in
    the entry, so it runs last), the stopping signals are ignored: no Python handler can
    run any more, and the teardown's default action would end the process by the signal."""
    if _ending:
        _set_stopping(signal.SIG_IGN)
