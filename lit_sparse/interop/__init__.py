"""Leaving lit_sparse: a run's model as a folder others load, and any saved model loaded back.

- :mod:`~lit_sparse.interop.export`: ``python -m lit_sparse export`` (a folder or a GGUF file).
- :mod:`~lit_sparse.interop.loading`: a model and tokenizer from a run, a checkpoint or an export.
- :mod:`~lit_sparse.interop.hf`: the models in Hugging Face transformers (the ``hf`` extra).
- :mod:`~lit_sparse.interop.lm_eval`, :mod:`~lit_sparse.interop.shipped_tasks`: the lm-eval
  model and the tasks lit_sparse ships for it.
- :mod:`~lit_sparse.interop.extras`: the extras' checks.
"""
