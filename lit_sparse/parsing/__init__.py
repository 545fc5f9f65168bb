"""How command lines and config files become values: parser, errors, list options, config files.

Public names (imported on first use): ``read_model_config`` (config files and overrides to a
``ModelSpec``: the model's config and what else the files set) and ``condense_parse_error`` (a
parser's error in one line)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lit_sparse._lazy import lazy_names

if TYPE_CHECKING:
    from lit_sparse.parsing.config_files import ModelSpec as ModelSpec
    from lit_sparse.parsing.config_files import read_model_config as read_model_config
    from lit_sparse.parsing.parse_errors import condense_parse_error as condense_parse_error

__getattr__, __dir__, __all__ = lazy_names(__name__)
