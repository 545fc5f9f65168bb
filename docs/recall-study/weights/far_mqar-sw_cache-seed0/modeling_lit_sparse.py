"""lit_sparse's transformers model (remote code; needs ``pip install "lit_sparse[hf]"``)."""

from lit_sparse.interop.hf import LitSparseForCausalLM as _LitSparseForCausalLM

from .configuration_lit_sparse import LitSparseConfig


class LitSparseForCausalLM(_LitSparseForCausalLM):
    config_class = LitSparseConfig
