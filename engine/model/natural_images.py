"""Images with natural statistics for evaluation and calibration, put into the range the
model expects.

Uniform or normal noise is white: every spatial frequency carries the same power, where a
photograph's power falls as 1/f² and its colour channels move together. A quantized model
can keep white noise and still lose real pictures, so each image here is a 1/f-amplitude
(pink) noise field shared by the channels plus a little of each channel's own, with a few
smooth shapes and sharp edges laid over it, scaled to [0, 1].

The range the model expects, in this order: a Hugging Face `preprocessor_config.json` beside
the model or in its parent folder (rescale, then normalize with its image_mean/image_std);
an ultralytics export (metadata with "stride" and "names") keeps [0, 1]; anything else is
normalized with ImageNet's mean/std (torchvision and timm classifiers). uint8 inputs get
0..255 pixels as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.errors import InputError, one_line
from engine.files import loads_json

if TYPE_CHECKING:
    import onnx

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
PREPROCESSOR = "preprocessor_config.json"
CHANNELS = (1, 3, 4)
MIN_SIDE = 8  # smaller spatial dims are not an image


def image_layout(dtype: np.dtype[Any], shape: tuple[int, ...]) -> str | None:
    """ "NCHW" or "NHWC" for a float or uint8 input of rank 4 with 1, 3 or 4 channels and
    sides of at least MIN_SIDE; None for anything else (channels first when both fit)."""
    if len(shape) != 4 or not (np.issubdtype(dtype, np.floating) or dtype == np.uint8):
        return None
    if shape[1] in CHANNELS and min(shape[2:]) >= MIN_SIDE:
        return "NCHW"
    if shape[3] in CHANNELS and min(shape[1:3]) >= MIN_SIDE:
        return "NHWC"
    return None


def natural_images(
    rng: np.random.Generator, n: int, channels: int, height: int, width: int
) -> np.ndarray:
    """`n` images [n, channels, height, width], float32 in [0, 1]."""
    fy = np.fft.fftfreq(height)[:, None]
    fx = np.fft.rfftfreq(width)[None, :]
    f = np.sqrt(fx**2 + fy**2)
    f[0, 0] = 1.0 / max(height, width)
    inverse = (1.0 / f).astype(np.float32)

    def pink(k: int, amplitude: np.ndarray) -> np.ndarray:
        size = (k, height, width // 2 + 1)
        re = rng.standard_normal(size, dtype=np.float32)
        im = rng.standard_normal(size, dtype=np.float32)
        field = np.fft.irfft2((re + 1j * im) * amplitude, s=(height, width)).astype(np.float32)
        field -= field.mean(axis=(1, 2), keepdims=True)
        field /= field.std(axis=(1, 2), keepdims=True) + 1e-6
        return field

    shared = pink(n, inverse)[:, None]  # 1/f amplitude: power falls as 1/f²
    # colour varies more slowly than brightness: each channel's own field falls faster
    own = pink(n * channels, inverse**1.5).reshape(n, channels, height, width)
    tint = rng.normal(0.0, 0.25, (n, channels, 1, 1)).astype(np.float32)
    images = 0.85 * shared + 0.35 * own + tint
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    yy /= max(height - 1, 1)
    xx /= max(width - 1, 1)
    for i in range(n):
        for _ in range(int(rng.integers(2, 6))):
            mask = _shape_mask(rng, yy, xx, min(height, width))
            grey, hue = rng.normal(0.0, 1.2), rng.normal(0.0, 0.4, (channels, 1, 1))
            colour = (grey + hue).astype(np.float32)
            keep = float(rng.uniform(0.2, 0.6))  # the texture shows through the shape
            images[i] = images[i] * (1 - mask * (1 - keep)) + colour * mask * (1 - keep)
    lo = np.percentile(images, 1, axis=(1, 2, 3), keepdims=True)
    hi = np.percentile(images, 99, axis=(1, 2, 3), keepdims=True)
    out = (images - lo) / np.maximum(hi - lo, 1e-6)
    return np.clip(out, 0.0, 1.0).astype(np.float32)


def _shape_mask(rng: np.random.Generator, yy: np.ndarray, xx: np.ndarray, side: int) -> np.ndarray:
    """A soft ellipse or a straight edge (half plane), 0..1; sharp or blurred."""
    sharp = float(rng.choice([side / 1.5, side / 8.0]))  # a 1.5-pixel or an 8-pixel edge
    angle = float(rng.uniform(0, np.pi))
    cy, cx = rng.uniform(0.1, 0.9, 2)
    u = (xx - cx) * np.cos(angle) + (yy - cy) * np.sin(angle)
    if rng.random() < 0.6:
        v = -(xx - cx) * np.sin(angle) + (yy - cy) * np.cos(angle)
        ru, rv = rng.uniform(0.08, 0.35, 2)
        radius = np.sqrt((u / ru) ** 2 + (v / rv) ** 2)
        z = (1.0 - radius) * sharp * float(min(ru, rv))
    else:
        z = u * sharp
    return np.asarray(1.0 / (1.0 + np.exp(-np.clip(z, -30, 30))), dtype=np.float32)


@dataclass(frozen=True)
class Preprocess:
    """[0, 1] pixels -> the model's input: x * scale, then (x - mean) / std when given."""

    scale: float
    mean: tuple[float, ...] | None
    std: tuple[float, ...] | None
    text: str  # "normalized with ImageNet mean/std"

    def apply(self, images: np.ndarray) -> np.ndarray:
        """`images` [n, C, H, W] in [0, 1]; channels past the mean's length reuse it."""
        out = images * np.float32(self.scale)
        if self.mean is not None and self.std is not None:
            c = images.shape[1]
            mean = np.resize(np.asarray(self.mean, np.float32), c).reshape(1, c, 1, 1)
            std = np.resize(np.asarray(self.std, np.float32), c).reshape(1, c, 1, 1)
            out = (out - mean) / std
        return out.astype(np.float32)


def preprocessing(model: onnx.ModelProto, model_path: str | Path) -> Preprocess:
    """How the model wants its pixels (see the module's docstring)."""
    here = Path(model_path).parent
    for folder in (here, here.parent):
        config = folder / PREPROCESSOR
        if config.is_file():
            return _from_config(config)
    keys = {p.key for p in model.metadata_props}
    if {"stride", "names"} <= keys:
        return Preprocess(1.0, None, None, "in [0,1] (ultralytics export)")
    return Preprocess(1.0, IMAGENET_MEAN, IMAGENET_STD, "normalized with ImageNet mean/std")


def _from_config(path: Path) -> Preprocess:
    try:
        config = loads_json(path.read_text(encoding="utf-8"))
        if not isinstance(config, dict):
            raise ValueError("not a JSON object")
        scale = 255.0 * (float(config.get("rescale_factor", 1 / 255))
                         if config.get("do_rescale", True) else 1.0)  # fmt: skip
        mean = _floats(config.get("image_mean"))
        std = _floats(config.get("image_std"))
    except (OSError, ValueError, TypeError) as exc:
        raise InputError(f"not a readable preprocessor config ({one_line(exc)})", path) from exc
    if not config.get("do_normalize", True) or mean is None or std is None:
        return Preprocess(scale, None, None, f"scaled to [0,{scale:g}] per {PREPROCESSOR}")
    if any(s == 0 for s in std):
        raise InputError("image_std holds a zero", path)
    shown = f"mean {'/'.join(f'{m:g}' for m in mean)}, std {'/'.join(f'{s:g}' for s in std)}"
    return Preprocess(scale, mean, std, f"normalized per {PREPROCESSOR} ({shown})")


def _floats(value: object) -> tuple[float, ...] | None:
    if value is None:
        return None
    items: list[Any] = value if isinstance(value, list) else [value]
    if not items:
        return None
    return tuple(float(x) for x in items)
