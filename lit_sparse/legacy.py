"""Files an earlier version wrote (run configs, a checkpoint's hyperparameters, an export's
config.json) in today's form: translated once where such a file is read, with one note.

Nothing here is imported on the daily path of today's files: configs name today's paths, and
the readers of saved files call :func:`translate` on what they read."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

REMOVED_IN = "0.3.0"
"""The lit_sparse version that reads only today's forms."""

_KERNELS = "compiled csr gather huge_pages mixed_linear reference self_check slots triton_kernel"
MOVED = {
    "lit_sparse.analysis": "lit_sparse.runs.analysis",
    "lit_sparse.checkpoints": "lit_sparse.runs.checkpoints",
    "lit_sparse.data.recall": "lit_sparse.tasks",
    "lit_sparse.data.recall_data": "lit_sparse.tasks",
    "lit_sparse.evaluation.lego": "lit_sparse.tasks.lego",
    "lit_sparse.evaluation.ruler": "lit_sparse.tasks.ruler",
    "lit_sparse.interop.sources": "lit_sparse.interop.loading",
    "lit_sparse.data.probe": "lit_sparse.tasks.probe",
    "lit_sparse.evaluation.probe": "lit_sparse.tasks.probe",
    "lit_sparse.attention.kernels": "lit_sparse.kernels",
    **{
        f"lit_sparse.attention.kernels.{name}": f"lit_sparse.kernels.{name}"
        for name in _KERNELS.split()
    },
    # the synthetic tasks' DataModules, once named in lit_sparse.data
    **{
        f"lit_sparse.data.{name}": f"lit_sparse.tasks.{name}"
        for name in ("MQARDataModule", "DistanceDataModule", "PasskeyDataModule")
    },
}
"""An earlier version's module or class path -> where it lives now (a prefix: the names in a
moved module keep theirs)."""


def current_path(path: Any) -> Any:
    """A dotted path of an earlier version (a key of :data:`MOVED`, or a name in one) as
    today's; any other value unchanged."""
    if not isinstance(path, str) or not path.startswith("lit_sparse."):
        return path
    for old in sorted(MOVED, key=len, reverse=True):  # the longest: kernels.csr, not kernels
        if path == old or path.startswith(old + "."):
            return MOVED[old] + path[len(old) :]
    return path


def translate(data: Any, source: str | None) -> Any:
    """``data`` (a loaded config, hyperparameters or config.json) in today's form: old module
    and class paths (:data:`MOVED`) and the options a registered attention plugin's
    ``upgrade_init_args`` rewrites. ``source`` names the file for a one-line FutureWarning
    when anything changed (None: translate quietly, e.g. to compare with a saved run)."""
    changes: list[str] = []
    today = _walk(data, "", changes)
    if changes and source is not None:
        warnings.warn(
            f"{source} is in an earlier lit_sparse's form, read as today's: "
            f"{'; '.join(dict.fromkeys(changes))} (write the new form there; lit_sparse "
            f"{REMOVED_IN} reads only it)",
            FutureWarning,
            stacklevel=_caller_outside_lit_sparse(),
        )
    return today


def _caller_outside_lit_sparse() -> int:
    """The ``stacklevel`` of the first caller of :func:`translate` outside lit_sparse (a
    notebook's cell, a user's script), which a warning names as where it happened."""
    package, frame, level = str(Path(__file__).parent), sys._getframe(2), 2
    while frame.f_back is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def translate_config_args(args: Sequence[str]) -> list[str]:
    """Command-line ``args`` with each ``--config FILE`` in an earlier version's form given as
    its translation (a YAML string, which ``--config`` takes too), with its note; files in
    today's form are left to the parser as they are."""
    from lit_sparse.io.yaml_files import load_yaml

    out = list(args)
    for i, arg in enumerate(out):
        if arg in ("-c", "--config") and i + 1 < len(out):
            at, flag, path = i + 1, "", out[i + 1]
        elif arg.startswith("--config="):
            at, flag, path = i, "--config=", arg.split("=", 1)[1]
        else:
            continue
        try:
            loaded = load_yaml(path)
        except Exception:  # not a file (a YAML string), or unreadable: the parser says so
            continue
        today = translate(loaded, path)
        if today != loaded:
            out[at] = flag + yaml.safe_dump(today, sort_keys=False)
    return out


_NOT_PLUGINS = ("lightning.", "torch.", "lit_sparse.callbacks.", "lit_sparse.tasks.")
"""Class paths read past without asking the attention registry (loggers, callbacks, data)."""


def _walk(data: Any, where: str, changes: list[str]) -> Any:
    if isinstance(data, list):
        return [_walk(value, f"{where}[{i}]", changes) for i, value in enumerate(data)]
    if isinstance(data, str):
        today = current_path(data)
        if today != data:
            changes.append(f"{data} -> {today}")
        return today
    if not isinstance(data, dict):
        return data
    data = {
        key: _walk(value, f"{where}.{key}" if where else str(key), changes)
        for key, value in data.items()
    }
    class_path, init_args = data.get("class_path"), data.get("init_args")
    if isinstance(class_path, str) and isinstance(init_args, dict):
        plugin = None if class_path.startswith(_NOT_PLUGINS) else _attention_plugin(class_path)
        today = plugin.upgrade_init_args(init_args) if plugin is not None else init_args
        if today != init_args:
            data["init_args"] = today
            changes.append(f"{where}.init_args {_shown_change(init_args, today)}")
    return data


def _attention_plugin(class_path: str):
    """The registered attention plugin ``class_path`` names (name, class name or path)."""
    from lit_sparse.attention.registry import ATTENTION

    registry = ATTENTION.load()
    if class_path in registry:
        return registry[class_path]
    name = class_path.rpartition(".")[2]
    return next((cls for cls in registry.values() if cls.__name__ == name), None)


def _shown_change(old: dict[str, Any], new: dict[str, Any]) -> str:
    """``alpha_min, alpha_max -> schedule: {...}``: the options gone, and those new or changed."""
    gone = [key for key in old if key not in new]
    changed = {key: value for key, value in new.items() if old.get(key, object()) != value}
    shown = yaml.safe_dump(changed, default_flow_style=True, width=10**9, sort_keys=False)
    return f"{', '.join(gone) or 'options'} -> {shown.strip()[1:-1]}"  # without the braces
