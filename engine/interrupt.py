"""Whether the user interrupted this process (Ctrl+C, SIGTERM, SIGHUP). A library that
turns the interruption into its own error (ONNX Runtime stopped mid-initialization says
"initialization failed") must not make a cancelled run read as a failed one: the recorder
and the command line ask here before they call an error an error.

A loop whose threads sit inside a library (the serving loop's instances in ONNX Runtime)
must not be torn out of its main thread by a KeyboardInterrupt: the interpreter would exit
with them still running and the C++ runtime abort ("terminate called without an active
exception"). Inside `deferred()` a signal only sets `received`; the loop polls it, stops
its threads, joins them and ends with what it measured.

A native call holds the main thread where no Python signal handler runs: a session.run
of a Loop of 10^12 iterations, a session made of a 1,000,000-node chain. `watch()` (the
CLI) wakes a thread on every signal through the interpreter's wakeup fd, which calls the
stops registered with `on_signal` (ONNX Runtime's `RunOptions.terminate`: a run ends
between nodes, and inside a Loop); a call that cannot be stopped runs through `native()`,
on a worker thread the main thread waits on, so the handler's KeyboardInterrupt still
lands at once (the worker is left behind: `stray_native()` says so, and the CLI then exits
without waiting on it).

A signal that lands inside an import is raised only once the import has ended
(`raise_stop`): a C extension's init that calls back into Python (ONNX's, through
nanobind, building an enum) cannot take an exception there; the process aborted from C++
("terminate called after throwing an instance of 'nanobind::python_error'") or died of
SIGSEGV freeing the half-made module (gdb on the core: `module_dealloc` into
onnx_cpp2py_export), about 1 in 300 `--self-test` runs sent SIGTERM in their first second."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")

received = threading.Event()
signal_name = ""  # the signal that set `received` ("SIGINT", "SIGTERM", ...)
_deferring = 0  # how many `deferred()` blocks are open (signals land on the main thread)
_stops: list[Callable[[], None]] = []  # what a signal calls at once, from the watcher
_watching = False  # whether `watch()` runs: native calls then go through a worker thread
_native: set[threading.Thread] = set()  # native calls the main thread gave up waiting on
_undos: list[Callable[[], None]] = []  # what puts back a stop's change (`unwatch`)
_wakeup: tuple[int, int] | None = None  # the watcher's write end, the wakeup fd before it
_kept: list[object] = []  # what an interrupted command does not tear down (`calling`)
_ended = 0  # how many commands `unwatch` ended: a run in flight across one was abandoned
_waiting_import = False  # a stop waits for the main thread's import to end (`raise_stop`)
_wait_gen = 0  # bumped when a second signal ends that wait
_asked_again = False  # the waiting thread has asked for the signal again
AFTER_IMPORT_POLL_S = 0.01  # how often the waiting thread looks at the main thread's frames
STOPPING = frozenset({"SIGINT", "SIGTERM", "SIGHUP"})  # the signals that stop a command


def mark(name: str) -> None:
    """A signal arrived: say so to whoever polls."""
    global signal_name
    signal_name = signal_name or name
    received.set()


def deferring() -> bool:
    """Whether a signal should only be marked, not raised as KeyboardInterrupt."""
    return _deferring > 0


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """While open, an interruption is polled (`received`), never raised."""
    global _deferring
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1


def raise_stop(signum: int, frame: object) -> None:
    """A stopping signal's handler (main thread): marked, then raised as KeyboardInterrupt,
    unless `deferred()` is open or the main thread is inside an import: there it is asked
    for again (`_thread.interrupt_main`, through this handler) as soon as the import ends.
    A second signal while the first waits so is raised at once (the user insisted); the
    asking again is dropped if a KeyboardInterrupt is being handled by then (code that
    polls `received` raised it meanwhile)."""
    global _waiting_import, _asked_again, _wait_gen
    name = signal.Signals(signum).name
    mark(name)
    if deferring():  # a serving loop polls `received` and stops itself
        return
    if _asked_again:
        _asked_again = False
        if isinstance(sys.exc_info()[1], KeyboardInterrupt):
            return
    if _waiting_import:  # a second signal: the waiting thread asks for nothing more
        _waiting_import, _wait_gen = False, _wait_gen + 1
    elif importing(frame):
        _raise_after_import(signum)
        return
    raise KeyboardInterrupt(name)


def importing(frame: object) -> bool:
    """Whether `frame` (the interrupted code) runs inside an import: a native module's
    init may have called back into Python, and an exception there escapes through C++."""
    f = frame
    while f is not None:
        where = f.f_code.co_filename  # type: ignore[attr-defined]
        if where.startswith("<frozen importlib") or where.endswith(_IMPORTLIB_FILES):
            return True
        f = f.f_back  # type: ignore[attr-defined]
    return False


_IMPORTLIB_FILES = (
    os.path.join("importlib", "_bootstrap.py"),
    os.path.join("importlib", "_bootstrap_external.py"),
)  # where Python runs with -X frozen_modules=off


def _raise_after_import(signum: int) -> None:
    """A thread that asks for `signum` again in the main thread once its frames hold no
    import (the handler looks again there: a new import by then waits once more)."""
    global _waiting_import
    import _thread

    main, gen = threading.main_thread().ident, _wait_gen

    def wait() -> None:
        global _waiting_import, _asked_again
        while _wait_gen == gen:
            time.sleep(AFTER_IMPORT_POLL_S)
            frame = sys._current_frames().get(main) if main is not None else None
            if frame is None:  # the main thread has gone
                _waiting_import = False
                return
            if not importing(frame) and _wait_gen == gen:
                _waiting_import, _asked_again = False, True
                _thread.interrupt_main(signal.Signals(signum))
                return

    _waiting_import = True
    threading.Thread(target=wait, name="opscope-stop-after-import", daemon=True).start()


def reason() -> str:
    """The cancelled run's reason, naming the signal."""
    name = signal_name if signal_name not in ("", "SIGINT") else "Ctrl-C"
    return f"interrupted ({name})"


def on_signal(stop: Callable[[], None], undo: Callable[[], None] | None = None) -> None:
    """Call `stop` as soon as a signal arrives (from the watcher thread, while the main
    thread may sit in native code); not inside `deferred()`, whose loop stops itself.
    `undo` puts back what `stop` changed when the command ends (`unwatch`)."""
    _stops.append(stop)
    if undo is not None:
        _undos.append(undo)


def watch() -> None:
    """Wake a thread on every signal whose Python handler is installed (the interpreter
    writes its number to the wakeup fd at once, whatever the main thread is doing): it
    marks the signal and calls the registered stops. Call from the main thread, once."""
    global _watching
    if _watching or threading.current_thread() is not threading.main_thread():
        return
    global _wakeup
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    try:
        before = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except (ValueError, OSError):  # not the main interpreter: signals stay as they were
        os.close(read_fd)
        os.close(write_fd)
        return
    _watching, _wakeup = True, (write_fd, before)

    def wake() -> None:
        while True:
            try:
                got = os.read(read_fd, 64)
            except OSError:
                return
            if not got:  # `unwatch` closed the write end
                os.close(read_fd)
                return
            names = set()
            for signum in got:  # a timer's SIGALRM or another handled signal stops nothing
                with contextlib.suppress(ValueError):
                    names.add(signal.Signals(signum).name)
            for name in sorted(names & STOPPING):
                mark(name)
            if names & STOPPING and not deferring():
                for stop in list(_stops):
                    with contextlib.suppress(Exception):  # a stop must never end the watch
                        stop()

    threading.Thread(target=wake, name="opscope-signal-watch", daemon=True).start()


def unwatch() -> None:
    """Undo `watch()` when the command ends (a command run inside another program: a
    test, a caller): the wakeup fd as it was, the watcher thread ended, the interruption
    forgotten and every stop's change put back (ONNX Runtime's `terminate` left set would
    fail every later run of the process, and a `received` left set would stop its next
    native call at once)."""
    global _watching, _wakeup, signal_name, _waiting_import, _asked_again, _wait_gen, _ended
    _waiting_import, _asked_again, _wait_gen = False, False, _wait_gen + 1  # no stop waits
    _ended += 1  # before `received` is cleared: a run failing now reads as stopped (`stopped`)
    if _wakeup is not None and threading.current_thread() is threading.main_thread():
        write_fd, before = _wakeup
        with contextlib.suppress(ValueError, OSError):
            signal.set_wakeup_fd(before)
        os.close(write_fd)  # the watcher reads the end and closes its side
        _wakeup, _watching = None, False
    received.clear()
    signal_name = ""
    for undo in list(_undos):
        with contextlib.suppress(Exception):
            undo()


def native(call: Callable[[], T]) -> T:
    """`call()` (a native call no flag can stop: making a session), with the main thread
    free for the signal handler: on a worker thread while `watch()` runs and this is the
    main thread, else directly. An interruption raises KeyboardInterrupt at once and
    leaves the worker running (`stray_native()`)."""
    if not _watching or threading.current_thread() is not threading.main_thread():
        return call()
    box: dict[str, object] = {}

    def work() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the waiting thread
            box["error"] = exc

    worker = threading.Thread(target=work, name="opscope-native", daemon=True)
    _native.add(worker)
    worker.start()
    while worker.is_alive():
        worker.join(0.1)  # the handler's KeyboardInterrupt lands here
        if received.is_set() and not deferring():
            raise KeyboardInterrupt(signal_name)
    _native.discard(worker)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def calling(thing: object) -> None:
    """`thing` (a session) starts a native call a signal may stop. While a command runs
    (`watch()`), it is held until `returned(thing)`; a call stopped by an interruption
    never returns, and the thing stays held to the process's end, which for an interrupted
    command is `os._exit` (engine/cli/process_exit.py): a profiled session stopped inside
    a long run writes its whole profile when destroyed (11 s after 12 s of a Loop), and
    the command's exit waited on it. Held from before the call, because the signal's
    KeyboardInterrupt may land on any line after it. A caller that goes on after `main()`
    (a test) lets go of what was held with `let_go_kept()`."""
    if _watching:
        _kept.append(thing)


def command_count() -> int:
    """A token for `stopped`, taken as a native call starts."""
    return _ended


def stopped(since: int) -> bool:
    """Whether a native call that started at `command_count() == since` was stopped: a
    signal arrived, or its command ended meanwhile (`unwatch` clears `received`: a worker's
    run the interruption stopped can fail only after the main thread has unwound, under
    load, and read as a plain failure)."""
    return received.is_set() or _ended != since


def returned(thing: object) -> None:
    """`thing`'s native call ended without an interruption: no longer held."""
    if _kept:
        with contextlib.suppress(ValueError):
            _kept.remove(thing)


def let_go_kept() -> int:
    """Drop what `calling` held (its teardown runs now); how many there were."""
    n = len(_kept)
    _kept.clear()
    return n


def stray_native() -> bool:
    """Whether a native call is still running that an interruption stopped waiting on (the
    process should then exit without waiting on it, or unwinding its library)."""
    return any(t.is_alive() for t in _native)
