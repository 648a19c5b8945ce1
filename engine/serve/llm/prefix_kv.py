"""The real engine's prefix cache: KV rows of whole prompt blocks kept after a prefill and
copied into a new sequence's slot when its prompt begins with the same tokens, so its
prefill starts after them (prefix_cache.py says why blocks, and the LRU).

Keys are computed from the tokens, as vLLM hashes its blocks: each full block's key is a
hash of the previous block's key and this block's token ids, so equal keys mean equal
prompts up to the end of that block. The rows are copied, not shared: the slot cache is one
buffer per layer (slots.py), and a copy of a block's rows costs what reading them once does
(32 KiB a block of 16 tokens on the demo LLM), against a prefill pass over the block.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from engine.backends.genai.slots import SlotCache
from engine.serve.llm.prefix_cache import PrefixCache
from engine.serve.llm.requests import LLMWorkload

BLOCK_SALT = 0xB10C


def block_keys(ids: np.ndarray, block: int) -> tuple[int, ...]:
    """The chain keys of the full blocks of `ids`."""
    keys: list[int] = []
    parent = b"opscope"
    for i in range(ids.size // block):
        digest = hashlib.blake2b(
            parent + np.ascontiguousarray(ids[i * block : (i + 1) * block], np.int64).tobytes(),
            digest_size=8,
        ).digest()
        keys.append(int.from_bytes(digest, "little"))
        parent = digest
    return tuple(keys)


def shared_prompt(
    ids: np.ndarray, keys: tuple[int, ...], block: int, seed: int, low: int, vocab: int
) -> np.ndarray:
    """A request's prompt whose full blocks follow the workload's block keys: the tokens of
    block `key` are the same in every prompt that has it (seeded by the key), the rest of
    the prompt stays the request's own (`ids`)."""
    out = ids.copy()
    for i, key in enumerate(keys[: ids.size // block]):
        rng = np.random.default_rng([seed, BLOCK_SALT, key])
        out[i * block : (i + 1) * block] = rng.integers(low, vocab, block, dtype=np.int64)
    return out


@dataclass
class PrefixKV:
    """`capacity` blocks of `block` tokens of KV rows, least recently used evicted."""

    capacity: int
    block: int
    lru: PrefixCache = field(init=False)
    rows: dict[int, list[np.ndarray]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.lru = PrefixCache(self.capacity, self.block)

    @classmethod
    def for_workload(cls, work: LLMWorkload, capacity: int) -> PrefixKV:
        return cls(capacity, work.block_tokens)

    def take(self, ids: np.ndarray) -> tuple[int, list[list[np.ndarray]]]:
        """Tokens of this prompt found cached, and their blocks' rows (held, so a later
        eviction cannot take them before they are copied in)."""
        keys = block_keys(ids, self.block)
        got = self.lru.match(keys, int(ids.size))
        return got, [self.rows[k] for k in keys[: got // self.block]]

    def restore(self, slots: SlotCache, slot: int, blocks: list[list[np.ndarray]]) -> None:
        """Copy the held blocks' rows into the first tokens of `slot`."""
        b = self.block
        for i, block_rows in enumerate(blocks):
            for buf, part in zip(slots.cache, block_rows, strict=True):
                buf[slot, :, i * b : (i + 1) * b] = part

    def keep(self, slots: SlotCache, slot: int, ids: np.ndarray) -> None:
        """After the prefill of `ids` in `slot`: its full blocks not yet kept are copied out
        and kept; the least recently used go past capacity."""
        b = self.block
        keys = block_keys(ids, b)
        for i, key in enumerate(keys):
            if key not in self.rows:
                self.rows[key] = [buf[slot, :, i * b : (i + 1) * b].copy() for buf in slots.cache]
        for key in self.lru.insert(keys, int(ids.size)):
            self.rows.pop(key, None)
        for key in keys:  # kept now but never admitted (a cache smaller than the prompt)
            if key not in self.lru:
                self.rows.pop(key, None)
