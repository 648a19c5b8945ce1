"""Ctrl-C in the first fraction of a second of `opscope`, before the entry installs its
handler, is Python's KeyboardInterrupt: a traceback from whatever import it lands in
(bench/signal_startup.py). Most of that time is Python's own start and `site` (the editable
install's finder imports pathlib and re), which no code of ours can reach; ours is the
entry module and its handler, which now import nothing the interpreter has not already
loaded (it imported `__future__`, `collections.abc` and `signal`, whose enums cost more
than the rest)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# no `site`: the interpreter's own start, and `os`, which `site` imports in every start
CHILD = """
import os, sys
sys.path.insert(0, sys.argv[1])
before = set(sys.modules)
from app.entry import _stop_until_taken_over
_stop_until_taken_over()
import _signal
assert _signal.getsignal(_signal.SIGTERM).__name__ == "stop"
print(" ".join(sorted(set(sys.modules) - before)))
"""


def test_the_entry_installs_its_handler_without_importing_anything_else() -> None:
    done = subprocess.run(
        [sys.executable, "-S", "-c", CHILD, str(ROOT)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["app", "app.entry"], done.stdout
