"""Tiny PyTorch models saved as .pt2 (torch.export) and TorchScript, for the torch tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def mlp() -> Any:
    """An MLP: 16 -> 32 -> 10 with a ReLU, seeded."""
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10)
    ).eval()


def conv_net() -> Any:
    """A tiny conv net on 3x16x16 images."""
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(8, 4),
    ).eval()


def save_pt2(module: Any, example: Any, path: Path) -> Path:
    """torch.export with a dynamic batch dim, then torch.export.save."""
    import torch

    batch = torch.export.Dim("batch", min=1, max=1024)
    program = torch.export.export(module, (example,), dynamic_shapes=({0: batch},))
    torch.export.save(program, str(path))
    return path


def save_torchscript(module: Any, example: Any, path: Path) -> Path:
    import torch

    torch.jit.save(torch.jit.trace(module, example), str(path))
    return path
