"""A checkpoint checked against the command that would use it, before anything is built."""

from __future__ import annotations

import sys
from typing import Any

from jsonargparse import Namespace

from lit_sparse.attention import build_attention
from lit_sparse.config import ModelConfig
from lit_sparse.errors import CheckpointError
from lit_sparse.runs import checkpoint_files
from lit_sparse.runs.locks import is_global_rank_zero
from lit_sparse.runs.resume import changed_values, describe_changes
from lit_sparse.runs.strategy import check_resume_strategy


def _resolved_arch(values: dict) -> dict:
    """Architecture values with derived fields filled in, for comparison."""
    config = ModelConfig.from_dict(dict(values))
    return {**config.to_dict(), "ffn_hidden": config.ffn_width, "init_std": config.std}


def _model_differences(wanted: Namespace, found: dict[str, Any], subcommand: str) -> list[str]:
    lines = []
    if "arch" in found:
        lines += checkpoint_files.differences(
            _resolved_arch(wanted.arch.as_dict()), _resolved_arch(found["arch"]), "arch"
        )
    if "attention" in found:
        config_attention = build_attention(wanted.attention.as_dict())
        ckpt_attention = build_attention(found["attention"])
        if type(config_attention) is not type(ckpt_attention):
            lines.append(
                f"attention: config {type(config_attention).name!r}, "
                f"checkpoint {type(ckpt_attention).name!r}"
            )
        else:
            lines += checkpoint_files.differences(
                config_attention.init_args(), ckpt_attention.init_args(), "attention"
            )
    if subcommand == "fit" and found.get("optimizer", "adamw") != wanted.get("optimizer"):
        lines.append(
            f"optimizer: config {wanted.get('optimizer')!r}, checkpoint "
            f"{found.get('optimizer', 'adamw')!r} (its state cannot carry over)"
        )
    return lines


def check_checkpoint(config: Namespace, subcommand: str, config_filename: str | None) -> None:
    """Check ``config.ckpt_path`` is whole, of the config's model and tokenizer and resumable."""
    ckpt_path = config.get("ckpt_path")
    if subcommand == "fit":
        check_resume_strategy(ckpt_path, config.trainer.get("strategy"))
    checkpoint = checkpoint_files.read_checkpoint(ckpt_path, weights=False)
    found = checkpoint.get("hyper_parameters", {})
    wanted = config.model
    lines = _model_differences(wanted, found, subcommand)
    if lines:
        raise CheckpointError(
            f"ckpt_path={ckpt_path!r} holds a different model than the config: "
            + "; ".join(f"model.{line}" for line in lines)
            + " (use the run's own config.yaml)"
        )
    data = config.get("data")
    init_args = data.get("init_args") if isinstance(data, Namespace) else None
    if init_args is not None and init_args.get("tokenizer"):
        from lit_sparse.data.tokenizer import load_tokenizer

        spec, trained = init_args.tokenizer, checkpoint_files.checkpoint_tokenizer(checkpoint)
        checkpoint_files.check_tokenizer(trained, load_tokenizer(spec).sha256, spec, ckpt_path)
    if subcommand == "fit" and is_global_rank_zero():
        changes = changed_values(wanted.as_dict(), found)
        if changes:
            print(
                f"resuming from step {checkpoint.get('global_step')} with "
                f"{describe_changes(changes)}; they apply from this step and the config of "
                f"the resumed part records them ({config_filename})",
                file=sys.stderr,
            )
