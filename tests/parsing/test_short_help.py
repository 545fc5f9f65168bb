"""The short ``--help`` of the Lightning commands (lit_sparse/parsing/short_help.py), on a small
jsonargparse parser laid out as LightningCLI's: the project's words where Lightning's are
generic, the trainer options set most and no others, lists in the form the command line
takes, plain text. The real commands' help: tests/test_help.py."""

from __future__ import annotations

from jsonargparse import ArgumentParser

from lit_sparse.parsing.short_help import CKPT_PATH_EVALUATED, short_help


def parser(command: str) -> ArgumentParser:
    """Groups named as LightningCLI names them: model, trainer and the command's own."""
    parser = ArgumentParser(prog=f"python -m lit_sparse {command}")
    parser.add_argument("--seed_everything", type=int, default=42, help="jsonargparse's words")
    model = parser.add_argument_group("the model", name="model")
    model.add_argument("--model.lr", type=float, default=3e-4, help="the ``peak`` learning rate")
    model.add_argument("--model.betas", type=list[float], default=[0.9, 0.95], help="AdamW's")
    model.add_argument("--model.attention", type=str, default=None, help="generic words")
    trainer = parser.add_argument_group("trainer", name="trainer")
    trainer.add_argument("--trainer.max_steps", type=int, default=None, help="Lightning's")
    trainer.add_argument("--trainer.max_epochs", type=int, default=None, help="Lightning's")
    own = parser.add_argument_group(command, name=command)
    own.add_argument("--ckpt_path", type=str, default=None, help="generic")
    own.add_argument("--weights_only", type=bool, default=None, help="generic")
    return parser


def test_fits_short_help_in_the_projects_words():
    text = short_help(parser("fit"))
    lines = text.splitlines()
    assert lines[0] == "usage: python -m lit_sparse fit [-c CONFIG] [--<option> VALUE ...]"
    flat = " ".join(text.split())
    assert "Train a model: python -m lit_sparse fit --config configs/<variant>.yaml" in flat
    assert "the seed set before the model is built" in flat and "jsonargparse's" not in flat
    assert "the peak learning rate (default: 0.0003)" in flat and "``" not in text
    assert "the attention plugin: a registered name" in flat and "generic words" not in flat
    assert '--ckpt_path CKPT_PATH resume a run: "last"' in flat
    assert "--weights_only" not in text
    assert "  --model.betas BETAS [BETAS ...]" in text and "--model.betas+" not in text
    assert "--trainer.max_steps MAX_STEPS optimizer steps to train" in flat
    assert "--trainer.max_epochs" not in text
    assert "--help=full lists all 9, Lightning's Trainer's among them" in flat


def test_an_evaluating_commands_checkpoint_is_the_one_scored():
    flat = " ".join(short_help(parser("validate")).split())
    assert "Score a checkpoint on every held-out set" in flat
    assert f"--ckpt_path CKPT_PATH {CKPT_PATH_EVALUATED}" in flat
