"""`opscope info|bench|profile|gate|session|compare|...`: argument parsing and dispatch.

Exit codes: 0 success; 2 bad input (one line naming the file and cause, no traceback);
1 for genuine internal faults (with a traceback, since that is a bug to report).
"""

from __future__ import annotations

# First, under `python -m engine.cli.main` too: its atexit hook must be registered before any
# other so that it runs last (engine/cli/process_exit.py).
import engine.cli.process_exit

# isort: split
import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from engine import __version__, backends
from engine import interrupt as interrupt_flag
from engine.analysis.deltas import GENERATION_METRICS, METRICS
from engine.cli.arg_types import (
    MAX_BATCH,
    OneLineParser,
    int_in,
    nonneg_int,
    nonneg_seconds,
    percent,
    positive_int,
    seconds,
    unit_interval,
)
from engine.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    add_json_flag,
    add_seed_flag,
    add_session_flag,
)
from engine.cli.gate_args import add_gate_parser
from engine.cli.generate_args import add_generate_parser, add_import_parser
from engine.cli.graph_cmd import add_graph_parser
from engine.cli.memory_cmd import add_memory_parser
from engine.cli.output_guard import guarded_stdout
from engine.cli.remote_cmd import add_host_flag, add_remote_parser
from engine.cli.serve_args import add_serving_parsers
from engine.cli.tune_args import add_sweep_parser, add_tune_parser
from engine.config import DEFAULT_MIN_COSINE, FUSIONS, PRECISIONS, PROVIDERS
from engine.errors import OpScopeError, escape_controls

__all__ = ["build_parser", "main"]

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="opscope",
        description="OpScope: time, profile and tune ONNX models.",
        epilog="The desktop app: `opscope` with no command, or `opscope gui [MODEL | SESSION] "
        "[--session FILE] [--screenshot PNG --quit-after S]`.",
    )
    parser.add_argument("--version", action="version", version=f"opscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("info", help="describe a model: inputs, outputs, ops, parameters")
    p.add_argument("model", help="an .onnx file")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="symbolic dims in full (an exporter's formula can run to hundreds of characters)",
    )
    add_json_flag(p, "the description")
    p.set_defaults(handler=_cmd_info)

    for name, helptext in (
        ("bench", "time a model: warm-up, then raw per-inference latencies"),
        ("profile", "time a model, then profile every operator in a separate pass"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("model", help="an .onnx file")
        _add_knobs(p)
        p.add_argument(
            "--duration",
            type=seconds,
            default=5.0,
            metavar="S",
            help="minimum seconds of timed inferences (default 5)",
        )
        p.add_argument(
            "--min-runs",
            type=int_in(1, 10_000_000),
            default=50,
            metavar="N",
            help="minimum timed inferences (default 50)",
        )
        p.add_argument(
            "--warmup",
            type=int_in(0, 1_000_000),
            default=10,
            metavar="N",
            help="warm-up inferences discarded (default 10, and at least 0.5 s)",
        )
        p.add_argument(
            "--warmup-s", type=nonneg_seconds, default=0.5, metavar="S", help=argparse.SUPPRESS
        )
        p.add_argument(
            "--no-accuracy", action="store_true", help="skip the comparison with the FP32 model"
        )
        add_json_flag(p)
        p.add_argument(
            "--live",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="print rolling latency while timing (default: on a terminal)",
        )
        add_seed_flag(p, "seed for generated inputs")
        add_session_flag(p, "record the run into a session file (created, or appended to)")
        add_host_flag(p)
        if name == "profile":
            p.add_argument(
                "--top",
                type=positive_int,
                default=15,
                metavar="N",
                help="nodes to list (default 15; JSON keeps all unless set)",
            )
            p.add_argument(
                "--runs",
                type=int_in(1, 100_000),
                default=20,
                metavar="K",
                help="profiled inferences (default 20)",
            )
        p.set_defaults(handler=_cmd_bench, profile=name == "profile")

    add_serving_parsers(sub, _add_knobs)
    add_tune_parser(sub, _add_knobs)
    add_sweep_parser(sub, _add_knobs)
    add_generate_parser(sub)
    add_import_parser(sub)

    add_remote_parser(sub)
    add_gate_parser(sub, _add_knobs)
    add_memory_parser(sub, _add_knobs)
    add_graph_parser(sub, _add_knobs)

    p = sub.add_parser("session", help="read session files (.opscope)")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = actions.add_parser(
        "show", help="one line per run: config, latency, throughput, accuracy, status"
    )
    p.add_argument("ref", metavar="FILE[:RUN]", help="a session file, or one run of it")
    add_json_flag(p, "runs and metadata")
    p.set_defaults(handler=_cmd_session_show)
    p = actions.add_parser(
        "compact",
        help="a compact copy to hand on: every run and sample, in the current format, "
        "vacuumed (optionally only the last N passes' raw op rows)",
    )
    p.add_argument("src", metavar="IN", help="a session file (.opscope); only read")
    p.add_argument("dest", metavar="OUT", help="the copy to write (must not exist)")
    p.add_argument(
        "--keep-passes",
        type=nonneg_int,
        metavar="N",
        help="keep the raw per-inference op rows of the last N profiling passes of each "
        "run only (older passes keep their per-node statistics); default: all",
    )
    p.set_defaults(handler=_cmd_session_compact)
    _add_session_tools(sub)
    p = sub.add_parser(
        "system",
        help="this machine: CPU, memory, versions, usable providers, "
        "GPUs and measured peaks (cached)",
    )
    add_json_flag(p, "it")
    p.add_argument("--remeasure", action="store_true", help="measure the peaks again")
    add_host_flag(p)
    p.set_defaults(handler=_cmd_system)
    p = sub.add_parser(
        "cache",
        help="the cache of built variants: where, how big, the cap; --trim or --clear",
    )
    how = p.add_mutually_exclusive_group()
    how.add_argument(
        "--trim", action="store_true", help="evict least recently used entries down to the cap"
    )
    how.add_argument("--clear", action="store_true", help="remove every cached entry")
    add_json_flag(p, "it")
    p.set_defaults(handler=_cmd_cache)
    return parser


def _add_session_tools(sub: argparse._SubParsersAction[OneLineParser]) -> None:
    """`compare`, `export` and `report`: commands over recorded session files."""
    p = sub.add_parser(
        "compare",
        help="compare two recorded runs: latency and throughput "
        "deltas with confidence intervals, per-op differences, a regression gate",
    )
    p.add_argument("baseline", metavar="BASELINE", help="FILE (its last run) or FILE:ID")
    p.add_argument("candidate", metavar="CANDIDATE", help="FILE (its last run) or FILE:ID")
    p.add_argument(
        "--metric",
        choices=(*METRICS, *GENERATION_METRICS),
        default="p50",
        help="the metric the gate looks at (default p50; ttft_* and tpot_* for two "
        "generation runs)",
    )
    p.add_argument(
        "--max-regression",
        type=percent,
        default=5.0,
        metavar="PCT",
        help="exit 3 when the candidate is significantly worse by more than PCT "
        "percent (the confidence interval's lower bound; default 5: machines "
        "drift by a few percent between runs of one config)",
    )
    p.add_argument(
        "--top", type=positive_int, default=15, metavar="N", help="ops to list (default 15)"
    )
    add_seed_flag(p, "bootstrap seed (default 0)")
    add_json_flag(p, "the comparison")
    p.set_defaults(handler=_cmd_compare)

    p = sub.add_parser(
        "export",
        help="export a session: a Chrome/Perfetto trace of profiled inferences, or CSV tables",
    )
    p.add_argument("file", metavar="FILE", help="a session file (.opscope)")
    p.add_argument("--run", type=int_in(1, 2**63 - 1), metavar="ID", help="only this run")
    p.add_argument(
        "--trace",
        metavar="OUT.json",
        help="Chrome trace event JSON (Perfetto, "
        "chrome://tracing): the median profiled inference of each run; for a serving "
        "run, each batch as a slice per model instance and the queue depth as a counter",
    )
    p.add_argument(
        "--csv", metavar="DIR", help="write runs.csv, latency.csv, ops.csv and sweeps.csv"
    )
    p.set_defaults(handler=_cmd_export)

    p = sub.add_parser("report", help="a self-contained HTML report of a session")
    p.add_argument("file", metavar="FILE", help="a session file (.opscope)")
    p.add_argument(
        "-o",
        "--output",
        metavar="OUT.html",
        help="where to write it (default: FILE with an .html suffix)",
    )
    p.set_defaults(handler=_cmd_report)


def _add_knobs(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("knobs")
    g.add_argument(
        "--engine",
        choices=backends.names(),
        default=backends.DEFAULT,
        help="; ".join(
            f"{b.capabilities.name}: {b.capabilities.summary}" for b in backends.all_backends()
        ),
    )
    g.add_argument("--precision", choices=PRECISIONS, default="fp32")
    g.add_argument(
        "--fusion",
        choices=FUSIONS,
        default="all",
        help="ONNX Runtime graph optimization level (default all)",
    )
    g.add_argument("--batch", type=int_in(1, MAX_BATCH), default=1, help="batch size (default 1)")
    g.add_argument(
        "--threads",
        type=nonneg_int,
        default=0,
        help="intra-op threads (default 0: one per physical core)",
    )
    g.add_argument(
        "--spinning",
        choices=("on", "off"),
        default="off",
        help="intra-op thread spinning (default off: on small machines spinning "
        "threads steal cores from each other)",
    )
    g.add_argument(
        "--provider",
        choices=PROVIDERS,
        default="auto",
        help="execution provider (default auto: CUDA when a GPU is present)",
    )
    g.add_argument(
        "--min-cosine",
        type=unit_interval,
        default=DEFAULT_MIN_COSINE,
        metavar="X",
        help=f"INT8 keeps cosine >= X against FP32 on its worst output (default "
        f"{DEFAULT_MIN_COSINE}): settings that suit this CPU are tried, then sensitive nodes "
        "kept in FP32, until it does",
    )
    g.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=AxB",
        help="concrete shape for an input (repeatable)",
    )
    g.add_argument(
        "--dim",
        action="append",
        default=[],
        metavar="NAME=N",
        help="a symbolic input dim by name, as the app's Inputs panel sets it "
        "(sequence=256, height=320; repeatable)",
    )
    g.add_argument(
        "--inputs",
        metavar="FILE.npz|DIR",
        help="real input data (keys = input names): N samples along the batch axis, or a "
        "folder of .npz files; timing runs the first batch, accuracy every sample",
    )
    g.add_argument(
        "--labels",
        metavar="FILE.npy",
        help="class indices of the --inputs samples (1-D integers): top-1 accuracy against "
        "them, for FP32 and the variant",
    )
    g.add_argument(
        "--calibration",
        metavar="FILE.npz|DIR",
        help="calibration samples for int8 and int8-static (keys = input names; a file or folder)",
    )
    g.add_argument(
        "--tokenizer",
        metavar="tokenizer.json|DIR",
        help="the model's tokenizer: generated evaluation and calibration texts go through it "
        "(default: a tokenizer.json beside the model or in its parent folder)",
    )


# Command modules are imported only when run, so `--help` needs no heavy imports.
def _cmd_info(args: argparse.Namespace) -> int:
    from engine.cli.commands import cmd_info

    return cmd_info(args)


def _cmd_bench(args: argparse.Namespace) -> int:
    if args.host:
        from engine.cli.remote_cmd import cmd_remote

        return cmd_remote(args)
    from engine.cli.commands import cmd_bench

    return cmd_bench(args)


def _cmd_session_show(args: argparse.Namespace) -> int:
    from engine.cli.session_cmds import cmd_session_show

    return cmd_session_show(args)


def _cmd_session_compact(args: argparse.Namespace) -> int:
    from engine.cli.session_cmds import cmd_session_compact

    return cmd_session_compact(args)


def _cmd_system(args: argparse.Namespace) -> int:
    if args.host:  # the GPU box's machine and roofs, from a CPU runner
        from engine.cli.remote_cmd import cmd_remote

        return cmd_remote(args)
    from engine.cli.system_cmds import cmd_system

    return cmd_system(args)


def _cmd_cache(args: argparse.Namespace) -> int:
    from engine.cli.system_cmds import cmd_cache

    return cmd_cache(args)


def _cmd_compare(args: argparse.Namespace) -> int:
    from engine.cli.compare_cmds import cmd_compare

    return cmd_compare(args)


def _cmd_export(args: argparse.Namespace) -> int:
    from engine.cli.export_cmds import cmd_export

    return cmd_export(args)


def _cmd_report(args: argparse.Namespace) -> int:
    from engine.cli.report_cmds import cmd_report

    return cmd_report(args)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # as typed: for --host
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_OK
    try:
        return _interrupted_now(_run(args))
    except KeyboardInterrupt:  # a second signal while the first one unwound
        return _interrupted_now(EXIT_INTERRUPTED)
    finally:  # run inside another program (a test, a caller): it goes on as it was
        interrupt_flag.unwatch()


def _run(args: argparse.Namespace) -> int:
    try:
        with _stops_like_ctrl_c(), _notes_on_stderr(), guarded_stdout():
            if os.environ.get(STOP_ON_EOF) == "1":
                _stop_when_stdin_closes()
            _trace_window(args)
            code: int = args.handler(args)
        return code
    except OpScopeError as exc:  # one line, whatever a path or a file's text holds
        if interrupt_flag.received.is_set():  # a library's error for our interruption
            print("opscope: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        print(f"opscope: error: {escape_controls(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("opscope: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except ImportError as exc:  # a signal inside a C extension's init (ONNX Runtime's)
        if not engine.cli.process_exit.interrupted_import(exc):
            raise
        print("opscope: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:  # the system refused a path the user gave (a name too long to
        if exc.filename is None:  # look up: Path.exists() raises ENAMETOOLONG, not False)
            raise
        if interrupt_flag.received.is_set():
            print("opscope: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        print(f"opscope: error: {_path_refused(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT


PATH_SHOWN = 120  # characters of a refused path said (a name can be thousands long)


def _path_refused(exc: OSError) -> str:
    """`PATH: why` in one line, a long path cut to its start and its length."""
    name = os.fsdecode(exc.filename) if isinstance(exc.filename, bytes) else str(exc.filename)
    if len(name) > PATH_SHOWN:
        name = f"{name[:PATH_SHOWN]}... ({len(name):,} characters)"
    why = exc.strerror or type(exc).__name__
    return escape_controls(f"{name}: {why}")


def _interrupted_now(code: int) -> int:
    """`code`, unless a native call an interruption stopped waiting on still runs (a
    session being made): then exit at once, streams flushed, without unwinding the
    library under it (its teardown beside a running call aborts the process)."""
    if interrupt_flag.stray_native():
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
    return code


STOP_ON_EOF = "OPSCOPE_STOP_ON_EOF"  # set by --host on the command it runs on a host


def _stop_when_stdin_closes() -> None:
    """A command run on a host over SSH: when its stdin closes (the workstation pressed
    Ctrl+C, or the connection dropped), it stops as Ctrl+C stops it, keeping what it
    measured, rather than running on unseen."""

    def watch() -> None:
        with contextlib.suppress(OSError, ValueError):  # the raw fd: no buffer lock held
            while os.read(0, 1 << 16):  # at the interpreter's exit
                pass
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=watch, name="opscope-stdin-watch", daemon=True).start()


@contextlib.contextmanager
def _notes_on_stderr() -> Iterator[None]:
    """A session file that lacks optional columns says so once, in one line on stderr,
    whichever command opened it (its figures show as "-")."""
    from engine.session.reader import NOTE_HOOK
    from engine.session.trust import printable

    told: set[Path] = set()

    def note(path: Path, text: str) -> None:
        if path not in told:
            told.add(path)
            print(f"note: {printable(str(path))}: {text}", file=sys.stderr)

    NOTE_HOOK[:] = [note]
    try:
        yield
    finally:
        NOTE_HOOK.clear()


@contextlib.contextmanager
def _stops_like_ctrl_c() -> Iterator[None]:
    """SIGTERM and SIGHUP (a closed terminal, `kill`, the app's Cancel) end a command as
    Ctrl+C does: the run marked cancelled, what was measured kept, the file left whole."""

    interrupt = interrupt_flag.raise_stop  # (a serving loop stops itself; not mid-import)
    names = ("SIGINT", "SIGTERM", "SIGHUP")
    sigs = [getattr(signal, n) for n in names if hasattr(signal, n)]
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, interrupt) for s in sigs}
    interrupt_flag.watch()  # a native call (a run, a session being made) stops too
    hook = sys.excepthook  # no library's traceback of our KeyboardInterrupt (process_exit)
    sys.excepthook = engine.cli.process_exit.quiet_interruptions(hook)
    unraisable = sys.unraisablehook  # one that landed in a finalizer: raised again
    sys.unraisablehook = engine.cli.process_exit.reraised_interruptions(unraisable)
    try:
        yield
    finally:
        sys.excepthook = hook
        sys.unraisablehook = unraisable
        for s, handler in before.items():
            signal.signal(s, handler)


def _trace_window(args: argparse.Namespace) -> None:
    """--trace-speed and --trace-start written into the trace spec (`@speed=X,start=S`),
    so that everything downstream that reads the spec replays the same window."""
    speed, start = getattr(args, "trace_speed", None), getattr(args, "trace_start", None)
    if (speed is not None or start is not None) and getattr(args, "traffic", None):
        from engine.serve.traffic.schedule import with_trace_window

        args.traffic = with_trace_window(args.traffic, speed, start)
    elif speed is not None or start is not None:
        from engine.errors import ConfigError

        raise ConfigError("--trace-speed and --trace-start need --traffic trace:FILE")


if __name__ == "__main__":
    engine.cli.process_exit.end_process(main())
