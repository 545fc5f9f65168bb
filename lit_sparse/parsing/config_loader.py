"""The YAML loader of every lit_sparse parser (``parser_mode=MODE``): jsonargparse's, with older
attention specs upgraded so a saved config.yaml parses after its plugin's options change."""

from __future__ import annotations

from typing import Any

from jsonargparse import get_loader, set_loader

from lit_sparse.attention.registry import upgrade_attention_specs

__all__ = ["MODE"]

MODE = "lit_sparse_yaml"
_yaml_load = get_loader("yaml")


def _load(text: str) -> Any:
    return upgrade_attention_specs(_yaml_load(text))


set_loader(MODE, _load)
