"""Config files: the checks the CLI and the commands share, and reading only the model (its
shape and attention) and the data's length out of layered configs (files are read by
:func:`lit_sparse.io.yaml_files.load_yaml`, the one YAML loader).

Reading never builds the DataModule, so ``coverage`` and ``flops`` work offline on the paper
configs (whose data names a hub tokenizer). Configs layer as the CLI's ``--config a.yaml
--config b.yaml`` do, the ``model`` section parsed with the LitLanguageModel signature (so
defaults and validation match ``fit``), and the model's context length and vocabulary come from
the data section as the CLI links them.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lit_sparse.attention import AttentionPattern, AttentionPlugin, build_attention
from lit_sparse.attention.registry import expand_attention_names
from lit_sparse.config import ModelConfig
from lit_sparse.errors import ConfigError
from lit_sparse.io.yaml_files import load_yaml
from lit_sparse.parsing.list_options import split_option_values
from lit_sparse.parsing.parse_errors import condense_parse_error

__all__ = [
    "ModelSpec",
    "read_model_config",
]


@dataclass
class ModelSpec:
    """The model a set of config files describes, without its weights."""

    arch: ModelConfig
    """The shape, with ``context_length`` and ``vocab_size`` taken from the data as in fit."""
    attention: AttentionPlugin
    configs: list[str]
    """The config files read, in order."""

    @property
    def seq_len(self) -> int:
        return self.arch.context_length

    def patterns(self) -> list[AttentionPattern]:
        """Every layer's attention pattern (on the CPU; a learned alpha at its start value)."""
        n_layers = self.arch.n_layers
        self.attention.check(n_layers)
        return [self.attention.build(layer, n_layers, self.seq_len) for layer in range(n_layers)]

    def describe(self) -> str:
        """A short name of the attention: ``fibonacci linear W=8``, ``pow2 fixed W=8``."""
        args = self.attention.init_args()
        name = type(self.attention).name or type(self.attention).__name__
        if name == "fibonacci":
            return f"{args['rungs']} {args['schedule']} W={args['window']}"
        shown = " ".join(
            f"{key}={args[key]}" for key in ("window", "n_global", "n_random") if key in args
        )
        return f"{name} {shown}".strip()


def _data_section(value: Any, config: Path) -> dict[str, Any]:
    """A config's ``data`` value as {class_path, init_args}; a string is a YAML file's path,
    relative to the config file (else to the working directory)."""
    if isinstance(value, str):
        candidate = config.parent / value
        path = candidate if candidate.is_file() else Path(value)
        value = load_yaml(path, "data")
    if not isinstance(value, dict):
        raise ConfigError(f"data in {config}: expected a mapping or a YAML path, got {value!r}")
    return {"class_path": value.get("class_path"), "init_args": dict(value.get("init_args") or {})}


def _merge_data(current: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    if current is None or (new["class_path"] and new["class_path"] != current["class_path"]):
        return new
    return {
        "class_path": current["class_path"],
        "init_args": {**current["init_args"], **new["init_args"]},
    }


def _data_class(class_path: str | None):
    if not class_path:
        from lit_sparse.data import TextDataModule

        return TextDataModule
    module, _, name = class_path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        raise ConfigError(f"data.class_path={class_path!r}: cannot be imported") from None


def _default(cls, name: str) -> Any:
    parameter = inspect.signature(cls.__init__).parameters.get(name)
    return None if parameter is None else parameter.default


def model_parser():
    """A jsonargparse parser of the ``model`` section, as the CLI has it (no data, no
    trainer)."""
    from jsonargparse import ArgumentParser

    from lit_sparse.module import LitLanguageModel

    parser = ArgumentParser(exit_on_error=False, default_env=False)
    parser.add_class_arguments(LitLanguageModel, "model")
    return parser


def read_model_config(configs: Sequence[str | Path], overrides: Sequence[str] = ()) -> ModelSpec:
    """The model of layered ``configs`` plus ``overrides``.

    Args:
        configs: config files, later ones layered over earlier ones.
        overrides: CLI-style options: ``--model.<key> value`` (e.g.
            ``--model.attention.init_args.window 12``; registry names work for
            ``--model.attention``) and ``--data.<key> value`` (e.g. ``--data.seq_len 2048``).
    """

    if not configs:
        raise ConfigError("--config: expected at least one config file")
    model_args: list[str] = []
    data: dict[str, Any] | None = None
    for config in map(Path, configs):
        values = load_yaml(config, "--config")
        if values.get("model") is not None:
            model_args += ["--model", yaml.safe_dump(values["model"])]
        if values.get("data") is not None:
            data = _merge_data(data, _data_section(values["data"], config))
    data_overrides: dict[str, Any] = {}
    for key, value in split_option_values(overrides):  # --key v, --key=v, --key v1 v2 ...
        if key.startswith(("--model.", "--data.")) and not value:
            raise ConfigError(f"{key}: expected a value")
        if key.startswith("--model."):
            model_args += [key, value]
        elif key.startswith("--data."):
            name = key[len("--data.") :].removeprefix("init_args.")
            data_overrides[name] = yaml.safe_load(value)
        else:
            raise ConfigError(
                f"{key}: unknown option; allowed here: --model.<key> VALUE and --data.<key> VALUE"
            )
    if data_overrides:
        data = _merge_data(data, {"class_path": None, "init_args": data_overrides})
    parser = model_parser()
    try:
        parsed = parser.parse_args(expand_attention_names(model_args)).model
    except ConfigError:
        raise
    except Exception as err:  # jsonargparse's ArgumentError: condense to one line
        raise ConfigError(condense_parse_error(str(err))) from None
    arch_values = parsed.arch.as_dict() if hasattr(parsed.arch, "as_dict") else dict(parsed.arch)
    if data is not None:
        from lit_sparse.data import checked_seq_len

        cls, init_args = _data_class(data["class_path"]), data["init_args"]
        seq_len = init_args.get("seq_len", _default(cls, "seq_len"))
        arch_values["context_length"] = checked_seq_len(seq_len)
        if hasattr(cls, "model_vocab_size"):
            arch_values["vocab_size"] = cls.model_vocab_size(**init_args)
    arch = ModelConfig.from_dict(arch_values)
    attention = build_attention(None if parsed.attention is None else parsed.attention.as_dict())
    attention.check(arch.n_layers)
    return ModelSpec(arch=arch, attention=attention, configs=[str(c) for c in configs])
