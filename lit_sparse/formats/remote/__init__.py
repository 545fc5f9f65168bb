"""The two small remote-code files a lit_sparse model folder carries (the modules beside this
one), and the ``auto_map`` of its config.json that points at them.

With them, ``transformers.AutoModelForCausalLM.from_pretrained(folder,
trust_remote_code=True)`` works in a process that never imported lit_sparse: transformers
imports the files, which import lit_sparse's own classes (``lit_sparse.interop.hf``, the
``hf`` extra) and subclass them under the folder's module names (so transformers'
``save_pretrained`` copies these files again, and nothing else). lit_sparse reads them as
text: their import of ``lit_sparse.interop.hf``, above, is the one pyproject.toml lets through.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["AUTO_MAP", "REMOTE_CODE"]

AUTO_MAP = {
    "AutoConfig": "configuration_lit_sparse.LitSparseConfig",
    "AutoModelForCausalLM": "modeling_lit_sparse.LitSparseForCausalLM",
}

REMOTE_CODE = {
    name: (Path(__file__).parent / name).read_text(encoding="utf-8")
    for name in ("configuration_lit_sparse.py", "modeling_lit_sparse.py")
}
"""File name -> source, written beside config.json."""
