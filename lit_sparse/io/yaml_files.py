"""The one YAML loader: config files and run configs, with one-line errors naming the file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from lit_sparse.errors import ConfigError


def load_yaml(path: str | Path, what: str = "--config") -> dict[str, Any]:
    """A YAML file holding a mapping (empty: {}); else ConfigError naming ``what`` and the file:
    unreadable, not valid YAML (with line and column) or not a mapping."""
    path = Path(path)
    try:
        values = yaml.safe_load(path.read_text())
    except OSError as err:
        raise ConfigError(f"{what} {path}: cannot be read ({err.strerror or err})") from None
    except UnicodeDecodeError as err:  # no strerror: a ValueError, not an OSError
        raise ConfigError(f"{what} {path}: cannot be read (not UTF-8 text: {err})") from None
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        raise ConfigError(
            f"{what} {path}: not valid YAML{at} ({getattr(err, 'problem', err)})"
        ) from None
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ConfigError(
            f"{what} {path}: expected a mapping of options, got {type(values).__name__}"
        )
    return values


def check_config_files(args: Sequence[str]) -> None:
    """One line naming the first ``--config`` file that is missing or invalid YAML."""
    for i, arg in enumerate(args):
        if arg in ("-c", "--config") and i + 1 < len(args):
            load_yaml(args[i + 1])
        elif arg.startswith("--config="):
            load_yaml(arg.split("=", 1)[1])
