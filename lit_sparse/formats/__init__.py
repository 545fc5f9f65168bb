"""The model's folder format, one layer below the network that saves itself in it.

- :mod:`~lit_sparse.formats.pretrained`: the weights-only folder ``LanguageModel.save_pretrained``
  writes and ``from_pretrained`` reads (``model.safetensors`` + ``config.json``), its checks
  and its model card.
- :mod:`~lit_sparse.formats.stock`: the same network in transformers' Llama/Mistral layouts,
  and the standard config.json keys of a ``ModelConfig``.
- :mod:`~lit_sparse.formats.remote`: the remote-code files a folder carries for
  transformers' Auto classes.
- :mod:`~lit_sparse.formats.transformers_files`: the tokenizer and generation configs beside
  an export.

The functions take the model (or its class) as an argument and never import the network.
"""
