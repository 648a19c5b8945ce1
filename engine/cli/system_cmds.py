"""`opscope system`: the machine, its providers, GPUs and peaks; `opscope cache`: what is cached."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from engine.cli.common import EXIT_OK, write_json
from engine.measure.contention import Contention


def cmd_system(args: argparse.Namespace) -> int:
    from engine.machine.peaks import cached_peaks
    from engine.machine.peaks_trust import judge
    from engine.machine.system import system_info

    out = sys.stdout if args.json != "-" else sys.stderr
    cached = cached_peaks()
    if args.remeasure or cached is None:
        print("measuring peaks (a few seconds; cached when the machine was quiet)...",
              file=sys.stderr)  # fmt: skip
    elif not judge(cached).trusted:
        print("the cached peaks are provisional: measured again if the machine is quiet "
              "(it is looked at once a minute at most; --remeasure measures now)...",
              file=sys.stderr)  # fmt: skip
    from engine.machine.peaks import PROGRESS_HOOK

    PROGRESS_HOOK[:] = [lambda text: print(f"[peaks] {text}", file=sys.stderr, flush=True)]
    try:
        info = system_info(remeasure=args.remeasure)
    finally:
        PROGRESS_HOOK.clear()
    print_system(info, out)
    if args.json:
        write_json(args.json, info)
    return EXIT_OK


def print_system(info: dict[str, Any], out: TextIO) -> None:
    """A short human-readable summary of `system_info()`."""
    w = out.write
    cpu = info["cpu"]
    freq = cpu.get("freq_mhz") or {}
    w(
        f"cpu        {cpu['model']}  {cpu['cores']} cores / {cpu['logical_cores']} threads"
        + (f"  {freq['current']} MHz" if freq.get("current") else "")
        + "\n"
    )
    w(f"memory     {info['memory_gb']:.1f} GB\n")
    w(f"os         {info['os']['platform']}\n")
    v = info["versions"]
    w("versions   " + ", ".join(f"{k} {val}" for k, val in v.items() if val) + "\n")
    p = info["providers"]
    w(f"providers  usable: {', '.join(p['usable'])}   (listed: {', '.join(p['available'])})\n")
    if info["gpus"]:
        for g in info["gpus"]:
            w(
                f"gpu{g['index']}       {g['name']}  {g['memory_gb']} GB  "
                f"theoretical {g['theoretical_gbps']} GB/s  power limit {g['power_limit_w']} W\n"
            )
    else:
        w(f"gpus       none: {info['gpu_reason']}\n")
    import dataclasses

    from engine.machine.peaks import roofs_for
    from engine.machine.peaks_trust import status_lines

    peaks = info["peaks"]
    c = peaks["cpu"]
    blas = c.get("blas") or {}
    ort_fp32, ort_int = c.get("ort_gflops"), c.get("ort_int_gops")
    roofs = roofs_for(peaks, "CPUExecutionProvider")
    plain = dataclasses.replace(roofs, caveat=None).describe() if roofs else "?"  # said below
    w(
        f"cpu roofs  {plain}\n"
        f"           memory: each cache level's working set, {c.get('threads', '?')} "
        f"thread(s); DRAM the better of that and a STREAM triad ({c.get('triad_gbps')} GB/s)\n"
        f"           compute: fp32 best of numpy {c.get('numpy_gflops')} and ORT MatMul"
        f"{_at(ort_fp32)}; int8 ORT MatMulInteger{_at(ort_int)}; "
        f"{blas.get('name') or 'BLAS ?'} {blas.get('version') or ''}"
        + (
            f", OPENBLAS_CORETYPE={blas['openblas_coretype']}"
            if blas.get("openblas_coretype")
            else ""
        )
        + "\n"
    )
    for i, line in enumerate(status_lines(peaks)):
        w(f"{'peaks' if i == 0 else '':<11}{line}\n")
    g = peaks.get("gpu")
    if isinstance(g, dict) and "memory_gbps" in g:
        w(f"gpu peaks  {g['memory_gbps']:.1f} GB/s  {g['gflops']:.1f} GFLOP/s (fp16 matmul)\n")
    elif isinstance(g, dict) and g.get("error"):
        w(f"gpu peaks  failed: {g['error']}\n")
    kept = "kept until the machine is quiet" if peaks.get("provisional") else "cached"
    w(f"measured   {peaks.get('measured_at')} ({kept}; --remeasure to measure again)\n")
    now = Contention.from_json(info.get("contention"))
    if now is not None:
        slow = ": timings taken now will read slow" if now.busy else ""
        w(f"machine    {now.line()} while `opscope system` ran{slow}\n")


def _at(rate: Any) -> str:
    """' at 512^3': the size a compute roof was reached at."""
    return f" at {rate['n']}^3" if isinstance(rate, dict) and "n" in rate else ""


def cmd_cache(args: argparse.Namespace) -> int:
    from engine import cache

    out = sys.stdout if args.json != "-" else sys.stderr
    if args.clear or args.trim:
        gone = cache.trim(limit=0 if args.clear else None, recent_s=0.0 if args.clear else None)
        freed = sum(e.bytes for e in gone)
        out.write(f"removed {len(gone)} entries, {_mb(freed)}\n")
    listed = cache.entries()
    kinds: dict[str, dict[str, int]] = {}
    for e in listed:
        k = kinds.setdefault(e.kind, {"entries": 0, "bytes": 0})
        k["entries"] += 1
        k["bytes"] += e.bytes
    total = sum(e.bytes for e in listed)
    cap = cache.max_bytes()
    out.write(f"cache      {cache.cache_root()}\n")
    out.write(
        f"size       {_mb(total)} in {len(listed)} entries, cap {_mb(cap)} "
        "($OPSCOPE_CACHE_MAX_GB; least recently used evicted past it)\n"
    )
    for name, k in sorted(kinds.items()):
        out.write(f"  {name:<13}{k['entries']:>5} entries  {_mb(k['bytes']):>10}\n")
    if args.json:
        write_json(
            args.json,
            {"root": str(cache.cache_root()), "bytes": total, "cap_bytes": cap, "kinds": kinds},
        )
    return EXIT_OK


def _mb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"
