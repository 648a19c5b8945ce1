"""Issues 53 and 54's probe rerun as one broad, seeded fuzz: every class of hostile input
(session files, command lines, inputs, traces, models, the remote host's input, the
self-test) generated afresh (bench/probe_fuzz_cases.py, probe_fuzz_data.py,
probe_fuzz_models.py), each case the real `opscope` console script in a process of its own,
as a terminal starts it (SIGINT at its default), under a timeout and an address-space limit
(resource.setrlimit in preexec_fn), some sent Ctrl-C, SIGTERM or SIGHUP part-way, some
(--odd-stdout) with stdout on /dev/full or closed. Per class it counts:

- tracebacks: "Traceback" in stdout or stderr;
- bad exits: an exit status other than 0, 1, 2, 3, 4 or 130 (a signal's death included);
- hangs: past the timeout with no output for 10 s (a command ends or shows progress), or
  still alive 5 s after the signal it was sent;
- memory: killed for memory (MemoryError, std::bad_alloc, SIGKILL that was not ours);
- control characters: C0/C1 controls or DEL in what it printed (a name that drives the
  terminal), the remote host's binary frames aside;
- error lines: more than one line of error.

The time is shared evenly between the classes (the next case comes from the class that has
used the least). Run at low priority beside others' work:

    nice -n 10 .venv/bin/python bench/probe_fuzz.py --minutes 20 --label before

(--tree DIR runs a snapshot of the code instead of the checkout others keep editing;
--material FILE a session recorded before) appends a section to
bench/results/probe_fuzz.md (counts per class, CPU, load, others' CPU use, each distinct
finding once with the command that reproduces it; its files are kept under --keep)."""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.probe_fuzz_cases import Case, Material, command_lines, sessions  # noqa: E402
from bench.probe_fuzz_data import inputs, traces  # noqa: E402
from bench.probe_fuzz_models import models, remote, selftest  # noqa: E402

OPSCOPE = ROOT / ".venv" / "bin" / "opscope"
RESULTS = ROOT / "bench" / "results" / "probe_fuzz.md"
CLEAN_EXITS = {0, 1, 2, 3, 4, 130}
QUIET_S = 10.0  # past the timeout, a command silent this long hangs
SIGNAL_GRACE_S = 5.0  # a command still alive this long after a signal ignored it
KINDS = ("traceback", "bad exit", "hang", "memory", "control chars", "error lines")
CLASSES: dict[str, Callable[[random.Random, Material], Iterator[Case]]] = {
    "sessions": sessions,
    "command lines": command_lines,
    "inputs": inputs,
    "traces": traces,
    "models": models,
    "remote": remote,
    "self-test": selftest,
}
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")
ERROR_LINE = re.compile(r"(?i)(\berror\b|\[E:onnxruntime|^\s*File \")")


_LIVE: set[int] = set()  # process groups of the commands running now
_LIVE_LOCK = threading.Lock()


def _stop_all() -> None:
    """Every command still running is killed with its children (the fuzz is stopping)."""
    with _LIVE_LOCK:
        for pgid in list(_LIVE):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)


@dataclass
class Outcome:
    rc: int | None  # None: we killed it
    wall_s: float
    out: str
    err: str
    hang: str = ""
    cpu_s: float = 0.0  # the command's own CPU time (user + system), from wait4
    problems: list[str] = field(default_factory=list)


def _limits(memory: int, fsize: int | None, close: tuple[int, ...]) -> Callable[[], None]:
    def apply() -> None:
        # as a terminal starts a command: a runner started in the background ignores SIGINT,
        # one under nohup SIGHUP, and a command keeps what it inherits ignored (as it should)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        for fd in close:
            os.close(fd)

    return apply


def run_case(
    case: Case, env: dict[str, str], timeout: float, memory: int, work: Path, slot: Path
) -> Outcome:
    """One case, its stdout and stderr in `slot` (one folder per case run at once)."""
    out_path, err_path = slot / "stdout", slot / "stderr"
    case_env = {**env, **case.env}
    if "PYTHONPATH" in case.env and env.get("PYTHONPATH"):  # a shadowing folder goes first,
        case_env["PYTHONPATH"] = f"{case.env['PYTHONPATH']}:{env['PYTHONPATH']}"  # tree kept
    close = {"closed": (1,), "both-closed": (1, 2)}.get(case.stdout, ())
    fsize = 2048 if case.stdout == "fsize" else None
    target = "/dev/full" if case.stdout == "full" else out_path
    started = time.monotonic()
    with open(target, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [str(OPSCOPE), *case.argv],
            stdin=subprocess.PIPE if case.stdin is not None else subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=case_env,
            cwd=work,
            start_new_session=True,
            preexec_fn=_limits(memory, fsize, close),
        )
        with _LIVE_LOCK:
            _LIVE.add(proc.pid)
        if case.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.write(case.stdin)  # type: ignore[union-attr]
            with contextlib.suppress(OSError):
                proc.stdin.close()  # type: ignore[union-attr]
        hang, killed, sent, cpu = "", False, None, 0.0
        size, grew = 0, started
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)  # reaped here: its CPU time
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                cpu = usage.ru_utime + usage.ru_stime
                break
            time.sleep(0.02 if time.monotonic() - started < 2 else 0.1)
            now = time.monotonic()
            if err_path.stat().st_size != size:
                size, grew = err_path.stat().st_size, now
            if case.signal and sent is None and now - started >= case.signal[1]:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, case.signal[0])
                sent = now
            if sent is not None and now - sent > SIGNAL_GRACE_S:
                hang = f"alive {SIGNAL_GRACE_S:g} s after signal {case.signal[0]}"  # type: ignore[index]
            elif now - started > timeout and now - grew > QUIET_S:
                hang = f"past {timeout:g} s, silent {now - grew:.0f} s"
            elif now - started > 4 * timeout:
                hang = f"past {4 * timeout:g} s (still printing)"
            if hang:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                killed = True
        with contextlib.suppress(ProcessLookupError):  # its children too
            os.killpg(proc.pid, signal.SIGKILL)
        with _LIVE_LOCK:
            _LIVE.discard(proc.pid)
    o = Outcome(
        None if killed else proc.returncode,
        time.monotonic() - started,
        "" if case.binary_stdout or target != out_path else out_path.read_text(errors="replace"),
        err_path.read_text(errors="replace"),
        hang,
        cpu,
    )
    o.problems = problems(case, o)
    return o


def problems(case: Case, o: Outcome) -> list[str]:
    text = o.out + o.err
    found = []
    if "Traceback" in text:
        found.append("traceback")
    if o.rc is not None and o.rc not in CLEAN_EXITS:
        found.append("bad exit")
    if o.hang:
        found.append("hang")
    if re.search(r"MemoryError|bad_alloc|Cannot allocate memory", text) or o.rc == -9:
        found.append("memory")
    if CONTROL.search(text):
        found.append("control chars")
    errors = [
        ln
        for ln in o.err.splitlines()
        if ERROR_LINE.search(ln) and not ln.startswith(("info:", "warning:", "note:", "  "))
    ]
    if len(errors) > 1:
        found.append("error lines")
    return found


def signature(case: Case, kind: str, o: Outcome) -> str:
    """What tells one finding from another: its class, kind, command and last line."""
    lines = [ln for ln in o.err.splitlines() if ln.strip()]
    last = lines[-1] if lines else f"rc {o.rc}"
    if kind == "traceback":
        frames = [ln for ln in o.err.splitlines() if ln.strip().startswith("File ")]
        last = (frames[-1].strip() if frames else "") + " | " + last
    elif kind == "hang":
        last = o.hang
    elif kind == "control chars":
        m = CONTROL.search(o.out + o.err)
        last = repr((o.out + o.err)[max(0, m.start() - 40) : m.end() + 10]) if m else last
    last = re.sub(r"/tmp/[^\s:'\"]+", "<tmp>", last)
    last = re.sub(r"\d+(\.\d+)?", "N", last)[:200]
    verb = case.argv[0] if case.argv else ""
    if verb == "remote" and len(case.argv) > 1:
        verb += " " + case.argv[1]
    return f"{case.cls} | {kind} | {verb} | {last}"


def others_busy() -> Callable[[], float]:
    """Others' CPUs over the run: the machine's busy time less ours (this process and the
    commands it ran), per second of wall time."""

    def busy() -> float:
        fields = Path("/proc/stat").read_text().split("\n")[0].split()[1:]
        ticks = [int(x) for x in fields]
        return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")

    def ours() -> float:
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    b0, o0, t0 = busy(), ours(), time.monotonic()
    return lambda: max(0.0, (busy() - b0) - (ours() - o0)) / max(time.monotonic() - t0, 1e-9)


def cpu_name() -> str:
    from engine.hostinfo import cpu_model

    return cpu_model() or "unknown CPU"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=53)
    ap.add_argument("--timeout", type=float, default=45.0, help="seconds per command")
    ap.add_argument("--memory-gb", type=float, default=3.0, help="RLIMIT_AS per command")
    ap.add_argument("--only", default="", help="classes whose name holds this")
    ap.add_argument(
        "--odd-stdout",
        type=float,
        default=0.0,
        help="this share of cases with stdout on /dev/full or closed",
    )
    ap.add_argument(
        "--jobs", type=int, default=1, help="cases run at once (each its own process group)"
    )
    ap.add_argument("--label", default="run")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--material", default="", help="a session recorded before (else recorded)")
    ap.add_argument("--tree", default=str(ROOT), help="the code to run (a snapshot: its path)")
    ap.add_argument("--keep", default=str(Path(tempfile.gettempdir()) / "probe-fuzz-findings"))
    a = ap.parse_args()
    memory = int(a.memory_gb * (1 << 30))
    budget = a.minutes * 60
    keep = Path(a.keep) / a.label
    shutil.rmtree(keep, ignore_errors=True)
    keep.mkdir(parents=True)
    load0, others = os.getloadavg(), others_busy()
    started = time.monotonic()
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    spent: dict[str, float] = {}
    findings: dict[str, list[str]] = {}
    cpu: dict[str, float] = defaultdict(float)
    with tempfile.TemporaryDirectory(prefix="probe-fuzz-") as tmp:
        work = Path(tmp)
        cache = work / "cache"
        home_cache = Path.home() / ".cache" / "opscope"
        for part in ("peaks", "calibration"):  # measured once already: not the probe's matter
            if (home_cache / part).is_dir():
                shutil.copytree(home_cache / part, cache / part)
        env = {**os.environ, "OPSCOPE_CACHE_DIR": str(cache), "PYTHONPATH": a.tree}
        env.pop("PYTHONSTARTUP", None)
        from tests.session_mutations import record_material

        if a.material:
            shutil.copyfile(a.material, work / "material.opscope")
        material = Material(
            work, work / "material.opscope" if a.material else record_material(work)
        )
        print(f"material recorded in {time.monotonic() - started:.0f} s", flush=True)
        gens = {
            n: g(random.Random(f"{a.seed}:{n}"), material)
            for n, g in CLASSES.items()
            if a.only in n
        }
        spent = dict.fromkeys(gens, 0.0)
        odd = random.Random(f"{a.seed}:stdout")  # apart: the classes' cases stay the same
        running: dict[Future[Outcome], tuple[str, Case]] = {}
        free = [work / f"slot{i}" for i in range(a.jobs)]
        for slot in free:
            slot.mkdir()

        def share(n: str) -> float:  # time used, the cases still running at their mean
            busy = sum(1 for c, _ in running.values() if c == n)
            return spent[n] + busy * spent[n] / max(counts[n]["runs"], 1)

        with ThreadPoolExecutor(a.jobs) as pool:
            try:
                while running or (gens and time.monotonic() - started < budget):
                    while free and gens and time.monotonic() - started < budget:
                        cls = min(gens, key=share)
                        try:
                            case = next(gens[cls])
                        except Exception as exc:
                            print(f"{cls}: generator failed: {exc!r}", flush=True)
                            del gens[cls]
                            continue
                        if any("\x00" in arg for arg in case.argv):  # no process takes one
                            continue
                        if (
                            case.stdout == "file"
                            and not case.binary_stdout
                            and odd.random() < a.odd_stdout
                        ):
                            case.stdout = odd.choice(["full", "closed"])  # output cannot go
                            case.name += f" >{case.stdout}"
                        slot = free.pop()
                        job = pool.submit(run_case, case, env, a.timeout, memory, work, slot)
                        job.slot = slot  # type: ignore[attr-defined]
                        running[job] = (cls, case)
                    if not running:
                        break
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for job in done:
                        cls, case = running.pop(job)
                        free.append(job.slot)  # type: ignore[attr-defined]
                        _record(job.result(), cls, case, counts, spent, cpu, findings, keep)
            finally:
                for job in running:  # the fuzz stopped: its commands stop too
                    job.cancel()
                _stop_all()
    load1 = os.getloadavg()
    text = report(
        a, counts, spent, cpu, findings, load0, load1, others(), time.monotonic() - started
    )
    with open(a.out, "a") as fh:
        fh.write(text)
    print(text)
    return 0


def _record(
    o: Outcome,
    cls: str,
    case: Case,
    counts: dict[str, Counter[str]],
    spent: dict[str, float],
    cpu: dict[str, float],
    findings: dict[str, list[str]],
    keep: Path,
) -> None:
    spent[cls] += o.wall_s
    cpu[cls] += o.cpu_s
    counts[cls]["runs"] += 1
    for kind in o.problems:
        counts[cls][kind] += 1
        sig = signature(case, kind, o)
        seen = findings.setdefault(sig, [])
        if len(seen) < 2:
            seen.append(_keep(case, o, keep, len(findings)))
    if not o.problems:
        counts[cls]["clean"] += 1
    print(
        f"{cls:13s} {o.rc!s:5s} {o.wall_s:5.1f}s {o.cpu_s:5.1f}cpu "
        f"{','.join(o.problems) or 'ok':20s} {case.name[:90]!r}",
        flush=True,
    )
    _remove(case.files)


def _keep(case: Case, o: Outcome, keep: Path, n: int) -> str:
    """The case's files copied under `keep`, and the command that reproduces it."""
    dest = keep / f"f{n:03d}"
    dest.mkdir(exist_ok=True)
    for f in case.files:
        with contextlib.suppress(OSError):
            if f.is_dir() and not f.is_symlink():
                shutil.copytree(f, dest / f.name, symlinks=True)
            elif f.exists() or f.is_symlink():
                shutil.copy(f, dest / f.name, follow_symlinks=False)
    if case.stdin is not None:
        (dest / "stdin.bin").write_bytes(case.stdin)
    (dest / "stderr.txt").write_text(o.err[-20_000:])
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in case.env.items())
    how = {"full": " >/dev/full", "closed": " >&-", "both-closed": " >&- 2>&-"}.get(case.stdout, "")
    cmd = f"{env} opscope {shlex.join(case.argv)}{how}".strip()
    if case.stdin is not None:
        cmd += f" < {dest / 'stdin.bin'}"
    if case.signal:
        cmd += f"  # signal {case.signal[0]} after {case.signal[1]:.2f} s"
    cmd = CONTROL.sub(lambda m: repr(m.group())[1:-1], cmd)  # the results file stays text
    return f"`{cmd[:400]}` (files: {dest})"


def _remove(files: list[Path]) -> None:
    for f in files:
        with contextlib.suppress(OSError):
            if f.is_dir() and not f.is_symlink():
                shutil.rmtree(f)
            elif f.exists() or f.is_symlink():
                f.unlink()


def report(
    a: argparse.Namespace,
    counts: dict[str, Counter[str]],
    spent: dict[str, float],
    cpu: dict[str, float],
    findings: dict[str, list[str]],
    load0: tuple[float, ...],
    load1: tuple[float, ...],
    others: float,
    wall: float,
) -> str:
    rows = [
        "| class | runs | clean | " + " | ".join(KINDS) + " | time s | CPU s |",
        "|---|---|---|" + "---|" * len(KINDS) + "---|---|",
    ]
    total: Counter[str] = Counter()
    for cls in spent:
        c = counts[cls]
        total.update(c)
        rows.append(
            f"| {cls} | {c['runs']} | {c['clean']} | "
            + " | ".join(str(c[k]) for k in KINDS)
            + f" | {spent[cls]:.0f} | {cpu[cls]:.0f} |"
        )
    rows.append(
        f"| **all** | {total['runs']} | {total['clean']} | "
        + " | ".join(str(total[k]) for k in KINDS)
        + f" | {sum(spent.values()):.0f} | {sum(cpu.values()):.0f} |"
    )
    lines = [
        f"## {a.label}: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, seed {a.seed}",
        "",
        f"CPU: {cpu_name()}, {os.cpu_count()} logical cores shared with other work; "
        f"load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end; others' CPU "
        f"use over the run {others:.2f} of {os.cpu_count()} CPUs. Run at nice 10 "
        f"(nice now {os.nice(0)}), {wall / 60:.1f} min in all (the session material included), "
        f"timeout {a.timeout:g} s per command, RLIMIT_AS {a.memory_gb:g} GB, "
        f"{a.odd_stdout:.0%} of cases with stdout on /dev/full or closed, {a.jobs} case(s) at "
        f"once. Time s: the cases' wall time, CPU s: the commands' own CPU time (wait4).",
        "",
        *rows,
        "",
        f"{len(findings)} distinct findings (class | kind | command | last line, numbers as N):",
        "",
    ]
    for sig, examples in sorted(findings.items()):
        lines.append(f"- {sig.replace('|', '/')}")
        lines += [f"  - {e}" for e in examples[:1]]
    return "\n".join(lines) + "\n\n"


if __name__ == "__main__":
    raise SystemExit(main())
