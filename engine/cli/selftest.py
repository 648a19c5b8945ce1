"""`opscope --self-test`: a one-minute check that an installed OpScope works on this machine.

Loads the bundled demo model, runs 20 timed inferences through the same engine generator the
CLI and the app use, records them into a temporary session file, reads the file back and
checks it holds the 20 samples. Prints the provider obtained and the latency; exits 0.
Any failure prints one line starting with `opscope self-test: FAILED` and exits 1 (130 when
interrupted).
No Qt: it runs on machines without a display.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from engine import interrupt
from engine.cli.process_exit import quiet_interruptions
from engine.errors import escape_controls

RUNS = 20


def demo_model_path() -> str:
    """The bundled demo transformer (package data, also inside the installer bundle)."""
    return str(importlib.resources.files("resources") / "models" / "demo_transformer.onnx")


def run_self_test() -> str:
    """Run the check; returns the summary line. Raises on any failure."""
    from engine.config import RunConfig
    from engine.events import RunEnded, RunStarted, TimingDone
    from engine.model.workload import Workload
    from engine.run.bench import BenchRequest, run_bench
    from engine.run.timing import TimingPlan
    from engine.session.recording import recording
    from engine.session.store import open_session_file

    model = demo_model_path()
    if not Path(model).is_file():
        raise RuntimeError(f"bundled demo model missing: {model}")
    # max_runs is checked at batch boundaries: a zero batch interval makes it exact.
    plan = TimingPlan(
        warmup_runs=3,
        warmup_s=0.0,
        min_runs=RUNS,
        duration_s=0.01,
        batch_interval_s=0.0,
        max_runs=RUNS,
    )
    config = RunConfig()
    req = BenchRequest(Workload(model, config), timing=plan, check_accuracy=False)
    started: RunStarted | None = None
    done: TimingDone | None = None
    ended: RunEnded | None = None
    with tempfile.TemporaryDirectory(prefix="opscope-selftest-") as tmp:
        session = Path(tmp) / "self-test.opscope"
        t0 = time.perf_counter()
        with recording(session, model_path=model, kind="bench", config=config) as feed:
            for ev in run_bench(req):
                feed(ev)
                if isinstance(ev, RunStarted):
                    started = ev
                elif isinstance(ev, TimingDone):
                    done = ev
                elif isinstance(ev, RunEnded):
                    ended = ev
        wall = time.perf_counter() - t0
        if started is None or done is None or ended is None:
            raise RuntimeError("the engine ended without a complete run")
        if ended.status != "ok":
            raise RuntimeError(f"run ended {ended.status}: {ended.error}")
        if done.latency.count != RUNS:
            raise RuntimeError(f"expected {RUNS} timed inferences, got {done.latency.count}")
        reader = open_session_file(session)
        try:
            run_id = reader.last_run_id()
            if run_id is None:
                raise RuntimeError("the session file has no run")
            _starts, lat = reader.latency(run_id)
            row = reader.run(run_id)
        finally:
            reader.close()
        if len(lat) != RUNS:
            raise RuntimeError(f"session file holds {len(lat)} samples, expected {RUNS}")
        if row.status != "ok":
            raise RuntimeError(f"session file records the run as {row.status}")
    lat_ms = done.latency
    return (
        f"opscope self-test: OK provider={started.provider_used} "
        f"runs={lat_ms.count} p50={lat_ms.p50:.3f} ms p99={lat_ms.p99:.3f} ms "
        f"mean={lat_ms.mean:.3f} ms (session recorded and read back; {wall:.1f} s)"
    )


def main() -> int:
    """One line and an exit code whatever happens: 0 OK; 1 FAILED (the cause named, a
    shadowed NumPy too); 130 on Ctrl-C, SIGTERM or SIGHUP. A closed stdout or stderr, a
    full disk behind them or a file-size limit never end in a traceback."""
    _standard_streams()
    with _stops_as_interrupt():
        try:
            line = run_self_test()
        except KeyboardInterrupt:
            return _say("opscope self-test: FAILED: interrupted", 130)
        except BaseException as exc:  # SystemExit from a shadowed module, any failure
            if interrupt.received.is_set():  # Ctrl-C inside an import reads ImportError
                return _say("opscope self-test: FAILED: interrupted", 130)
            text = " ".join((str(exc) or type(exc).__name__).split())
            return _say(f"opscope self-test: FAILED: {type(exc).__name__}: {text}{_shadowed()}", 1)
    try:
        print(line, flush=True)
    except OSError as exc:  # stdout on a full disk, past a file-size limit, or gone
        _drop_stdout()
        return _say(f"opscope self-test: FAILED: cannot write to stdout ({exc.strerror})", 1)
    return 0


def _say(text: str, code: int) -> int:
    """`text` on stderr, if stderr can take it at all; returns `code`."""
    with contextlib.suppress(OSError, ValueError, AttributeError):  # full, closed, None
        print(escape_controls(text), file=sys.stderr, flush=True)
    return code


def _standard_streams() -> None:
    """A closed fd 0, 1 or 2 is given /dev/null, so that no file the check opens (its
    session, ONNX Runtime's log) lands on it, and a missing sys.stdout/stderr is made."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if sys.stdout is None:
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - the process's own
    if sys.stderr is None:
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115 - the process's own


def _drop_stdout() -> None:
    """What stdout could not take is dropped: the interpreter's flush at exit would fail
    again, with a traceback."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)


@contextlib.contextmanager
def _stops_as_interrupt() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP end the check as Ctrl-C does (exit 130, one line);
    SIGXFSZ is ignored, so that a file-size limit fails a write instead of killing."""

    stop = interrupt.raise_stop  # raised where no C extension's import is under way
    names = ("SIGINT", "SIGTERM", "SIGHUP")
    before = {getattr(signal, n): signal.signal(getattr(signal, n), stop) for n in names
              if hasattr(signal, n)}  # fmt: skip
    if hasattr(signal, "SIGXFSZ"):
        before[signal.SIGXFSZ] = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    hook = sys.excepthook  # NumPy's import_array prints our KeyboardInterrupt (process_exit)
    sys.excepthook = quiet_interruptions(hook)
    try:
        yield
    finally:
        sys.excepthook = hook
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _shadowed() -> str:
    """Where a module the check needs is not the installed package (a numpy.py on
    PYTHONPATH or in the current folder): said, since the error alone reads as a bug."""
    for name in ("numpy", "onnx", "onnxruntime"):
        module = sys.modules.get(name)
        where = getattr(module, "__file__", None) or ""
        if module is not None and "-packages" not in where:
            return f" ({name} here is {where or 'not a file'}: it shadows the installed {name})"
    return ""


if __name__ == "__main__":
    sys.exit(main())
