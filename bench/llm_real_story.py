"""The seed's story on a real LLM, as a user would tell it with the CLI, every step recording
into one session file: prefill against decode on the roofline (`generate --profile`),
attention's growth with the prompt (the profile again at a long prompt, and
`generate --sweep-prompt`'s TTFT fit), the three serving layouts simulated (`simulate
--llm --layout all`), one served for real (`load --llm`), and the prefix cache (simulated,
then served twice and the tokens compared). Each step is short: a few requests, seconds of
traffic. A step that fails is kept with its one-line error, never skipped."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STEP_TIMEOUT_S = 900
# the serving steps' requests: short prompts and outputs, a few of them; the same flags
# simulated and served for real (one instance, chunks of 64 tokens)
SERVE = "--prompt-len 64-192 --new-tokens 16 --max-seqs 8 --instances 1 --chunk-tokens 64 "
SERVE += "--traffic poisson:0.3 --requests 8"
PREFIX = "--layout colocated --prompt-len 192 --new-tokens 8 --max-seqs 8 --instances 1 "
PREFIX += "--shared-prefix 2,128 --prefix-cache 64 --traffic poisson:0.3 --requests 8"
GEN = "--new-tokens 16 --duration 2 --warmup 1"
SWEEP = "--prompt-len 32 --new-tokens 8 --duration 1 --warmup 1 --sweep-prompt 32,128,512,1024"


def _op_share(phase: dict[str, Any], word: str) -> float:
    ops = phase.get("op_types", [])
    total = sum(o.get("time_ms", 0.0) for o in ops) or 1.0
    return sum(o.get("time_ms", 0.0) for o in ops if word in o.get("name", "")) / total


def _roofline(d: dict[str, Any]) -> str:
    p, q = d["phases"]["prefill"], d["phases"]["decode"]
    return (
        f"prefill {p['time_ms']:.0f} ms/pass, {p['intensity']:.1f} FLOP/B, "
        f"{p['gflops_per_s']:.1f} GFLOP/s; decode {q['time_ms']:.0f} ms/pass, "
        f"{q['intensity']:.2f} FLOP/B, {q['gb_per_s']:.1f} GB/s: decode's intensity "
        f"{p['intensity'] / q['intensity']:.0f}x lower (memory-bound); attention "
        f"{_op_share(p, 'Attention'):.0%} of prefill at {d['prompt_len']} tokens; "
        f"TPOT p50 {d['tpot_ms']['p50']:.0f} ms, decode {d['tokens_per_s']['decode']:.1f} "
        "tokens/s"
    )


def _long(d: dict[str, Any]) -> str:
    p = d["phases"]["prefill"]
    top = ", ".join(f"{o['name']} {o['time_ms'] / p['time_ms']:.0%}" for o in p["op_types"][:3])
    return (
        f"at {d['prompt_len']} tokens attention is {_op_share(p, 'Attention'):.0%} of "
        f"prefill ({p['time_ms']:.0f} ms/pass; top: {top}); TTFT p50 "
        f"{d['ttft_ms']['p50']:.0f} ms"
    )


def _sweep(d: dict[str, Any]) -> str:
    s = d["sweep"]
    pts = ", ".join(f"{p['prompt_len']}: {p['ttft_p50_ms']:.0f}" for p in s["points"])
    f = s["prefill_fit"]
    return (
        f"TTFT p50 ms by prompt length {pts}; fit {f['a_ms']:.1f} + "
        f"{f['b_ms_per_token']:.3f}*L + {f['c_ms_per_token2'] * 1e6:.2f}e-6*L^2 ms: the "
        f"quadratic (attention) term is {f['quadratic_share_at_longest']:.0%} of TTFT at "
        f"the longest; TPOT +{s['tpot_fit']['us_per_context_token']:.2f} us per context "
        "token"
    )


def _row(r: dict[str, Any]) -> str:
    t = r["throughput"]
    return (
        f"{r['layout']}: TTFT p50 {r['ttft_ms']['p50']:.0f} / p99 {r['ttft_ms']['p99']:.0f} "
        f"ms, TPOT p50 {r['tpot_ms']['p50']:.0f} ms, {t['tokens_per_s']:.1f} tokens/s"
    )


def _simulate(d: dict[str, Any]) -> str:
    rows = d.get("layouts") or [d]
    return f"{d['traffic']['requests']} requests; " + "; ".join(_row(r) for r in rows)


def _load(d: dict[str, Any]) -> str:
    return f"{d['traffic']['requests']} requests served for real; {_row(d)}"


def _prefix(d: dict[str, Any]) -> str:
    rows = d.get("layouts") or [d]
    r = rows[0]
    w = r["without_prefix_cache"]
    out = (
        f"TTFT p50 {w['ttft_ms']['p50']:.0f} ms without the cache, "
        f"{r['ttft_ms']['p50']:.0f} ms with it (hit rate {r['prefix_cache']['hit_rate']:.0%})"
    )
    if "tokens_identical" in r:
        same = r["tokens_identical"]
        out += f"; tokens identical with and without: {same['same']} of {same['requests']}"
    return out


def steps(folder: Path, threads: int) -> list[tuple[str, list[str], Callable[[Any], str]]]:
    tail = ["--threads", str(threads)]

    def cmd(kind: str, flags: str) -> list[str]:
        return [kind, str(folder), *flags.split(), *tail]

    return [
        ("prefill vs decode roofline", cmd("generate", f"{GEN} --prompt-len 128 --profile"),
         _roofline),
        ("attention at a long prompt", cmd("generate", f"{GEN} --prompt-len 1024 --profile"),
         _long),
        ("prompt-length sweep", cmd("generate", SWEEP), _sweep),
        ("three layouts simulated", cmd("simulate", f"--llm --layout all --recalibrate {SERVE}"),
         _simulate),
        ("one layout for real", cmd("load", f"--llm --layout chunked {SERVE}"), _load),
        ("prefix cache simulated", cmd("simulate", f"--llm {PREFIX}"), _prefix),
        ("prefix cache for real", cmd("load", f"--llm {PREFIX}"), _prefix),
    ]  # fmt: skip


def _error(text: str) -> str:
    """The command's own one-line error (its last line that says something)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    said = [ln for ln in lines if ln.startswith(("opscope:", "error", "Error"))]
    return (said or lines or ["(no output)"])[-1][:300]


def story(folder: Path, session: Path, threads: int) -> dict[str, Any]:
    session.unlink(missing_ok=True)
    done: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="llm-real-story-") as tmp:
        for i, (name, argv, showed) in enumerate(steps(folder, threads)):
            out = Path(tmp) / f"{i}.json"
            cmd = [*argv, "--session", str(session), "--json", str(out)]
            t0 = time.perf_counter()
            try:
                proc = subprocess.run(
                    [sys.executable, "-m", "app.entry", *cmd],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    timeout=STEP_TIMEOUT_S,
                )
                rc, text = proc.returncode, proc.stdout + proc.stderr
            except subprocess.TimeoutExpired as exc:
                rc, text = 124, f"opscope: timed out after {exc.timeout:.0f} s"
            step: dict[str, Any] = {
                "name": name,
                "command": "opscope "
                + " ".join(
                    a.replace(str(folder), Path(folder).name).replace(str(session), session.name)
                    for a in cmd
                    if not a.startswith(tmp)
                ).replace(" --json", ""),
                "seconds": time.perf_counter() - t0,
                "rc": rc,
                "error": "",
                "showed": "",
            }
            if rc != 0:
                step["error"] = _error(text)
            else:
                try:
                    step["showed"] = showed(json.loads(out.read_text()))
                except Exception as exc:  # a JSON without what we read: say so, keep going
                    step["showed"] = f"(ran; its JSON lacked {exc!r})"
            print(f"story {name}: rc {rc} {step['error'] or step['showed']}", flush=True)
            done.append(step)
    show = subprocess.run(
        [sys.executable, "-m", "app.entry", "session", "show", str(session)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return {
        "steps": done,
        "session": str(session),
        "session_show": (show.stdout + show.stderr).strip().splitlines(),
    }
