"""optimum + ONNX Runtime quantization recipes for bench/int8_peers.py, run in a side venv.

optimum is not in the OpScope venv (it would pull its own onnxruntime over onnxruntime-gpu),
so bench/int8_peers.py runs this script with another Python:

    python3 -m venv /tmp/peersvenv
    /tmp/peersvenv/bin/pip install torch==2.13.0 "optimum[onnxruntime]" onnxruntime==1.31.1 \\
        "datasets<4"        # datasets 4/5 want huggingface-hub >= 1 which transformers 4.57 refuses
    /tmp/peersvenv/bin/python bench/int8_peers_optimum.py MODEL.onnx CALIB.npz OUTDIR

Writes OUTDIR/<recipe>.onnx for each recipe that works and OUTDIR/optimum_report.json (per
recipe: path or error, versions). Recipes: ORTQuantizer with
AutoQuantizationConfig.avx512_vnni(is_static=False, per_channel=False|True) (dynamic), and
is_static=True (QDQ, MinMax calibration over CALIB.npz samples one at a time, via
AutoCalibrationConfig.minmax) with per_channel=False|True.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

import numpy as np


def main(argv: list[str]) -> int:
    model, calib, out = Path(argv[0]), Path(argv[1]), Path(argv[2])
    out.mkdir(parents=True, exist_ok=True)
    import onnxruntime
    import optimum
    from optimum.onnxruntime import ORTQuantizer
    from optimum.onnxruntime.configuration import AutoCalibrationConfig, AutoQuantizationConfig

    try:
        from importlib.metadata import version

        opt_version = version("optimum")
        onnx_opt = version("optimum-onnx")
    except Exception:
        opt_version, onnx_opt = getattr(optimum, "__version__", "?"), "?"
    report: dict = {
        "optimum": opt_version,
        "optimum-onnx": onnx_opt,
        "onnxruntime": onnxruntime.__version__,
        "recipes": {},
    }

    # ORTQuantizer wants a folder with exactly one .onnx in it
    work = Path(tempfile.mkdtemp(prefix="optq_"))
    shutil.copy(model, work / "model.onnx")
    for extra in model.parent.glob("*.data"):
        shutil.copy(extra, work / extra.name)

    data = dict(np.load(calib))
    n = len(next(iter(data.values())))

    for static in (False, True):
        for per_channel in (False, True):
            name = f"optimum_{'static' if static else 'dynamic'}{'_pc' if per_channel else ''}"
            try:
                q = ORTQuantizer.from_pretrained(work, file_name="model.onnx")
                qconfig = AutoQuantizationConfig.avx512_vnni(
                    is_static=static, per_channel=per_channel
                )
                ranges = None
                if static:
                    from datasets import Dataset

                    ds = Dataset.from_dict(
                        {k: [v[i : i + 1][0] for i in range(n)] for k, v in data.items()}
                    )
                    ccfg = AutoCalibrationConfig.minmax(ds)
                    ranges = q.fit(
                        dataset=ds,
                        calibration_config=ccfg,
                        operators_to_quantize=qconfig.operators_to_quantize,
                        onnx_augmented_model_name=str(work / "augmented.onnx"),
                    )
                sub = work / name
                path = q.quantize(
                    quantization_config=qconfig, save_dir=sub, calibration_tensors_range=ranges
                )
                path = Path(path)
                if path.is_dir():  # optimum returns the save_dir
                    path = next(p for p in path.glob("*.onnx") if "augmented" not in p.name)
                dest = out / f"{name}.onnx"
                shutil.copy(path, dest)
                report["recipes"][name] = {"path": str(dest), "config": repr(qconfig)[:400]}
                print(f"{name}: {dest}", flush=True)
            except Exception as e:
                report["recipes"][name] = {
                    "error": f"{type(e).__name__}: {e}"[:600],
                    "trace": traceback.format_exc()[-1500:],
                }
                print(f"{name}: FAILED {type(e).__name__}: {e}", flush=True)
    (out / "optimum_report.json").write_text(json.dumps(report, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
