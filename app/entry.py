"""The `opscope` console script. With no command (or `gui`) it opens the desktop app; every
other command is the engine's CLI, which runs on machines without Qt.

Until `run()` installs its handler, Ctrl-C is Python's KeyboardInterrupt (a traceback from
whatever import it lands in): this module imports nothing at its top beyond what the
interpreter has already loaded (no `__future__`, `collections.abc`, `typing` or `signal`,
whose enums cost more than the rest of the module), so that the handler comes as soon as
the console script reaches us (bench/signal_startup.py; the rest of that time is Python's
start and `site`, the editable install's finder importing pathlib and re, not ours)."""

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

GUI_COMMANDS = ("gui",)
GUI_OPTIONS = ("--screenshot", "--quit-after", "--session", "--size")


def main(argv: "Sequence[str] | None" = None) -> int:
    # In a frozen (PyInstaller) app the engine host's spawn child re-runs this executable:
    # freeze_support() turns it into the child there instead of starting a second GUI.
    import multiprocessing

    multiprocessing.freeze_support()
    args = list(sys.argv[1:] if argv is None else argv)
    first = args[0] if args else ""
    if first == "--self-test":
        from engine.cli.selftest import main as self_test_main

        return self_test_main()
    if first == "remote":  # a host answering --host: fast, without the CLI's imports
        from engine.remote.host_side import main_cli as remote_main

        return remote_main(args[1:])
    if (
        not args
        or first in GUI_COMMANDS
        or first.lower().endswith(_gui_files())
        or _a_model_folder(first)
        or _a_shared_llm(first)
        or first.split("=", 1)[0] in GUI_OPTIONS
    ):
        from app.shell.launch import main as gui_main

        return gui_main(args[1:] if args and args[0] in GUI_COMMANDS else args)
    from engine.cli.main import main as cli_main

    return cli_main(args)


def run() -> None:
    """The console script's entry: `main()`, then the end an interrupted command needs."""
    _stop_until_taken_over()
    _refuse_shadowed_packages()
    # imported first: its atexit hook then runs after every other one (see the module)
    from engine.cli.process_exit import end_process

    end_process(main())


def _stop_until_taken_over() -> None:
    """Ctrl-C, SIGTERM or SIGHUP before a command installs its own handling (the second
    of imports every start takes) ends the process as an interrupted command ends: one line,
    exit 130. Nothing was measured yet; Python's default handling died by the signal
    (SIGTERM: exit -15) or raised KeyboardInterrupt inside an import (a traceback, or
    NumPy's "bad install" message and exit 1). A signal the caller ignores stays ignored;
    each command's handlers replace these while it runs (engine/cli/main.py, the window's
    launch, the self-test)."""
    import _signal as signal  # the C module: `signal` builds its enums (enum, ~10 ms busy)
    import os

    # the self-test's own line, as when its handler has taken over (engine/cli/selftest.py)
    said = b"opscope self-test: FAILED: interrupted\n" if sys.argv[1:2] == ["--self-test"] else b""

    def stop(_signum: int, _frame: object) -> None:
        for stream in (sys.stdout, sys.stderr):  # a command's output, if it had finished
            try:  # noqa: SIM105 (no contextlib import in the first second of start-up)
                stream.flush()
            except Exception:  # a write the signal interrupted: what it held is lost
                pass
        os.write(2, said or b"opscope: interrupted\n")
        os._exit(130)

    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) != signal.SIG_IGN:
            signal.signal(sig, stop)


def _refuse_shadowed_packages() -> None:
    """Our top-level packages must be ours: an `engine.py` (or `widgets/`) found first on a
    PYTHONPATH replaced `engine`, and the self-test ended in that file's SyntaxError
    traceback, or exited with whatever code the file chose (the probe fuzz, stop 61)."""
    if getattr(sys, "frozen", False):
        return  # a bundle imports from its own archive
    import importlib.util
    import os

    home = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for name in ("engine", "widgets"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        where = spec.origin if spec is not None else None
        if where is not None and os.path.dirname(os.path.dirname(where)) != home:
            shown = where.encode("unicode_escape", "replace").decode("ascii", "replace")[:200]
            sys.stderr.write(
                f"opscope: error: {shown}: shadows OpScope's package {name!r} (from "
                "PYTHONPATH or the current folder): remove it from the path\n"
            )
            sys.stderr.flush()
            os._exit(2)


def _gui_files() -> tuple[str, ...]:
    """`opscope FILE` opens the window for a session or any model a backend runs."""
    from engine.backends import model_suffixes

    return (".opscope", *model_suffixes())


def _a_shared_llm(arg: str) -> bool:
    """`opscope FILE.gguf` or `opscope HF_FOLDER`: the window imports it, then opens it."""
    from engine.model.llm_sources import source_kind

    return bool(arg) and source_kind(arg) is not None


def _a_model_folder(arg: str) -> bool:
    """`opscope FOLDER` opens the window for a folder some backend runs (a generating
    model's); a command's name is never a folder of that kind."""
    from pathlib import Path

    if not arg or not Path(arg).is_dir():
        return False
    from engine.backends import all_backends

    return any(b.opens(arg) for b in all_backends())


if __name__ == "__main__":
    run()
