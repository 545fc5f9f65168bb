"""A small LRU cache of what a pattern builds per (length, device), so a stream of new lengths
(an evaluation sweep, many prompts) does not grow it."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import torch

V = TypeVar("V")


class LengthCache(Generic[V]):
    """At most ``entries`` values, the least recently used evicted first."""

    def __init__(self, entries: int = 8):
        self.entries = entries
        self._values: OrderedDict[Hashable, V] = OrderedDict()

    def get(self, key: Hashable, build: Callable[[], V]) -> V:
        """The value for ``key``, built outside inference mode (usable in training) if missing."""
        if key in self._values:
            self._values.move_to_end(key)
            return self._values[key]
        with torch.inference_mode(False):
            value = build()
        self._values[key] = value
        while len(self._values) > self.entries:
            self._values.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._values)
