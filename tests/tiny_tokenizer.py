"""A WordLevel tokenizer.json small enough to build in a test: [PAD] 0, [UNK] 1, [CLS] 2,
[SEP] 3, then the words given, then filler entries up to `size`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def tiny_tokenizer(path: Path, words: Sequence[str], size: int = 0) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    for w in words:
        vocab.setdefault(w, len(vocab))
    while len(vocab) < size:
        vocab[f"w{len(vocab)}"] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return path
