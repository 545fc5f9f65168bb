"""lit_sparse: sparse causal attention for language models on PyTorch Lightning."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lit_sparse._checkout import require_one_checkout
from lit_sparse._lazy import lazy_names

__version__ = "0.1.0"

require_one_checkout(Path(__file__).resolve().parent)  # not two commits' code in one run

if TYPE_CHECKING:  # the public names, each imported on first use (lit_sparse._lazy)
    from lit_sparse.attention import AttentionPlugin as AttentionPlugin
    from lit_sparse.attention import BigBirdAttention as BigBirdAttention
    from lit_sparse.attention import DenseAttention as DenseAttention
    from lit_sparse.attention import FibonacciAttention as FibonacciAttention
    from lit_sparse.attention import HybridAttention as HybridAttention
    from lit_sparse.attention import SlidingWindowAttention as SlidingWindowAttention
    from lit_sparse.attention import build_attention as build_attention
    from lit_sparse.attention import list_attention as list_attention
    from lit_sparse.attention import register_attention as register_attention
    from lit_sparse.config import ModelConfig as ModelConfig
    from lit_sparse.data.tokenizer import Tokenizer as Tokenizer
    from lit_sparse.errors import ConfigError as ConfigError
    from lit_sparse.errors import DamagedFileError as DamagedFileError
    from lit_sparse.errors import LitSparseError as LitSparseError
    from lit_sparse.errors import RunInUseError as RunInUseError
    from lit_sparse.errors import check_format as check_format
    from lit_sparse.errors import interrupted as interrupted
    from lit_sparse.generation import generate as generate
    from lit_sparse.generation import generate_text as generate_text
    from lit_sparse.generation import score as score
    from lit_sparse.interop.loading import load_pretrained as load_pretrained
    from lit_sparse.legacy import current_path as current_path
    from lit_sparse.model import Attention as Attention
    from lit_sparse.model import Block as Block
    from lit_sparse.model import FeedForward as FeedForward
    from lit_sparse.model import FusedProjection as FusedProjection
    from lit_sparse.model import LanguageModel as LanguageModel
    from lit_sparse.runs.analysis import load_run as load_run

__getattr__, __dir__, __all__ = lazy_names(__name__, subpackages=True)
