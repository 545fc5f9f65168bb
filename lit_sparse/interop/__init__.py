"""Leaving lit_sparse: a run's model as a folder others load, and any saved model loaded back.

- :mod:`~lit_sparse.interop.export`: ``python -m lit_sparse export``: a run's weights,
  config, tokenizer and model card.
- :mod:`~lit_sparse.interop.loading`: a model and its tokenizer from a run folder, a
  checkpoint or an exported folder.
- :mod:`~lit_sparse.interop.hf`: the models in Hugging Face transformers (the ``hf`` extra):
  ``LitSparseForCausalLM``, its bounded cache, registration with the Auto classes.
- :mod:`~lit_sparse.formats.transformers_files`: the tokenizer and generation configs an
  export carries for transformers; :mod:`~lit_sparse.interop.extras`: the extras' checks.
"""
