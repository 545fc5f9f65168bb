"""Benchmarks, as ratios from one run (``python -m lit_sparse bench``): the library side.

- :mod:`~lit_sparse_studies.bench.timing`: how everything is measured (interleaved rounds, peaks,
  copy bandwidth, busy cores, fresh child processes).
- :mod:`~lit_sparse_studies.bench.attention`: one attention call, forward + backward, per plugin.
- :mod:`~lit_sparse_studies.bench.train`: whole AdamW training steps of a model shape.
- :mod:`~lit_sparse_studies.bench.rows`: the processes and rows of those two, and their table.
- :mod:`~lit_sparse_studies.bench.plan`: what a ``bench`` command times, from its parsed options,
  and its run (the command module holds only the parser).
- :mod:`~lit_sparse_studies.bench.decode`: decoding latency and KV-cache size after long contexts.
- :mod:`~lit_sparse_studies.bench.shape`: the model shape those of decoding share.
"""
