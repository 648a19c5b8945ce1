"""How an `opscope` process ends. A command that was interrupted (Ctrl+C, SIGTERM, SIGHUP)
has already kept what it measured and printed its line when `main()` returns 130; the
interpreter's teardown after that is where ONNX Runtime's threads meet their library's
static destructors. When the signal landed just as a native call ended (a session that
failed to build on a 20,000-node chain), that teardown aborts the process ("terminate
called without an active exception", exit -6) instead of exiting 130. An interrupted
process therefore ends at once, its streams flushed, without that teardown; every other
code ends as usual (atexit handlers run).

Only the process's own entry calls this: `main()` run inside another program (a test, a
caller) returns its code and the program goes on."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import NoReturn

INTERRUPTED = 130  # engine.cli.common.EXIT_INTERRUPTED, without that module's imports


def end_process(code: int) -> NoReturn:
    """Exit this process with `code`; an interrupted one without the interpreter's teardown."""
    if code == INTERRUPTED:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
    sys.exit(code)
