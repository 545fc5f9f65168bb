"""A dense model as one GGUF file for llama.cpp (the ``gguf`` extra), as its converter writes a
Llama: the shape under ``llama.*``, llama.cpp's tensor names (the head tied), q and k rows
interleaved per head (our RoPE rotates halves, llama.cpp's adjacent pairs) and the byte-level
BPE tokenizer (docs/generation.md, "llama.cpp")."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lit_sparse.attention import build_attention
from lit_sparse.errors import ConfigError
from lit_sparse.formats.stock import BLOCK_NAMES, stock_layout_of
from lit_sparse.io.atomic import AtomicFile, storage_error, storage_failure

_FILE_TYPES = {"f32": "ALL_F32", "f16": "MOSTLY_F16", "q8_0": "MOSTLY_Q8_0"}  # gguf.LlamaFileType
GGUF_TYPES = tuple(_FILE_TYPES)
DEFAULT_GGUF_TYPE = "f16"
"""Half f32's bytes, logits within about 1e-3 (llama.cpp's converter's default too)."""

_GPT2_PRE = "gpt-2"  # llama.cpp's name of GPT-2's pre-tokenizer regex


@dataclass(frozen=True)
class GGUFVocab:
    """A byte-level BPE vocabulary as llama.cpp reads it: tokens in id order (None for an unused
    id), merges (``"Ġ t"``), the added tokens' ids and the end-of-text id."""

    tokens: list[str | None]
    merges: list[str]
    control: frozenset[int]
    """Special added tokens (llama.cpp's CONTROL type)."""
    user_defined: frozenset[int] = frozenset()
    """Added tokens that are not special."""
    eos_id: int | None = None

    def padded(self, size: int) -> tuple[list[str], list[int]]:
        """Tokens and types for ``size`` embedding rows, unused ids filled with ``[PADn]``."""
        import gguf

        if len(self.tokens) > size:
            raise ConfigError(
                f"vocab_size={size}: the tokenizer has {len(self.tokens)} tokens, more than the "
                "model's embedding rows"
            )
        tokens = self.tokens + [None] * (size - len(self.tokens))
        kinds = gguf.TokenType
        added = dict.fromkeys(self.user_defined, kinds.USER_DEFINED)
        added.update(dict.fromkeys(self.control, kinds.CONTROL))
        types = [
            kinds.UNUSED if token is None else added.get(i, kinds.NORMAL)
            for i, token in enumerate(tokens)
        ]
        return [f"[PAD{i}]" if t is None else t for i, t in enumerate(tokens)], types


def tokenizer_vocab(tokenizer_json: str, eos_id: int) -> GGUFVocab:
    """The vocabulary of a byte-level BPE tokenizer.json whose end-of-text id is ``eos_id``; any
    other kind is one ConfigError line (llama.cpp would split text differently)."""
    spec = json.loads(tokenizer_json)
    model, pre = spec.get("model") or {}, spec.get("pre_tokenizer") or {}
    byte_level = (
        model.get("type") == "BPE"
        and not model.get("byte_fallback")
        and spec.get("normalizer") is None
        and pre.get("type") == "ByteLevel"
        and pre.get("use_regex", True)
        and not pre.get("add_prefix_space", False)
    )
    if not byte_level:
        kind = f"{model.get('type')} model, {pre.get('type') or 'no'} pre-tokenizer"
        raise ConfigError(
            f"tokenizer ({kind}): GGUF export writes byte-level BPE tokenizers with GPT-2's "
            "pre-tokenizer (ByteLevel, use_regex, no prefix space, no normalizer), as the "
            "embedded one is; use --format lit_sparse or llama for this tokenizer"
        )
    ids = dict(model["vocab"])
    added = {t["id"]: t for t in spec.get("added_tokens", [])}
    ids.update({t["content"]: i for i, t in added.items()})
    by_id = {i: token for token, i in ids.items()}
    tokens = [by_id.get(i) for i in range(max(by_id) + 1)]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    control = frozenset(i for i, t in added.items() if t.get("special"))
    return GGUFVocab(tokens, merges, control, frozenset(added) - control, eos_id)


def byte_vocab() -> GGUFVocab:
    """The 256 byte symbols, one merge and ``<|endoftext|>``: for random-weight GGUFs."""
    from tokenizers import pre_tokenizers

    symbols = sorted(pre_tokenizers.ByteLevel.alphabet())
    return GGUFVocab([*symbols, "Ġt", "<|endoftext|>"], ["Ġ t"], frozenset({257}), eos_id=257)


def check_gguf_type(gguf_type: str) -> str:
    if gguf_type not in GGUF_TYPES:
        raise ConfigError(f"gguf_type={gguf_type!r}: must be one of {', '.join(GGUF_TYPES)}")
    return gguf_type


def check_gguf_model(attention, has_mlp: bool) -> None:
    """One ConfigError line unless the model is dense with an MLP (all llama.cpp runs)."""
    if stock_layout_of(attention.to_config()) != "llama":
        name = type(attention).name or type(attention).__name__
        raise ConfigError(
            f"format='gguf': a {name} model has no GGUF form (llama.cpp runs dense attention "
            "only: only dense exports as gguf); use --format lit_sparse"
        )
    if not has_mlp:
        raise ConfigError(
            "format='gguf': the model's blocks have no MLP (ffn_hidden 0), and every block of "
            "llama.cpp's llama architecture has one; use --format lit_sparse"
        )


def check_trained_dense(model) -> None:
    """One ConfigError line when the weights were trained with attention other than dense."""
    record = getattr(model, "trained_attention", None)
    trained = record.get("attention") if isinstance(record, dict) else None
    if isinstance(trained, dict) and stock_layout_of(trained) != "llama":
        name = trained.get("class_path")
        with contextlib.suppress(Exception):  # a plugin that is no longer installed
            name = type(build_attention(trained)).name or name
        raise ConfigError(
            f"format='gguf': the weights were trained with {name} attention (config.json's "
            "trained_attention), not dense: its attention was edited since, and llama.cpp "
            "would run them with attention they never learned; export it as trained with "
            "--format lit_sparse"
        )


def _interleave_rope(weight: torch.Tensor, heads: int) -> torch.Tensor:
    """q or k rows (heads * D, d_model), rotate-half pairs (i, i + D/2) to (2i, 2i + 1) per head."""
    rows, cols = weight.shape
    half = rows // heads // 2
    return weight.reshape(heads, 2, half, cols).transpose(1, 2).reshape(rows, cols)


def gguf_tensors(model) -> dict[str, torch.Tensor]:
    """gguf name -> float32 tensor (q, k rows interleaved; no output matrix: the head is tied)."""
    import gguf

    config = model.config
    state = {k: v.detach().to("cpu", torch.float32) for k, v in model.state_dict().items()}
    names = gguf.TENSOR_NAMES
    out = {
        names[gguf.MODEL_TENSOR.TOKEN_EMBD] + ".weight": state.pop("embedding.weight"),
        names[gguf.MODEL_TENSOR.OUTPUT_NORM] + ".weight": state.pop("norm.weight"),
    }
    rope_heads = {"ATTN_Q": config.n_heads, "ATTN_K": config.n_kv_heads}
    for layer in range(config.n_layers):
        for ours, (_, member) in BLOCK_NAMES.items():
            tensor = state.pop(f"blocks.{layer}.{ours}")
            if member in rope_heads:
                tensor = _interleave_rope(tensor, rope_heads[member])
            out[names[gguf.MODEL_TENSOR[member]].format(bid=layer) + ".weight"] = tensor
    if state:
        raise ConfigError(f"the model has tensors a GGUF llama holds no place for: {list(state)}")
    return out


def _encoded(tensor: torch.Tensor, gguf_type: str) -> tuple[np.ndarray, Any]:
    """The array to write and its ggml type: norms (1-D) f32, matrices in ``gguf_type``."""
    import gguf

    types = gguf.GGMLQuantizationType
    data = tensor.numpy()
    if data.ndim == 1 or gguf_type == "f32":
        return data, types.F32
    qtype = types.Q8_0 if gguf_type == "q8_0" else types.F16
    try:
        return gguf.quants.quantize(data, qtype), qtype
    except gguf.QuantError:  # rows not a multiple of q8_0's block of 32
        return gguf.quants.quantize(data, types.F16), types.F16


_SHAPE_KEYS = {
    "context_length": "context_length",
    "embedding_length": "d_model",
    "block_count": "n_layers",
    "feed_forward_length": "ffn_width",
    "head_count": "n_heads",
    "head_count_kv": "n_kv_heads",
    "key_length": "head_dim",
    "value_length": "head_dim",
    "rope_dimension_count": "head_dim",
    "rope_freq_base": "rope_theta",
    "layer_norm_rms_eps": "norm_eps",
    "vocab_size": "vocab_size",
}
"""GGUF's llama hyperparameters (``GGUFWriter.add_<key>``) and the ModelConfig field of each."""


def write_gguf(
    model,
    path: str | Path,
    vocab: GGUFVocab,
    gguf_type: str = DEFAULT_GGUF_TYPE,
    name: str | None = None,
) -> int:
    """Write dense ``model`` and ``vocab`` as one GGUF file, atomically; the tensors' bytes."""
    import gguf

    check_gguf_type(gguf_type)
    check_gguf_model(model.attention, bool(model.config.ffn_width))
    check_trained_dense(model)
    config = model.config
    tokens, types = vocab.padded(config.vocab_size)
    target = Path(path)
    handle = AtomicFile(target)  # the writer opens the temporary file by its name
    try:
        writer = gguf.GGUFWriter(handle.temporary, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.LLAMA])
        writer.add_type(gguf.GGUFType.MODEL)
        writer.add_name(name or target.stem)
        writer.add_file_type(gguf.LlamaFileType[_FILE_TYPES[gguf_type]])
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
        for key, field in _SHAPE_KEYS.items():  # llama.cpp's hyperparameters, ours by name
            getattr(writer, f"add_{key}")(getattr(config, field))
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre(_GPT2_PRE)
        writer.add_token_list(tokens)
        writer.add_token_types(types)
        writer.add_token_merges(vocab.merges)
        if vocab.eos_id is not None:
            writer.add_eos_token_id(vocab.eos_id)
            writer.add_bos_token_id(vocab.eos_id)
            writer.add_pad_token_id(vocab.eos_id)
        writer.add_add_bos_token(False)
        writer.add_add_eos_token(False)
        nbytes = 0
        for tensor_name, tensor in gguf_tensors(model).items():
            data, qtype = _encoded(tensor, gguf_type)
            writer.add_tensor(tensor_name, data, raw_dtype=qtype)
            nbytes += data.nbytes
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    except OSError as err:
        handle.abort()
        # a full disk stops numpy's tofile short, with no errno: storage_failure knows it
        raise (storage_failure(err, target) or storage_error(target, err)) from None
    except BaseException:
        handle.abort()
        raise
    handle.commit()  # fsyncs the file (the same inode the writer wrote) and renames it
    return nbytes
