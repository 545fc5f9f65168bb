"""The model's folder format: ``pretrained`` (the folder and its checks), ``stock`` (Llama /
Mistral layouts), ``remote`` (remote-code files), ``transformers_files`` and ``gguf``. It
takes the model or its class as an argument and never imports the network.

Public names (imported on first use): ``stock_config`` and ``to_stock_names`` (a stock
layout's config and weight names), ``write_gguf`` and ``byte_vocab`` (a GGUF file, and the
byte vocabulary of a model trained without a tokenizer)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lit_sparse._lazy import lazy_names

if TYPE_CHECKING:
    from lit_sparse.formats.gguf import byte_vocab as byte_vocab
    from lit_sparse.formats.gguf import write_gguf as write_gguf
    from lit_sparse.formats.stock import stock_config as stock_config
    from lit_sparse.formats.stock import to_stock_names as to_stock_names

__getattr__, __dir__, __all__ = lazy_names(__name__)
