"""Studies: the paper's matrix, numbers and tables, the analyses of a config (coverage, FLOPs),
the retrieval probe's grid, and the seeded presets (their runs, skip/resume, statistics over
seeds, tables, plots). The commands (``matrix``, ``probe``, ``coverage``, ``flops``) parse
their options and call these.

- :mod:`.paper_matrix`, :mod:`.paper_tables`: the paper's
  runs and numbers; Tables 1, 3 and 4 from run folders.
- :mod:`.coverage`, :mod:`.flops`: the distances a config's
  attention reaches; its forward FLOPs per token by term, dense against sparse.
- :mod:`.probe`: the retrieval-probe grid (paper table 2).
- :mod:`.preset`, :mod:`.runner`,
  :mod:`.reports`: the presets' runs, running them, what ``matrix --preset``
  prints.
- :mod:`.seeds`, :mod:`.figures`: what the seeded studies
  share; beside them each study's own: ``cpu_results``, ``cpu_report``, ``cpu_plots`` and
  ``recall_records``, ``recall_results``, ``recall_report``, ``recall_plots``.
"""
