"""How command lines and config files become values.

- :mod:`~lit_sparse.parsing.arguments`: the Lightning commands' parser (one-line errors, list
  options, LightningCLI's own optimizer options refused).
- :mod:`~lit_sparse.parsing.parse_errors`: jsonargparse's nested reports as one line.
- :mod:`~lit_sparse.parsing.list_options`: ``--lengths 1024 2048`` on every command.
- :mod:`~lit_sparse.parsing.config_files`: the model described by layered config files, read
  without building the data (``coverage``, ``flops``).
"""
