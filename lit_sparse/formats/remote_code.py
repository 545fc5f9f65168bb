"""The two small remote-code files a lit_sparse model folder carries, and the ``auto_map``
of its config.json that points at them.

With them, ``transformers.AutoModelForCausalLM.from_pretrained(folder,
trust_remote_code=True)`` works in a process that never imported lit_sparse: transformers
imports the files, which import lit_sparse's own classes (``lit_sparse.interop.hf``, the
``hf`` extra) and subclass them under the folder's module names (so transformers'
``save_pretrained`` copies these files again, and nothing else).
"""

from __future__ import annotations

__all__ = ["AUTO_MAP", "REMOTE_CODE"]

AUTO_MAP = {
    "AutoConfig": "configuration_lit_sparse.LitSparseConfig",
    "AutoModelForCausalLM": "modeling_lit_sparse.LitSparseForCausalLM",
}

_CONFIGURATION = '''"""lit_sparse's transformers config (remote code; needs the `hf` extra:
`pip install "lit_sparse[hf]"`)."""

from lit_sparse.interop.hf import LitSparseConfig as _LitSparseConfig


class LitSparseConfig(_LitSparseConfig):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
'''

_MODELING = '''"""lit_sparse's transformers model (remote code; needs the `hf` extra:
`pip install "lit_sparse[hf]"`): the lit_sparse network, its attention plugin and its
bounded decoding cache."""

from lit_sparse.interop.hf import LitSparseForCausalLM as _LitSparseForCausalLM

from .configuration_lit_sparse import LitSparseConfig


class LitSparseForCausalLM(_LitSparseForCausalLM):
    config_class = LitSparseConfig
'''

REMOTE_CODE = {
    "configuration_lit_sparse.py": _CONFIGURATION,
    "modeling_lit_sparse.py": _MODELING,
}
"""File name -> source, written beside config.json."""
