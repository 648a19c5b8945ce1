"""`--engine torch` and `--engine onnxruntime` on the same PyTorch files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli.results import RunResult
from engine.config import RunConfig
from engine.errors import ConfigError
from engine.events import OpProfile, RunEnded, VariantReady
from engine.model.workload import JobInputs, Workload
from engine.run import host_commands as cmds
from engine.run.bench import BenchRequest, run_bench
from engine.run.timing import TimingPlan

torch = pytest.importorskip("torch")

from tests.torch_models import conv_net, mlp, save_pt2, save_torchscript  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FAST = ["--duration", "0.3", "--warmup", "2", "--min-runs", "5"]
QUICK = TimingPlan(warmup_runs=2, warmup_s=0.0, min_runs=5, duration_s=0.2)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("torchmodels")
    return {
        "mlp": save_pt2(mlp(), torch.randn(2, 16), out / "mlp.pt2"),
        "cnn": save_pt2(conv_net(), torch.randn(2, 3, 16, 16), out / "cnn.pt2"),
        "ts": save_torchscript(mlp(), torch.randn(2, 16), out / "mlp.pt"),
    }


def bench(*args: str | Path) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-m", "app.entry", "bench", *map(str, args), *FAST, "--json", "-"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    data: dict[str, object] = json.loads(proc.stdout)
    return data


def run(
    path: Path,
    profile: bool = False,
    shapes: dict[str, tuple[int, ...]] | None = None,
    **cfg: object,
) -> RunResult:
    result = RunResult()
    inputs = JobInputs(shapes=shapes or {})
    work = Workload(str(path), RunConfig(**cfg), inputs)  # type: ignore[arg-type]
    req = BenchRequest(work, timing=QUICK, profile=profile, profile_runs=5)
    for ev in run_bench(req):
        result.feed(ev)
    return result


def test_both_engines_give_the_same_json_contract(models: dict[str, Path]) -> None:
    ort = bench(models["mlp"], "--engine", "onnxruntime", "--batch", "4")
    pt = bench(models["mlp"], "--engine", "torch", "--fusion", "off", "--batch", "4")
    assert set(ort) == set(pt)
    assert ort["status"] == pt["status"] == "ok"
    assert ort["config"]["engine"] == "onnxruntime"  # type: ignore[index]
    assert pt["config"]["engine"] == "torch"  # type: ignore[index]
    assert pt["provider_used"] == "torch-cpu"
    assert ort["provider_used"] == "CPUExecutionProvider"
    assert ort["model"]["path"] == pt["model"]["path"] == str(models["mlp"])  # type: ignore[index]
    assert ort["batch"] == pt["batch"] == 4
    export = ort["variant"]["torch_export"]  # type: ignore[index]
    assert export["exporter"] == "dynamo" and export["nodes"] > 0 and export["export_s"] > 0
    for data in (ort, pt):
        assert data["latency_ms"]["count"] >= 5  # type: ignore[index]


@pytest.mark.parametrize("precision", ["bf16", "int8-dynamic"])
def test_torch_precisions_report_accuracy(models: dict[str, Path], precision: str) -> None:
    data = bench(models["mlp"], "--engine", "torch", "--fusion", "off", "--precision", precision)
    acc = data["accuracy"]
    assert isinstance(acc, dict) and acc["cosine"] > 0.98
    assert acc["baseline"] == "fp32 eager (torch)"


def test_ort_int8_on_exported_pt2_reports_accuracy(models: dict[str, Path]) -> None:
    data = bench(models["mlp"], "--precision", "int8-dynamic")
    acc = data["accuracy"]
    assert isinstance(acc, dict) and acc["cosine"] > 0.98


def test_torch_profile_gives_op_records_and_records_a_session(
    models: dict[str, Path], tmp_path: Path
) -> None:
    result = run(models["cnn"], profile=True, engine="torch", fusion="off", batch=2)
    prof = result.profile
    assert isinstance(prof, OpProfile) and prof.runs == 5
    ops = {s.op_type for s in prof.ops}
    assert "aten::conv2d" in ops and "aten::linear" in ops
    assert abs(sum(s.share for s in prof.ops) - 1.0) < 1e-6
    conv = next(s for s in prof.op_types if s.name == "aten::conv2d")
    assert conv.flops and conv.flops > 0 and conv.bytes > 0 and conv.intensity
    assert {s.provider for s in prof.ops} == {"torch-cpu"}
    session = tmp_path / "t.opscope"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.entry",
            "profile",
            str(models["cnn"]),
            "--engine",
            "torch",
            "--fusion",
            "off",
            *FAST,
            "--runs",
            "3",
            "--session",
            str(session),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    shown = subprocess.run(
        [sys.executable, "-m", "app.entry", "session", "show", str(session), "--json", "-"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0 and "torch" in shown.stdout


def test_torchscript_needs_shape_then_runs_on_both(models: dict[str, Path]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "app.entry", "bench", str(models["ts"]), "--engine", "torch", *FAST],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "--shape" in proc.stderr
    for engine in ("torch", "onnxruntime"):
        result = run(
            models["ts"],
            shapes={"input": (3, 16)},
            engine=engine,
            fusion="off" if engine == "torch" else "all",
        )
        assert result.ended is not None and result.ended.status == "ok"
        assert result.started is not None and result.started.inputs["input"][0] == (3, 16)


def test_torch_engine_refuses_other_fusions(models: dict[str, Path]) -> None:
    with pytest.raises(ConfigError, match="engine torch: fusion must be one of off, all"):
        run(models["mlp"], engine="torch", fusion="basic")
    with pytest.raises(ConfigError, match="int8-static"):
        run(models["mlp"], engine="torch", fusion="off", precision="int8-static")


def test_torch_compile_runs(models: dict[str, Path]) -> None:
    result = run(models["mlp"], engine="torch", fusion="all")
    assert result.timing is not None and result.timing.latency.count >= 5
    assert isinstance(result.variant, VariantReady)
    assert result.variant.details["mode"] == "compiled"
    assert result.variant.details["compile_s"] > 0


def test_live_host_switches_engines_on_one_pt2_and_records_both(
    models: dict[str, Path], tmp_path: Path
) -> None:
    """The app's engine host: the same .pt2 timed live on PyTorch (eager, then compiled)
    and on ONNX Runtime, each a run in one session, profiled by each engine's profiler."""
    from engine.events import LatencyBatch, Marker, RunStarted
    from engine.session.recorder import Recorder
    from engine.session.store import SessionStore, open_session_file
    from tests.test_host import Host

    host = Host()
    store = SessionStore.create_or_open(tmp_path / "both.opscope")
    recorder = Recorder(store, kind="live")
    try:
        host.send(cmds.Apply(RunConfig(engine="torch", fusion="off", batch=2)))
        host.send(cmds.Load(str(models["mlp"])))
        started = host.wait_for(lambda e: isinstance(e, RunStarted))
        assert started.provider_used == "torch-cpu" and started.batch == 2
        prof = host.wait_for(lambda e: isinstance(e, OpProfile))
        assert any(op.op_type.startswith("aten::") for op in prof.ops)
        host.wait_for(
            lambda e: isinstance(e, LatencyBatch) and e.latencies_ns.size > 0,
            start=host.events.index(prof),
        )
        host.send(cmds.Apply(RunConfig(engine="onnxruntime", batch=2)))
        ort = host.wait_for(
            lambda e: isinstance(e, RunStarted) and e.config.engine == "onnxruntime", timeout=240
        )  # exports first
        assert ort.provider_used == "CPUExecutionProvider"
        start = host.events.index(ort)
        mark = host.wait_for(lambda e: isinstance(e, Marker) and e.kind == "config", start=start)
        assert mark.label == "ONNX Runtime, fusion all"
        host.wait_for(
            lambda e: (
                isinstance(e, OpProfile)
                and not any(op.op_type.startswith("aten::") for op in e.ops)
            ),
            start=start,
        )
        host.wait_for(
            lambda e: isinstance(e, LatencyBatch) and e.latencies_ns.size > 0, start=start
        )
        host.send(cmds.Stop())
        host.wait_for(lambda e: isinstance(e, RunEnded), start=start)
    finally:
        host.close()
        for ev in host.events:
            recorder.feed(ev)
        recorder.close()
        store.close()
    reader = open_session_file(tmp_path / "both.opscope")
    runs = reader.runs()
    assert [r.config.engine for r in runs if r.config][:2] == ["torch", "onnxruntime"]
    assert all(r.samples > 0 for r in runs[:2]), [(r.id, r.status, r.samples) for r in runs]
    from engine.analysis.run_compare import compare_runs

    comp = compare_runs((reader, runs[0]), (reader, runs[1]), resamples=200)
    matmul = next(d for d in comp.op_types if d.key == "matmul")
    assert matmul.status == "both" and "aten::linear" in matmul.op_type
    assert "Gemm" in matmul.op_type or "MatMul" in matmul.op_type
    assert comp.ops == [] and any("different engines" in n for n in comp.notes)
    reader.close()


def test_a_fixed_batch_program_says_it_cannot_change_batch(tmp_path: Path) -> None:
    from engine.events import Notice, RunStarted

    program = torch.export.export(mlp(), (torch.randn(2, 16),))  # no dynamic batch dim
    path = tmp_path / "static.pt2"
    torch.export.save(program, str(path))
    for engine in ("torch", "onnxruntime"):
        events = list(
            run_bench(
                BenchRequest(
                    Workload(str(path), RunConfig(engine=engine, batch=4)),
                    timing=QUICK,
                    check_accuracy=False,
                )
            )
        )
        started = next(e for e in events if isinstance(e, RunStarted))
        assert started.batch == 2
        note = next(e for e in events if isinstance(e, Notice) and "fixed batch" in e.message)
        assert note.level == "warning" and "running batch 2, not 4" in note.message


def test_a_cached_export_names_the_file_it_was_asked_for(
    models: dict[str, Path], tmp_path: Path
) -> None:
    """The same bytes under another path (a teammate's copy) hit the export cache, but the
    source reported is this file, not the one first exported."""
    import shutil

    from engine.backends.pytorch.to_onnx import onnx_for_torch

    def export(path: Path) -> dict[str, object]:
        gen = onnx_for_torch(str(path), 2, {})
        try:
            while True:
                next(gen)
        except StopIteration as stop:
            return dict(stop.value[1])

    first = export(models["mlp"])
    copy = Path(shutil.copy(models["mlp"], tmp_path / "copy.pt2"))
    second = export(copy)
    assert second["cached"] is True and second["source"] == str(copy)
    assert first["source"] == str(models["mlp"])
