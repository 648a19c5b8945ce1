"""A job that dies of SIGABRT under an address-space limit says the limit: ONNX Runtime
answers a failed allocation with an uncaught std::bad_alloc, and "the memory probe crashed
(SIGABRT)" alone did not say that memory ran out (stop 62's probe fuzz, RLIMIT_AS 3 GB)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import resource, sys
if sys.argv[1] != "none":
    resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), resource.RLIM_INFINITY))
from engine.run.child_job import describe_exit
print(describe_exit(-6, "the memory probe"))
print(describe_exit(-9, "the memory probe"))
"""


def _words(limit: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, limit], cwd=ROOT, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_an_abort_under_an_address_space_limit_names_it() -> None:
    abort, kill = _words(str(3 * 10**9))
    assert abort.startswith("the memory probe crashed (SIGABRT) under an address-space limit")
    assert "3.0 GB" in abort and "ulimit -v" in abort
    assert kill == "the memory probe was killed (SIGKILL)"


def test_without_a_limit_an_abort_is_said_as_before() -> None:
    assert _words("none")[0] == "the memory probe crashed (SIGABRT)"
