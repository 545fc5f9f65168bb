"""The remote-code files a model folder carries (the modules beside this one, read as text) and
the ``auto_map`` to them, so transformers loads the folder with ``trust_remote_code=True``."""

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
