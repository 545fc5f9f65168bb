"""Generating text from a trained model: prefill, then incremental decoding over the caches
each attention pattern states (``LanguageModel.new_cache``).

- ``generate``: tokens as they are made (``prefill``: a prompt in chunks; ``sampling``: greedy,
  temperature, top-k, top-p, seeds); ``text``: token ids to text as characters complete.
- ``text_generation``: ``generate_text``, prompts to text up to stop strings; ``scoring``:
  ``score``, log-likelihoods of continuations in right-padded batches (exact for every plugin).
- ``quantize``, ``weights``: int8 and bfloat16 weights for decoding on a CPU.
- A model and tokenizer from a run or an export: :mod:`lit_sparse.interop.loading`.
"""

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
