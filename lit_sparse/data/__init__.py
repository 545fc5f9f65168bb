"""Data: the weighted text mixture, tokenizer, token cache, embedded corpus, recall tasks.

``TextDataModule`` is the LightningDataModule of text; ``MQARDataModule``,
``DistanceDataModule`` and ``PasskeyDataModule`` are the recall tasks'
(:mod:`lit_sparse.data.recall_data`); ``SourceConfig`` describes one source of the
mixture; ``DataSourceUnavailable`` is raised (one line, naming the offline alternative) when
a source or tokenizer needs the Hugging Face hub and the hub cannot be reached.
"""

from lit_sparse.data.datamodule import (
    TextDataModule,
    checked_seq_len,
    default_cache_dir,
    embedded_sources,
)
from lit_sparse.data.hub import DataSourceUnavailable, find_unavailable
from lit_sparse.data.recall_data import DistanceDataModule, MQARDataModule, PasskeyDataModule
from lit_sparse.data.sources import SourceConfig

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
