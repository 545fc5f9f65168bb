"""lit_sparse's transformers model (remote code; needs the `hf` extra:
`pip install "lit_sparse[hf]"`): the lit_sparse network, its attention plugin and its
bounded decoding cache."""

from lit_sparse.interop.hf import LitSparseForCausalLM as _LitSparseForCausalLM

from .configuration_lit_sparse import LitSparseConfig


class LitSparseForCausalLM(_LitSparseForCausalLM):
    config_class = LitSparseConfig
