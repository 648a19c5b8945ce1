"""The `opscope` command line end to end: the JSON contract and the exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import DEMO_CNN, DEMO_TRANSFORMER, ROOT

FAST = ["--duration", "0.3", "--warmup", "2", "--min-runs", "5"]


def opscope(*args: str | Path, check: bool = False) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "app.entry", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ.copy(),
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
    return proc


def test_info_json(tmp_path: Path) -> None:
    out = tmp_path / "info.json"
    proc = opscope("info", DEMO_TRANSFORMER, "--json", out, check=True)
    assert "input_ids: int64[batch, sequence]" in proc.stdout
    data = json.loads(out.read_text())
    assert data["inputs"][0] == {
        "name": "input_ids",
        "kind": "tensor",
        "dtype": "int64",
        "shape": ["batch", "sequence"],
    }
    assert data["nodes"] > 50 and data["params"] > 100_000
    assert data["op_types"]["MatMul"] >= 8
    assert data["opset"]["ai.onnx"] >= 17


def test_bench_json_contract(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    opscope("bench", DEMO_CNN, "--batch", "2", *FAST, "--json", out, check=True)
    data = json.loads(out.read_text())
    assert set(data) >= {
        "model",
        "config",
        "provider_used",
        "variant",
        "latency_ms",
        "throughput",
        "stable",
        "accuracy",
    }
    assert data["model"]["sha256"] and data["model"]["path"].endswith("demo_cnn.onnx")
    cfg = data["config"]
    assert cfg == cfg | {
        "engine": "onnxruntime",
        "precision": "fp32",
        "fusion": "all",
        "batch": 2,
        "spinning": False,
        "provider": "auto",
    }
    assert cfg["threads"] >= 1  # as actually used, never the 0 placeholder
    assert data["provider_used"] == "CPUExecutionProvider"
    lat = data["latency_ms"]
    assert set(lat) == {
        *("count", "mean", "std", "min", "p50", "p90", "p95", "p99", "max"),
        *("p50_ci", "p99_ci"),
    }
    assert lat["count"] >= 5
    assert lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p95"] <= lat["p99"] <= lat["max"]
    if lat["p50_ci"] is not None:  # an interval from the raw samples, around the p50
        assert lat["p50_ci"][0] <= lat["p50"] <= lat["p50_ci"][1]
    busy = data["machine"]["contention"]  # how busy the machine was while timing
    assert busy["verdict"] in ("quiet", "busy") and busy["cpus"] >= 1
    assert busy["line"].startswith(busy["verdict"])
    tp = data["throughput"]
    assert tp["samples_per_s"] == pytest.approx(2 * tp["inferences_per_s"])
    assert data["variant"]["nodes_original"] > data["variant"]["nodes"]  # BatchNorm folded
    assert data["accuracy"] is None  # FP32 is the baseline
    assert data["inputs"]["image"]["shape"] == [2, 3, 64, 64]


def test_profile_json_has_ops(tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    proc = opscope(
        "profile",
        DEMO_TRANSFORMER,
        "--shape",
        "input_ids=1x32",
        *FAST,
        "--runs",
        "5",
        "--json",
        out,
        check=True,
    )
    assert "top nodes" in proc.stdout
    data = json.loads(out.read_text())
    ops, types = data["ops"], data["op_types"]
    keys = {
        "name",
        "op_type",
        "provider",
        "time_ms",
        "share",
        "bytes",
        "gbps",
        "flops",
        "gflops",
        "intensity",
    }
    assert ops and all(keys <= set(o) for o in ops)
    assert sum(o["share"] for o in ops) == pytest.approx(1.0, abs=1e-6)
    assert sum(t["time_ms"] for t in types) == pytest.approx(
        sum(o["time_ms"] for o in ops), rel=1e-6
    )
    assert {o["provider"] for o in ops} == {"CPUExecutionProvider"}
    matmuls = [o for o in ops if o["op_type"] in ("MatMul", "FusedMatMul", "Gemm")]
    assert matmuls and all(o["flops"] and o["flops"] > 0 for o in matmuls)
    assert 0.5 < data["profile"]["coverage"] <= 1.0
    assert data["latency_ms"]["count"] >= 5  # the timing pass ran, separately


def test_int8_dynamic_reports_accuracy_and_caches(tmp_path: Path) -> None:
    out = tmp_path / "int8.json"
    relative = DEMO_TRANSFORMER.relative_to(ROOT)  # relative paths must survive the build
    opscope(
        "bench",
        relative,
        "--precision",
        "int8-dynamic",
        "--shape",
        "input_ids=2x32",
        *FAST,
        "--json",
        out,
        check=True,
    )
    first = json.loads(out.read_text())
    acc = first["accuracy"]
    assert acc["baseline"] == "fp32"
    assert 0.9 < acc["cosine"] <= 1.0 and acc["max_abs_err"] > 0
    assert acc["top1_agreement"] is not None
    assert first["variant"]["cached"] is False and first["variant"]["build_s"] > 0
    opscope(
        "bench",
        DEMO_TRANSFORMER,
        "--precision",
        "int8-dynamic",
        "--shape",
        "input_ids=2x32",
        *FAST,
        "--json",
        out,
        check=True,
    )
    assert json.loads(out.read_text())["variant"]["cached"] is True


def test_cuda_request_is_reported_honestly(tmp_path: Path) -> None:
    out = tmp_path / "cuda.json"
    opscope("bench", DEMO_CNN, "--provider", "cuda", *FAST, "--json", out, check=True)
    data = json.loads(out.read_text())
    assert data["provider_requested"] == "CUDAExecutionProvider"
    if data["provider_used"] != "CUDAExecutionProvider":
        assert any("ONNX Runtime is running on" in n["message"] for n in data["notices"])


@pytest.mark.parametrize(
    ("model", "extra", "fragment"),
    [
        ("corrupt", [], "not a valid ONNX file"),
        ("truncated", [], "not a valid ONNX file"),
        ("external_data_missing", [], "missing external data file"),
        ("unsupported_op", [], "unsupported operator"),
        ("session_fails", [], "cannot load the model"),
        ("shape_mismatch_dynamic", ["--batch", "4"], "rejected inputs x float32[4x3x8x8]"),
        ("dims_named", ["--shape", "x=2x17"], "fixed at 16"),
        ("dims_named", ["--inputs", "nowhere.npz"], "inputs file not found"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    zoo: dict[str, Path], model: str, extra: list[str], fragment: str
) -> None:
    proc = opscope("bench", zoo[model], *FAST, *extra)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("opscope: error:")]
    assert len(errors) == 1 and fragment in errors[0]
    assert "nowhere.npz" in errors[0] or str(zoo[model]) in errors[0]


def test_missing_model_and_bad_options(tmp_path: Path) -> None:
    proc = opscope("info", tmp_path / "missing.onnx")
    assert proc.returncode == 2 and "file not found" in proc.stderr
    assert "missing.onnx" in proc.stderr
    assert opscope("bench", DEMO_CNN, "--precision", "int3").returncode == 2
    assert opscope("bench", DEMO_CNN, "--batch", "0").returncode == 2


def test_real_inputs_from_npz(zoo: dict[str, Path], tmp_path: Path) -> None:
    data = tmp_path / "in.npz"
    np.savez(data, a=np.ones((3, 8), np.float32), b=np.ones((3, 8), np.float32))
    out = tmp_path / "r.json"
    opscope("bench", zoo["multi_output"], "--inputs", data, *FAST, "--json", out, check=True)
    assert json.loads(out.read_text())["inputs"]["a"]["shape"] == [1, 8]  # fitted to batch 1


def test_entry_opens_the_window_for_model_and_session_files(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import app.shell.launch
    import engine.cli.main
    from app.entry import main

    seen: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(app.shell.launch, "main", lambda a: seen.append(("gui", list(a))) or 0)
    monkeypatch.setattr(engine.cli.main, "main", lambda a: seen.append(("cli", list(a))) or 0)
    for args in (
        ["net.pt2"],
        ["Net.ONNX"],
        ["s.opscope"],
        ["gui", "m.pt"],
        [],
        ["bench", "m.onnx"],
        ["info", "m.pt2"],
    ):
        main(args)
    assert seen == [
        ("gui", ["net.pt2"]),
        ("gui", ["Net.ONNX"]),
        ("gui", ["s.opscope"]),
        ("gui", ["m.pt"]),
        ("gui", []),
        ("cli", ["bench", "m.onnx"]),
        ("cli", ["info", "m.pt2"]),
    ]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["simulate", "m.onnx", "--confirm", "-1"], "opscope simulate: error: argument --confirm"),
        (["bench", "m.onnx", "--batch", "0"], "opscope bench: error: argument --batch"),
        (["nosuch"], "opscope: error: argument COMMAND: invalid choice: 'nosuch'"),
        (["gui", "--size", "abc"], "opscope gui: error: argument --size"),
    ],
)
def test_a_bad_flag_is_one_line_saying_where_the_usage_is(args: list[str], said: str) -> None:
    """Not argparse's usage block (two dozen lines for simulate) before the error."""
    proc = opscope(*args)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [proc.stderr.strip()], proc.stderr
    assert proc.stderr.startswith(said) and "--help for usage)" in proc.stderr
