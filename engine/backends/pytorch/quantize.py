"""INT8 dynamic quantization of a PyTorch model's Linear layers (CPU, fbgemm/x86 kernels).

An eager `nn.Module` with `nn.Linear` children goes through
`torch.ao.quantization.quantize_dynamic`. The module of an ExportedProgram has no
`nn.Linear` children (its linears are `aten.linear` calls on parameters), so there each
such call is rewritten to `quantized.linear_dynamic` over per-channel INT8 weights, which
is what `quantize_dynamic` does for an `nn.Linear`.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

from engine.errors import ConfigError


def quantize_linear_int8(module: Any) -> tuple[Any, int]:
    """A quantized copy of `module` and the number of Linear layers it quantized."""
    import torch

    if isinstance(module, torch.jit.ScriptModule):
        raise ConfigError(
            "int8-dynamic with engine torch needs a .pt2 program "
            "(TorchScript modules cannot be quantized in place)"
        )
    linears = sum(isinstance(m, torch.nn.Linear) for m in module.modules())
    if linears:
        from torch.ao.quantization import quantize_dynamic

        return quantize_dynamic(
            copy.deepcopy(module),
            {torch.nn.Linear},  # type: ignore[no-untyped-call]
            dtype=torch.qint8,
        ), linears
    if isinstance(module, torch.fx.GraphModule):
        return _rewrite_aten_linear(module)
    return module, 0


def _rewrite_aten_linear(gm: Any) -> tuple[Any, int]:
    """Replace `aten.linear(x, W, b)` on constant W with `quantized.linear_dynamic`
    (reduce_range=True, as quantize_dynamic does on x86: full 8-bit activations saturate
    fbgemm's int16 accumulation of products)."""
    import torch

    gm = copy.deepcopy(gm)
    with warnings.catch_warnings():  # quantize_per_channel / get_attr of a ScriptObject
        warnings.simplefilter("ignore")
        count = _rewrite(torch, gm)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm, count


def _rewrite(torch: Any, gm: Any) -> int:
    linear = torch.ops.aten.linear.default
    count = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not linear:
            continue
        w_node = node.args[1]
        b_node = node.args[2] if len(node.args) > 2 else None
        if getattr(w_node, "op", None) != "get_attr":
            continue
        weight = _attr(gm, w_node.target).detach().float()
        bias = _attr(gm, b_node.target).detach().float() if b_node is not None else None
        scales = (weight.abs().amax(dim=1) / 127.0).clamp(min=1e-8).double()
        zeros = torch.zeros(weight.shape[0], dtype=torch.int64)
        qweight = torch.quantize_per_channel(weight, scales, zeros, 0, torch.qint8)
        packed = torch.ops.quantized.linear_prepack(qweight, bias)
        attr = f"_opscope_int8_linear_{count}"
        setattr(gm, attr, packed)
        with gm.graph.inserting_before(node):
            p_node = gm.graph.get_attr(attr)
            q_node = gm.graph.call_function(
                torch.ops.quantized.linear_dynamic, (node.args[0], p_node, True)
            )
        node.replace_all_uses_with(q_node)
        gm.graph.erase_node(node)
        count += 1
    return count


def _attr(gm: Any, target: str) -> Any:
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj
