"""Does the roofline tell the truth? For each model (and precision), `opscope profile` places
every operator against the roof of the memory level its working set fits in and against the
float or integer compute roof; this counts, among the 20 slowest operators, those that run
more than 10% above the roof placed over them (the issue's goal: none), and which roofs
bound them. The roofs are measured first (`opscope system --remeasure`) and printed with the
load average, since a busy machine's roofs come out low.

    .venv/bin/python bench/roofline_check.py [MODEL.onnx ...]
        # writes bench/results/roofline_check_<cpu model>.md
        # default: the demo CNN (FP32, INT8 static), the demo transformer, and MiniLM-L3
        # (FP32, INT8 dynamic) when bench/models/bert_zoo.py has built it
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from results_file import publish  # noqa: E402

OPSCOPE = [sys.executable, "-m", "app.entry"]
MINILM = Path.home() / ".cache" / "opscope-bench" / "paraphrase-minilm-l3" / "model.onnx"
TOP = 20


def cases(models: list[str]) -> list[tuple[str, list[str]]]:
    if models:
        return [(Path(m).name, [m]) for m in models]
    out = [
        ("demo CNN FP32", [str(ROOT / "resources/models/demo_cnn.onnx")]),
        ("demo CNN INT8 static", [str(ROOT / "resources/models/demo_cnn.onnx"),
                                  "--precision", "int8-static"]),
        ("demo transformer FP32", [str(ROOT / "resources/models/demo_transformer.onnx")]),
    ]  # fmt: skip
    if MINILM.is_file():
        out.append(("MiniLM-L3 FP32", [str(MINILM)]))
        out.append(("MiniLM-L3 INT8 dynamic", [str(MINILM), "--precision", "int8-dynamic"]))
    return out


def main() -> int:
    roofs = subprocess.run([*OPSCOPE, "system", "--remeasure"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout  # fmt: skip
    sys.path.insert(0, str(ROOT))
    from engine.hostinfo import cpu_isa, cpu_model

    lines = [f"# The roofline against its operators ({len(cases(sys.argv[1:]))} runs)", "",
             f"CPU: {cpu_model()} ({cpu_isa()}), {os.cpu_count()} CPUs.", "",
             f"Load average before: {os.getloadavg()[0]:.2f}. Roofs:", "", "```"]  # fmt: skip
    lines += [ln for ln in roofs.splitlines() if ln.startswith(("cpu roofs", "   "))]
    lines += ["```", "", f"| run | top {TOP} above roof >10% | worst (fraction of its roof) "
              "| bound by | roofs re-measured |", "|---|---|---|---|---|"]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "p.json"
        for label, args in cases(sys.argv[1:]):
            proc = subprocess.run(
                [*OPSCOPE, "profile", *args, "--duration", "2", "--runs", "20", "--no-accuracy",
                 "--json", str(out)], cwd=ROOT, capture_output=True, text=True,
            )  # fmt: skip
            if proc.returncode:
                lines.append(f"| {label} | failed: {proc.stderr.strip()[-200:]} | | | |")
                continue
            ops = sorted(json.loads(out.read_text())["ops"], key=lambda o: -o["time_ms"])[:TOP]
            above = [o for o in ops if (o.get("peak_fraction") or 0) > 1.10]
            worst = max(ops, key=lambda o: o.get("peak_fraction") or 0)
            bounds: dict[str, int] = {}
            for o in ops:
                key = o["level"] if o["bound"] == "memory" else o["compute_roof"]
                bounds[key] = bounds.get(key, 0) + 1
            again = "yes" if "measuring them again" in proc.stderr else "no"
            lines.append(
                f"| {label} | {len(above)} of {len(ops)} | {worst['op_type']} "
                f"{worst.get('peak_fraction') or 0:.0%} ({worst['level']}, "
                f"{worst['compute_roof']}) | "
                + ", ".join(f"{k} {v}" for k, v in sorted(bounds.items()))
                + f" | {again} |"
            )
    lines += ["", f"Load average after: {os.getloadavg()[0]:.2f}."]
    name = re.sub(r"\((r|tm)\)", "", cpu_model().lower())  # "Intel(R) Xeon(R)" -> intel_xeon
    slug = re.sub(r"[^a-z0-9]+", "_", name).strip("_").removesuffix("_processor")[:40]
    publish("\n".join(lines), ROOT / "bench" / "results" / f"roofline_check_{slug}.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
