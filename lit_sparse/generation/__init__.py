"""Generating text from a trained model: prefill + incremental decoding over the caches each
attention pattern states (``LanguageModel.new_cache``), sampling, streaming text, scoring,
loading a run or an exported folder, and the decode benchmark.

- :mod:`~lit_sparse.generation.generate`: ``generate`` (yields tokens as they are made).
- :mod:`~lit_sparse.generation.sampling`: greedy, temperature, top-k, top-p, seeds.
- :mod:`~lit_sparse.generation.text`: token ids to text as characters complete.
- :mod:`~lit_sparse.generation.text_generation`: ``generate_text``: prompts of any lengths
  to text, stopping on stop strings.
- :mod:`~lit_sparse.generation.scoring`: ``score``: log-likelihoods of continuations in
  right-padded batches (exact for every plugin).
- :mod:`~lit_sparse.interop.loading`: a model and tokenizer from a run, a checkpoint or an
  exported folder (``lit_sparse.load_pretrained``).
- :mod:`~lit_sparse_studies.bench.decode`: per-token latency and cache size at long
  contexts (``python -m lit_sparse bench decode``).
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
