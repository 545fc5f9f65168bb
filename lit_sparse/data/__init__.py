"""Data: the weighted text mixture, tokenizer, token cache and embedded corpus.

The synthetic tasks' data modules live in :mod:`lit_sparse.tasks` and are named here for
configs. Names import on first use (loading an export never needs Lightning)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lit_sparse._lazy import lazy_names

_PUBLIC = {
    "DataSourceUnavailable": "lit_sparse.data.hub",
    "find_unavailable": "lit_sparse.data.hub",
    "DistanceDataModule": "lit_sparse.tasks.distance",
    "MQARDataModule": "lit_sparse.tasks.mqar",
    "PasskeyDataModule": "lit_sparse.tasks.passkey_retrieval",
    "SourceConfig": "lit_sparse.data.sources",
    "TextDataModule": "lit_sparse.data.datamodule",
    "checked_seq_len": "lit_sparse.data.datamodule",
    "default_cache_dir": "lit_sparse.data.datamodule",
    "embedded_sources": "lit_sparse.data.datamodule",
}
"""public name -> the module it comes from."""

__all__ = [
    "DataSourceUnavailable",
    "DistanceDataModule",
    "MQARDataModule",
    "PasskeyDataModule",
    "SourceConfig",
    "TextDataModule",
    "checked_seq_len",
    "default_cache_dir",
    "embedded_sources",
    "find_unavailable",
]

if TYPE_CHECKING:
    from lit_sparse.data.datamodule import (
        TextDataModule,
        checked_seq_len,
        default_cache_dir,
        embedded_sources,
    )
    from lit_sparse.data.hub import DataSourceUnavailable, find_unavailable
    from lit_sparse.data.sources import SourceConfig


__getattr__, __dir__ = lazy_names(__name__, _PUBLIC)
