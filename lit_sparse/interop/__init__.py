"""Leaving lit_sparse: a run's model exported (a folder or a GGUF file), any saved model loaded
back, and the transformers and lm-eval integrations."""
