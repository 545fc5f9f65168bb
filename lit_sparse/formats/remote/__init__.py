"""The remote-code files a model folder carries (the modules beside this one) and the
``auto_map`` pointing at them, so ``AutoModelForCausalLM.from_pretrained(folder,
trust_remote_code=True)`` works without importing lit_sparse first. They subclass
``lit_sparse.interop.hf``'s classes; lit_sparse reads them as text only."""

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
