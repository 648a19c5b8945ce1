"""FP16 on ONNX Runtime's CPU provider, said as it is: the CPU provider has FP16 kernels for
few ops, so at session creation it wraps every other FP16 node in Casts to FP32 and back
("InsertedPrecisionFreeCast_..." nodes in the graph it runs) and computes in FP32 anyway,
usually slower than FP32 throughout (MiniLM: 67 Casts inserted). Counted from the optimized
graph the session saved, and told in one warning line, in the CLI and the window alike.
That graph is read once, for its node count and its Casts together (`optimized_graph`)."""

from __future__ import annotations

from pathlib import Path

from engine.config import RunConfig

INSERTED = "InsertedPrecisionFreeCast_"  # ONNX Runtime's name for a Cast it inserted


def optimized_graph(optimized: str | Path, casts: bool) -> tuple[int | None, int | None]:
    """(top-level nodes, Cast nodes ONNX Runtime inserted) of the graph the session saved,
    from one load (None, None: not saved; casts None unless asked for)."""
    import onnx

    if not Path(optimized).exists():
        return None, None
    graph = onnx.load(str(optimized), load_external_data=False).graph
    if not casts:
        return len(graph.node), None
    inserted = sum(1 for n in graph.node if n.op_type == "Cast" and n.name.startswith(INSERTED))
    return len(graph.node), inserted


def fp16_cpu_warning(config: RunConfig, provider_used: str, casts: int | None) -> str | None:
    """The one line for FP16 run on the CPU provider (None for any other run)."""
    if config.precision != "fp16" or not provider_used.startswith("CPU"):
        return None
    did = (
        f"ONNX Runtime inserted {casts} Cast node{'s' if casts != 1 else ''} to run the "
        "others in FP32"
        if casts
        else "the others run through Casts to FP32"
    )
    return (
        f"FP16 on the CPU provider: it has FP16 kernels for few ops; {did}, so expect it "
        "slower than FP32 (FP16 pays off on a GPU)"
    )
