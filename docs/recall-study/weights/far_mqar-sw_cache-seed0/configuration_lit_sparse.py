"""lit_sparse's transformers config (remote code; needs the `hf` extra:
`pip install "lit_sparse[hf]"`)."""

from lit_sparse.interop.hf import LitSparseConfig as _LitSparseConfig


class LitSparseConfig(_LitSparseConfig):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
