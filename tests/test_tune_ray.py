"""`opscope tune --ray`: trials as Ray tasks on a real (local) Ray head, one per node at a
time, their runs gathered into the session; files shipped to a node that lacks them; an
address nothing listens at refused in one line."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.session.reader import SessionReader
from tests.conftest import DEMO_CNN, one_at_a_time
from tests.test_cli import opscope

RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def ray_head() -> Iterator[str]:
    """A local Ray head, one on the machine at a time: `make test` runs a worker per core,
    and `ray stop --force` ends every Ray process here, so a second worker waits."""
    import tempfile

    with one_at_a_time(Path(tempfile.gettempdir()) / "opscope-tests-ray.lock"):
        yield from _head()


def _head() -> Iterator[str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    subprocess.run(
        [RAY, "start", "--head", "--port", str(port), "--node-ip-address", "127.0.0.1",
         "--num-cpus", "2", "--include-dashboard=false", "--disable-usage-stats"],
        check=True, capture_output=True, timeout=180, env=env,
    )  # fmt: skip
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=120, env=env)


def test_a_tune_through_a_local_ray_head(ray_head: str, tmp_path: Path) -> None:
    out, session = tmp_path / "t.json", tmp_path / "t.opscope"
    proc = opscope("tune", DEMO_CNN, "--space", "precision=fp32,int8-dynamic", "--duration",
                   "0.3", "--threads", "1", "--ray", ray_head, "--json", out, "--session",
                   session, check=True)  # fmt: skip
    assert "ray        1 node(s), one trial each at a time" in proc.stdout
    progress = re.compile(r"\[\w[\w-]*\] ")  # our own progress lines, on a slow machine
    said = [line for line in proc.stderr.splitlines() if line and not progress.match(line)]
    assert said == []  # none of Ray's log lines
    trials = json.loads(out.read_text())["trials"]
    assert [t["status"] for t in trials] == ["ok", "ok"]
    assert all(t["node"] == socket.gethostname() for t in trials)
    with SessionReader.open(session) as reader:
        runs = reader.runs()
        assert [r.status for r in runs] == ["ok", "ok"]
        assert {r.model_path for r in runs} == {str(DEMO_CNN)}
        assert all(reader.latency(r.id)[1].size == r.samples > 0 for r in runs)
    p50s = sorted(t["latency_ms"]["p50"] for t in trials)
    assert p50s == pytest.approx(sorted(r.latency.p50 for r in runs if r.latency))


def test_a_node_without_the_file_gets_its_bytes(ray_head: str, tmp_path: Path) -> None:
    import ray

    from engine.tune.ray_trials import Shipped, _digest, _folder_digest, _materialize, _ship

    model = tmp_path / "m.onnx"
    shutil.copy(DEMO_CNN, model)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.npz").write_bytes(b"first")
    (tmp_path / "data" / "b.npz").write_bytes(b"second")
    ray.init(address=ray_head, log_to_driver=False, logging_level="ERROR")
    try:
        shipped, folder = _ship(str(model)), _ship(str(tmp_path / "data"))
        assert _materialize(shipped, tmp_path / "x") == str(model)  # same bytes here: used
        model.write_bytes(b"changed")  # same path, other bytes: the shipped ones
        got = Path(_materialize(shipped, tmp_path / "y"))
        assert got != model and _digest(got) == _digest(DEMO_CNN)
        gone = Shipped(str(tmp_path / "nowhere"), folder.sha256, folder.ref, folder=True)
        copied = Path(_materialize(gone, tmp_path / "z"))
        assert _folder_digest(copied) == folder.sha256
        assert (copied / "b.npz").read_bytes() == b"second"
    finally:
        ray.shutdown()


def test_an_address_nothing_listens_at_is_one_line() -> None:
    proc = opscope("tune", DEMO_CNN, "--ray", f"127.0.0.1:{_free_port()}")
    assert proc.returncode == 2 and "cannot reach a Ray cluster" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "trial" not in proc.stdout
    proc = opscope("tune", DEMO_CNN, "--ray", "headnode")
    assert proc.returncode == 2 and "expected HOST:PORT" in proc.stderr


def test_runs_copied_from_another_session_keep_every_row(tmp_path: Path) -> None:
    """What a Ray trial recorded on its node lands whole in the user's session: new ids,
    every table that belongs to a run (samples, markers, serving rows) with it."""
    import sqlite3

    from engine.session.merge import copy_runs
    from engine.session.store import SessionStore

    src, dst = tmp_path / "node.opscope", tmp_path / "mine.opscope"
    opscope("bench", DEMO_CNN, "--duration", "0.3", "--threads", "1", "--no-live", "--session",
            src, check=True)  # fmt: skip
    opscope("load", DEMO_CNN, "--traffic", "poisson:200", "--duration", "1", "--warmup-s",
            "0.2", "--threads", "1", "--session", src, check=True)  # fmt: skip
    opscope("bench", DEMO_CNN, "--duration", "0.3", "--threads", "1", "--no-live", "--session",
            dst, check=True)  # fmt: skip

    def counts(path: Path, run_id: int) -> dict[str, int]:
        conn = sqlite3.connect(path)
        names = conn.execute("SELECT name FROM sqlite_master WHERE type='table'")

        def columns(t: str) -> list[str]:
            return [c[1] for c in conn.execute(f"PRAGMA table_info({t})")]

        tables = [t for (t,) in names if "run_id" in columns(t)]
        got = {t: conn.execute(f"SELECT COUNT(*) FROM {t} WHERE run_id=?", (run_id,)).fetchone()[0]
               for t in tables}  # fmt: skip
        conn.close()
        return got

    before = [counts(src, 1), counts(src, 2)]
    with SessionStore.create_or_open(dst) as store:
        assert copy_runs(store, src) == [2, 3]
    assert [counts(dst, 2), counts(dst, 3)] == before
    assert before[1]["requests"] > 100 and before[1]["markers"] >= 1
    with SessionReader.open(dst) as reader:
        assert [r.kind for r in reader.runs()] == ["bench", "bench", "load"]
        assert reader.serving(3) is not None
