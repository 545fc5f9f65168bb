"""The model's folder format, a layer below the network that saves itself in it (it takes the
model or its class as an argument and never imports the network).

- :mod:`~lit_sparse.formats.pretrained`: the folder ``LanguageModel.save_pretrained`` writes and
  ``from_pretrained`` reads, its checks, its card;
- :mod:`~lit_sparse.formats.stock`: the Llama/Mistral layouts, the standard shape keys;
- :mod:`~lit_sparse.formats.remote`: the remote-code files for transformers' Auto classes;
- :mod:`~lit_sparse.formats.transformers_files`: the tokenizer and generation configs;
- :mod:`~lit_sparse.formats.gguf`: a dense model and its tokenizer as one GGUF file.
"""
