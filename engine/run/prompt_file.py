"""Prompts from a JSONL file (`opscope generate --prompts FILE.jsonl`): one JSON object per
line, `{"prompt": "text"}` (the model's tokenizer) or `{"tokens": [ids]}`; blank lines
skipped. The file is untrusted: its size, line count, lengths and token ids are checked,
and a bad line is refused in one line naming the file and the line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from engine.errors import ConfigError

MAX_BYTES = 64 << 20
MAX_PROMPTS = 100_000


def read_prompts(
    path: str, encode: Callable[[str], list[int]], vocab_size: int, max_tokens: int
) -> list[np.ndarray]:
    """Each prompt's token ids (int64), in file order."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"--prompts {path}: not a file")
    if p.stat().st_size > MAX_BYTES:
        raise ConfigError(f"--prompts {path}: larger than {MAX_BYTES >> 20} MiB")
    prompts: list[np.ndarray] = []
    text = p.read_bytes().decode("utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"--prompts {path}, line {number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where}: not JSON ({exc.msg})") from exc
        except RecursionError as exc:
            raise ConfigError(f"{where}: nested too deep") from exc
        if not isinstance(item, dict) or not ({"prompt", "tokens"} & set(item)):
            raise ConfigError(f'{where}: expected {{"prompt": "text"}} or {{"tokens": [ids]}}')
        if "tokens" in item:
            ids = item["tokens"]
            if not isinstance(ids, list) or not all(
                isinstance(t, int) and not isinstance(t, bool) and 0 <= t < vocab_size for t in ids
            ):
                raise ConfigError(f"{where}: tokens must be ids from 0 to {vocab_size - 1}")
        else:
            if not isinstance(item["prompt"], str):
                raise ConfigError(f"{where}: prompt must be text")
            ids = encode(item["prompt"])
        if not ids:
            raise ConfigError(f"{where}: the prompt has no tokens")
        if len(ids) > max_tokens:
            raise ConfigError(f"{where}: {len(ids)} tokens, more than the {max_tokens} that fit")
        prompts.append(np.asarray(ids, np.int64))
        if len(prompts) > MAX_PROMPTS:
            raise ConfigError(f"--prompts {path}: more than {MAX_PROMPTS:,} prompts")
    if not prompts:
        raise ConfigError(f"--prompts {path}: no prompts")
    return prompts
