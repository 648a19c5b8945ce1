"""Session files that must be refused in one line (corrupt, truncated, foreign, from a newer
OpScope), values from a file validated before use, migrations, and reading a file from a
read-only folder. Files from teammates are untrusted."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from sqlite_utils import Database

from engine.cli.results import RunResult
from engine.errors import SessionFileError
from engine.model.info import ModelInfo, load_model
from engine.session import (
    SCHEMA_VERSION,
    Recorder,
    SessionStore,
    columns,
    open_session_file,
    read_only,
    resolve_run_ref,
    schema,
)
from tests.conftest import DEMO_CNN
from tests.session_material import BAD_KINDS, bad_file, live_events, record_demo_profile


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunResult]:
    path = tmp_path_factory.mktemp("session") / "run.opscope"
    return path, record_demo_profile(path)


@pytest.fixture(scope="module")
def info() -> ModelInfo:
    return load_model(DEMO_CNN)[1]


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_bad_files_are_refused_in_one_line(
    kind: str, tmp_path: Path, recorded: tuple[Path, RunResult]
) -> None:
    path, fragment = bad_file(kind, tmp_path, recorded[0])
    with pytest.raises(SessionFileError) as err:
        open_session_file(path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    assert fragment in message.removeprefix(f"{path}: ")


@pytest.mark.parametrize("kind", ["corrupt", "truncated", "foreign", "foreign-meta", "future"])
def test_the_writer_never_touches_a_file_it_does_not_own(
    kind: str, tmp_path: Path, recorded: tuple[Path, RunResult]
) -> None:
    path, fragment = bad_file(kind, tmp_path, recorded[0])
    before = path.read_bytes()
    with pytest.raises(SessionFileError) as err:
        SessionStore.create_or_open(path)
    assert fragment in str(err.value).removeprefix(f"{path}: ")
    assert path.read_bytes() == before
    assert not Path(f"{path}-wal").exists()


@pytest.mark.parametrize(
    ("column", "value", "fragment"),
    [
        ("config", '{"batch": -1}', "invalid config"),
        ("config", "not json", "runs.config is not valid JSON"),
        ("config", "[1, 2]", "runs.config is not a JSON dict"),
        ("samples", "many", "runs.samples is not a number"),
        ("accuracy", '{"baseline": "fp32", "cosine": "1; rm -rf"}', "accuracy.cosine"),
        ("inputs", '{"x": {"shape": "1x3", "dtype": "f"}}', "malformed input"),
    ],
)
def test_values_from_the_file_are_validated(
    tmp_path: Path, recorded: tuple[Path, RunResult], column: str, value: str, fragment: str
) -> None:
    path = tmp_path / "tampered.opscope"
    shutil.copyfile(recorded[0], path)
    conn = sqlite3.connect(path)
    conn.execute(f"UPDATE runs SET {column} = ?", [value])
    conn.commit()
    conn.close()
    with open_session_file(path) as reader, pytest.raises(SessionFileError) as err:
        reader.runs()
    assert fragment in str(err.value) and str(path) in str(err.value)


def test_migrations_run_in_order_on_an_empty_database() -> None:
    db = Database(memory=True)
    assert schema.migrate(db) == SCHEMA_VERSION == len(schema.MIGRATIONS)
    assert schema.stored_version(db.conn) == SCHEMA_VERSION
    tables = set(db.table_names())
    assert set(columns.COLUMNS) <= tables
    for table, declared in columns.COLUMNS.items():  # every column a reader uses exists
        assert set(declared) <= set(db.table(table).columns_dict), table
    assert schema.migrate(db) == SCHEMA_VERSION  # idempotent


def test_an_older_file_is_migrated(
    tmp_path: Path, recorded: tuple[Path, RunResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With one more migration in the list: readers migrate a file in memory, never in
    place; the writer migrates it in place; a failing migration leaves the file at its
    version."""
    path = tmp_path / "old.opscope"
    shutil.copyfile(recorded[0], path)
    calls: list[int] = []
    now = len(schema.MIGRATIONS)

    def next_add_tags(db: Database) -> None:
        calls.append(now + 1)
        db.execute("ALTER TABLE runs ADD COLUMN tags TEXT")

    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, next_add_tags])
    monkeypatch.setattr(schema, "SCHEMA_VERSION", now + 1)
    before = path.read_bytes()
    with open_session_file(path) as reader:
        assert reader.version == now and calls == [now + 1]
        assert reader.runs()[0].status == "ok"
        assert reader._conn.execute("SELECT tags FROM runs").fetchall() == [(None,)]
    assert path.read_bytes() == before

    def then_broken(db: Database) -> None:
        db.execute("ALTER TABLE runs ADD COLUMN half_done TEXT")
        raise RuntimeError("bug in the last migration")

    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, then_broken])
    monkeypatch.setattr(schema, "SCHEMA_VERSION", now + 2)
    with pytest.raises(RuntimeError, match="bug in the last migration"):
        SessionStore.create_or_open(path)
    conn = sqlite3.connect(path)
    assert schema.stored_version(conn) == now + 1  # committed; the broken one rolled back
    assert "half_done" not in {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    conn.close()


def test_a_v1_file_reads_and_gains_the_serving_tables(tmp_path: Path) -> None:
    """A file written before serving runs existed (v1): read as is (no serving runs), and
    the writer adds the serving tables in place so a load run can be appended."""
    path = tmp_path / "v1.opscope"
    db = Database(sqlite3.connect(path))
    schema.migrate(db, schema.MIGRATIONS[:1])
    db.conn.close()
    assert schema.stored_version(sqlite3.connect(path)) == 1
    with open_session_file(path) as reader:
        assert reader.version == 1 and reader.runs() == []
    SessionStore.create_or_open(path).close()
    conn = sqlite3.connect(path)
    assert schema.stored_version(conn) == SCHEMA_VERSION >= 2
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"serving", "requests", "batches"} <= tables
    conn.close()


def _live_copy(tmp_path: Path, info: ModelInfo) -> Path:
    """A session whose writer is still open (data in the -wal), copied elsewhere."""
    src = tmp_path / "live.opscope"
    e = live_events(info)
    store = SessionStore.create_or_open(src)
    rec = Recorder(store)
    for ev in (e["started"], *e["batches"]):
        rec.feed(ev)
    rec.flush()
    dst = tmp_path / "copy"
    dst.mkdir()
    for suffix in ("", "-wal"):
        shutil.copyfile(f"{src}{suffix}", dst / f"live.opscope{suffix}")
    store.close()
    return dst / "live.opscope"


@pytest.mark.parametrize("with_wal", [True, False])
def test_read_only_folder_fallbacks(
    tmp_path: Path, info: ModelInfo, with_wal: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When mode=ro cannot open (a WAL file in a read-only folder: no -shm can be made),
    read a private copy of file + -wal, or open immutable when there is no -wal."""
    path = _live_copy(tmp_path, info)
    if not with_wal:
        Path(f"{path}-wal").unlink()
    real_probe = read_only._probe
    uris: list[str] = []

    def probe(conn: sqlite3.Connection) -> sqlite3.Connection:
        (uri,) = [row[2] for row in conn.execute("PRAGMA database_list")]
        uris.append(uri)
        if len(uris) == 1:
            conn.close()
            raise sqlite3.OperationalError("unable to open database file")
        return real_probe(conn)

    monkeypatch.setattr(read_only, "_probe", probe)
    if with_wal:
        reader = open_session_file(path)
        tmpdir = reader._tmpdir
        assert tmpdir and Path(tmpdir).is_dir()
        assert reader.runs()[0].samples == 5 and reader.latency(1)[1].size == 5
        reader.close()
        assert not Path(tmpdir).exists()
    else:  # the WAL's contents are gone: what the main file holds (nothing yet) is all
        with pytest.raises(SessionFileError, match="copy that too"):
            open_session_file(path)
    assert len(uris) == 2


@pytest.mark.parametrize("case", ["wal header, no -wal", "-wal without -shm"])
def test_reading_a_wal_file_creates_nothing_beside_it(
    tmp_path: Path, info: ModelInfo, recorded: tuple[Path, RunResult], case: str
) -> None:
    """#30: a read-only open of a WAL file lacking its -wal (or its -shm) used to create
    them beside it; a reader now leaves the folder as it found it."""
    if case == "wal header, no -wal":
        path = tmp_path / "wal.opscope"
        shutil.copyfile(recorded[0], path)
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA journal_mode = wal").fetchone() == ("wal",)
        conn.close()  # the last connection: -wal and -shm removed, the header stays WAL
        with open_session_file(recorded[0]) as source:
            samples = source.runs()[0].samples
    else:
        path = _live_copy(tmp_path, info)
        samples = 5
    before = sorted(p.name for p in path.parent.iterdir())
    assert not any(name.endswith("-shm") for name in before)
    with open_session_file(path) as reader:
        assert reader.runs()[0].samples == samples
        assert reader.latency(1)[1].size == samples
    assert sorted(p.name for p in path.parent.iterdir()) == before


def test_resolve_run_ref(tmp_path: Path) -> None:
    assert resolve_run_ref("a.opscope") == ("a.opscope", None)
    assert resolve_run_ref("a.opscope:12") == ("a.opscope", 12)
    assert resolve_run_ref("dir:x/a.opscope:3") == ("dir:x/a.opscope", 3)
    assert resolve_run_ref("a.opscope:") == ("a.opscope:", None)
    assert resolve_run_ref("a.opscope:x1") == ("a.opscope:x1", None)
    assert resolve_run_ref("a.opscope:²") == ("a.opscope:²", None)
    assert resolve_run_ref(r"C:\runs\a.opscope") == (r"C:\runs\a.opscope", None)
    assert resolve_run_ref(r"C:\runs\a.opscope:2") == (r"C:\runs\a.opscope", 2)
    assert resolve_run_ref("C:7") == ("C:7", None)  # drive C, not run 7 of a file "C"
    odd = tmp_path / "b.opscope:4"  # an existing file wins
    odd.write_bytes(b"")
    assert resolve_run_ref(str(odd)) == (str(odd), None)
