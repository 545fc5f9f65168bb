"""How every layer writes and reads its files, at the bottom of the layers.

- :mod:`~lit_sparse.io.atomic`: the one atomic writer (temporary file, fsync, rename) and
  one-line messages for a full disk, a read-only folder or a missing permission.
- :mod:`~lit_sparse.io.yaml_files`: the one YAML loader (config files, run configs).
- :mod:`~lit_sparse.io.tables`: the one Markdown-table printer.
- :mod:`~lit_sparse.io.forks`: a function's result computed in a fork of this process (the
  peak-memory measurements).
"""
