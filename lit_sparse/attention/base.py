"""Base classes: a plugin (options, one per model) builds one pattern module per layer."""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from lit_sparse.attention.configurable import Configurable
from lit_sparse.attention.decoding import DecodeShape, LayerDecoder, RecomputeDecoder, SlotDecoder
from lit_sparse.attention.length_cache import LengthCache
from lit_sparse.kernels import KeySlots, sparse_attention
from lit_sparse.kernels.masked import masked_is_cheaper
from lit_sparse.kernels.reference import masked_attention, slots_attention, slots_mask


class AttentionPattern(nn.Module, ABC):
    """One layer's causal attention pattern, from RoPE'd q (B, H, T, D) and k, v (B, KV, T, D)
    (the model holds the projections and RoPE)."""

    max_length: int | None = None
    """The longest sequence the pattern supports; None (every built-in): any length."""

    rotary: bool = True
    """Whether the model rotates this layer's q and k (False: a NoPE layer, set by a hybrid)."""

    def __init__(self, training_length: int):
        super().__init__()
        self.training_length = training_length

    @abstractmethod
    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        """The training path: linear in T for sparse patterns."""

    @abstractmethod
    def reference(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        """The O(T^2) dense-mask path; tests compare the training path against it."""

    @abstractmethod
    def distances(self, length: int) -> list[int]:
        """Relative distances this layer attends to at ``length`` (nominal for learned alpha)."""

    def unseen_distances(self, length: int) -> list[int]:
        """Distances attended at ``length`` that the layer never attended at its training length."""
        seen = set(self.distances(min(length, self.training_length)))
        return [d for d in self.distances(length) if d not in seen]

    @property
    def alpha(self) -> Tensor | None:
        """The layer's spacing multiplier, where the pattern has one."""
        return None

    def decoder(self, shape: DecodeShape) -> LayerDecoder:
        """This layer's incremental decoder; the default reruns ``forward`` per token."""
        return RecomputeDecoder(self, shape)


class SlotPattern(AttentionPattern):
    """A pattern described by ``KeySlots``: one sparse kernel, one dense reference."""

    def __init__(self, training_length: int):
        super().__init__(training_length)
        self._cache: LengthCache[KeySlots] = LengthCache()
        self._masks: LengthCache[Tensor] = LengthCache(entries=2)

    @abstractmethod
    def build_slots(self, length: int, device: torch.device) -> KeySlots:
        """The slots at ``length``; computed once per (length, device), a few lengths kept."""

    def slots(self, length: int, device: torch.device) -> KeySlots:
        """The slots at ``length``, checked once when built (ValueError naming this class)."""
        device = torch.device(device)
        return self._cache.get((length, device), lambda: self._checked_slots(length, device))

    def _checked_slots(self, length: int, device: torch.device) -> KeySlots:
        slots = self.build_slots(length, device)
        slots.check(length, f"{type(self).__module__}.{type(self).__qualname__}.build_slots")
        return slots

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        """The slot op, or SDPA with the slots' mask where that is cheaper (a wide window on
        the CPU: :func:`~lit_sparse.kernels.masked.masked_is_cheaper`)."""
        length, device = q.shape[-2], q.device
        slots = self.slots(length, device)
        if masked_is_cheaper(q, slots):
            mask = self._masks.get((length, device), lambda: slots_mask(slots, length))
            return masked_attention(q, k, v, mask)
        return sparse_attention(q, k, v, slots)

    def reference(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return slots_attention(q, k, v, self.slots(q.shape[-2], q.device))

    def decoder(self, shape: DecodeShape) -> LayerDecoder:
        """The slots at the total length name each token's rows (prefix consistency); a
        subclass with its own ``reference`` math reruns its forward."""
        if type(self).reference is not SlotPattern.reference:
            return super().decoder(shape)
        return SlotDecoder(self, shape, self.slots(shape.max_length, shape.device))


class AttentionPlugin(Configurable, ABC):
    """A registered attention family and its options (typed, documented constructor arguments
    kept as attributes of the same name); builds the pattern of every layer."""

    name: ClassVar[str] = ""

    @abstractmethod
    def build(self, layer: int, n_layers: int, training_length: int) -> AttentionPattern:
        """Layer ``layer`` of ``n_layers``, in a model built for ``training_length``."""

    def check(self, n_layers: int) -> None:  # noqa: B027 - optional hook
        """Raise ValueError for options that do not fit a model of ``n_layers`` layers."""

    def new_offsets_policy(self) -> str | None:
        """The policy for distances seen only beyond the training length ("use" or "drop"),
        None for a plugin without a ``new_offsets`` option."""
        return getattr(self, "new_offsets", None) if "new_offsets" in self._options() else None

    def with_new_offsets(self, policy: str) -> AttentionPlugin:
        """This plugin under ``policy`` (a plugin whose ``new_offsets_policy`` is not None)."""
        return type(self)(**{**self._options(), "new_offsets": policy})

    @classmethod
    def conformance_cases(cls, window: int, n_layers: int) -> dict[str, AttentionPlugin]:
        """Optional hook: case id -> plugin for the conformance kit (``lit_sparse.testing``) at
        ``window`` (0, 6, 12); override to cover every option that changes the pattern."""
        return {cls.name or cls.__name__: cls(**_window_argument(cls, window))}

    @classmethod
    def bench_cases(cls, keys: int, window: int) -> dict[str, AttentionPlugin]:
        """Optional hook: row name -> plugin for ``python -m lit_sparse bench``, each attending
        about ``keys`` keys per query (fibonacci's count at window W)."""
        return {cls.name or cls.__name__: cls(**_window_argument(cls, window))}

    @classmethod
    def upgrade_init_args(cls, init_args: Mapping[str, Any]) -> dict[str, Any]:
        """Optional hook: options an older version saved, in today's form. Default: unchanged."""
        return dict(init_args)


def _window_argument(cls: type, window: int) -> dict[str, int]:
    """``{"window": window}`` when ``cls``'s constructor takes a window, else nothing."""
    return {"window": window} if "window" in inspect.signature(cls.__init__).parameters else {}
