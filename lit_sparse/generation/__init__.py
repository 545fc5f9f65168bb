"""Generating text from a trained model: prefill, then incremental decoding over each attention
pattern's cache; ``generate_text`` (text to text, stop strings), ``score`` (continuations'
log-likelihoods), int8 and bfloat16 weights for CPU decoding.

Also ``prefill`` (a prompt into a cache, in chunks) and, imported on first use, ``quantize_int8`` /
``Int8Weight`` / ``check_quantize`` and ``bfloat16_weights`` / ``decoding_layout`` (the
weights and layout decoding runs on)."""

from typing import TYPE_CHECKING

from lit_sparse._lazy import lazy_names
from lit_sparse.generation.generate import Generation as Generation
from lit_sparse.generation.generate import GenerationStats as GenerationStats
from lit_sparse.generation.generate import generate as generate
from lit_sparse.generation.prefill import prefill as prefill  # eager: the submodule's name
from lit_sparse.generation.sampling import Sampler as Sampler
from lit_sparse.generation.scoring import Score as Score
from lit_sparse.generation.scoring import score as score
from lit_sparse.generation.text_generation import generate_text as generate_text

if TYPE_CHECKING:
    from lit_sparse.generation.quantize import Int8Weight as Int8Weight
    from lit_sparse.generation.quantize import check_quantize as check_quantize
    from lit_sparse.generation.quantize import quantize_int8 as quantize_int8
    from lit_sparse.generation.weights import bfloat16_weights as bfloat16_weights
    from lit_sparse.generation.weights import decoding_layout as decoding_layout

__getattr__, __dir__, __all__ = lazy_names(__name__)
