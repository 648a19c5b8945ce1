"""The INT8 peers benchmark's markdown report (bench/int8_peers.py)."""

from __future__ import annotations

import datetime
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from int8_peers_metrics import TARGET


def fmt_speed(t: dict | None) -> str:
    if not t:
        return "-"
    c, w = t["cpu"], t["wall"]
    return (
        f"{c['speedup']:.2f}x [{c['iqr'][0]:.2f}-{c['iqr'][1]:.2f}] cpu; "
        f"{w['speedup']:.2f}x [{w['iqr'][0]:.2f}-{w['iqr'][1]:.2f}] wall"
    )


def report(results: list[dict], cpu: dict, args, started: float, threads: int) -> str:
    import onnxruntime as ort

    Path(args.opscope_root)
    L = [
        "# INT8 peers benchmark (issue 50, item 6)",
        "",
        f"- CPU: **{cpu['name']}**, {cpu['logical']} logical CPUs, {threads} physical cores; "
        f"avx512_vnni: {'yes' if cpu['avx512_vnni'] else 'no'}, avx_vnni: "
        f"{'yes' if cpu['avx_vnni'] else 'no'}, amx_int8: {'yes' if cpu['amx_int8'] else 'no'}",
        f"- onnxruntime {ort.__version__} (harness, ORT recipes); optimum: "
        + (
            ", ".join(
                f"{k} {v}"
                for k, v in (
                    next(
                        (r["optimum_versions"] for r in results if r.get("optimum_versions")), None
                    )
                    or {}
                ).items()
            )
            or "not run"
        ),
        f"- OpScope: {args.opscope_label}; "
        f"`python bench/int8_peers.py {' '.join(sys.argv[1:])}`; {datetime.date.today()}; "
        f"{(time.perf_counter() - started) / 60:.1f} min",
        f"- Target for every recipe: worst output's worst-sample cosine >= {TARGET} and the task "
        "metric holds (see bench/int8_peers.py). Speed = fp32 time / recipe time in the same "
        f"interleaved round, median over {args.rounds} rounds [IQR], ~{args.window} s per recipe "
        "per round, batch 1, first eval sample; process CPU time (cpu) and wall time (wall). "
        "Own timing loop (not engine/measure/interleave.py). Sessions: intra-op threads = "
        "physical cores, spinning off, graph optimization ALL, CPU provider.",
        "- `8-bit ops, w8` = compute nodes (Conv/MatMul/Gemm/...) running in 8 bits over all "
        "of them (integer ops, or QDQ-wrapped), and weight tensors stored as 8-bit integers "
        "(w8 0 with 8-bit ops: weights quantized at run time, e.g. DynamicQuantizeLinear on "
        "Constant weights). "
        "`OpScope says` = the OpScope JSON's `variant.met` and its cosine.",
        "",
    ]
    for r in results:
        L.append(f"## {r['model']}: `{Path(r['path']).parent.name}/{Path(r['path']).name}`")
        L.append("")
        L.append(f"- inputs {r['io']['inputs']}; outputs {r['io']['outputs']}")
        L.append(f"- eval {r['inputs']}, calib {r['calib']}")
        for ph in ("quiet", "loaded"):
            L.append(f"- {ph}: {r['timing'][ph]['busy']}")
        L.append(
            f"- OpScope's pick: **{r['pick'] or 'none (no OpScope variant met by its own word)'}**"
        )
        L.append("")
        L.append(
            "| recipe | 8-bit ops, w8 | meets | worst cosine per output (mean) | task metric | "
            "speed vs fp32 quiet | speed vs fp32 loaded | OpScope says |"
        )
        L.append("|---|---|---|---|---|---|---|---|")
        for name, row in r["rows"].items():
            tag = f"**{name}** (pick)" if name == r["pick"] else name
            if "accuracy" not in row:
                L.append(f"| {tag} | - | not run | - | {row.get('error', '?')[:160]} | - | - | - |")
                continue
            a = row["accuracy"]
            meets = "yes" if a["meets"] else "no: " + "; ".join(a["fails"])
            if name == "fp32":
                meets = "reference"
            cs = "; ".join(f"{o['worst']:.4f} ({o['mean']:.4f})" for o in a["outputs"].values())
            says = "-"
            if name.startswith("opscope"):
                kept = row.get("opscope_excluded")
                says = f"met={row.get('opscope_met')} cos {row.get('opscope_cosine')}" + (
                    f", {kept} in FP32" if kept else ""
                )
            L.append(
                f"| {tag} | {row.get('int8_tensors', '-')} | {meets} | {cs} | "
                f"{a.get('task', '-')} | {fmt_speed(r['timing']['quiet']['results'].get(name))} | "
                f"{fmt_speed(r['timing']['loaded']['results'].get(name))} | {says} |"
            )
        L.append("")
        # done-when checks
        pick = r["pick"]
        q = r["timing"]["quiet"]["results"]
        lines = []
        if pick and pick in q:
            ps = q[pick]["cpu"]["speedup"]
            pm = r["rows"][pick].get("accuracy", {}).get("meets")
            lines.append(
                f"- OpScope's pick {pick}: neutral verdict meets={pm}, {ps:.2f}x fp32 (cpu, quiet)"
            )
            for name, row in r["rows"].items():
                if name in ("fp32", pick) or name.startswith("opscope"):
                    continue
                if row.get("accuracy", {}).get("meets") and name in q:
                    pr = q[name]["cpu"]
                    mine = q[pick]["cpu"]["ratios"]
                    paired = [a / b for a, b in zip(mine, pr["ratios"], strict=False)]
                    m = statistics.median(paired)
                    lo, hi = np.percentile(paired, [25, 75])
                    verdict = "pick at least as fast" if m >= 0.98 else "PEER FASTER"
                    lines.append(
                        f"  - vs {name} (meets): pick/peer speed {m:.2f} "
                        f"[{lo:.2f}-{hi:.2f}] -> {verdict}"
                    )
        else:
            lines.append("- no OpScope pick to compare")
        for name, row in r["rows"].items():
            if (
                name.startswith("opscope")
                and row.get("opscope_met")
                and "accuracy" in row
                and not row["accuracy"]["meets"]
            ):
                lines.append(
                    f"- **{name}: OpScope says met, the neutral harness says not** "
                    f"({'; '.join(row['accuracy']['fails'])})"
                )
            if name.startswith("opscope") and row.get("opscope_warnings"):
                for w in dict.fromkeys(row["opscope_warnings"]):
                    lines.append(f"  - {name} warning: {w[:300]}")
            if name.startswith("opscope") and "error" in row:
                lines.append(f"- {name}: {row['error'][:300]}")
            if name.startswith("optimum") and "error" in row:
                lines.append(f"- {name} not built: {row['error'][:300]}")
            if name.startswith("ort_") and "error" in row:
                lines.append(f"- {name} not built: {row['error'][:300]}")
        L += lines
        L.append("")
    return "\n".join(L) + "\n"
