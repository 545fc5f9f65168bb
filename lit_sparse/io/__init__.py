"""The files lit_sparse writes and reads, at the bottom of every layer.

- :mod:`~lit_sparse.io.atomic`: the one atomic writer (temporary file, fsync, rename) and
  one-line messages for a full disk, a read-only folder or a missing permission.
- :mod:`~lit_sparse.io.yaml_files`: the one YAML loader (config files, run configs).
- :mod:`~lit_sparse.io.tables`: the one Markdown-table printer.
- :mod:`~lit_sparse.io.pretrained`: the weights-only folder a model saves and loads
  (``model.safetensors`` + ``config.json``) and its model card.
"""
