"""The YAML loader of every lit_sparse parser: jsonargparse's, with old attention specs upgraded."""

from __future__ import annotations

from typing import Any

from jsonargparse import get_loader, set_loader

from lit_sparse.attention.registry import upgrade_attention_specs

MODE = "lit_sparse_yaml"
_yaml_load = get_loader("yaml")


def _load(text: str) -> Any:
    return upgrade_attention_specs(_yaml_load(text))


set_loader(MODE, _load)
