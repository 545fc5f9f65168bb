"""lit_sparse's studies and benchmarks, outside the library core: the paper's run matrix and
tables, the seeded studies (presets, runner, records, reports, plots), a config's coverage
and FLOPs, the retrieval-probe grid, and the benchmarks of ``python -m lit_sparse bench``.

Installed beside ``lit_sparse`` by the same ``pip install``, and built on its public API
only: the library never imports this package, and this package imports no private name
of the library (``tests/test_layers.py`` holds both). Its commands (``matrix``, ``probe``,
``coverage``, ``flops``, ``bench``) join ``python -m lit_sparse`` through the
``lit_sparse.commands`` entry point, as another package's would.
"""
