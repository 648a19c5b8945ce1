"""Hostile session files made from a real one, and the reader commands run over them
(#29, #30): shared by tests/test_session_probe.py (a sample) and bench/session_probe.py
(every mutation).

`record_material` records a real session with the CLI (profile, load, simulate and sweep
runs of the demo models, tiny durations). `mutations` lists ways to damage a copy: each
column dropped, each numeric column set to NaN, -1, 1e18 or text, a text column inflated
to 5 MB, JSON fields given absurd values, `steps` rows under a load run, 500 sweeps.
`run_reader` runs one reader command in a forked child of this process (so the command is
the real `opscope` main, in-process, with its resource use measured on its own by
`os.wait4`) and says whether it ended cleanly: exit 0, or exit 2 with a one-line error,
never a traceback.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "resources" / "models"
QUICK = ["--warmup", "2", "--threads", "1", "--no-live", "--no-accuracy"]
FIVE_MB = 5 * 1024 * 1024

# the runs of the material file: 1 profile, 2 load, 3 simulate, 4-5 the sweep's profile runs
RECORDING: list[list[str]] = [
    ["profile", str(MODELS / "demo_cnn.onnx"), *QUICK, "--duration", "0.3", "--runs", "3"],
    [
        "load",
        str(MODELS / "demo_cnn.onnx"),
        "--traffic",
        "poisson:100",
        "--duration",
        "0.6",
        "--warmup-s",
        "0.1",
        "--max-batch",
        "4",
        "--threads",
        "1",
    ],
    [
        "simulate",
        str(MODELS / "demo_cnn.onnx"),
        "--traffic",
        "poisson:200",
        "--duration",
        "1",
        "--warmup-s",
        "0.2",
        "--max-batch",
        "4",
        "--threads",
        "1",
    ],
    [
        "sweep",
        str(MODELS / "demo_transformer.onnx"),
        "--vary",
        "sequence=8,16",
        "--duration",
        "0.2",
        "--runs",
        "2",
        "--threads",
        "1",
    ],
]


def record_material(folder: Path) -> Path:
    """A real session recorded by the CLI, one process per command as a user records."""
    path = folder / "material.opscope"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for args in RECORDING:
        done = subprocess.run(
            [sys.executable, "-m", "app.entry", *args, "--session", str(path)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise RuntimeError(f"recording {args[0]} failed: {done.stderr[-2000:]}")
    return path


def reader_commands(path: Path, out: Path) -> dict[str, list[str]]:
    """Every command that reads a session file, by name -> argv."""
    f = str(path)
    return {
        "show": ["session", "show", f],
        "show-json": ["session", "show", f, "--json", str(out / "show.json")],
        "compare": ["compare", f"{f}:1", f"{f}:4", "--json", str(out / "cmp.json")],
        "compare-load": ["compare", f"{f}:2", f"{f}:3"],
        "export-trace": ["export", f, "--trace", str(out / "trace.json")],
        "export-csv": ["export", f, "--csv", str(out / "csv")],
        "report": ["report", f, "-o", str(out / "report.html")],
        "simulate": ["simulate", f"{f}:3", "--duration", "0.5", "--warmup-s", "0.1"],
    }


# -- mutations ---------------------------------------------------------------------------

Mutation = Callable[[sqlite3.Connection], None]

# numeric columns the readers use (table -> columns), set to each bad value in turn
NUMERIC: dict[str, tuple[str, ...]] = {
    "runs": (
        "batch",
        "session_create_s",
        "timing_origin_ns",
        "samples",
        "mean_ms",
        "std_ms",
        "min_ms",
        "p50_ms",
        "p90_ms",
        "p95_ms",
        "p99_ms",
        "max_ms",
        "inferences_per_s",
        "samples_per_s",
        "stable",
        "warmup_runs",
        "elapsed_s",
    ),
    "latency": ("start_ns", "latency_ns"),
    "profiles": ("runs", "coverage", "overhead", "nodes_total"),
    "ops": ("calls", "time_ms", "p50_ms", "p99_ms", "share", "bytes", "gbps", "flops"),
    "op_times": ("run_index", "start_us", "dur_us", "self_us"),
    "op_nodes": ("node_index", "activation_bytes", "parameter_bytes", "output_bytes"),
    "telemetry": ("wall_ns", "value"),
    "markers": ("wall_ns", "t_ns"),
    "serving": ("simulated", "warmup_s", "origin_ns"),
    "requests": ("scheduled_ns", "sent_ns", "dequeued_ns", "done_ns", "batch", "outcome"),
    "batches": ("start_ns", "end_ns", "size", "instance"),
}
# (a NaN bound from Python is stored by SQLite as NULL, so "null" is what a NaN becomes)
BAD_VALUES: dict[str, object] = {
    "null": None, "neg": -1, "huge": 1e18, "inf": 9e999, "text": "x", "frac": 1.5,
}  # fmt: skip
# text columns inflated to 5 MB
TEXT: dict[str, tuple[str, ...]] = {
    "runs": ("error", "model_path", "host", "inputs", "providers", "config"),
    "op_nodes": ("name", "input_shapes", "output_shapes"),
    "markers": ("text",),
    "sweeps": ("result",),
    "serving": ("traffic", "summary"),
}
# JSON fields: (table, column, key path, value) set inside the stored JSON
JSON_FIELDS: list[tuple[str, str, tuple[str | int, ...], object]] = [
    ("serving", "batching", ("max_batch",), v) for v in (10**18, -1, "8", float("nan"), 0)
] + [
    ("serving", "batching", ("delay_ms",), float("nan")),
    ("serving", "batching", ("delay_ms",), "5"),
    ("serving", "batching", ("instances",), 10**12),
    ("serving", "batching", ("preferred",), [10**18]),
    ("serving", "traffic", ("duration_s",), float("nan")),
    ("serving", "traffic", ("spec",), 7),
    ("serving", "summary", ("latency_ms", "p50"), float("nan")),
    ("serving", "summary", ("latency_ms", "p99"), "x"),
    ("serving", "calibration", ("sizes",), [10**18]),
    ("runs", "inputs", ("input", "shape"), [10**18, 3]),
    ("runs", "config", ("batch",), 10**18),
    ("runs", "config", ("threads",), -1),
    ("sweeps", "result", ("points", 0, "latency_ms"), float("nan")),
    ("sweeps", "result", ("points", 0, "value"), 10**18),
]


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def _tables(conn: sqlite3.Connection) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name"
        )
    ]


def drop_column(table: str, column: str) -> Mutation:
    def mutate(conn: sqlite3.Connection) -> None:
        keep = [c for c in _columns(conn, table) if c != column]
        conn.execute("PRAGMA legacy_alter_table = ON")  # the op_events view names op_nodes
        conn.execute(f"CREATE TABLE _new AS SELECT {', '.join(keep)} FROM {table}")
        conn.execute(f"DROP TABLE {table}")
        conn.execute(f"ALTER TABLE _new RENAME TO {table}")

    return mutate


def set_value(table: str, column: str, value: object) -> Mutation:
    def mutate(conn: sqlite3.Connection) -> None:
        conn.execute(f"UPDATE {table} SET {column} = ?", [value])

    return mutate


def inflate(table: str, column: str) -> Mutation:
    def mutate(conn: sqlite3.Connection) -> None:
        info = conn.execute(f"PRAGMA table_info({table})").fetchall()
        keys = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]] or ["rowid"]
        row = conn.execute(f"SELECT {column}, {', '.join(keys)} FROM {table} LIMIT 1").fetchone()
        if row is None:
            return
        old = row[0] if isinstance(row[0], str) else ""
        if old.startswith("["):  # a JSON list: still valid JSON, 5 MB of entries
            entry = '["float",[1,3]]' if "shapes" in column else '"x"'
            big = "[" + ",".join([entry] * (FIVE_MB // len(entry))) + "]"
        elif old.startswith("{"):
            big = old[:-1] + (',"pad":"' if len(old) > 2 else '"pad":"') + "x" * FIVE_MB + '"}'
        else:
            big = "x" * FIVE_MB
        where = " AND ".join(f"{k} = ?" for k in keys)
        conn.execute(f"UPDATE {table} SET {column} = ? WHERE {where}", [big, *row[1:]])

    return mutate


def set_json(table: str, column: str, keys: tuple[str | int, ...], value: object) -> Mutation:
    def mutate(conn: sqlite3.Connection) -> None:
        for rowid, text in conn.execute(f"SELECT rowid, {column} FROM {table}").fetchall():
            if not isinstance(text, str):
                continue
            doc = json.loads(text)
            node = doc
            try:
                for k in keys[:-1]:
                    node = node[k]
                if isinstance(node, dict | list):
                    node[keys[-1]] = value  # type: ignore[index]
            except (KeyError, IndexError, TypeError):
                continue
            conn.execute(
                f"UPDATE {table} SET {column} = ? WHERE rowid = ?", [json.dumps(doc), rowid]
            )

    return mutate


def steps_under_load(conn: sqlite3.Connection) -> None:
    """A generation's step rows under the load run (run 2)."""
    conn.executemany(
        "INSERT INTO steps (run_id, generation, step, start_ns, dur_ns) VALUES (2, ?, ?, ?, ?)",
        [(g, s, g * 1000, 100) for g in range(3) for s in range(4)],
    )


def generation_without_steps(conn: sqlite3.Connection) -> None:
    """Run 1 made a generation run whose steps are missing (or under another run)."""
    conn.execute("UPDATE runs SET kind = 'generate' WHERE id = 1")
    conn.execute(
        "INSERT INTO generation (run_id, prompt_len, new_tokens, batch, sampling, "
        "context_length, kv_bytes_per_token, summary) VALUES (1, 8, 4, 1, '{}', 64, 0, '{}')"
    )
    steps_under_load(conn)


def many_sweeps(conn: sqlite3.Connection, count: int = 500) -> None:
    """The sweep copied until the file holds `count` of them."""
    row = conn.execute(
        "SELECT created_at, model_path, dim, config, result, run_ids, status FROM sweeps"
    ).fetchone()
    conn.executemany(
        "INSERT INTO sweeps (created_at, model_path, dim, config, result, run_ids, status) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [row] * (count - 1),
    )


def mutations(path: Path) -> Iterator[tuple[str, Mutation]]:
    """Every mutation of the file at `path`, by name."""
    with sqlite3.connect(path) as conn:
        tables = {t: _columns(conn, t) for t in _tables(conn)}
    for table, columns in tables.items():
        for column in columns:
            yield f"drop {table}.{column}", drop_column(table, column)
    for table, columns in NUMERIC.items():
        for column in columns:
            for label, value in BAD_VALUES.items():
                yield f"{table}.{column}={label}", set_value(table, column, value)
    for table, columns in TEXT.items():
        for column in columns:
            yield f"{table}.{column} 5MB", inflate(table, column)
    for table, column, keys, value in JSON_FIELDS:
        key = ".".join(map(str, keys))
        yield f"{table}.{column}.{key}={value!r}"[:80], set_json(table, column, keys, value)
    yield "steps under a load run", steps_under_load
    yield "a generation run without its steps", generation_without_steps
    yield "500 sweeps", many_sweeps


def mutated_copy(src: Path, dest: Path, mutate: Mutation) -> Path:
    shutil.copyfile(src, dest)
    conn = sqlite3.connect(dest)
    try:
        mutate(conn)
        conn.commit()
    finally:
        conn.close()
    return dest


# -- running a reader command --------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    rc: int
    stdout: str
    stderr: str
    cpu_s: float  # user + system time of the command alone
    max_rss_kb: int  # the child's peak resident set

    def problem(self) -> str | None:
        """Why this is not a clean end (None: it is): exit 0 (3 for compare's regression
        verdict, 4 for its 'no verdict'), or exit 2 with one `opscope:` error line, and no
        traceback."""
        text = self.stdout + self.stderr
        if "Traceback" in text or self.rc == 99:
            return f"traceback (rc {self.rc}): {self.stderr.strip().splitlines()[-1:]}"
        if self.rc in (0, 3, 4):  # 3, 4: compare's regression or no verdict, clean ends
            return None
        if self.rc != 2:
            return f"rc {self.rc}: {self.stderr.strip()[-300:]}"
        errors = [line for line in self.stderr.splitlines() if line.startswith("opscope:")]
        if len(errors) != 1:
            return f"rc 2 without one error line: {self.stderr.strip()[-300:]}"
        return None


def run_reader(argv: list[str], workdir: Path, memory_limit_mb: int = 3072) -> Outcome:
    """`opscope ARGV` run by the CLI's main in a forked child of this process (imports done
    once, here), its stdout and stderr captured, its address space capped so that a huge
    allocation fails there instead of exhausting the machine."""
    from engine.cli.main import main

    out_file, err_file = workdir / "stdout.txt", workdir / "stderr.txt"
    pid = os.fork()
    if pid == 0:  # the child: run the command, never return into the caller's code
        code = 99
        try:
            with open(out_file, "wb") as o, open(err_file, "wb") as e:
                os.dup2(o.fileno(), 1)
                os.dup2(e.fileno(), 2)
            # streams on the new descriptors (pytest's capture replaced sys.stdout/err)
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            soft = _vm_bytes() + memory_limit_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (soft, resource.RLIM_INFINITY))
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 2
            except BaseException:
                traceback.print_exc()
                code = 99
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    _, status, usage = os.wait4(pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    return Outcome(
        rc=rc,
        stdout=out_file.read_text(errors="replace"),
        stderr=err_file.read_text(errors="replace"),
        cpu_s=usage.ru_utime + usage.ru_stime,
        max_rss_kb=usage.ru_maxrss,
    )


def _vm_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def warm_imports() -> None:
    """Import what the reader commands import, once, before forking (so each child's time
    is the command's, not Python's imports)."""
    import engine.analysis.export
    import engine.analysis.report
    import engine.cli.compare_cmds
    import engine.cli.export_cmds
    import engine.cli.main
    import engine.cli.report_cmds
    import engine.cli.session_cmds
    import engine.cli.simulate_cmd  # noqa: F401
