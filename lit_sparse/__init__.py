"""lit_sparse: sparse causal attention for language models on PyTorch Lightning."""
