"""A response cache: LRU of N entries keyed by request content. A response is stored when
it completes; a request whose key is stored is a hit and returns without the model."""

from __future__ import annotations

from collections import OrderedDict


class ResponseCache:
    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"cache size must be 0 (off) or more, got {size}")
        self.size = size
        self._entries: OrderedDict[int, None] = OrderedDict()
        self.hits = 0
        self.lookups = 0
        # whether a key is stored, without counting a lookup or moving it: a C-level test
        # the simulator makes before `lookup` on each of a million arrivals, most misses
        self.holds = self._entries.__contains__

    def lookup(self, key: int) -> bool:
        """Whether `key` is stored (a hit moves it to the most recent place)."""
        if not self.size:
            return False
        self.lookups += 1
        if key in self._entries:
            self._entries.move_to_end(key)
            self.hits += 1
            return True
        return False

    def store(self, key: int) -> None:
        if not self.size:
            return
        entries = self._entries
        if key in entries:
            entries.move_to_end(key)
            return
        entries[key] = None
        if len(entries) > self.size:
            entries.popitem(last=False)

    def store_all(self, keys: list[int]) -> None:
        """`store` each of `keys`, in order (a batch's, as it completes)."""
        if not self.size:
            return
        entries, size = self._entries, self.size
        for key in keys:
            if key in entries:
                entries.move_to_end(key)
            else:
                entries[key] = None
                if len(entries) > size:
                    entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
