"""What the Memory dock says of a memory report (engine/run/memory_job.py's result), as
lines and series: Qt-free, so the wording and the numbers are tested without a window."""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.api import device_copy_text, size_text


def summary_lines(r: dict[str, Any]) -> list[str]:
    """Weights, the activation peak as run (as loaded when the run's is unknown), what the
    session holds against the estimate, and the load broken down."""
    w = r["weights_bytes"]
    dtypes = ", ".join(f"{k} {size_text(v)}" for k, v in list(w["by_dtype"].items())[:4])
    lines = [f"Weights {size_text(w['total'])} ({dtypes})"]
    loaded_total = sum(w["as_loaded"].values())
    if abs(loaded_total - w["total"]) > 1:
        lines[0] += f"; the model file's {size_text(loaded_total)}"
    acts = r["activations"]
    for label, live in (("as run", acts.get("as_run")), ("as loaded", acts.get("as_loaded"))):
        if live:
            lines.append(f"Activation peak {label}: {peak_text(live, live['at_node'])}")
    m = r["measured"]
    ratio = m.get("estimate_over_measured")
    lines.append(
        f"The session holds {size_text(m['held_bytes'])} (resident, steady state); weights + "
        f"peak estimate {size_text(m['estimate_bytes'])}"
        + (f", {ratio:.0%} of it" if ratio is not None else "")
    )
    load = r["load"]
    fp32 = (r.get("config") or {}).get("precision") == "fp32"
    built = "cached" if load.get("variant_cached") else f"{load['variant_s']:.2f} s"
    variant = "none" if fp32 else built
    inner = " + ".join(
        f"{k.replace('_', ' ')} {load[k + '_s'] * 1e3:.0f} ms"
        for k in ("model_loading", "session_initialization")
        if load.get(k + "_s") is not None
    )
    lines.append(
        f"Load: read {load['read_s'] * 1e3:.0f} ms, variant {variant}, session "
        f"{(load.get('session_s') or 0) * 1e3:.0f} ms" + (f" ({inner})" if inner else "")
    )
    copied = device_copy_text(load.get("weights_to_device"))
    if copied:
        lines.append(copied[0].upper() + copied[1:])
    return lines


def peak_text(live: dict[str, Any], where: str = "") -> str:
    """A liveness pass's peak (at `where`) in words; where shape inference could not size
    some tensors the peak is a floor, and says so: '2.4 MB or more at Add (197 tensors not
    sized at these shapes, not counted)'."""
    unknown = int(live.get("unknown_tensors") or 0)
    text = size_text(float(live.get("peak_bytes") or 0.0)) + (" or more" if unknown else "")
    text += f" at {where}" if where else ""
    if unknown:
        text += f" ({unknown} tensor{'s' if unknown > 1 else ''} not sized at these shapes, "
        text += "not counted)"
    return text


def timeline(live: dict[str, Any] | None) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(node index, bytes alive while it ran, node names) of one liveness pass."""
    points = (live or {}).get("timeline") or []
    x = np.arange(len(points), dtype=float)
    y = np.array([p["bytes"] for p in points], dtype=float)
    return x, y, [str(p["node"]) for p in points]


def alive_rows(live: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    """(tensor, size, producer) of the tensors alive at the peak, largest first."""
    return [(t["tensor"], size_text(t["bytes"]), t["producer"])
            for t in (live or {}).get("alive_at_peak") or []]  # fmt: skip
