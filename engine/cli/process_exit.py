"""How an `opscope` process ends. A command that was interrupted (Ctrl+C, SIGTERM, SIGHUP)
has already kept what it measured and printed its line when `main()` returns 130; the
interpreter's teardown after that is where ONNX Runtime's threads meet their library's
static destructors. When the signal landed just as a native call ended (a session that
failed to build on a 20,000-node chain), that teardown aborts the process ("terminate
called without an active exception", exit -6) instead of exiting 130. An interrupted
process therefore ends at once, its streams flushed, without that teardown.

Every other code ends as usual (atexit handlers run, then the interpreter's teardown, which
a closed window's session file and the engine host rely on; not when another thread is still
inside ONNX Runtime or another C++ library then: see `_quiet_teardown`), but a signal no
longer ends a finished command by the signal: the teardown takes a second or more (its modules, ONNX
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
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, NoReturn

ExceptHook = Callable[[type[BaseException], BaseException, TracebackType | None], object]

INTERRUPTED = 130  # engine.cli.common.EXIT_INTERRUPTED, without that module's imports
STOPPING = ("SIGINT", "SIGTERM", "SIGHUP")  # engine.interrupt.STOPPING, without its imports

_ending = False  # end_process has started: the teardown ignores the stopping signals
_code = 0  # the code end_process was given
# Libraries whose calls run C++ with the GIL released (or load a C++ extension: an import):
# a thread inside one when the interpreter finalizes aborts the process (below).
NATIVE_PACKAGES = frozenset(
    {"onnxruntime", "onnx", "importlib", "_frozen_importlib", "_frozen_importlib_external",
     "PySide6", "shiboken6", "llama_cpp", "tokenizers", "torch"}
)  # fmt: skip


def _signalled() -> bool:
    """Whether a stopping signal has been received (`engine.interrupt`, when that module is
    loaded: this one imports nothing of ours)."""
    received = getattr(sys.modules.get("engine.interrupt"), "received", None)
    return received is not None and received.is_set()


def interrupted_import(exc: BaseException) -> bool:
    """Whether `exc`, an ImportError, is an interruption in disguise: a signal whose handler
    raised KeyboardInterrupt inside a C extension's module init (ONNX Runtime's, NumPy's,
    PySide6's), which the extension turned into its own ImportError ("initialization
    failed", "import numpy failed"). So when a KeyboardInterrupt is in its chain (pybind11
    raises from it) or a stopping signal has been received (`engine.interrupt`, when that
    module is loaded: this one imports nothing of ours). An ImportError with neither is a
    real error."""
    if not isinstance(exc, ImportError):
        return False
    if _signalled():
        return True
    seen: set[int] = set()
    chain: list[BaseException | None] = [exc]
    while chain:
        link = chain.pop()
        if link is None or id(link) in seen:
            continue
        if isinstance(link, KeyboardInterrupt):
            return True
        seen.add(id(link))
        chain += [link.__cause__, link.__context__]
    return False


def quiet_interruptions(hook: ExceptHook) -> ExceptHook:
    """`hook` (sys.excepthook), except that it prints nothing for the KeyboardInterrupt of
    a stopping signal (`engine.interrupt.received`): a C extension whose init the handler's
    KeyboardInterrupt stopped prints it itself before raising its ImportError (NumPy's
    `import_array`, which ONNX Runtime's init calls, goes through PyErr_Print), a
    traceback above the command's one line."""

    def quiet(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> object:
        if isinstance(exc, KeyboardInterrupt) and _signalled():
            return None
        return hook(kind, exc, tb)

    return quiet


UnraisableHook = Callable[[Any], object]
REPEAT_S = 0.02  # a swallowed interruption raised again after this


def reraised_interruptions(hook: UnraisableHook) -> UnraisableHook:
    """`hook` (sys.unraisablehook), except for the KeyboardInterrupt of a stopping signal
    (`engine.interrupt.received`) that landed in a finalizer or a weakref callback, where
    Python only prints it as "Exception ignored in: ..." with its traceback and goes on:
    the command then did not stop (the probe fuzz, stop 62: `report` and SIGTERM inside
    WeakKeyDictionary's callback). Nothing is printed, and the signal is raised again in
    the main thread at its next step (`_thread.interrupt_main`, through our handler)."""

    def reraise(unraisable: Any) -> object:
        flag = sys.modules.get("engine.interrupt")
        exc = getattr(unraisable, "exc_value", None)
        if isinstance(exc, KeyboardInterrupt) and _signalled():
            import _thread

            signum = getattr(signal, getattr(flag, "signal_name", "") or "SIGINT", signal.SIGINT)
            # from another thread, a moment later: asked from here, the handler would run at
            # once, inside this hook (and one still inside the callback comes back here)
            timer = threading.Timer(REPEAT_S, _thread.interrupt_main, (signum,))
            timer.daemon = True
            timer.start()
            return None
        return hook(unraisable)

    return reraise


def end_process(code: int) -> NoReturn:
    """Exit this process with `code`; an interrupted one without the interpreter's teardown,
    any other one with it, a signal meanwhile keeping `code`."""
    _flush()
    if code == INTERRUPTED:
        os._exit(code)
    global _ending, _code
    _ending, _code = True, code

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


def threads_in_native_code() -> list[str]:
    """The names of the other threads whose innermost Python frame is a call into one of
    NATIVE_PACKAGES (ONNX Runtime's `session.run` or session making, an `import onnx`)."""
    frames = sys._current_frames()
    found = []
    for thread in threading.enumerate():
        frame = frames.get(thread.ident) if thread.ident is not None else None
        if thread is threading.current_thread() or frame is None:
            continue
        module = str(frame.f_globals.get("__name__", ""))
        if module.split(".", 1)[0] in NATIVE_PACKAGES:
            found.append(thread.name)
    return found


@atexit.register
def _quiet_teardown() -> None:
    """After the atexit handlers (registered when this module is imported, first thing in
    the entry, so it runs last), the stopping signals are ignored: no Python handler can
    run any more, and the teardown's default action would end the process by the signal.

    A daemon thread still inside a C++ library then (ONNX Runtime running or making a
    session on a worker the command no longer waits for) is the teardown's abort: when the
    library's call returns, the thread asks for the GIL, CPython 3.11 ends it with
    pthread_exit, whose forced unwinding through the library's noexcept frames calls
    std::terminate ("terminate called without an active exception", exit -6: 12 of 12
    with a thread looping on session.run, tests/test_process_exit_native.py). Every atexit
    handler has run by now and the streams are flushed: the process ends with its code,
    without the teardown."""
    if not _ending:
        return
    _set_stopping(signal.SIG_IGN)
    if threads_in_native_code():
        _flush()
        os._exit(_code)
