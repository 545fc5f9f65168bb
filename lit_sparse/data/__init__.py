"""Data: the weighted text mixture, tokenizer, token cache and embedded corpus (the synthetic
tasks' DataModules are :mod:`lit_sparse.tasks`'). Names import on first use (loading an export
never needs Lightning)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lit_sparse._lazy import lazy_names

if TYPE_CHECKING:
    from lit_sparse.data.datamodule import TextDataModule as TextDataModule
    from lit_sparse.data.datamodule import checked_seq_len as checked_seq_len
    from lit_sparse.data.datamodule import default_cache_dir as default_cache_dir
    from lit_sparse.data.datamodule import embedded_sources as embedded_sources
    from lit_sparse.data.hub import DataSourceUnavailable as DataSourceUnavailable
    from lit_sparse.data.hub import find_unavailable as find_unavailable
    from lit_sparse.data.sources import SourceConfig as SourceConfig

__getattr__, __dir__, __all__ = lazy_names(__name__)
