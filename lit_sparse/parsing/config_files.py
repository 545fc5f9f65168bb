"""The model of layered ``--config`` files as ``fit`` parses them, the data never built."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lit_sparse.attention import AttentionPattern, AttentionPlugin, build_attention
from lit_sparse.attention.registry import expand_attention_names
from lit_sparse.config import ModelConfig
from lit_sparse.errors import ConfigError
from lit_sparse.io.yaml_files import load_yaml
from lit_sparse.legacy import translate_config_args
from lit_sparse.parsing.list_options import split_option_values
from lit_sparse.parsing.parse_errors import condense_parse_error


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
            return f"{args['rungs']} {self.attention.schedule.name} W={args['window']}"
        if name == "hybrid":
            local, global_ = (
                dataclasses.replace(self, attention=plugin).describe()
                for plugin in (self.attention.local_attention, self.attention.global_attention)
            )
            layers = self.attention.global_layer_indices(self.arch.n_layers)
            nope = "" if self.attention.global_rope else " NoPE"
            return f"hybrid: {local} local, {global_}{nope} in layers {layers}"
        shown = " ".join(
            f"{key}={args[key]}" for key in ("window", "n_global", "n_random") if key in args
        )
        return f"{name} {shown}".strip()


FIT_SECTIONS = tuple(
    "trainer seed_everything ckpt_path weights_only optimizer lr_scheduler".split()
)
"""The other top-level keys of a fit config: read past, not checked here."""


def model_parser():
    """A parser of fit's configs: ``model``, ``data`` (never built), other sections read past."""
    import lightning.pytorch as pl
    from jsonargparse import ActionConfigFile, ArgumentParser

    from lit_sparse.module import LitLanguageModel

    parser = ArgumentParser(exit_on_error=False, default_env=False)
    parser.add_argument("--config", action=ActionConfigFile)
    parser.add_class_arguments(LitLanguageModel, "model")
    parser.add_subclass_arguments(pl.LightningDataModule, "data", required=False)
    for section in FIT_SECTIONS:
        parser.add_argument(f"--{section}", type=Any, default=None)
    return parser


def read_model_config(configs: Sequence[str | Path], overrides: Sequence[str] = ()) -> ModelSpec:
    """The model of layered ``configs`` plus ``overrides``, parsed as ``fit`` parses them.

    Args:
        configs: config files, later ones layered over earlier ones.
        overrides: ``--model.<key> value`` (registry names work for ``--model.attention``)
            and ``--data.<key> value``, e.g. ``--data.seq_len 2048``.
    """
    if not configs:
        raise ConfigError("--config: expected at least one config file")
    for config in map(Path, configs):
        load_yaml(config, "--config")  # a missing or damaged file: one line naming it
    pairs = split_option_values(overrides)  # --key v, --key=v, --key v1 v2 ... (one value)
    for key, value in pairs:
        if not key.startswith(("--model.", "--data.")):
            raise ConfigError(
                f"{key}: unknown option; allowed here: --model.<key> VALUE and --data.<key> VALUE"
            )
        if not value:
            raise ConfigError(f"{key}: expected a value")
    args = translate_config_args([a for config in configs for a in ("--config", str(config))])
    try:
        options = [arg for pair in pairs for arg in pair]
        parsed = model_parser().parse_args(expand_attention_names([*args, *options]))
    except ConfigError:
        raise
    except Exception as err:  # jsonargparse's ArgumentError: condense to one line
        raise ConfigError(condense_parse_error(str(err))) from None
    model = parsed.model
    arch_values = model.arch.as_dict() if hasattr(model.arch, "as_dict") else dict(model.arch)
    data = parsed.data
    if data is not None and data.class_path:
        from lit_sparse.data import checked_seq_len
        from lit_sparse.io.class_paths import import_class

        init_args = dict(data.init_args or {})
        arch_values["context_length"] = checked_seq_len(init_args.get("seq_len"))
        cls = import_class(data.class_path)
        if hasattr(cls, "model_vocab_size"):
            arch_values["vocab_size"] = cls.model_vocab_size(**init_args)
    arch = ModelConfig.from_dict(arch_values)
    attention = build_attention(None if model.attention is None else model.attention.as_dict())
    attention.check(arch.n_layers)
    return ModelSpec(arch=arch, attention=attention, configs=[str(c) for c in configs])
