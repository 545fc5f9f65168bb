"""``LitSparseCache``: a transformers ``Cache`` whose layers are lit_sparse's own decoders (each
keeps what its pattern reads). Rows with the same left padding share decoders (:mod:`.padding`).
Built without a length, it keeps the token ids and rebuilds for twice the length when outgrown."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor
from transformers.cache_utils import Cache, CacheLayerMixin

from lit_sparse.attention.decoding import DecodingCache, LayerDecoder
from lit_sparse.errors import ConfigError
from lit_sparse.interop.hf.decoders import rows_of
from lit_sparse.interop.hf.padding import RowLayout, check_positions, row_layout

RIGHT_PADDED = (
    "attention_mask: the prompt is padded on the right, so a row cannot continue after its "
    "padding; pad prompts on the left to generate (tokenizer.padding_side = 'left')"
)


@dataclass
class RowGroup:
    """The batch rows sharing a left padding, and their decoders (positions from their first)."""

    rows: Tensor
    """(G,) int64 indices into the batch."""
    left: int
    decoding: DecodingCache
    tokens: list[Tensor] | None = None
    """The rows' token ids so far (kept only by a cache that grows)."""


class LitSparseCacheLayer(CacheLayerMixin):
    """One layer's decoders, one per row group (they write their rows, not ``update``); the
    cache resets and reorders every layer at once."""

    is_compileable = False
    is_croppable = False
    is_sliding = False
    supports_early_init = False

    def __init__(self, cache: LitSparseCache, index: int):
        super().__init__()
        self._cache, self.index = cache, index

    @property
    def decoders(self) -> list[LayerDecoder]:
        return [group.decoding.layers[self.index] for group in self._cache.groups]

    def lazy_initialization(self, key_states: Tensor, value_states: Tensor) -> None:
        """Nothing to do: the decoders are built from the prompt by the model."""

    def update(self, key_states: Tensor, value_states: Tensor, *args, **kwargs):
        raise NotImplementedError(
            "a LitSparseCache is written by lit_sparse's own decoders inside "
            "LitSparseForCausalLM.forward, not through Cache.update"
        )

    def get_seq_length(self) -> int:
        return self._cache.seen

    def get_max_length(self) -> int:
        """The rows this layer keeps (largest distance + 1), or -1 when it keeps the whole past."""
        decoders = self.decoders
        if not decoders:
            return -1
        rows = decoders[0].cache.capacity
        return rows if rows < decoders[0].shape.max_length else -1

    def get_max_cache_shape(self) -> int:
        """The name of :meth:`get_max_length` before transformers 5 (abstract in 4.56)."""
        return self.get_max_length()

    def get_mask_sizes(self, query_length: int, *args) -> tuple[int, int]:
        return self._cache.seen + query_length, 0

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError(
            "a LitSparseCache cannot be cropped (a ring has overwritten the rows it would "
            "need): assisted decoding is not supported with lit_sparse models"
        )


class LitSparseCache(Cache):
    """Every layer's decoders for one batch of ``network`` (a ``LanguageModel``), built from the
    prompt; ``max_length``: the columns (padding included) it serves (None: it grows)."""

    def __init__(self, network, max_length: int | None = None):
        layers = [LitSparseCacheLayer(self, i) for i in range(network.config.n_layers)]
        super().__init__(layers=layers)
        self.network, self.max_length = network, max_length
        self.grows = max_length is None
        self.groups: list[RowGroup] = []
        self.seen = 0
        self.layout: RowLayout | None = None

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None, position_ids: Tensor | None
    ) -> Tensor:
        """Logits (B, n, V) of the next ``n`` columns of every row; the cache moves on by n."""
        batch, n = input_ids.shape
        if not self.groups:
            return self._prompt(input_ids, attention_mask, position_ids)
        if batch != self.layout.left.numel():
            raise ConfigError(
                f"input_ids: {batch} rows, but the cache holds {self.layout.left.numel()}"
            )
        if self.layout.right_padded:
            raise ConfigError(RIGHT_PADDED)
        if attention_mask is not None:
            self._check_mask(attention_mask, batch, n)
        if position_ids is not None:  # every row's tokens go on past the last column
            endless = torch.full_like(self.layout.left, 1 << 62)
            check_positions(position_ids, RowLayout(self.layout.left, endless, 1 << 62), self.seen)
        self._ensure(self.seen + n)
        steps = []
        for t in range(n):  # the decoders take one token at a time after the prompt
            steps.append(self._run(input_ids[:, t : t + 1], prompt=False))
            self.seen += 1
        return steps[0] if n == 1 else torch.cat(steps, dim=1)

    def _prompt(self, input_ids, attention_mask, position_ids) -> Tensor:
        batch, n = input_ids.shape
        self.layout = layout = row_layout(attention_mask, batch, n)
        check_positions(position_ids, layout, 0)
        self.max_length = total = max(self.max_length or 0, n)
        self.groups = [
            RowGroup(rows, left, self.network.new_cache(int(rows.numel()), total - left))
            for left, rows in layout.groups()
        ]
        logits = self._run(input_ids, prompt=True)
        self.seen = n
        return logits

    def _run(self, input_ids: Tensor, prompt: bool) -> Tensor:
        """Each group's rows through its decoders (the prompt after its padding, or a column);
        a cache that grows keeps the ids."""
        batch, n = input_ids.shape
        logits = None
        for group in self.groups:
            rows = group.rows.to(input_ids.device)
            start = group.left if prompt else 0
            ids = input_ids[rows, start:]
            if self.grows:  # appended in place: a step costs O(1), not a copy of every step's ids
                group.tokens = group.tokens if group.tokens is not None else []
                group.tokens.append(ids)
            part = self.network(ids, group.decoding)
            if len(self.groups) == 1 and start == 0:
                return part
            if logits is None:
                logits = part.new_zeros(batch, n, part.shape[-1])
            logits[rows, start:] = part
        return logits

    def _check_mask(self, attention_mask: Tensor, batch: int, n: int) -> None:
        """A continuation's mask: the prompt's padding unchanged, every new column a token."""
        columns = self.seen + n
        if tuple(attention_mask.shape) != (batch, columns):
            raise ConfigError(
                f"attention_mask: expected shape {(batch, columns)} (the cached {self.seen} "
                f"columns and {n} new), got {tuple(attention_mask.shape)}"
            )
        tokens = (attention_mask[:, : self.seen] != 0).sum(dim=1).cpu()  # O(columns): cheap
        new_ok = bool((attention_mask[:, self.seen :] != 0).all())
        if not new_ok or not torch.equal(tokens, self.seen - self.layout.left):
            raise ConfigError(
                "attention_mask: after the prompt, the padding must stay as the prompt had it "
                "and every new column must be a token (1)"
            )

    def _ensure(self, columns: int) -> None:
        """Rebuild the decoders for twice the length from the seen ids when ``columns`` outgrows."""
        if columns <= self.max_length:
            return
        if not self.grows:
            raise ConfigError(
                f"the cache was built for {self.max_length} columns and this call goes to "
                f"{columns}; build it longer (model.new_cache(max_length)) or without a length"
            )
        self.max_length = total = max(columns, 2 * self.max_length)
        for group in self.groups:
            tokens = torch.cat(group.tokens, dim=1)
            group.decoding = self.network.new_cache(int(group.rows.numel()), total - group.left)
            self.network(tokens, group.decoding)  # the prompt path: the same rows, exactly
            group.tokens = [tokens]

    def get_max_cache_shape(self, layer_idx: int = 0) -> int:
        """The name of ``get_max_length`` before transformers 5: the largest reach."""
        return self.get_max_length()

    def get_max_length(self, layer_idx: int | None = None) -> int:
        """The most rows a layer keeps (largest distance + 1); -1 when one keeps the whole past."""
        layers = self.layers if layer_idx is None else [self.layers[layer_idx]]
        values = [layer.get_max_length() for layer in layers]
        return -1 if -1 in values else max(values)

    def reset(self) -> None:
        self.groups, self.seen, self.layout = [], 0, None
        if self.grows:
            self.max_length = None

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.groups:
            count = self.layout.left.numel()
            self.select_rows(torch.arange(count).repeat_interleave(repeats))

    def select_rows(self, rows: Tensor) -> None:
        """Keep batch rows ``rows`` (in that order; a row may repeat)."""
        if not self.groups:
            return
        rows = rows.detach().cpu().long()
        wanted, groups = rows.tolist(), []
        for group in self.groups:
            place = {row: i for i, row in enumerate(group.rows.tolist())}
            picked = [i for i, row in enumerate(wanted) if row in place]
            if picked:
                places = torch.tensor([place[wanted[i]] for i in picked])
                decoding = rows_of(group.decoding, places)
                tokens = None
                if group.tokens is not None:
                    tokens = [torch.cat(group.tokens, dim=1)[places.to(group.tokens[0].device)]]
                groups.append(RowGroup(torch.tensor(picked), group.left, decoding, tokens))
        self.groups = groups
        layout = self.layout
        self.layout = RowLayout(layout.left[rows], layout.length[rows], layout.columns)

    reorder_cache = batch_select_indices = select_rows

    @property
    def nbytes(self) -> int:
        """Bytes of every decoder's cache buffers."""
        return sum(group.decoding.nbytes for group in self.groups)

    def describe(self) -> str:
        """The caches in words (``LanguageModel.new_cache``'s ``describe``)."""
        if not self.groups:
            return "empty (built from the prompt)"
        return self.groups[0].decoding.describe()

    def fill_random(self, batch: int, length: int, seed: int = 0) -> None:
        """As if ``length`` columns of ``batch`` rows were decoded (random keys and values)."""
        total = max(self.max_length or 0, length + 1)
        self.max_length, self.grows = total, False
        decoding = self.network.new_cache(batch, total)
        decoding.fill_random(length, seed)
        zeros = torch.zeros(batch, dtype=torch.long)
        self.groups = [RowGroup(torch.arange(batch), 0, decoding)]
        self.layout = RowLayout(zeros, torch.full((batch,), length), length)
        self.seen = length
