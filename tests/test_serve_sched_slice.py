"""The short scheduler slice the serving loops' senders ask for (engine/serve/sched_slice.py):
granted where the kernel has it, the thread's nice value and policy kept."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from engine.serve.sched_slice import ATTR, SLICE_NS, SYSCALLS, short_slice

linux = pytest.mark.skipif(sys.platform != "linux", reason="Linux scheduler")


def in_thread(fn: Callable[[], Any]) -> Any:
    """`fn` run on a fresh thread (a slice, a nice value and a policy are per thread)."""
    out: list[Any] = []
    th = threading.Thread(target=lambda: out.append(fn()))
    th.start()
    th.join()
    return out[0]


def slice_now() -> int:
    import ctypes
    import platform

    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(ATTR.size)
    assert libc.syscall(SYSCALLS[platform.machine()][1], 0, buf, ATTR.size, 0) == 0
    return int(ATTR.unpack(buf.raw)[5])


@linux
def test_the_slice_is_the_threads_own_and_keeps_its_nice_value() -> None:
    def ask() -> tuple[bool, int, int]:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, 5)  # nicer: allowed unprivileged
        got = short_slice()
        return got, os.getpriority(os.PRIO_PROCESS, tid), slice_now() if got else 0

    got, nice, ns = in_thread(ask)
    assert nice == 5  # kept (a reset to 0 would need privilege, and is not asked for)
    if got:  # Linux 6.12 and later
        assert ns == SLICE_NS
        assert in_thread(slice_now) != SLICE_NS  # another thread keeps the default


@linux
def test_a_batch_thread_is_left_as_it_is() -> None:
    def ask() -> tuple[bool, int]:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        return short_slice(), os.sched_getscheduler(0)

    got, policy = in_thread(ask)
    assert not got and policy == os.SCHED_BATCH


def test_elsewhere_it_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("platform.machine", lambda: "riscv64")
    assert short_slice() is False
