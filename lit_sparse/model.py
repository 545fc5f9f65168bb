"""The decoder-only language model: pre-norm blocks of attention and SwiGLU, tied head.

x += Attn(RMSNorm(x)); x += FFN(RMSNorm(x)); logits = RMSNorm(x) @ embedding^T. Attention
projects q, k, v (GQA), rotates q and k (RoPE) and hands them to the layer's pattern; with a
decoding cache (``new_cache``) to the layer's decoder. Hub methods: huggingface_hub's mixin."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from huggingface_hub import ModelCard, PyTorchModelHubMixin
from torch import Tensor, nn

from lit_sparse.attention import AttentionPattern, AttentionPlugin, build_attention
from lit_sparse.attention.decoding import DecodeShape, DecodingCache, LayerDecoder
from lit_sparse.config import ModelConfig
from lit_sparse.errors import DamagedFileError
from lit_sparse.formats import pretrained
from lit_sparse.kernels import compiled
from lit_sparse.kernels.mixed_linear import linear


class Linear(nn.Linear):
    """A bias-free projection; its weight may be narrower than the activations (run in theirs)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__(in_features, out_features, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight)


class FusedProjection(nn.Module):
    """Projections of one input as one product, for decoding: their weights are views of one unsaved
    stacked buffer, row-major for the compiled kernel (float32 column-major where the kernel
    cannot be built: torch's product streams that layout faster). Replacing a weight (``.to()``,
    a quantization) ends the fusion (:meth:`active` False)."""

    DTYPES = (torch.float32, torch.bfloat16)

    def __init__(self, projections: list[nn.Linear]):
        super().__init__()
        self.projections = projections  # a plain list: the modules stay their parents'
        stacked = torch.cat([p.weight.detach() for p in projections])  # (sum of outs, in)
        if stacked.dtype == torch.float32 and not compiled.available():
            stacked = stacked.t().contiguous().t()
        self.register_buffer("weight", stacked, persistent=False)
        self.sizes = [p.weight.shape[0] for p in projections]
        for projection, view in zip(projections, self.weight.split(self.sizes), strict=True):
            projection.weight.data = view  # (out, in) rows of the stacked buffer

    @classmethod
    def fuse(cls, projections: list[nn.Linear]) -> FusedProjection | None:
        """The fusion of float32 or bfloat16 CPU ``nn.Linear``s sharing an input, else None."""
        weights = [getattr(p, "weight", None) for p in projections]
        if not all(isinstance(p, nn.Linear) for p in projections) or not all(
            w.device.type == "cpu" and w.dtype == weights[0].dtype in cls.DTYPES for w in weights
        ):
            return None
        return cls(projections)

    def active(self) -> bool:
        """Whether every projection's weight is still its view of the buffer."""
        # pointer arithmetic, not weight.split: every forward asks (a decode step per layer)
        base, first = self.weight.data_ptr(), 0
        step = self.weight.stride(0) * self.weight.element_size()  # bytes from row to row
        for projection, size in zip(self.projections, self.sizes, strict=True):
            if projection.weight.data_ptr() != base + first * step:
                return False
            first += size
        return True

    def forward(self, x: Tensor) -> Tensor:
        """Every projection of ``x``, side by side in the last dim (``split(self.sizes)``)."""
        return linear(x, self.weight)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        if x.dtype == torch.float32 == self.weight.dtype:  # one call, the same arithmetic
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        x_float = x.float()
        normed = x_float * torch.rsqrt(x_float.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


class RotaryEmbedding(nn.Module):
    """Rotate-half RoPE, never saved: sequences from position 0 slice one power-of-two table per
    (device, dtype); a decoding step computes its own position."""

    def __init__(self, head_dim: int, theta: float):
        super().__init__()
        inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self._tables: dict[tuple, tuple[Tensor, Tensor]] = {}
        self._step: tuple | None = None  # (key, cos, sin) of the last decoding position

    def tables(self, length: int, device: torch.device, dtype: torch.dtype):
        """cos and sin (T, D) at positions 0..T-1, at least float32."""
        key = (torch.device(device), dtype)
        table = self._tables.get(key)
        if table is None or table[0].shape[0] < length:
            size = 1 << max(0, length - 1).bit_length()
            table = self._tables[key] = self._build(0, size, device, dtype)
        return table[0][:length], table[1][:length]

    def rotation(self, start: int, length: int, device: torch.device, dtype: torch.dtype):
        """cos and sin (T, D) at positions start..start+T-1."""
        if start == 0:
            return self.tables(length, device, dtype)
        key = (start, length, torch.device(device), dtype)
        if self._step is None or self._step[0] != key:  # one entry: shared by every layer
            self._step = (key, *self._build(start, length, device, dtype))
        return self._step[1], self._step[2]

    def _build(self, start: int, length: int, device: torch.device, dtype: torch.dtype):
        with torch.inference_mode(False):  # cached: must stay usable outside inference
            positions = torch.arange(
                start, start + length, dtype=torch.float64, device=self.inv_freq.device
            )
            angles = torch.outer(positions, self.inv_freq)  # (T, D/2)
            angles = torch.cat([angles, angles], dim=-1)  # (T, D)
            return angles.cos().to(device, dtype), angles.sin().to(device, dtype)

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        """x (B, heads, T, D) rotated by its absolute positions start..start+T-1."""
        dtype = torch.promote_types(x.dtype, torch.float32)
        cos, sin = self.rotation(start, x.shape[-2], x.device, dtype)
        first, second = x.to(dtype).chunk(2, dim=-1)
        return (x * cos + torch.cat([-second, first], dim=-1) * sin).to(x.dtype)


class Attention(nn.Module):
    """Projections, RoPE (unless the pattern is a NoPE layer) and the layer's attention pattern."""

    def __init__(self, config: ModelConfig, pattern: AttentionPattern, rope: RotaryEmbedding):
        super().__init__()
        self.n_heads = config.n_heads
        self.n_kv_heads = config.n_kv_heads
        self.head_dim = config.head_dim
        self.q_proj = Linear(config.d_model, config.n_heads * config.head_dim)
        self.k_proj = Linear(config.d_model, config.n_kv_heads * config.head_dim)
        self.v_proj = Linear(config.d_model, config.n_kv_heads * config.head_dim)
        self.o_proj = Linear(config.n_heads * config.head_dim, config.d_model)
        self.pattern = pattern
        self.rope = rope
        self.qkv: FusedProjection | None = None  # decoding (generation.weights)

    def forward(self, x: Tensor, decoder: LayerDecoder | None = None) -> Tensor:
        batch, length, _ = x.shape
        start = 0 if decoder is None else decoder.position
        if self.qkv is not None and self.qkv.active():
            q, k, v = self._fused_qkv(x, start)
        else:
            q = self.q_proj(x).view(batch, length, self.n_heads, self.head_dim).transpose(1, 2)
            k = self.k_proj(x).view(batch, length, self.n_kv_heads, self.head_dim).transpose(1, 2)
            v = self.v_proj(x).view(batch, length, self.n_kv_heads, self.head_dim).transpose(1, 2)
            if self.pattern.rotary:  # a NoPE layer (a hybrid's global layers) keeps q, k as is
                q, k = self.rope(q, start), self.rope(k, start)
        # q (B, H, T, D); k, v (B, KV, T, D): KV heads stay KV heads
        out = self.pattern(q, k, v) if decoder is None else decoder(q, k, v)  # (B, H, T, D)
        return self.o_proj(out.transpose(1, 2).reshape(batch, length, -1))  # (B, T, d_model)

    def _fused_qkv(self, x: Tensor, start: int) -> tuple[Tensor, Tensor, Tensor]:
        """q, k, v from one product, q and k rotated in one call."""
        batch, length, _ = x.shape
        heads, rotated = self.n_heads + 2 * self.n_kv_heads, self.n_heads + self.n_kv_heads
        qkv = self.qkv(x).view(batch, length, heads, self.head_dim).transpose(1, 2)
        qk = self.rope(qkv[:, :rotated], start) if self.pattern.rotary else qkv[:, :rotated]
        q, k = qk.split([self.n_heads, self.n_kv_heads], dim=1)
        return q, k, qkv[:, rotated:]


class FeedForward(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.gate = Linear(config.d_model, config.ffn_width)
        self.up = Linear(config.d_model, config.ffn_width)
        self.down = Linear(config.ffn_width, config.d_model)
        self.gate_up: FusedProjection | None = None  # decoding (generation.weights)

    def forward(self, x: Tensor) -> Tensor:
        if self.gate_up is not None and self.gate_up.active():
            gate, up = self.gate_up(x).split(self.gate_up.sizes, dim=-1)
        else:
            gate, up = self.gate(x), self.up(x)
        return self.down(F.silu(gate) * up)


class Block(nn.Module):
    """Pre-norm residual attention, then SwiGLU (none when ``ffn_width`` is 0)."""

    def __init__(self, config: ModelConfig, pattern: AttentionPattern, rope: RotaryEmbedding):
        super().__init__()
        self.attn_norm = RMSNorm(config.d_model, config.norm_eps)
        self.attn = Attention(config, pattern, rope)
        if config.ffn_width:
            self.ffn_norm = RMSNorm(config.d_model, config.norm_eps)
            self.ffn = FeedForward(config)
        else:
            self.ffn_norm = self.ffn = None

    def forward(self, x: Tensor, decoder: LayerDecoder | None = None) -> Tensor:
        x = x + self.attn(self.attn_norm(x), decoder)
        return x if self.ffn is None else x + self.ffn(self.ffn_norm(x))


class BlockStep:
    """A block's decoding step of one token as one compiled call (``compiled.layer_step``, CPU,
    float32 activations): its norms, its matrices as the kernel reads them and its decoder's
    reads, gathered once per decoding cache. The modules' own forward is the reference."""

    NONE = torch.zeros(0)

    def __init__(self, block: Block, decoder: LayerDecoder, reads: tuple, stages: tuple):
        ffn_norm = self.NONE if block.ffn_norm is None else block.ffn_norm.weight.detach()
        self.norms = (block.attn_norm.weight.detach(), ffn_norm)
        self.eps = block.attn_norm.eps
        self.heads = (block.attn.n_heads, block.attn.n_kv_heads)
        self.rotary = block.attn.pattern.rotary
        self.decoder, self.reads, self.stages = decoder, reads, stages

    @classmethod
    def of(cls, block: Block, decoder: LayerDecoder) -> BlockStep | None:
        """The block's compiled step, or None where the kernel cannot take it (a pattern with a
        step of its own, weights it cannot read, another device or dtype)."""
        reads = decoder.step_reads()
        if reads is None:
            return None
        attn, ffn = block.attn, block.ffn
        stages = [_fused_or(attn.qkv, [attn.q_proj, attn.k_proj, attn.v_proj]), [attn.o_proj]]
        if ffn is not None:
            stages += [_fused_or(ffn.gate_up, [ffn.gate, ffn.up]), [ffn.down]]
        norms = [block.attn_norm.weight] + ([] if ffn is None else [block.ffn_norm.weight])
        if not all(n.dtype == torch.float32 and n.device.type == "cpu" for n in norms):
            return None
        matrices = [_matrices(modules) for modules in stages]
        if any(m is None for m in matrices):
            return None
        weights, scales = zip(*matrices, strict=True)
        return cls(block, decoder, reads, (list(weights), list(scales)))

    def __call__(self, x: Tensor, rotation: tuple[Tensor, Tensor]) -> None:
        """The next token's step on x (B, d), in place; ``rotation``: its position's cos, sin."""
        position = self.decoder.take_position()
        cache = self.decoder.cache  # after take_position: a reserve may have grown it
        rotation = rotation if self.rotary else (self.NONE, self.NONE)
        compiled.layer_step(
            x, self.norms, self.eps, self.stages, self.heads, rotation, (cache.k, cache.v),
            position, self.reads,
        )  # fmt: skip


def _fused_or(fused: FusedProjection | None, modules: list[nn.Module]) -> list[nn.Module]:
    return [fused] if fused is not None and fused.active() else modules


def _matrices(modules: list[nn.Module]) -> tuple[list[Tensor], list[Tensor]] | None:
    """The matrices of projections whose outputs sit side by side, with an int8 matrix's scales
    (an empty tensor for others), as the compiled step reads them; None where it cannot."""
    weights, scales = [], []
    for module in modules:
        weight = getattr(module, "weight", None)
        if not isinstance(weight, Tensor) or weight.dim() != 2 or weight.device.type != "cpu":
            return None
        scale = getattr(module, "scale", None)
        if weight.dtype == torch.int8 and isinstance(scale, Tensor):
            scales.append(scale)
        elif weight.dtype in FusedProjection.DTYPES and weight.is_contiguous():
            scales.append(BlockStep.NONE)
        else:
            return None
        weights.append(weight.detach())
    return weights, scales


class LanguageModel(
    nn.Module,
    PyTorchModelHubMixin,
    library_name="lit_sparse",
    tags=["lit_sparse", "sparse-attention", "text-generation"],
):
    """Token ids (B, T) -> next-token logits (B, T, vocab_size), for any T."""

    def __init__(self, config: ModelConfig | None = None, attention: AttentionPlugin | None = None):
        super().__init__()
        self.config = config = config or ModelConfig()
        self.attention = attention = build_attention(attention)
        attention.check(config.n_layers)
        rope = RotaryEmbedding(config.head_dim, config.rope_theta)
        self.embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(
            Block(config, attention.build(layer, config.n_layers, config.context_length), rope)
            for layer in range(config.n_layers)
        )
        self.norm = RMSNorm(config.d_model, config.norm_eps)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The paper's init: N(0, std), residual outputs N(0, std / sqrt(2L))."""
        std = self.config.std
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=std)
        for block in self.blocks:
            residual_outs = [block.attn.o_proj] + ([block.ffn.down] if block.ffn else [])
            for residual_out in residual_outs:
                nn.init.normal_(residual_out.weight, std=std / math.sqrt(2 * self.config.n_layers))

    def forward(
        self, idx: Tensor, cache: DecodingCache | None = None, *, logits_to_keep: int = 0
    ) -> Tensor:
        """Logits (B, T, V) of ``idx`` (B, T); with a ``cache`` (:meth:`new_cache`) ``idx``
        continues the cached sequence. ``logits_to_keep`` > 0: the last that many positions only
        (a prefill needs one; a long prompt's (T, vocab) logits would dwarf the rest)."""
        x = self._hidden(idx, cache)  # (B, T, d_model)
        if logits_to_keep > 0:
            x = x[:, -logits_to_keep:]  # the norm too runs at the kept positions only
        return self.head(self.norm(x))

    def new_cache(self, batch: int, max_length: int, fused: bool = True) -> DecodingCache:
        """Every layer's decoder for ``batch`` sequences of up to ``max_length`` tokens, on the
        model's device and activation dtype (a ring of rows, or the whole past: the pattern's).
        ``fused``: a token's step runs each layer as one compiled call where the kernel takes it
        (CPU, float32 activations, no gradients); False: through the modules (the reference)."""
        config, weight = self.config, self.norm.weight
        heads = (config.n_heads, config.n_kv_heads, config.head_dim)
        shape = DecodeShape(batch, *heads, max_length, weight.device, weight.dtype)
        return DecodingCache([pattern.decoder(shape) for pattern in self.patterns], fused)

    @property
    def max_length(self) -> int | None:
        """The longest sequence every layer's pattern supports (None: any length)."""
        return min((p.max_length for p in self.patterns if p.max_length is not None), default=None)

    @property
    def patterns(self) -> list[AttentionPattern]:
        return [block.attn.pattern for block in self.blocks]

    def alphas(self) -> Tensor | None:
        """Every layer's current alpha (L,), or None when a layer's pattern has none."""
        values = self.layer_alphas()
        return torch.stack(list(values.values())) if len(values) == len(self.blocks) else None

    def layer_alphas(self) -> dict[int, Tensor]:
        """The current alpha of each layer that has one (a hybrid's dense layers have none)."""
        return {
            layer: pattern.alpha.detach().float().cpu()
            for layer, pattern in enumerate(self.patterns)
            if pattern.alpha is not None
        }

    def distances(self, length: int | None = None) -> list[list[int]]:
        """Each layer's attended distances at ``length`` (default: the training length)."""
        length = length or self.config.context_length
        return [pattern.distances(length) for pattern in self.patterns]

    def unseen_distances(self, length: int) -> dict[int, list[int]]:
        """Per layer, distances attended at ``length`` that training never used."""
        return {i: pattern.unseen_distances(length) for i, pattern in enumerate(self.patterns)}

    def features(self, idx: Tensor, cache: DecodingCache | None = None) -> Tensor:
        """The last normalised hidden states (B, T, d_model) of ``idx``, in the norms' dtype."""
        return self.norm(self._hidden(idx, cache))

    def _hidden(self, idx: Tensor, cache: DecodingCache | None = None) -> Tensor:
        """The last block's output (B, T, d_model), before the final norm."""
        x = self.embedding(idx).to(self.norm.weight.dtype)  # bfloat16 weights: float32 sums
        steps, rotation = self._block_steps(x, cache)
        for layer, block in enumerate(self.blocks):
            if steps[layer] is not None:  # one compiled call, in place
                steps[layer](x.view(x.shape[0], -1), rotation)
            else:
                x = block(x, None if cache is None else cache.layers[layer])
        return x

    def _block_steps(self, x: Tensor, cache: DecodingCache | None) -> tuple[list, tuple]:
        """Each block's compiled step for one new token of ``x`` (None where a block runs its
        modules: all of them with no cache or ``fused=False``, for a prompt, with gradients, on
        another device or dtype) and the token's rotation."""
        modules = [None] * len(self.blocks), ()
        if cache is None or not cache.fused or x.shape[1] != 1 or cache.position == 0:
            return modules
        if x.dtype != torch.float32 or x.device.type != "cpu" or torch.is_grad_enabled():
            return modules
        if cache.steps is None:
            pairs = zip(self.blocks, cache.layers, strict=True)
            cache.steps = [BlockStep.of(block, decoder) for block, decoder in pairs]
        if not any(cache.steps):
            return modules
        rope = self.blocks[0].attn.rope
        cos, sin = rope.rotation(cache.position, 1, x.device, torch.float32)
        return cache.steps, (cos.view(-1), sin.view(-1))

    def head(self, features: Tensor) -> Tensor:
        """The tied output layer: logits (..., vocab) of features (..., d_model)."""
        if not isinstance(self.embedding, nn.Embedding):  # int8 (generation/quantize.py)
            return self.embedding.project(features)
        return linear(features, self.embedding.weight)

    def train(self, mode: bool = True) -> LanguageModel:
        """nn.Module's ``train``, all or nothing (int8 weights refuse training)."""
        before = [(module, module.training) for module in self.modules()]
        try:
            return super().train(mode)
        except BaseException:
            for module, training in before:
                module.training = training
            raise

    def num_parameters(self, exclude_embedding: bool = False) -> int:
        total = sum(p.numel() for p in self.parameters())
        return total - self.embedding.weight.numel() if exclude_embedding else total

    # -------------------------------------- huggingface_hub mixin (formats/pretrained.py)
    def save_pretrained(self, save_directory, *, tokenizer=None, **kwargs):
        """huggingface_hub's (``push_to_hub`` too), with ``tokenizer``'s files in the folder."""
        pretrained.check_savable(self)  # before huggingface_hub makes or empties the folder
        self._tokenizer_to_save = tokenizer  # read by _save_pretrained, also when pushing
        try:
            return super().save_pretrained(save_directory, **kwargs)
        finally:
            self._tokenizer_to_save = None

    @classmethod
    def from_config(cls, config: dict) -> LanguageModel:
        """A fresh model of a config.json's ``arch`` and ``attention`` values."""
        return cls(ModelConfig.from_dict(config["arch"]), build_attention(config["attention"]))

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, **kwargs) -> LanguageModel:
        """The model of an exported folder or hub repository (``verify_weights=False``: changed
        weights load)."""
        path = str(pretrained_model_name_or_path)
        if os.path.isdir(path):
            pretrained.read_config(path)  # not JSON: one line, not the loader's traceback
        try:
            return super().from_pretrained(pretrained_model_name_or_path, **kwargs)
        except (UnicodeDecodeError, json.JSONDecodeError) as err:  # a hub repository's
            raise DamagedFileError(f"{path!r}: its config.json is not valid JSON ({err})") from None

    def _save_pretrained(self, save_directory: Path) -> None:
        pretrained.save(self, save_directory)
        if (tokenizer := getattr(self, "_tokenizer_to_save", None)) is not None:
            tokenizer.save_pretrained(save_directory)

    @classmethod
    def _from_pretrained(cls, *, model_id: str, config: dict | None = None, **kwargs):
        kwargs.pop("attention", None)  # read from config
        for unused in ("proxies", "resume_download"):  # passed by huggingface_hub < 1.0
            kwargs.pop(unused, None)
        return pretrained.load(cls, model_id, config, **kwargs)

    def generate_model_card(self, *args, **kwargs) -> ModelCard:
        return ModelCard(pretrained.model_card(self))


def token_nll(logits: Tensor, targets: Tensor, ignore_index: int = -100) -> Tensor:
    """Float32 NLL (B, T) of ``targets`` (B, T) under ``logits`` (B, T, V); 0 where ignored."""
    logits, flat = logits.flatten(0, 1).float(), targets.flatten()
    nll = F.cross_entropy(logits, flat, reduction="none", ignore_index=ignore_index)
    return nll.view_as(targets)
