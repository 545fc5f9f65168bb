"""Generating text from a trained model: prefill, then incremental decoding over each attention
pattern's cache; ``generate_text`` (text to text, stop strings), ``score`` (continuations'
log-likelihoods), int8 and bfloat16 weights for CPU decoding."""

from lit_sparse._lazy import reexported
from lit_sparse.generation.generate import Generation as Generation
from lit_sparse.generation.generate import GenerationStats as GenerationStats
from lit_sparse.generation.generate import generate as generate
from lit_sparse.generation.sampling import Sampler as Sampler
from lit_sparse.generation.scoring import Score as Score
from lit_sparse.generation.scoring import score as score
from lit_sparse.generation.text_generation import generate_text as generate_text

__all__ = sorted(reexported(__name__))
