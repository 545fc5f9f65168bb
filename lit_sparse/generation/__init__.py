"""Generating text from a trained model: prefill, then incremental decoding over each attention
pattern's cache; ``generate_text`` (text to text, stop strings), ``score`` (continuations'
log-likelihoods), int8 and bfloat16 weights for CPU decoding."""

from lit_sparse.generation.generate import Generation, GenerationStats, generate
from lit_sparse.generation.sampling import Sampler
from lit_sparse.generation.scoring import Score, score
from lit_sparse.generation.text_generation import generate_text

__all__ = [
    "Generation",
    "GenerationStats",
    "Sampler",
    "Score",
    "generate",
    "generate_text",
    "score",
]
