"""Generating text from a trained model: prefill + incremental decoding over the caches each
attention pattern states (``LanguageModel.new_cache``), sampling, streaming text, loading a
run or an exported folder, and the decode benchmark.

- :mod:`~lit_sparse.generation.generate`: ``generate`` (yields tokens as they are made).
- :mod:`~lit_sparse.generation.sampling`: greedy, temperature, top-k, top-p, seeds.
- :mod:`~lit_sparse.generation.text`: token ids to text as characters complete.
- :mod:`~lit_sparse.interop.sources`: a model and tokenizer from a run, a checkpoint or an
  exported folder.
- :mod:`~lit_sparse.bench.decode`: per-token latency and cache size at long
  contexts (``python -m lit_sparse bench decode``).
"""

from lit_sparse.generation.generate import Generation, GenerationStats, generate
from lit_sparse.generation.sampling import Sampler

__all__ = ["Generation", "GenerationStats", "Sampler", "generate"]
