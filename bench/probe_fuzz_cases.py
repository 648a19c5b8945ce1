"""The hostile cases bench/probe_fuzz.py runs: what a case is, and the generators of two
classes of issues 53 and 54's probe, session files and command lines (the data files in
probe_fuzz_data.py; models, the remote host's input and the self-test in
probe_fuzz_models.py). Each yields `Case`s of our own making (mutations, not only the
issues' samples); the session mutations come from tests/session_mutations.py and the wire
messages from tests/test_wire_fuzz.py (imported, not copied)."""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.session_mutations import mutated_copy, mutations, reader_commands  # noqa: E402

MODELS = ROOT / "resources" / "models"
CNN, TRANSFORMER, LLM = (
    MODELS / "demo_cnn.onnx",
    MODELS / "demo_transformer.onnx",
    MODELS / "demo_llm",
)
QUICK = {"--duration": "0.3", "--min-runs": "3", "--warmup": "1", "--runs": "2"}
FLAGS_OFF = ("--no-live", "--no-accuracy")

# values a user, a script or an attacker could type where a number, a name or a path belongs
HOSTILE_TEXT = [
    "nan",
    "NaN",
    "inf",
    "-inf",
    "-1",
    "0",
    "-0",
    "1e308",
    "1e-320",
    "1e999",
    "9" * 30,
    "",
    " ",
    "1,2",
    "x" * 5000,
    "\x1b]0;pwned\x07",
    "\x1b[2J",
    "é",
    "٣",
    "0x10",
    "1_000",
    "+1",
    " 3 ",
    "2147483648",
    "-2147483649",
    "18446744073709551616",
    "a=b=c",
    "=",
    "NAME=",
    "=1",
    "x=1x2x",
    "input_ids=1x999999999",
    "image=0x3x64x64",
    "batch=-5",
    "\t",
    "\u202e",
]


@dataclass
class Case:
    cls: str
    name: str
    argv: list[str]  # after `opscope`
    stdin: bytes | None = None
    env: dict[str, str] = field(default_factory=dict)
    signal: tuple[int, float] | None = None  # (signum, after s)
    stdout: str = "file"  # file | full (/dev/full) | closed | both-closed | fsize
    binary_stdout: bool = False  # the remote host's frames
    files: list[Path] = field(default_factory=list)  # made for this case (kept if it fails)


@dataclass
class Material:
    work: Path
    session: Path  # a real recorded session (tests/session_mutations.record_material)


def _n(rng: random.Random) -> str:
    return f"{rng.randrange(1 << 30):08x}"


# -- session files ------------------------------------------------------------------------

BAD_SQL: list[object] = [
    None,
    -1,
    0,
    2**63 - 1,
    -(2**63),
    1e308,
    -1e308,
    9e999,
    "x",
    "",
    "\x1b[2J\x1b]0;t\x07",
    b"\x00\xff",
    "nan",
    '{"a":',
    "[]",
    "{}",
    "1" * 100_000,
    3.5,
    "[[[[[[[[[[",
    '{"$dc": "os:system"}',
]


def _table_columns(path: Path) -> dict[str, list[str]]:
    with sqlite3.connect(path) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        return {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in names}


def _byte_damage(rng: random.Random, path: Path) -> str:
    data = bytearray(path.read_bytes())
    how = rng.choice(["flip", "truncate", "zero-page", "append", "header"])
    if how == "flip":
        for _ in range(rng.randint(1, 64)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif how == "truncate":
        del data[rng.randrange(1, len(data)) :]
    elif how == "zero-page":
        page = rng.randrange(len(data) // 4096) * 4096
        data[page : page + 4096] = bytes(4096)
    elif how == "append":
        data += rng.randbytes(rng.randint(1, 10_000))
    else:  # the 100-byte header: page size, counts, schema cookie
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(16, 100)] = rng.randrange(256)
    path.write_bytes(bytes(data))
    return how


def _sql_damage(rng: random.Random, path: Path, tables: dict[str, list[str]]) -> str:
    conn = sqlite3.connect(path)
    try:
        how = rng.choice(
            ["value", "value", "delete", "orphan", "drop-table", "version", "view", "kind", "dup"]
        )
        table = rng.choice(sorted(tables))
        if how == "value":
            col, val = rng.choice(tables[table]), rng.choice(BAD_SQL)
            where = rng.choice(["", " WHERE rowid = (SELECT MIN(rowid) FROM " + table + ")"])
            conn.execute(f"UPDATE {table} SET {col} = ?{where}", [val])
            how = f"{table}.{col}={str(val)[:20]!r}"
        elif how == "delete":
            conn.execute(f"DELETE FROM {table}")
            how = f"delete {table}"
        elif how == "orphan" and "run_id" in tables[table]:
            conn.execute(f"UPDATE {table} SET run_id = run_id + 1000")
            how = f"orphan {table}"
        elif how == "drop-table":
            conn.execute("PRAGMA legacy_alter_table = ON")
            conn.execute(f"DROP TABLE {table}")
            how = f"drop table {table}"
        elif how == "version":
            v = rng.choice([-1, 0, 999, 2**31 - 1, 3])
            conn.execute(f"PRAGMA user_version = {v}")
            how = f"user_version {v}"
        elif how == "view":
            conn.execute(f"ALTER TABLE {table} RENAME TO _old_{table}")
            conn.execute(f"CREATE VIEW {table} AS SELECT * FROM _old_{table} LIMIT 1")
            how = f"{table} a view"
        elif how == "kind":
            conn.execute(
                "UPDATE runs SET kind = ?, status = ?",
                [
                    rng.choice(["generate", "load", "simulate", "sweep", "tune", "x", ""]),
                    rng.choice(["running", "done", "x", None, "interrupted"]),
                ],
            )
        else:
            conn.execute(f"INSERT INTO {table} SELECT * FROM {table}")
            how = f"dup rows {table}"
        conn.commit()
        return how
    except sqlite3.Error as exc:  # SQLite refused the damage itself (NOT NULL, unique)
        return f"refused {type(exc).__name__}"
    finally:
        conn.close()


def sessions(rng: random.Random, m: Material) -> Iterator[Case]:
    listed = list(mutations(m.session))
    tables = _table_columns(m.session)
    out = m.work / "session-out"
    out.mkdir(exist_ok=True)
    while True:
        copy = m.work / f"s{_n(rng)}.opscope"
        kind = rng.choice(["listed", "combo", "sql", "sql", "bytes", "side"])
        label = kind
        try:
            if kind == "listed":
                name, mutate = rng.choice(listed)
                mutated_copy(m.session, copy, mutate)
                label = name
            elif kind == "combo":
                picks = rng.sample(listed, rng.randint(2, 3))
                shutil.copyfile(m.session, copy)
                for _, mutate in picks:
                    mutated_copy(copy, copy.with_suffix(".t"), mutate)
                    copy.with_suffix(".t").replace(copy)
                label = " + ".join(n for n, _ in picks)
            elif kind == "sql":
                shutil.copyfile(m.session, copy)
                label = " + ".join(_sql_damage(rng, copy, tables) for _ in range(rng.randint(1, 3)))
            elif kind == "bytes":
                shutil.copyfile(m.session, copy)
                label = "bytes " + _byte_damage(rng, copy)
            else:
                shutil.copyfile(m.session, copy)
                label = _side_file(rng, copy)
        except sqlite3.Error:
            continue
        cmds = reader_commands(copy, out)
        cmds["compact"] = ["session", "compact", str(copy), str(out / f"c{_n(rng)}.opscope")]
        cmds["memory"] = ["memory", str(copy)]
        which = rng.choice(sorted(cmds))
        side = [copy.with_name(copy.name + s) for s in ("-wal", "-shm", "-journal")]
        yield Case("sessions", f"{label[:90]} / {which}", cmds[which], files=[copy, *side])


def _side_file(rng: random.Random, copy: Path) -> str:
    how = rng.choice(["wal-dir", "wal-junk", "shm-junk", "journal-junk", "empty", "dir-wal"])
    wal, shm = copy.with_name(copy.name + "-wal"), copy.with_name(copy.name + "-shm")
    if how == "wal-dir":
        wal.mkdir()
    elif how == "wal-junk":
        wal.write_bytes(rng.randbytes(rng.choice([1, 32, 4096, 70_000])))
    elif how == "shm-junk":
        shm.write_bytes(rng.randbytes(rng.choice([1, 32768])))
    elif how == "journal-junk":
        copy.with_name(copy.name + "-journal").write_bytes(rng.randbytes(512))
    elif how == "empty":
        copy.write_bytes(b"")
    else:
        shm.mkdir()
    return how


# -- command lines ------------------------------------------------------------------------


def _subparsers(
    p: argparse.ArgumentParser, prefix: list[str]
) -> Iterator[tuple[list[str], argparse.ArgumentParser]]:
    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix, p
        return
    for name, child in subs[0].choices.items():
        yield from _subparsers(child, [*prefix, name])


def _positional(rng: random.Random, dest: str, m: Material) -> str:
    s = str(m.session)
    good = {
        "model": [str(CNN), str(TRANSFORMER), str(LLM)],
        "session": [s],
        "in": [s],
        "file": [s],
        "run": [f"{s}:1", f"{s}:2"],
        "base": [f"{s}:1"],
        "cand": [f"{s}:4"],
        "baseline": [f"{s}:1,4"],
    }
    bad = [
        "",
        "-",
        "/dev/zero",
        "/nonexistent\x1b[2J",
        str(m.work),
        f"{s}:99999999999999999999",
        f"{s}:",
        f"{s}:-1",
        f"{s}:1,,x",
        f"{s}:0",
        str(CNN) + ":1",
        "\u202e.onnx",
        "x" * 5000,
    ]
    for key, values in good.items():
        if key in dest.lower() and rng.random() < 0.8:
            return rng.choice(values)
    return rng.choice([*bad, str(CNN), s])


def command_lines(rng: random.Random, m: Material) -> Iterator[Case]:
    from engine.cli.main import build_parser

    skip = {"remote", "gui", "import-hf", "cache"}  # cache: its own hostile cases below
    parsers = [(n, p) for n, p in _subparsers(build_parser(), []) if n and n[0] not in skip]
    out = m.work / "cli-out"
    out.mkdir(exist_ok=True)
    while True:
        names, p = rng.choice(parsers)
        argv = list(names)
        for a in p._actions:
            if not a.option_strings and a.dest != "help" and a.nargs != 0:
                count = 1 if a.nargs in (None, "?", 1) else rng.randint(1, 2)
                argv += [_positional(rng, a.dest, m) for _ in range(count)]
        # --host: another machine over ssh, outside this probe
        options = [a for a in p._actions if a.option_strings and a.dest not in ("help", "host")]
        picked = rng.sample(options, min(len(options), rng.randint(1, 3)))
        for a in picked:
            flag = rng.choice(a.option_strings)
            if a.nargs == 0:
                argv.append(flag)
                continue
            if a.choices and rng.random() < 0.3:
                value = str(rng.choice(list(a.choices)))
            elif "json" in a.dest or a.dest in ("out", "output", "csv", "trace"):
                value = rng.choice(
                    [
                        "-",
                        "/dev/full",
                        str(m.work),
                        str(out / f"{_n(rng)}.x"),
                        "/proc/self/mem",
                        "/nonexistent/dir/x",
                    ]
                )
            else:
                value = rng.choice(HOSTILE_TEXT)
            argv += [flag, value] if rng.random() < 0.8 else [f"{flag}={value}"]
        known = {s for a in options for s in a.option_strings}
        given = {a for a in argv if a.startswith("--")}
        for flag, value in QUICK.items():
            if flag in known and flag not in given:
                argv += [flag, value]
        argv += [f for f in FLAGS_OFF if f in known and f not in given]
        sig = None
        if rng.random() < 0.15:
            sig = (rng.choice([2, 15, 1]), rng.uniform(0.2, 4.0))
        yield Case("command lines", " ".join(a[:30] for a in argv)[:120], argv, signal=sig)
