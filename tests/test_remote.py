"""--host: bench and profile on another machine over SSH, against a real SSH server on
localhost (tests/ssh_server.py) whose commands run with a cache folder of their own."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.config import RunConfig
from engine.errors import ConfigError
from engine.remote.target import Target
from tests.conftest import DEMO_CNN
from tests.in_process import Cli
from tests.ssh_server import SSHHost, reach
from tests.test_cli import opscope

needs_ssh = pytest.mark.skipif(shutil.which("ssh") is None, reason="no OpenSSH client (ssh)")


@pytest.fixture
def via(ssh_server: SSHHost, monkeypatch: pytest.MonkeyPatch) -> str:
    return reach(ssh_server, monkeypatch)


@pytest.fixture
def in_proc(cli: Cli) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`opscope ARGS` run in this process (tests/in_process.py), for the tests about what
    a command does with its host: the host's side is a process of its own over SSH either
    way, and a Python start and the engine's imports here add nothing to what is checked."""

    def run(*args: object, check: bool = False) -> subprocess.CompletedProcess[str]:
        proc = cli(*args)
        if check and proc.returncode != 0:
            raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
        return proc

    return run


def test_targets_are_parsed_and_never_reach_a_shell_unquoted() -> None:
    t = Target.parse("ana@gpu-box:2222")
    assert (t.user, t.host, t.port) == ("ana", "gpu-box", 2222) and str(t) == "ana@gpu-box:2222"
    argv = Target.parse("gpu-box").ssh("bench", "my model.onnx")
    assert argv[0] == "ssh" and "BatchMode=yes" in argv and argv[-1].endswith("'my model.onnx'")
    for bad in ("-oProxyCommand=x", "a b", "host;rm", "h:99999", ""):
        with pytest.raises(ConfigError):
            Target.parse(bad)


@needs_ssh
def test_bench_on_a_host_sends_the_model_once_and_names_the_host(
    via: str,
    ssh_server: SSHHost,
    tmp_path: Path,
    in_proc: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    out = tmp_path / "r.json"
    args = ["bench", DEMO_CNN, "--host", via, "--duration", "0.2", "--min-runs", "5",
            "--no-accuracy", "--json", out]  # fmt: skip
    first = in_proc(*args, check=True)
    r = json.loads(out.read_text())
    assert r["host"]["target"] == via and "link's latency" in r["host"]["timing"]
    assert r["latency_ms"]["count"] >= 5
    assert "sent to the host" in first.stderr and "host " in first.stdout
    assert "p50" in first.stdout  # the host's own table, relayed
    stored = list((ssh_server.cache / "remote" / "files").rglob("demo_cnn.onnx"))
    assert len(stored) == 1
    again = in_proc(*args, check=True)
    assert "already on the host" in again.stderr
    assert not list((ssh_server.cache / "remote" / "results").glob("*.json"))  # taken back


@needs_ssh
def test_a_host_with_another_version_is_refused_in_one_line(
    via: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = 'python3 -c \'import json; print(json.dumps({"opscope": "9.9.9", "protocol": 1}))\''
    monkeypatch.setenv("OPSCOPE_REMOTE_COMMAND", fake)
    done = opscope("bench", DEMO_CNN, "--host", via)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "9.9.9" in line and "0.1.0" in line and "pip install opscope==" in line


@needs_ssh
@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("python3 -c 'print(\"x\" * 100000)'", "not OpScope's"),
        ("/nowhere/opscope", "no OpScope there"),
    ],
)
def test_a_hostile_or_empty_host_is_one_line(
    via: str, monkeypatch: pytest.MonkeyPatch, command: str, says: str
) -> None:
    monkeypatch.setenv("OPSCOPE_REMOTE_COMMAND", command)
    done = opscope("bench", DEMO_CNN, "--host", via)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert says in line and "Traceback" not in done.stderr


@needs_ssh
def test_a_key_the_host_refuses_is_one_line(
    via: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncssh

    stranger = tmp_path / "stranger_key"
    stranger.write_bytes(asyncssh.generate_private_key("ssh-ed25519").export_private_key())
    stranger.chmod(0o600)
    opts = os.environ["OPSCOPE_SSH_OPTS"].split()
    opts[opts.index("-i") + 1] = str(stranger)
    monkeypatch.setenv("OPSCOPE_SSH_OPTS", " ".join(opts))
    done = opscope("bench", DEMO_CNN, "--host", via)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "authentication refused" in line and "Permission denied" in line, line


@needs_ssh
def test_an_unreachable_host_is_one_line(via: str) -> None:
    done = opscope("bench", DEMO_CNN, "--host", "127.0.0.1:1")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "cannot connect" in line


def test_the_host_refuses_bad_requests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the host answers is checked there too: a name with a path, a result outside
    its results folder."""
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))
    for args in (["put", "0" * 64, "4", "../evil"], ["put", "xyz", "4", "a.onnx"],
                 ["take", "/etc/passwd"]):  # fmt: skip
        done = opscope("remote", *args)
        assert done.returncode == 2 and "remote" in done.stderr, done.stderr
    assert os.listdir(tmp_path) in ([], ["remote"])


@needs_ssh
def test_memory_and_graph_on_a_host(
    via: str, tmp_path: Path, in_proc: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    out = tmp_path / "m.json"
    in_proc("memory", DEMO_CNN, "--host", via, "--runs", "1", "--json", out, check=True)
    r = json.loads(out.read_text())
    assert r["host"]["target"] == via and r["memory"]["weights_bytes"]
    graph = in_proc("graph", DEMO_CNN, "--host", via, "--json", out, check=True)
    assert "as loaded" in graph.stdout and json.loads(out.read_text())["graph"]["views"]
    refused = in_proc("graph", DEMO_CNN, "--host", via, "--explorer", tmp_path / "x.json")
    assert refused.returncode == 2 and "--explorer with --host" in refused.stderr


@needs_ssh
def test_load_and_simulate_on_a_host_take_their_trace_along(
    via: str,
    ssh_server: SSHHost,
    tmp_path: Path,
    in_proc: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    trace = tmp_path / "arrivals.csv"
    trace.write_text("time_s\n" + "".join(f"{i * 0.01:.3f}\n" for i in range(60)))
    out = tmp_path / "s.json"
    in_proc("simulate", DEMO_CNN, "--host", via, "--traffic", f"trace:{trace}@speed=2",
            "--max-batch", "2", "--threads", "1", "--json", out, check=True)  # fmt: skip
    r = json.loads(out.read_text())
    assert r["host"]["target"] == via and r["simulated"] and r["requests"]["sent"] == 60
    session = tmp_path / "local.opscope"
    done = in_proc("bench", DEMO_CNN, "--host", via, "--duration", "0.2", "--min-runs", "5",
                   "--session", session, check=True)  # fmt: skip
    assert "from 127.0.0.1" in done.stderr
    in_proc("load", DEMO_CNN, "--host", via, "--traffic", "poisson:50", "--duration", "1",
            "--max-batch", "2", "--session", session, "--json", out, check=True)  # fmt: skip
    r = json.loads(out.read_text())
    assert r["host"]["target"] == via and r["requests"]["completed"] > 0
    shown = in_proc("session", "show", session, "--json", tmp_path / "show.json", check=True)
    runs = json.loads((tmp_path / "show.json").read_text())["runs"]
    assert [r["kind"] for r in runs] == ["bench", "load"], shown.stdout
    assert {r["host"] for r in runs} == {"gpu-box"}  # the runs name the host's machine
    assert "engine host gpu-box: " in shown.stdout  # and its facts are kept
    assert sum(" gpu-box " in line for line in shown.stdout.splitlines()) == 2  # host column
    machines = json.loads((tmp_path / "show.json").read_text())["machines"]
    assert machines["gpu-box"]["host"] == "gpu-box"
    assert not list((ssh_server.cache / "remote" / "results").iterdir())  # nothing left there


@needs_ssh
def test_ctrl_c_here_stops_the_hosts_run_and_keeps_what_it_measured(
    via: str, ssh_server: SSHHost, tmp_path: Path
) -> None:
    """Ctrl+C on the workstation closes the command's stdin on the host, which stops as
    Ctrl+C stops it there: the run it recorded comes back into the local session."""
    import signal
    import subprocess
    import sys
    import threading
    import time

    from tests.conftest import ROOT

    session = tmp_path / "s.opscope"
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.entry", "bench", str(DEMO_CNN), "--host", via,
         "--duration", "120", "--session", str(session)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: list[str] = []
    assert proc.stderr is not None
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")))
    reader.start()
    end = time.monotonic() + 120  # until the host's session is open (its provider said)
    while not any("provider" in ln for ln in lines) and time.monotonic() < end:
        time.sleep(0.1)
    time.sleep(3)  # warm-up done, timing
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=120)
    reader.join(30)
    proc.stderr.close()
    err = "".join(lines)
    assert proc.returncode == 130, err
    assert "from 127.0.0.1" in err  # the host's session came back
    show = tmp_path / "show.json"
    opscope("session", "show", session, "--json", show, check=True)
    (run,) = json.loads(show.read_text())["runs"]
    assert run["samples"] > 0, run


@needs_ssh
def test_a_handshake_with_the_right_version_but_wrong_fields_is_refused(
    via: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = ("python3 -c 'import json; print(json.dumps({\"opscope\": \"0.1.0\", \"protocol\": 1,"
            " \"gpus\": \"many\"}))'")  # fmt: skip
    monkeypatch.setenv("OPSCOPE_REMOTE_COMMAND", fake)
    done = opscope("bench", DEMO_CNN, "--host", via)
    assert done.returncode == 2 and "handshake lacks" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@needs_ssh
def test_a_host_that_lies_about_what_arrived_is_refused(
    via: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A host whose handshake is right but which claims another hash for the bytes it was
    sent: one line, nothing run there."""
    fake = tmp_path / "liar.py"
    fake.write_text(
        "import json, sys\n"
        "if sys.argv[2] == 'version':\n"
        "    print(json.dumps({'opscope': '0.1.0', 'protocol': 1, 'hostname': 'liar',\n"
        "                      'cpu': 'x', 'gpus': 0, 'results': '/tmp'}))\n"
        "else:\n"
        "    print(json.dumps({'send': True}), flush=True)\n"
        "    sys.stdin.buffer.read()\n"
        "    print(json.dumps({'stored': '/tmp/m.onnx', 'sha256': '0' * 64}))\n"
    )
    monkeypatch.setenv("OPSCOPE_REMOTE_COMMAND", f"python3 {fake}")
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))  # no hash remembered
    done = opscope("bench", DEMO_CNN, "--host", via)
    assert done.returncode == 2, done.stderr
    assert "arrived changed" in done.stderr.strip().splitlines()[-1]
    assert "Traceback" not in done.stderr


@needs_ssh
def test_a_model_with_external_data_goes_as_a_folder_once(
    via: str,
    ssh_server: SSHHost,
    tmp_path: Path,
    in_proc: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """The model and the file its weights live in, each sent by hash, assembled on the
    host as a folder; the same folder again is found there, not rebuilt."""
    import onnx

    model = onnx.load(str(DEMO_CNN))
    src = tmp_path / "ext"
    src.mkdir()
    onnx.save(model, str(src / "cnn.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location="cnn.weights")  # fmt: skip
    (src / "unrelated.bin").write_bytes(b"x" * 100)  # not the model's: not sent
    out = tmp_path / "r.json"
    args = ["bench", src / "cnn.onnx", "--host", via, "--duration", "0.2", "--min-runs", "3",
            "--no-accuracy", "--json", out]  # fmt: skip
    done = in_proc(*args, check=True)
    assert "cnn.onnx and its files sent to the host" in done.stderr
    assert json.loads(out.read_text())["latency_ms"]["count"] >= 3
    folders = list((ssh_server.cache / "remote" / "files" / "folders").glob("*/ext"))
    assert len(folders) == 1
    sent = sorted(p.name for p in folders[0].iterdir() if not p.name.startswith("."))
    assert sent == ["cnn.onnx", "cnn.weights"]
    in_proc(*args, check=True)
    assert len(list((ssh_server.cache / "remote" / "files" / "folders").glob("*/ext"))) == 1
    (src / "cnn.weights").unlink()
    missing = in_proc(*args)
    assert missing.returncode == 2 and "cnn.weights" in missing.stderr


def test_the_host_assembles_only_plain_paths_of_files_it_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from engine.remote.host_side import assemble, received_root

    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))
    stored = received_root() / ("a" * 64) / "m.onnx"
    stored.parent.mkdir(parents=True)
    stored.write_bytes(b"1234")
    good = {"path": "sub/m.onnx", "sha256": "a" * 64, "size": 4}
    for name, files in (("ok", [{**good, "path": "../m.onnx"}]),
                        ("ok", [{**good, "path": "/etc/m.onnx"}]),
                        ("ok", [{**good, "sha256": "b" * 64}]),
                        ("ok", [{**good, "size": 5}]), ("ok", []), ("../x", [good])):  # fmt: skip
        with pytest.raises(ConfigError, match="remote folder"):
            assemble(name, {"files": files}, io.StringIO())
    said = io.StringIO()
    folder = assemble("ok", {"files": [good]}, said)
    assert (folder / "sub" / "m.onnx").read_bytes() == b"1234"
    assert json.loads(said.getvalue()) == {"folder": str(folder)}


DEMO_LLM = Path(__file__).resolve().parent.parent / "resources" / "models" / "demo_llm"


@needs_ssh
def test_tune_gate_and_generate_on_a_host(
    via: str,
    ssh_server: SSHHost,
    tmp_path: Path,
    in_proc: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """A CI job on a CPU runner tunes, gates and generates on the GPU box: the trials'
    runs come back into the local session, gate's verdict and exit code are the host's,
    a genai folder goes as its files."""
    from engine.session.store import open_session_file

    session = tmp_path / "tuned.opscope"
    out = tmp_path / "t.json"
    in_proc("tune", DEMO_CNN, "--host", via, "--space", "batch=1,2", "--duration", "0.3",
            "--session", session, "--json", out, check=True)  # fmt: skip
    tuned = json.loads(out.read_text())
    assert tuned["host"]["target"] == via and len(tuned["trials"]) == 2
    with open_session_file(session) as reader:
        assert len(reader.runs()) == 2  # each trial's run, copied here
    base = tmp_path / "base.opscope"  # gate's baseline: runs of the config it gates
    for _ in range(2):
        in_proc("bench", DEMO_CNN, "--host", via, "--duration", "0.2", "--min-runs", "5",
                "--threads", "1", "--no-accuracy", "--session", base, check=True)  # fmt: skip
    gate = in_proc("gate", base, DEMO_CNN, "--host", via, "--threads", "1", "--runs", "2",
                   "--duration",
                   "0.2", "--min-runs", "5", "--max-regression", "900", "--json", out)  # fmt: skip
    assert gate.returncode in (0, 3, 4), gate.stderr  # the host's verdict, whichever it is
    assert json.loads(out.read_text())["host"]["target"] == via
    refused = in_proc("gate", base, DEMO_CNN, "--host", via, "--junit", tmp_path / "j.xml")
    assert refused.returncode == 2 and "--junit with --host" in refused.stderr
    in_proc("sweep", DEMO_CNN, "--host", via, "--vary", "batch=1,2", "--duration", "0.2",
            "--runs", "2", "--session", session, check=True)  # fmt: skip
    with open_session_file(session) as reader:
        (sweep,) = reader.sweeps()  # its row, its points' runs renumbered here
        ids = {r.id for r in reader.runs()}
        assert len(sweep.run_ids) == 2 and set(sweep.run_ids) <= ids and len(ids) == 4
    gen = in_proc("generate", DEMO_LLM, "--host", via, "--prompt-len", "8", "--new-tokens",
                  "4", "--duration", "0.5", "--json", out, check=True)  # fmt: skip
    assert re.search("demo_llm and its files (sent to|already on) the host", gen.stderr)
    assert json.loads(out.read_text())["host"]["target"] == via


@needs_ssh
def test_the_hosts_machine_and_roofs(via: str, tmp_path: Path) -> None:
    out = tmp_path / "system.json"
    done = opscope("system", "--host", via, "--json", out, check=True)
    r = json.loads(out.read_text())
    assert r["host"]["target"] == via and r["peaks"]["cpu"]["gflops"] > 0, done.stdout


FILE_LIKE = re.compile(r"(path|npz|npy|file|model|traffic)$")


def test_every_job_request_names_the_files_it_reads() -> None:
    """A window on a host sends the files a job reads first: each request (and each request
    nested in one) names its file fields in `local_files`, so none is sent by guess or
    forgotten. Window-side jobs read the window's own files and are left out."""
    import dataclasses
    import importlib
    import typing

    from engine.remote.window_host import WINDOW_SIDE_JOBS
    from engine.run.jobs import JOBS, ON_LOADED_MODEL

    missing: list[str] = []
    seen: set[type] = set()

    def walk(cls: type) -> None:
        if cls in seen:
            return
        seen.add(cls)
        hints = typing.get_type_hints(cls)
        named = getattr(cls, "local_files", ())
        for f in dataclasses.fields(cls):
            kind = hints[f.name]
            if isinstance(kind, type) and dataclasses.is_dataclass(kind):
                walk(kind)
            elif kind in (str, str | None) and FILE_LIKE.search(f.name) and f.name not in named:
                missing.append(f"{cls.__name__}.{f.name}")
        missing.extend(f"{cls.__name__}.{n} (no such field)" for n in named
                       if n not in {f.name for f in dataclasses.fields(cls)})  # fmt: skip

    for path in (*JOBS, *ON_LOADED_MODEL):
        module, name = path.rsplit(".", 1)
        if name not in WINDOW_SIDE_JOBS:
            walk(getattr(importlib.import_module(module), name))
    assert not missing, missing
    assert len(seen) >= 12  # the requests and what they nest (configs, plans, inputs)


def test_a_job_sent_to_a_host_carries_the_hosts_copies_of_its_files(tmp_path: Path) -> None:
    """Every file field, nested or not, and a trace spec's file are replaced by the host's
    copy; other text (a Poisson spec, a session) is left alone."""
    from engine.model.workload import JobInputs, Workload
    from engine.remote.window_host import FileSender
    from engine.run import host_commands as cmds
    from engine.run.bench import BenchRequest
    from engine.run.serving_jobs import LoadRunRequest
    from engine.serve.llm.study import LLMStudyRequest
    from engine.serve.llm.study_plan import LLMPlan
    from engine.tune.search import Goal
    from engine.tune.sweep_job import SweepRequest
    from engine.tune.tune_job import TuneRequest

    sender = FileSender(Target.parse("gpu-box"))
    sender.path = lambda local: f"/host/{Path(local).name}"  # type: ignore[method-assign]

    def sent(request: Any) -> Any:
        return sender.command(cmds.RunJob(1, request)).request

    work = Workload("/me/m.onnx", RunConfig(), JobInputs(calibration_npz="/me/c.npz"))
    sweep = sent(SweepRequest(BenchRequest(work), "batch", ("1", "2")))
    there = sweep.bench.workload
    assert (there.model, there.inputs.calibration_npz) == ("/host/m.onnx", "/host/c.npz")
    assert there.inputs.inputs_npz is None and there.config == RunConfig()
    tune = sent(TuneRequest(Workload("/me/m.onnx", inputs=JobInputs(labels_npy="/me/l.npy")),
                            {}, Goal("p50", 0.99)))  # fmt: skip
    assert (tune.workload.model, tune.workload.inputs.labels_npy) == ("/host/m.onnx", "/host/l.npy")
    study = sent(LLMStudyRequest("real", Workload("/me/llm"),
                                 LLMPlan("trace:/me/t.csv@speed=2,start=5")))  # fmt: skip
    assert study.workload.model == "/host/llm"
    assert study.plan.traffic == "trace:/host/t.csv@speed=2,start=5"
    load = sent(LoadRunRequest("poisson:5", {}))
    assert load.traffic == "poisson:5"
    assert sent(LoadRunRequest("Trace:/me/a b.csv", {})).traffic == "trace:/host/a b.csv"


@needs_ssh
def test_a_file_that_changes_while_it_is_sent_is_refused(via: str, tmp_path: Path) -> None:
    from engine.remote.link import RemoteError, known_sha256, send_file

    model = tmp_path / "m.onnx"
    model.write_bytes(os.urandom(300_000))

    def touched(done: int, total: int) -> None:  # the file saved again mid-send
        if done == total:
            st = model.stat()
            os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))

    with pytest.raises(RemoteError, match="changed while it was sent"):
        send_file(Target.parse(via), model, touched)
    assert known_sha256(model) is None  # not remembered as sent
    there, sent = send_file(Target.parse(via), model)  # sent whole the next time
    assert sent and Path(there).read_bytes() == model.read_bytes()
