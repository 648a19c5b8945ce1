"""The writer-target matrix (#30): every output flag of every command that writes one,
against every kind of path it may be given, each cell a real `opscope` process. What must
hold: a new or existing file is written atomically; a symlink is followed (the link kept);
a FIFO with a reader and a device are written in place (they stay what they were); a FIFO
nobody reads, a full device, a folder and a link to a folder are refused in one line with
exit 2 and left as they were; `-` and a link to /proc/self/fd/1 go to standard output.

    python bench/writer_matrix.py [--out bench/results/writer_matrix.md] [--only NAME]

Device cells need root (mknod); without it they are skipped and the table says so."""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "resources" / "models"
CNN = str(MODELS / "demo_cnn.onnx")
LLM = str(MODELS / "demo_llm")
QUICK = ["--duration", "0.2", "--threads", "1"]

# name -> argv given the session (two bench runs and a profile of the demo CNN) and the path
WRITERS: dict[str, Callable[[str, str], list[str]]] = {
    "bench --json": lambda s, o: ["bench", CNN, *QUICK, "--no-accuracy", "--json", o],
    "profile --json": lambda s, o: ["profile", CNN, *QUICK, "--runs", "2", "--json", o],
    "system --json": lambda s, o: ["system", "--json", o],
    "session show --json": lambda s, o: ["session", "show", s, "--json", o],
    "compare --json": lambda s, o: ["compare", f"{s}:1", f"{s}:2", "--json", o],
    "report -o": lambda s, o: ["report", s, "-o", o],
    "export --trace": lambda s, o: ["export", s, "--trace", o],
    "gate --json": lambda s, o: ["gate", f"{s}:1", CNN, *QUICK, "--runs", "1", "--json", o],
    "gate --junit": lambda s, o: ["gate", f"{s}:1", CNN, *QUICK, "--runs", "1", "--junit", o],
    "gate --summary": lambda s, o: ["gate", f"{s}:1", CNN, *QUICK, "--runs", "1",
                                    "--summary", o],
    "load --json": lambda s, o: ["load", CNN, "--traffic", "poisson:50", "--duration", "0.5",
                                 "--json", o],
    "simulate --json": lambda s, o: ["simulate", CNN, "--traffic", "poisson:50",
                                     "--requests", "100", "--json", o],
    "generate --json": lambda s, o: ["generate", LLM, "--prompt-len", "8", "--new-tokens", "4",
                                     "--json", o],
    "sweep --json": lambda s, o: ["sweep", str(MODELS / "demo_transformer.onnx"), "--vary",
                                  "sequence=16,32", "--duration", "0.2", "--json", o],
    "tune --json": lambda s, o: ["tune", CNN, "--space", "precision=fp32", "--space",
                                 "fusion=all", "--duration", "0.2", "--json", o],
}  # fmt: skip
TARGETS = ("new file", "existing file", "link to a file", "FIFO with a reader",
           "FIFO, no reader", "null device", "full device", "/dev/stdout link", "folder",
           "link to a folder", "-")  # fmt: skip
WRITTEN = {"new file", "existing file", "link to a file", "FIFO with a reader", "null device"}
TO_STDOUT = {"/dev/stdout link", "-"}


class FifoReader:
    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.data = bytearray()
        self.stop = False
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while not self.stop:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                time.sleep(0.01)
                continue
            if chunk:
                self.data += chunk
            else:
                time.sleep(0.01)

    def close(self) -> bytes:
        time.sleep(0.2)
        self.stop = True
        self.thread.join()
        os.close(self.fd)
        return bytes(self.data)


def make_target(kind: str, folder: Path) -> tuple[str, FifoReader | None]:
    """The path of `kind` in `folder` (and the FIFO's reader, for that kind)."""
    path = folder / "out"
    if kind == "existing file":
        path.write_text("old")
    elif kind == "link to a file":
        (folder / "real").write_text("old")
        path.symlink_to(folder / "real")
    elif kind == "FIFO with a reader":
        return str(path), FifoReader(path)
    elif kind == "FIFO, no reader":
        os.mkfifo(path)
    elif kind in ("null device", "full device"):
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3 if kind == "null device" else 7))
    elif kind == "/dev/stdout link":
        path.symlink_to("/proc/self/fd/1")
    elif kind == "folder":
        path.mkdir()
    elif kind == "link to a folder":
        (folder / "dir").mkdir()
        path.symlink_to(folder / "dir")
    elif kind == "-":
        return "-", None
    return str(path), None


def kind_of(path: Path) -> str:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "missing"
    for test, name in ((stat.S_ISLNK, "link"), (stat.S_ISFIFO, "fifo"), (stat.S_ISCHR, "device"),
                       (stat.S_ISDIR, "folder"), (stat.S_ISREG, "file")):  # fmt: skip
        if test(mode):
            return name
    return "other"


def cell(writer: str, target: str, session: str, work: Path) -> tuple[bool, str]:
    """(as expected, what happened) for one writer against one kind of target."""
    folder = work / f"{writer.replace(' ', '_')}-{target.replace(' ', '_').replace('/', '')}"
    folder.mkdir()
    path, reader = make_target(target, folder)
    before = kind_of(Path(path)) if path != "-" else "-"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen"}
    t = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "engine.cli.main", *WRITERS[writer](session, path)],
            capture_output=True, text=True, timeout=180, env=env, cwd=folder,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return False, "did not finish in 180 s"
    seconds = time.monotonic() - t
    got = reader.close() if reader is not None else b""
    after = kind_of(Path(path)) if path != "-" else "-"
    err = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    tb = "Traceback" in proc.stderr
    kept = before == after or (before == "missing" and after == "file")
    verdicts = (0, 1, 3) if writer.startswith("gate") else (0, 1)  # 3: the gate's regression
    if target in WRITTEN:
        written = (
            len(got) > 0
            if reader is not None
            else target == "null device"
            or (Path(path).resolve().is_file() and Path(path).resolve().stat().st_size > 0)
        )
        ok = proc.returncode in verdicts and written and kept and not tb
        what = f"rc {proc.returncode}, written, still a {after}"
    elif target in TO_STDOUT:
        ok = proc.returncode in verdicts and len(proc.stdout) > 0 and kept and not tb
        what = f"rc {proc.returncode}, to stdout ({len(proc.stdout):,} chars)"
    else:
        ok = proc.returncode == 2 and kept and not tb and len(err) >= 1
        what = f"rc {proc.returncode}: {err[-1][:90] if err else '(silent)'}"
    if not kept:
        what += f" (was a {before}, now a {after})"
    if tb:
        what += " TRACEBACK"
    return ok, f"{what} [{seconds:.1f} s]"


def session_file(folder: Path) -> str:
    path = folder / "s.opscope"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cli = [sys.executable, "-m", "engine.cli.main"]
    for extra in (["bench", CNN, *QUICK, "--no-accuracy"], ["bench", CNN, *QUICK, "--no-accuracy"],
                  ["profile", CNN, *QUICK, "--runs", "2"]):  # fmt: skip
        subprocess.run([*cli, *extra, "--session", str(path)], check=True, env=env,
                       capture_output=True)  # fmt: skip
    return str(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "writer_matrix.md"))
    ap.add_argument("--only", action="append", help="writers to run (default: every one)")
    args = ap.parse_args()
    root = os.geteuid() == 0
    writers = args.only or list(WRITERS)
    work = Path(tempfile.mkdtemp(prefix="writer-matrix-"))
    failures: list[str] = []
    rows: list[str] = []
    try:
        session = session_file(work)
        for w in writers:
            marks = []
            for t in TARGETS:
                if t in ("null device", "full device") and not root:
                    marks.append("skipped (not root)")
                    continue
                ok, what = cell(w, t, session, work)
                marks.append("ok" if ok else "**FAIL**")
                if not ok:
                    failures.append(f"- {w} x {t}: {what}")
                print(f"{w:22} {t:20} {'ok ' if ok else 'FAIL'} {what}", flush=True)
            rows.append(f"| {w} | " + " | ".join(marks) + " |")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cells = len(writers) * len(TARGETS)
    lines = [
        "# Writer-target matrix (bench/writer_matrix.py)",
        "",
        f"- Date: {time.strftime('%Y-%m-%d %H:%M')}; {'root' if root else 'not root'}; "
        f"{cells} cells, {len(failures)} failed; each cell a real `opscope` process",
        "- Expected: files written atomically, a link followed (kept), a FIFO with a reader "
        "and /dev/null written in place; a FIFO nobody reads, /dev/full, a folder and a link "
        "to one refused in one line, exit 2, left as they were; `-` and a /proc/self/fd/1 "
        "link go to stdout. 'ok' means exactly that happened, with no traceback.",
        "",
        "| writer | " + " | ".join(TARGETS) + " |",
        "|---|" + "---|" * len(TARGETS),
        *rows,
        "",
        *(["## Failures", "", *failures, ""] if failures else []),
    ]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
