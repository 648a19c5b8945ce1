"""Evaluation and calibration samples that look like the model's inputs, for when the user
gives none: uniform token ids and normal noise pass accuracy checks that real data fail.

- Text models (an integer input named like ids, or gathering from an embedding): the texts
  of resources/eval_texts.txt through the model's `tokenizer.json` (the one the user names,
  else beside the model, else in its parent folder: the Hugging Face/optimum layout
  folder/onnx/model.onnx). Evaluation takes the file's even lines (0, 2, ...), calibration
  its odd lines, so the two never share a text; each is shuffled by the seed. A batch pads
  to its longest text with the tokenizer's pad id (or to a fixed sequence dim, truncating),
  at most 512 tokens; masks 1 on tokens, 0 on padding; token types 0; positions 0..L-1.
- Without a tokenizer: ids from a Zipf law over the embedding's rows by rank (low ids are
  the frequent ones in BERT and BPE vocabularies), skipping the first 1000 rows that
  vocabularies over 5000 reserve; each row its own length (log-uniform from 8 to the
  sequence length), padded with 0 and mask 0 after it; vocabularies over 30000 open each row
  with BERT's [CLS] 101 and close it with [SEP] 102, smaller ones open it with their lowest id.
- Images (rank 4, 1/3/4 channels, NCHW or NHWC): see engine/model/natural_images.
- Anything else: what generate_inputs gives it.
"""

from __future__ import annotations

import importlib.resources
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.errors import InputError, one_line
from engine.model.info import ModelInfo, ValueInfo
from engine.model.inputs import InputPlan, _values_for, index_limits
from engine.model.natural_images import Preprocess, image_layout, natural_images, preprocessing
from engine.model.sample_axis import sample_axes
from engine.model.sizes import check_fits, dtype_of

if TYPE_CHECKING:
    import onnx
    from tokenizers import Tokenizer

MAX_TOKENS = 512
MIN_TOKENS = 8
RESERVED_IDS = 1000  # BERT-style vocabularies' [unused], special and character rows
ZIPF_RANGE = 30000  # the frequent ids drawn from
_PURPOSES = {"evaluation": 0, "calibration": 1}
_ROLES = ("ids", "mask", "type", "position")


@dataclass(frozen=True)
class Realistic:
    batches: list[dict[str, np.ndarray]]  # feeds, each with the run's batch rows
    samples: int  # total samples
    description: str  # one line: "generated: 64 evaluation texts through ..."
    kind: str  # "texts" | "ids" | "images" | "random"


def find_tokenizer(model_path: str | Path, given: str | Path | None = None) -> Path | None:
    """The tokenizer.json the user gives (a file, or a folder holding one), else one beside
    the model, else in its parent folder; None when there is none."""
    if given is not None:
        p = Path(given)
        if p.is_dir():
            if not (p / "tokenizer.json").is_file():
                raise InputError("no tokenizer.json in this folder", p)
            return p / "tokenizer.json"
        if not p.is_file():
            raise InputError("tokenizer file not found", p)
        return p
    here = Path(model_path).parent
    for folder in (here, here.parent):
        if (folder / "tokenizer.json").is_file():
            return folder / "tokenizer.json"
    return None


def load_tokenizer(path: Path) -> Tokenizer:
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # the Rust side raises plain Exceptions
        raise InputError(f"not a readable tokenizer ({one_line(exc)})", path) from exc


def eval_texts(purpose: str) -> list[str]:
    """The texts of one purpose: evaluation the even lines, calibration the odd ones."""
    lines = (importlib.resources.files("resources") / "eval_texts.txt").read_text("utf-8")
    texts = [t.strip() for t in lines.splitlines() if t.strip()]
    return texts[_PURPOSES[purpose] :: 2]


def realistic_samples(
    model: onnx.ModelProto,
    info: ModelInfo,
    plan: InputPlan,
    count: int,
    batch: int,
    seed: int,
    purpose: str = "evaluation",
    tokenizer: Path | None = None,
    uniform: bool = False,
) -> Realistic:
    """`count` samples in batches of `batch` rows (a fixed batch dim's own; the last batch
    smaller only when the batch dim is dynamic). `tokenizer`: what the user pointed at.
    `uniform`: every text batch padded to the longest text of all, not its own longest
    (ORT's histogram calibration stacks every batch's activations: one shape for all)."""
    if purpose not in _PURPOSES:
        raise ValueError(f"purpose must be evaluation or calibration, not {purpose!r}")
    count = max(1, count)
    rng = np.random.default_rng([seed % (1 << 64), _PURPOSES[purpose], 0x7E47])
    axes = sample_axes(info)
    step, fixed = _rows(info, axes, batch)
    n_batches = max(1, math.ceil(count / step))
    sizes = (
        [step] * n_batches
        if fixed
        else [step] * (count // step) + [count % step] * bool(count % step)
    )
    check_fits(
        {v.name: (_grown(plan.shapes[v.name], axes[v.name], sum(sizes)), dtype_of(v))
         for v in info.inputs},
        info.path,
        "generated",
    )  # fmt: skip
    limits = index_limits(model, {v.name for v in info.inputs})
    roles = {v.name: _role(v, limits) for v in info.inputs}
    ids_v = next((v for v in info.inputs if roles[v.name] == "ids"), None)
    text = _text_maker(ids_v, info, plan, limits, sum(sizes), rng, purpose, tokenizer)
    if text is not None and uniform:
        text.uniform = True
        packed = text.fixed or max(1, int(text.lengths.max()))
        text.summary += f", packed into rows of {packed} tokens"
    parts = [text.summary] if text is not None else []
    kinds = [text.kind] if text is not None else []
    images = {
        v.name: layout
        for v in info.inputs
        if roles[v.name] is None and (layout := image_layout(dtype_of(v), plan.shapes[v.name]))
    }
    prep = preprocessing(model, info.path) if images else None
    if images:
        is_uint8 = all(dtype_of(v) == np.uint8 for v in info.inputs if v.name in images)
        how = "as 0-255 uint8 pixels" if is_uint8 else prep.text if prep else ""
        parts.append(f"{sum(sizes)} natural-statistics images {how}")
        kinds.append("images")
    seq_dim = ids_v.shape[-1] if ids_v is not None and ids_v.shape else None
    shared: dict[str, np.ndarray] = {}
    batches: list[dict[str, np.ndarray]] = []
    for rows in sizes:
        made = text.make(rows) if text is not None else {}
        length = made["ids"].shape[1] if made else 0
        feeds: dict[str, np.ndarray] = {}
        for v in info.inputs:
            role, dtype, axis = roles[v.name], dtype_of(v), axes[v.name]
            if role is not None and made:
                feeds[v.name] = _fitted(made[role], v, seq_dim, plan, ids_v).astype(dtype)
                continue
            shape = list(plan.shapes[v.name])
            if axis is not None and axis < len(shape) and not fixed:
                shape[axis] = rows
            if made and isinstance(seq_dim, str) and v.shape:
                shape = [
                    length if d == seq_dim else s for d, s in zip(v.shape, shape, strict=False)
                ]
            if v.name in images and prep is not None:
                feeds[v.name] = _image_batch(rng, tuple(shape), images[v.name], dtype, prep)
            elif axis is None:  # shared by every sample: made once
                if v.name not in shared:
                    shared[v.name] = _values_for(v, tuple(shape), limits.get(v.name), rng)
                feeds[v.name] = shared[v.name]
            else:
                feeds[v.name] = _values_for(v, tuple(shape), limits.get(v.name), rng)
        batches.append(feeds)
    if not parts:
        parts.append(f"{sum(sizes)} random samples (normal floats, uniform ids)")
    kind = kinds[0] if kinds else "random"
    return Realistic(batches, sum(sizes), "generated: " + "; ".join(parts), kind)


def _image_batch(
    rng: np.random.Generator,
    shape: tuple[int, ...],
    layout: str,
    dtype: np.dtype[Any],
    prep: Preprocess,
) -> np.ndarray:
    n, c, h, w = shape if layout == "NCHW" else (shape[0], shape[3], shape[1], shape[2])
    pixels = natural_images(rng, n, c, h, w)
    out = np.round(pixels * 255) if dtype == np.uint8 else prep.apply(pixels)
    if layout == "NHWC":
        out = out.transpose(0, 2, 3, 1)
    return np.ascontiguousarray(out, dtype=dtype)


def _fitted(
    arr: np.ndarray, v: ValueInfo, seq_dim: object, plan: InputPlan, ids_v: ValueInfo | None
) -> np.ndarray:
    """A mask over a longer dim than the ids' (a decoder's total_sequence_length, past and
    new tokens) starts with ones over the past the plan gives it."""
    if ids_v is None or not v.shape or v.shape[1] == seq_dim or isinstance(v.shape[1], int):
        return arr
    extra = max(0, plan.shapes[v.name][1] - plan.shapes[ids_v.name][1])
    return np.concatenate([np.ones((arr.shape[0], extra), arr.dtype), arr], axis=1)


def _rows(info: ModelInfo, axes: dict[str, int | None], batch: int) -> tuple[int, bool]:
    """Rows per batch and whether the model fixes them."""
    for v in info.inputs:
        a = axes.get(v.name)
        if a is not None and v.shape is not None and a < len(v.shape):
            d = v.shape[a]
            return (max(1, d), True) if isinstance(d, int) else (max(1, batch), False)
    return max(1, batch), False


def _grown(shape: tuple[int, ...], axis: int | None, total: int) -> tuple[int, ...]:
    if axis is None or axis >= len(shape):
        return shape
    return (*shape[:axis], total, *shape[axis + 1 :])


def _role(v: ValueInfo, limits: dict[str, int]) -> str | None:
    """What a rank-2 input of a text model holds: ids, mask, type or position; or None."""
    dtype, name = dtype_of(v), v.name.lower()
    if v.shape is None or len(v.shape) != 2:
        return None
    integer = np.issubdtype(dtype, np.integer)
    if "mask" in name and (integer or dtype == np.bool_ or np.issubdtype(dtype, np.floating)):
        return "mask"
    if not integer:
        return None
    if "position" in name:
        return "position"
    if "type" in name or "segment" in name:
        return "type"
    if "ids" in name or "token" in name or limits.get(v.name, 0) >= 100:
        return "ids"
    return None


@dataclass
class _Text:
    """Makes the text inputs of one batch after another: ids and mask [rows, L]."""

    ids: np.ndarray  # every sample's ids, padded to the longest
    lengths: np.ndarray
    pad: int
    fixed: int | None  # a fixed sequence length
    kind: str  # "texts" or "ids"
    summary: str  # the description's part
    done: int = 0
    uniform: bool = False  # every batch one length, texts packed into it (see `_packed`)

    def make(self, rows: int) -> dict[str, np.ndarray]:
        if self.uniform:
            ids, mask = self._packed(rows)
            length = ids.shape[1]
        else:
            take = np.arange(self.done, self.done + rows) % len(self.ids)
            self.done += rows
            length = self.fixed or max(1, int(self.lengths[take].max()))
            ids = np.full((rows, length), self.pad, dtype=np.int64)
            width = min(length, self.ids.shape[1])
            ids[:, :width] = self.ids[take, :width]
            mask = (np.arange(length)[None, :] < self.lengths[take, None]).astype(np.int64)
        position = np.broadcast_to(np.arange(length, dtype=np.int64), (rows, length)).copy()
        return {"ids": ids, "mask": mask, "type": np.zeros_like(ids), "position": position}

    def _packed(self, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows as long as the longest text (or the fixed length), each filled with whole
        texts one after another and cut at the end: one shape for every batch (ORT's
        Percentile and Entropy calibrations stack them) and no padding, whose masked
        positions put the attention mask's -3.4e38 into the calibrated ranges (a MiniLM's
        static INT8 fell to cosine 0.06 calibrated on padded batches)."""
        length = self.fixed or max(1, int(self.lengths.max()))
        ids = np.full((rows, length), self.pad, dtype=np.int64)
        for r in range(rows):
            filled = 0
            while filled < length:
                i = self.done % len(self.ids)
                self.done += 1
                piece = self.ids[i, : max(1, int(self.lengths[i]))][: length - filled]
                ids[r, filled : filled + len(piece)] = piece
                filled += len(piece)
        return ids, np.ones_like(ids)


def _text_maker(
    v: ValueInfo | None,
    info: ModelInfo,
    plan: InputPlan,
    limits: dict[str, int],
    total: int,
    rng: np.random.Generator,
    purpose: str,
    given: Path | None,
) -> _Text | None:
    """The texts (or token-id rows) for every batch; None without an ids input, or with
    no tokenizer and no embedding to read the vocabulary from (random ids then)."""
    if v is None:
        return None
    fixed = v.shape[1] if v.shape and isinstance(v.shape[1], int) else None
    cap = fixed or min([MAX_TOKENS, *(n for k, n in limits.items() if "position" in k.lower())])
    limit = limits.get(v.name)
    path, note = find_tokenizer(info.path, given), ""
    try:
        texts = _texts_for(purpose, total, rng) if path is not None else []
    except OSError as exc:  # a build that left the texts out: say so, use token ids
        path, note = None, f"; no texts to tokenize ({one_line(exc)})"
    if path is not None:
        tok = load_tokenizer(path)
        ids, lengths, pad = _encode(tok, texts, cap)
        if limit is None or int(ids.max(initial=0)) < limit:
            where = f"{path.parent.name}/{path.name}" if path.parent.name else path.name
            span = f"{lengths.min()}-{lengths.max()} tokens"
            summary = f"{total} {purpose} texts through {where} ({span})"
            return _Text(ids, lengths, pad, fixed, "texts", summary)
        why = f"its ids reach {int(ids.max())}, the model's embedding holds {limit} rows"
        if given is not None:
            raise InputError(f"not this model's tokenizer ({why})", path)
        note = f"; the {path.name} found does not fit: {why}"
    if limit is None:
        return None
    length = fixed or plan.shapes[v.name][1]
    ids, lengths = _zipf_rows(rng, total, length, limit)
    span = f"lengths {lengths.min()}-{lengths.max()}"
    summary = f"{total} token-id rows (Zipf over {limit:,} ids, {span}{note})"
    return _Text(ids, lengths, 0, length, "ids", summary)


def _texts_for(purpose: str, total: int, rng: np.random.Generator) -> list[str]:
    texts = eval_texts(purpose)
    order = np.concatenate([rng.permutation(len(texts)) for _ in range(-(-total // len(texts)))])
    return [texts[i] for i in order[:total]]


def _encode(tok: Tokenizer, texts: list[str], cap: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Ids [n, longest] padded with the tokenizer's pad id, each text's length, the pad."""
    padding: dict[str, Any] | None = tok.padding
    pad = padding.get("pad_id") if padding else None
    if pad is None:
        found = [tok.token_to_id(t) for t in ("[PAD]", "<pad>")]
        pad = next((p for p in found if p is not None), 0)
    tok.no_padding()
    tok.enable_truncation(max_length=cap)
    encoded = [e.ids for e in tok.encode_batch(texts)]
    lengths = np.array([len(e) for e in encoded], dtype=np.int64)
    ids = np.full((len(texts), max(1, int(lengths.max(initial=1)))), pad, dtype=np.int64)
    for row, e in enumerate(encoded):
        ids[row, : len(e)] = e
    return ids, lengths, int(pad)


def _zipf_rows(
    rng: np.random.Generator, n: int, length: int, vocab: int
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ids by a Zipf law over ranks, each its own length, padded with 0."""
    if length < 1:  # an empty sequence (--shape input_ids=1x0): nothing to draw
        return np.zeros((n, 0), dtype=np.int64), np.zeros(n, dtype=np.int64)
    low = RESERVED_IDS if vocab > 5000 else min(1, vocab - 1)
    ranks = np.arange(1, min(vocab - low, ZIPF_RANGE) + 1, dtype=np.float64)
    weights = 1.0 / (ranks + 2.7) ** 1.07
    ids = low + rng.choice(len(ranks), size=(n, length), p=weights / weights.sum())
    shortest = min(MIN_TOKENS, length)
    lengths = np.exp(rng.uniform(np.log(shortest), np.log(length + 1), n)).astype(np.int64)
    lengths = np.clip(lengths, shortest, length)
    bert = vocab > 30000
    ids[:, 0] = 101 if bert else low
    if bert:
        ids[np.arange(n), lengths - 1] = 102
    ids[np.arange(length)[None, :] >= lengths[:, None]] = 0
    return ids.astype(np.int64), lengths


def check_tokenizer(given: str | Path, info: ModelInfo) -> Path:
    """The tokenizer.json `given` names (a file, or a folder holding one), checked: readable,
    and its ids within the model's embedding where the model says how many rows it holds.
    A bad one raises InputError naming the file and the cause in one line."""
    import onnx

    path = find_tokenizer(info.path, given)
    assert path is not None  # (a given path is found or refused)
    tok = load_tokenizer(path)
    model = onnx.load(info.path, load_external_data=False)
    ids = {v.name for v in info.inputs if _role(v, index_limits(model, {v.name})) == "ids"}
    limits = index_limits(model, ids)
    limit = min(limits.values()) if limits else None
    size = tok.get_vocab_size(with_added_tokens=True)
    if limit is not None and size > limit:
        raise InputError(
            f"not this model's tokenizer (its vocabulary holds {size:,} ids, the model's "
            f"embedding {limit:,} rows)",
            path,
        )
    return path
