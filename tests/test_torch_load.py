"""Loading PyTorch files safely: .pt2 programs, TorchScript, and refused pickles."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from engine.errors import InputError, ModelError

torch = pytest.importorskip("torch")

from engine.backends.pytorch.load import detect_kind, input_shapes, load_torch, make_inputs  # noqa: E402
from tests.torch_models import mlp, save_pt2, save_torchscript  # noqa: E402


class _RunsCommand:
    """Unpickling this runs a shell command: the attack weights_only must stop."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("torchfiles")
    model = mlp()
    x = torch.randn(2, 16)
    torch.save(model.state_dict(), out / "state.pt")
    torch.save(model, out / "whole.pt")
    return {
        "pt2": save_pt2(model, x, out / "mlp.pt2"),
        "ts": save_torchscript(model, x, out / "mlp.pt"),
        "state": out / "state.pt",
        "whole": out / "whole.pt",
    }


def test_detect_kind_reads_layout_only(files: dict[str, Path], tmp_path: Path) -> None:
    assert detect_kind(files["pt2"]) == "export"
    assert detect_kind(files["ts"]) == "torchscript"
    assert detect_kind(files["state"]) == "pickle"
    legacy = tmp_path / "legacy.pth"
    legacy.write_bytes(pickle.dumps({"w": 1}, protocol=2))
    assert detect_kind(legacy) == "pickle"
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"hello")
    assert detect_kind(junk) == "unknown"
    with pytest.raises(ModelError, match="not a PyTorch model file"):
        load_torch(junk)


def test_pt2_program_loads_with_example_and_dynamic_batch(files: dict[str, Path]) -> None:
    model = load_torch(files["pt2"])
    assert model.kind == "export"
    [inp] = model.inputs
    assert inp.shape == (2, 16) and 0 in inp.dynamic and inp.dtype == "float32"
    shapes = input_shapes(model, 8, {})
    assert shapes == {inp.name: (8, 16)}
    feeds = make_inputs(model, shapes, seed=1)
    out = model.module(torch.from_numpy(feeds[inp.name]))
    assert tuple(out.shape) == (8, 10)
    assert input_shapes(model, 1, {inp.name: (3, 16)}) == {inp.name: (3, 16)}
    with pytest.raises(InputError, match="--shape names nope"):
        input_shapes(model, 1, {"nope": (1,)})


def test_torchscript_loads_and_needs_shape(files: dict[str, Path]) -> None:
    model = load_torch(files["ts"])
    assert model.kind == "torchscript"
    [inp] = model.inputs
    with pytest.raises(InputError, match="TorchScript files carry no example inputs"):
        input_shapes(model, 1, {})
    assert input_shapes(model, 1, {inp.name: (4, 16)}) == {inp.name: (4, 16)}


def test_state_dict_is_refused_with_formats_that_work(files: dict[str, Path]) -> None:
    with pytest.raises(ModelError, match=r"state dict.*torch.export.save.*torch.jit.save"):
        load_torch(files["state"])


def test_whole_module_pickle_is_refused(files: dict[str, Path]) -> None:
    with pytest.raises(ModelError, match="refused: unpickling this file would need arbitrary"):
        load_torch(files["whole"])


def test_malicious_pickle_is_refused_and_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pt"
    torch.save({"model": _RunsCommand(marker)}, evil)
    assert not marker.exists()
    with pytest.raises(ModelError, match=r"refused.*posix.system.*not executed"):
        load_torch(evil)
    assert not marker.exists()
    legacy = tmp_path / "evil_legacy.pth"
    legacy.write_bytes(pickle.dumps(_RunsCommand(marker), protocol=2))
    with pytest.raises(ModelError, match="refused"):
        load_torch(legacy)
    assert not marker.exists()
    # through the CLI as well (both engines): exit 2, one line, and still no marker
    for engine in ("torch", "onnxruntime"):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "app.entry",
                "bench",
                str(evil),
                "--engine",
                engine,
                "--duration",
                "0.1",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2, proc.stderr
        assert "refused" in proc.stderr and "Traceback" not in proc.stderr
    assert not marker.exists()


def test_without_torch_the_error_is_one_line(tmp_path: Path, files: dict[str, Path]) -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from engine.backends.pytorch.load import load_torch\n"
        "from engine.errors import ModelError\n"
        f"try:\n    load_torch({str(files['pt2'])!r})\n"
        "except ModelError as e:\n    print(e)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert proc.stdout.strip() == "PyTorch files need torch: pip install 'opscope[torch]'"


def test_info_describes_a_pt2_program(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from engine.cli.main import main

    assert main(["info", str(files["pt2"])]) == 0
    out = capsys.readouterr().out
    assert "input: float32[batch, 16]" in out and "aten::linear 2" in out
    assert main(["info", str(files["state"])]) == 2
