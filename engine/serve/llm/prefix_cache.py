"""Prefix caching, the form a "cache for frequent similar queries" takes in an LLM service:
prompts that begin alike reuse the KV rows of their common beginning instead of prefilling
it again.

At block granularity, as vLLM's paged KV blocks do: a prompt is cut into blocks of
`block_tokens` tokens, each full block named by a key that stands for the block and
everything before it (a chain hash: vLLM's block hash, or a Mooncake trace's hash_ids), so
a request reuses its longest run of leading blocks that are cached. Chosen over SGLang's
radix tree (which shares at token granularity) because the public traces that carry prefix
structure (Mooncake) give it as block hashes, and a block key is all the simulator and the
engine need to agree on. Eviction: least recently used block first, as vLLM frees blocks.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.errors import ConfigError

MAX_BLOCK_TOKENS = 4096


@dataclass
class PrefixCache:
    """An LRU set of block keys, `capacity` blocks of `block_tokens` tokens."""

    capacity: int
    block_tokens: int
    _lru: OrderedDict[int, None] = field(default_factory=OrderedDict, repr=False)
    lookups: int = 0
    hit_blocks: int = 0

    def __post_init__(self) -> None:
        if self.capacity < 0:
            raise ConfigError(f"a prefix cache of {self.capacity} blocks: must not be negative")
        if not 1 <= self.block_tokens <= MAX_BLOCK_TOKENS:
            raise ConfigError(f"--prefix-block must be 1 to {MAX_BLOCK_TOKENS}, "
                              f"got {self.block_tokens}")  # fmt: skip

    def __len__(self) -> int:
        return len(self._lru)

    def __contains__(self, key: int) -> bool:
        return key in self._lru

    def match(self, keys: Sequence[int], prompt: int) -> int:
        """Tokens of a prompt of `prompt` tokens, whose full blocks are `keys`, that are
        cached: its longest run of leading blocks present (each one touched), leaving at
        least one token to prefill (the pass that makes the first token's logits)."""
        self.lookups += 1
        usable = min(len(keys), (prompt - 1) // self.block_tokens)
        n = 0
        while n < usable and keys[n] in self._lru:
            self._lru.move_to_end(keys[n])
            n += 1
        self.hit_blocks += n
        return n * self.block_tokens

    def insert(self, keys: Sequence[int], prompt: int) -> list[int]:
        """The full blocks of a prefilled prompt, most recently used; the least recently
        used go when the cache is full (returned)."""
        gone: list[int] = []
        if not self.capacity:
            return gone
        for key in keys[: prompt // self.block_tokens]:
            if key in self._lru:
                self._lru.move_to_end(key)
                continue
            self._lru[key] = None
            if len(self._lru) > self.capacity:
                gone.append(self._lru.popitem(last=False)[0])
        return gone


def check_prefix_fits(blocks: int, block_tokens: int, kv_bytes_per_token: float) -> None:
    """A prefix cache larger than this machine's memory is refused, in one line."""
    import psutil

    need = blocks * block_tokens * kv_bytes_per_token
    have = psutil.virtual_memory().total
    if need > have:
        raise ConfigError(
            f"--prefix-cache {blocks}: {blocks:,} blocks of {block_tokens} tokens hold "
            f"{need / 2**30:.1f} GiB of KV rows, more than this machine's "
            f"{have / 2**30:.1f} GiB of memory"
        )
