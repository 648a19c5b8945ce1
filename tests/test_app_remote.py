"""The window with its engine on another machine: a real SSH server on localhost
(tests/ssh_server.py), the host `opscope remote host` in a process of its own, wire
messages between them. The session is recorded here; a hostile host is refused in one
line; a dropped link is a banner with Reconnect, and Reconnect resumes."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("PySide6")
from pytestqt.qtbot import QtBot

from app.shell.workbench import Workbench
from engine.remote.target import Target
from engine.session.store import open_session_file
from tests.conftest import DEMO_CNN
from tests.ssh_server import SSHHost, reach
from tests.test_app_live import two_trials
from tests.test_app_llm_serving import _small

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="no OpenSSH client (ssh)")
TIMEOUT_MS = 120_000


@pytest.fixture
def target(ssh_server: SSHHost, monkeypatch: pytest.MonkeyPatch) -> Target:
    return Target.parse(reach(ssh_server, monkeypatch))


def _bench(qtbot: QtBot, tmp_path: Path, target: Target) -> Workbench:
    wb = Workbench(session_path=str(tmp_path / "remote.opscope"), usable=["cpu"], host=target)
    qtbot.addWidget(wb.window)
    wb.window.show()
    wb.start(str(DEMO_CNN))
    return wb


def test_a_live_run_on_a_host_is_recorded_here_and_reconnect_resumes(
    qtbot: QtBot, tmp_path: Path, target: Target, ssh_server: SSHHost
) -> None:
    wb = _bench(qtbot, tmp_path, target)
    try:
        qtbot.waitUntil(lambda: wb.controller.samples > 20, timeout=TIMEOUT_MS)
        assert f"engine on {target}" in wb.window.windowTitle()
        wb.update_status()
        said = wb.window.status_provider.text()  # the host's machine, by its handshake
        assert said.endswith("(over SSH)") and wb.client.where in said, said
        assert "connecting" not in said
        sent = list((ssh_server.cache / "remote" / "files").rglob(DEMO_CNN.name))
        assert len(sent) == 1  # the model went into the host's cache, by its hash
        # the link drops (ssh killed): one line, Reconnect, nothing recorded lost
        wb.client.kill_host()
        # waits for its message (a busy machine's provisional-roofs warning may show first)
        qtbot.waitUntil(lambda: "saved in the session" in wb.window.banner.text.text(),
                        timeout=TIMEOUT_MS)  # fmt: skip
        text = wb.window.banner.text.text()
        assert str(target) in text and "saved in the session" in text
        assert wb.window.banner.action.text() == "Reconnect"
        before = wb.controller.samples
        wb.window.banner.action.click()
        qtbot.waitUntil(lambda: wb.controller.samples > before + 20, timeout=TIMEOUT_MS)
        assert len(list((ssh_server.cache / "remote" / "files").rglob(DEMO_CNN.name))) == 1
    finally:
        wb.shutdown()
    store = open_session_file(tmp_path / "remote.opscope")
    try:
        runs = store.runs()
        assert len(runs) >= 2 and runs[0].samples > 0
        notes = [m.text for m in store.markers() if m.kind == "notice"]
        assert sum("ran on gpu-box: " in n and "over SSH: timed there" in n
                   for n in notes) >= 2, notes  # fmt: skip
        assert {r.host for r in runs} == {"gpu-box"}  # the host's machine, not ours
        box = store.machines()["gpu-box"]  # and that machine's facts, told by its host
        assert box["host"] == "gpu-box" and box["cpu_count"] and box["onnxruntime"]
    finally:
        store.close()


HOSTILE = """
import json, os, struct, sys
MODE = {mode!r}
if sys.argv[1:3] == ["remote", "version"] and MODE == "version":
    print(json.dumps({{"opscope": "9.9.9", "protocol": 1}}))
elif sys.argv[1:3] == ["remote", "host"]:
    if MODE == "schema":
        bad = b'{{"v":1,"m":[{{"$dc":"os:system","f":{{"command":"touch PWNED"}}}}]}}'
        os.write(1, struct.pack(">I", len(bad)) + bad)
    elif MODE == "oversized":
        os.write(1, struct.pack(">I", 2**31))
    elif MODE == "wire":
        bad = b'{{"v":99,"m":[]}}'
        os.write(1, struct.pack(">I", len(bad)) + bad)
    sys.stdin.read()
else:
    os.execv(sys.executable, [sys.executable, "-m", "app.entry", *sys.argv[1:]])
"""


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("schema", "'os:system' is not in the wire schema"),
        ("oversized", "a message of 2048 MiB (at most 512)"),
        ("wire", "wire version 99"),
        ("version", "runs OpScope 9.9.9"),
    ],
)
def test_a_hostile_host_is_refused_in_one_line(
    qtbot: QtBot,
    tmp_path: Path,
    target: Target,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    says: str,
) -> None:
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE.format(mode=mode))
    monkeypatch.setenv("OPSCOPE_REMOTE_COMMAND", f"{sys.executable} {script}")
    wb = _bench(qtbot, tmp_path, target)
    try:
        qtbot.waitUntil(wb.window.banner.isVisible, timeout=TIMEOUT_MS)
        text = wb.window.banner.text.text()
        assert says in text and "\n" not in text and "Traceback" not in text, text
        assert not (tmp_path / "PWNED").exists() and not Path("PWNED").exists()
    finally:
        wb.shutdown()


def test_an_unreachable_host_is_one_line_and_the_window_stays(
    qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ssh_server: SSHHost
) -> None:
    reach(ssh_server, monkeypatch)  # its ssh options; the port below has nobody listening
    wb = _bench(qtbot, tmp_path, Target.parse("127.0.0.1:1"))
    try:
        qtbot.waitUntil(wb.window.banner.isVisible, timeout=TIMEOUT_MS)
        text = wb.window.banner.text.text()
        assert "127.0.0.1:1: cannot connect" in text
        assert "\n" not in text and "Traceback" not in text
        wb.update_status()
        assert wb.window.status_provider.text().endswith("127.0.0.1:1 (not connected)")
        wb.connect_host(None)  # back to this machine: runs here
        qtbot.waitUntil(lambda: wb.controller.samples > 10, timeout=TIMEOUT_MS)
        assert "engine on" not in wb.window.windowTitle()
    finally:
        wb.shutdown()


def test_jobs_from_a_connected_window_run_where_their_files_are(
    qtbot: QtBot, tmp_path: Path, target: Target, ssh_server: SSHHost
) -> None:
    """Memory on the host (the model sent there), an export here (it reads the session
    here), a tune on the host recording into a session of the host's, whose trial runs are
    merged into the window's session before the dock hears the tune ended."""
    from app.sessions.exports import ExportNotice

    wb = _bench(qtbot, tmp_path, target)
    from app.memory.controller import MemoryController

    dock = wb.room(MemoryController).view
    try:
        qtbot.waitUntil(lambda: wb.controller.samples > 20, timeout=TIMEOUT_MS)
        dock.measure_button.click()
        qtbot.waitUntil(lambda: not dock.measure_button.isEnabled(), timeout=5_000)
        qtbot.waitUntil(lambda: dock.measure_button.isEnabled(), timeout=TIMEOUT_MS)
        assert dock.status.text().startswith("measured on CPUExecutionProvider"), dock.status.text()
        assert dock.view.summary.text().startswith("Weights 1.3 MB (float32")
        wb.recording.flush()
        notice = wb.window.findChild(ExportNotice)
        notice.start("report", str(wb.recording.path), str(tmp_path / "r.html"))
        qtbot.waitUntil(lambda: not notice.busy, timeout=TIMEOUT_MS)
        assert "<svg" in (tmp_path / "r.html").read_text()
        qtbot.waitUntil(lambda: wb.running, timeout=10_000)
        from app.tune.controller import TuneController

        tune = wb.room(TuneController).view
        two_trials(tune)
        tune.start_button.click()
        qtbot.waitUntil(lambda: tune.table.rowCount() == 2, timeout=TIMEOUT_MS)
        qtbot.waitUntil(lambda: tune.start_button.isEnabled(), timeout=TIMEOUT_MS)
        assert "best: trial" in tune.summary.text(), tune.summary.text()
        wb.recording.flush()
        with open_session_file(wb.recording.path) as reader:
            assert sum(r.kind == "bench" for r in reader.runs()) == 2  # merged from the host
        assert not list((ssh_server.cache / "remote" / "results").glob("*.opscope"))  # taken
    finally:
        wb.shutdown()


def test_a_generating_model_and_its_serving_study_run_on_the_host(
    qtbot: QtBot, tmp_path: Path, target: Target, ssh_server: SSHHost
) -> None:
    demo_llm = Path(__file__).resolve().parent.parent / "resources" / "models" / "demo_llm"
    wb = Workbench(session_path=str(tmp_path / "llm.opscope"), usable=["cpu"], host=target)
    qtbot.addWidget(wb.window)
    wb.window.show()
    wb.start(str(demo_llm))
    from app.llm_serving.controller import LLMServingController

    c = wb.room(LLMServingController)
    try:
        qtbot.waitUntil(lambda: wb.generation.stats.total > 3, timeout=TIMEOUT_MS)
        (folder,) = (ssh_server.cache / "remote" / "files" / "folders").glob("*/demo_llm")
        assert (folder / "genai_config.json").is_file()
        dock = c.view
        _small(dock)  # an LLM serving study on the host: three layouts, then one for real
        dock.simulate_button.click()
        qtbot.waitUntil(lambda: not c.busy, timeout=TIMEOUT_MS)
        assert dock.table.rowCount() == 3, dock.status.text()
        dock.real_layout.setCurrentIndex(dock.real_layout.findData("colocated"))
        dock.real_button.click()
        qtbot.waitUntil(lambda: not c.busy, timeout=TIMEOUT_MS)
        assert sum(not r.simulated for r in c.table.rows) == 1, dock.status.text()
        # both studies recorded on the host, merged into the window's session, the model
        # named as it is here
        with open_session_file(wb.recording.path) as reader:
            studies = reader.llm_studies()
        assert [(s.kind, len(s.rows)) for s in studies] == [("simulate", 3), ("real", 2)]
        assert {s.model_path for s in studies} == {str(demo_llm)}
    finally:
        wb.shutdown()


def test_cancel_stops_a_models_upload_and_the_link_stays(
    qtbot: QtBot, tmp_path: Path, target: Target, ssh_server: SSHHost
) -> None:
    wb = _bench(qtbot, tmp_path, target)
    big = tmp_path / "big.onnx"
    with open(big, "wb") as fh:  # sparse: 2 GB to send, nothing on this disk
        fh.truncate(2 << 30)
    panel = wb.window.config_panel
    try:
        qtbot.waitUntil(lambda: wb.controller.samples > 10, timeout=TIMEOUT_MS)
        wb.open_model(str(big))
        qtbot.waitUntil(lambda: "sending big.onnx" in panel.progress.format(), timeout=30_000)
        panel.cancel.click()
        qtbot.waitUntil(  # its message, not a busy machine's provisional-roofs warning
            lambda: "cancelled while its files were sent" in wb.window.banner.text.text(),
            timeout=TIMEOUT_MS,
        )
        n = wb.controller.samples
        qtbot.waitUntil(lambda: wb.controller.samples > n + 10, timeout=TIMEOUT_MS)  # runs on
        # none kept: the host's receiver removes its part once it reads the stream's end,
        # which a busy machine can take a while to come to
        files = ssh_server.cache / "remote" / "files"
        qtbot.waitUntil(lambda: not list(files.rglob("big.onnx*")), timeout=TIMEOUT_MS)
    finally:
        wb.shutdown()


def test_load_what_if_sweep_and_graph_from_a_connected_window(
    qtbot: QtBot, tmp_path: Path, target: Target, ssh_server: SSHHost
) -> None:
    """The Traffic dock's load run (replaying a trace file of this machine's, sent there)
    and What-if calibration on the loaded model there, the Scaling dock's sweep (its row
    and its points' runs merged here), the Graph dock's layout of the graph as the host ran
    it."""
    from tests.conftest import DEMO_TRANSFORMER

    wb = Workbench(session_path=str(tmp_path / "all.opscope"), usable=["cpu"], host=target)
    qtbot.addWidget(wb.window)
    wb.window.show()
    wb.start(str(DEMO_TRANSFORMER))
    try:
        qtbot.waitUntil(lambda: wb.controller.samples > 10, timeout=TIMEOUT_MS)
        from app.traffic.controller import TrafficController

        traffic = wb.room(TrafficController).view
        trace = tmp_path / "arrivals.csv"
        trace.write_text("time_s\n" + "".join(f"{i * 0.01:.3f}\n" for i in range(150)))
        traffic.set_trace(str(trace))
        traffic.duration.setValue(2)
        traffic.run_button.click()
        qtbot.waitUntil(lambda: not traffic.run_button.isEnabled(), timeout=5_000)
        qtbot.waitUntil(lambda: traffic.run_button.isEnabled(), timeout=TIMEOUT_MS)
        assert "done: p50" in traffic.serving_plot.tally.text()
        traffic.calibrate_button.click()
        qtbot.waitUntil(lambda: traffic.what_if.curves()["proposed"][0].size > 3,
                        timeout=TIMEOUT_MS)  # fmt: skip
        qtbot.waitUntil(lambda: wb.running, timeout=TIMEOUT_MS)
        from app.scaling.controller import ScalingController

        scaling = wb.room(ScalingController).view
        scaling.values.setText("16,32")
        scaling.run_button.click()
        qtbot.waitUntil(lambda: not wb.running, timeout=5_000)
        qtbot.waitUntil(lambda: scaling.run_button.isEnabled(), timeout=TIMEOUT_MS)
        assert "total ~ sequence^" in scaling.status.text(), scaling.status.text()
        qtbot.waitUntil(lambda: wb.running, timeout=TIMEOUT_MS)
        from app.graph.controller import GraphController

        wb.window.dock("Graph").raise_()
        view = wb.room(GraphController).view.view
        # the graph as loaded is drawn first: then the whole result, with the graph as run
        qtbot.waitUntil(
            lambda: "run" in ((view.result or {}).get("views") or {}), timeout=TIMEOUT_MS
        )
        assert view.scene_ is not None and view.scene_.kind == "run"
        wb.recording.flush()
        with open_session_file(wb.recording.path) as reader:
            runs = reader.runs()
            assert sum(r.kind == "load" for r in runs) == 1
            (load,) = [r for r in runs if r.kind == "load"]
            served = reader.serving(load.id)
            assert served is not None and served.traffic["kind"] == "trace"
            assert served.records.scheduled.size == 150  # the trace's arrivals, replayed
            assert served.traffic["path"].startswith(str(ssh_server.cache))  # from its copy
            (sweep,) = reader.sweeps()
            assert len(sweep.run_ids) == 2 and set(sweep.run_ids) <= {r.id for r in runs}
            assert sweep.model_path == str(DEMO_TRANSFORMER)  # named as here
            assert {r.host for r in runs} == {"gpu-box"}
    finally:
        wb.shutdown()
