"""What the soak benchmarks share: resident memory sampled over time and its slope, which
mappings grew (/proc/PID/smaps), how busy the rest of the machine was meanwhile, the CPU's
name, and a results section appended to a Markdown file.

Used by bench/soak.py (the window and its engine host), bench/load_soak.py (`opscope
load`) and bench/session_growth.py (its results file).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def slope_mb_per_min(t_s: np.ndarray, rss_mb: np.ndarray, skip_s: float) -> float:
    """Least-squares slope of RSS against time (MB per minute) over samples at t >= skip_s."""
    keep = t_s >= skip_s
    if keep.sum() < 3:
        return float("nan")
    a, _ = np.polyfit(t_s[keep] / 60.0, rss_mb[keep], 1)
    return float(a)


def smaps(pid: int) -> dict[str, int]:
    """Resident bytes per mapping of `pid` (Linux): '[heap]', a file, or 'anon@ADDR'."""
    out: dict[str, int] = {}
    name = ""
    try:
        with open(f"/proc/{pid}/smaps") as fh:
            for line in fh:
                head = line.split()
                if not head:
                    continue
                if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                    name = head[5] if len(head) > 5 else f"anon@{head[0].split('-')[0]}"
                elif head[0] == "Rss:":
                    out[name] = out.get(name, 0) + int(head[1]) * 1024
    except OSError:
        pass
    return out


def rollup(pid: int) -> dict[str, int]:
    """Resident bytes of `pid` split (Linux /proc/PID/smaps_rollup): 'rss', 'anon' (heap,
    arenas, anonymous mmaps), 'file' (mapped files: libraries, fonts, an mmapped database),
    'thp' (anonymous memory in transparent huge pages); {} where it cannot be read."""
    keys = {"Rss:": "rss", "Anonymous:": "anon", "AnonHugePages:": "thp"}
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                head = line.split()
                if head and head[0] in keys:
                    out[keys[head[0]]] = int(head[1]) * 1024
    except OSError:
        return {}
    if "rss" in out and "anon" in out:
        out["file"] = out["rss"] - out["anon"]
    return out


def smaps_growth(first: dict[str, int], last: dict[str, int], top: int = 8) -> list[str]:
    """The mappings whose resident size grew most between two `smaps` readings."""
    growth = {k: last.get(k, 0) - first.get(k, 0) for k in set(first) | set(last)}
    ranked = sorted(growth.items(), key=lambda kv: -abs(kv[1]))[:top]
    return [f"{v / 1e6:+8.2f} MB  {k}" for k, v in ranked if v]


def machine_and_proc_cpu(proc: Any) -> tuple[float, float]:
    """CPU-seconds the whole machine has been busy, and those of `proc` (a psutil.Process)
    and every process under it."""
    import psutil

    t = psutil.cpu_times()
    total = sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0)
    total -= getattr(t, "guest_nice", 0.0)
    own = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            c = p.cpu_times()
            own += c.user + c.system
        except psutil.Error:
            pass
    return total, own


def others_cpu(t_s: np.ndarray, busy: np.ndarray) -> tuple[float, float]:
    """Other processes' CPU use (cores' worth) from `machine_and_proc_cpu` samples: the mean
    over the soak and the busiest minute's mean."""
    if len(busy) < 2:
        return float("nan"), float("nan")
    others = busy[:, 0] - busy[:, 1]
    mean = float((others[-1] - others[0]) / (t_s[-1] - t_s[0]))
    step = max(1, round(60 / max(float(np.median(np.diff(t_s))), 1e-3)))
    per_min = np.diff(others[::step]) / np.diff(t_s[::step]) if len(t_s) > step else []
    return mean, float(np.max(per_min)) if len(per_min) else mean


def malloc_in_use() -> int:
    """Bytes glibc's malloc has handed out and not had back, over all arenas (mallinfo2's
    uordblks + hblkhd; -1 without glibc 2.33+): grows with live C allocations, not with
    free memory the allocator keeps."""
    import ctypes

    class MallInfo2(ctypes.Structure):
        _fields_ = [
            (n, ctypes.c_size_t)
            for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                      "uordblks", "fordblks", "keepcost")
        ]  # fmt: skip

    try:
        fn = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return -1
    fn.restype = MallInfo2
    info = fn()
    return int(info.uordblks + info.hblkhd)


def object_counts() -> dict[str, int]:
    """Python objects the collector tracks, by type name. The list of every object is
    made, read and dropped inside one C call, so no other thread runs while it is alive:
    that list holds a reference to any tuple another thread is still building
    (`tuple(generator)`), whose resize then fails with "SystemError: Objects/tupleobject.c:
    bad argument to internal function". A census that counted in Python broke the
    window's wire reader this way, and the window refused its host as malformed (any
    bytecode, even the return from gc.get_objects(), may hand the GIL over)."""
    import collections
    import gc
    import itertools
    import operator

    enabled = gc.isenabled()
    gc.disable()  # no finalizer (Python code) runs midway either
    try:
        every = itertools.chain.from_iterable(map(operator.call, (gc.get_objects,)))
        kinds = list(map(type, every))  # C only: the list of objects is gone when it returns
    finally:
        if enabled:
            gc.enable()
    out: collections.Counter[str] = collections.Counter()
    for kind, n in collections.Counter(kinds).items():
        out[kind.__name__] += n
    return dict(out)


def malloc_free() -> dict[str, int]:
    """Where glibc's malloc keeps its free memory, over all arenas (malloc_info's XML):
    'system' (bytes the arenas took from the OS), 'holes' (free in chunks under 4 KiB,
    which no trim can give back: a page with a live neighbour stays resident), 'large'
    (free in larger chunks and the tops, which `malloc_trim` can give back), 'mmapped'
    (blocks mmapped on their own); {} without glibc. Growth of 'holes' while the bytes in
    use stay flat is fragmentation."""
    import ctypes
    import os
    import re
    import tempfile

    try:
        libc = ctypes.CDLL("libc.so.6")
        info = libc.malloc_info
    except (OSError, AttributeError):
        return {}
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    fd, path = tempfile.mkstemp(suffix=".xml")
    os.close(fd)
    try:
        fp = libc.fopen(path.encode(), b"w")
        if not fp:
            return {}
        info(0, fp)
        libc.fclose(fp)
        text = Path(path).read_text()
    finally:
        os.unlink(path)
    out = {"system": 0, "holes": 0, "large": 0, "mmapped": 0}
    for heap in re.findall(r"<heap nr=.*?</heap>", text, re.S):
        free = sum(
            int(n)
            for n in re.findall(r'<total type="(?:fast|rest)" count="\d+" size="(\d+)"', heap)
        )
        holes = sum(
            int(total)
            for to, total in re.findall(
                r'<(?:size|unsorted) from="\d+" to="(\d+)" total="(\d+)"', heap
            )
            if int(to) < 4096
        )
        system = re.search(r'<system type="current" size="(\d+)"', heap)
        out["system"] += int(system.group(1)) if system else 0
        out["holes"] += holes
        out["large"] += free - holes
    mmapped = re.search(r'<total type="mmap" count="\d+" size="(\d+)"', text)
    out["mmapped"] = int(mmapped.group(1)) if mmapped else 0
    return out


def pymalloc() -> dict[str, int]:
    """Python's small-object allocator (pymalloc), which takes its 1 MiB arenas from mmap, not
    malloc (so mallinfo2 does not see them): 'arenas' held now and 'in blocks', the bytes
    live objects use in them; {} where CPython does not say (sys._debugmallocstats writes
    to the C stderr, read here through a temporary file on fd 2)."""
    import os
    import sys
    import tempfile

    stats = getattr(sys, "_debugmallocstats", None)
    if stats is None:
        return {}
    with tempfile.TemporaryFile() as fh:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(fh.fileno(), 2)
        try:
            stats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        fh.seek(0)
        text = fh.read().decode(errors="replace")
    keys = {"# arenas allocated current": "arenas", "# bytes in allocated blocks": "in blocks"}
    out: dict[str, int] = {}
    for line in text.splitlines():
        head, _, value = line.partition("=")
        if head.strip() in keys:
            out[keys[head.strip()]] = int(value.strip().replace(",", ""))
    return out


def cpu_model() -> str:
    from engine.session.env import cpu_name

    return cpu_name() or "unknown CPU"


def append_section(path: Path, header: str, text: str) -> None:
    """Append `text` to the Markdown results file `path`, which starts with `header` when
    this writes it first."""
    if not path.exists():
        path.write_text(header)
    with path.open("a") as fh:
        fh.write(text + "\n")
