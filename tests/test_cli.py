"""The CLI: every config parses and trains a few steps; links, names and errors."""

import sys
from pathlib import Path

import pytest
import torch
import yaml

from lit_sparse.attention.registry import expand_attention_names
from lit_sparse.cli import LitSparseCLI, main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def plain_argv(monkeypatch):
    """LightningCLI warns when it sees pytest's own arguments in sys.argv."""
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])


CONFIGS = sorted(p for p in (ROOT / "configs").glob("*.yaml") if p.name != "quickstart.yaml")
TINY = ROOT / "tests" / "configs" / "tiny.yaml"
PAPER_VARIANTS = {"dense", "fixed", "learned", "staggered", "coprime", "pow2", "pow2_staggered"}


def test_there_is_a_config_per_paper_variant():
    assert PAPER_VARIANTS | {"bigbird", "sliding_window"} <= {p.stem for p in CONFIGS}


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_every_config_parses(config, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(config), "--print_config"])
    assert exit_info.value.code == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["trainer"]["max_steps"] == 13000
    assert printed["model"]["tokens_per_step"] == 32768
    assert printed["data"]["init_args"]["seq_len"] == 1024


def test_paper_configs_share_one_recipe():
    """Only the attention plugin and the logger's name differ between paper configs."""
    recipes = {}
    for config in CONFIGS:
        values = yaml.safe_load(config.read_text())
        values["model"].pop("attention")
        values["trainer"]["logger"]["init_args"].pop("name")
        recipes[config.stem] = values
    first = next(iter(recipes.values()))
    assert all(recipe == first for recipe in recipes.values())


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_every_config_trains_a_few_steps(config, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # a hybrid's period (4, 6) is longer than the tiny model's 2 layers: a global layer in 2
    period = ["--model.attention.init_args.every", "2"] if "hybrid" in config.stem else []
    cli = LitSparseCLI(["fit", "--config", str(config), "--config", str(TINY), *period])
    trainer = cli.trainer
    assert trainer.global_step == 4
    loss = trainer.callback_metrics["train/loss"]
    assert torch.isfinite(loss)
    assert torch.isfinite(trainer.callback_metrics["val/loss"])
    run_dir = Path(trainer.log_dir)
    assert run_dir.parent.name == config.stem
    assert (run_dir / "config.yaml").is_file()
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()


def test_links_take_vocab_and_context_from_the_data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cli = LitSparseCLI(["--config", str(CONFIGS[0]), "--config", str(TINY)], run=False)
    assert cli.model.config.context_length == cli.datamodule.seq_len == 48
    assert cli.model.config.vocab_size == cli.datamodule.vocab_size
    assert cli.model.hparams.max_steps == cli.trainer.max_steps == 4
    # derived shape values follow the overridden d_model, not the paper default's
    assert cli.model.config.ffn_width == 86 and cli.model.config.std == pytest.approx(32**-0.5)


@pytest.mark.slow
def test_same_seed_builds_bit_identical_models(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["--config", str(ROOT / "configs" / "learned.yaml"), "--config", str(TINY)]
    first, second = (LitSparseCLI(args, run=False).model.state_dict() for _ in range(2))
    assert all(torch.equal(first[key], second[key]) for key in first)
    third = LitSparseCLI([*args, "--seed_everything", "7"], run=False).model.state_dict()
    assert not torch.equal(first["model.embedding.weight"], third["model.embedding.weight"])


@pytest.mark.parametrize(
    "name", ["fibonacci", "FibonacciAttention", "lit_sparse.FibonacciAttention"]
)
def test_attention_chosen_by_short_name_or_class_path(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = [
        "--config",
        str(ROOT / "configs" / "dense.yaml"),
        "--config",
        str(TINY),
        "--model.attention",
        name,
        "--model.attention.window",
        "3",
    ]
    cli = LitSparseCLI(args, run=False)
    assert type(cli.model.model.attention).__name__ == "FibonacciAttention"
    assert cli.model.model.attention.window == 3


def test_expand_attention_names_rewrites_only_registry_names():
    assert expand_attention_names(["--model.attention", "bigbird"]) == [
        "--model.attention",
        "lit_sparse.attention.bigbird.BigBirdAttention",
    ]
    assert expand_attention_names(["--model.attention=dense"]) == [
        "--model.attention=lit_sparse.attention.dense.DenseAttention"
    ]
    assert expand_attention_names(["--model.attention.help", "fibonacci"]) == [
        "--model.attention.help",
        "lit_sparse.attention.fibonacci.FibonacciAttention",
    ]
    assert expand_attention_names(["--model.attention", "my.Plugin"]) == [
        "--model.attention",
        "my.Plugin",
    ]


def test_plugin_options_are_documented_in_help(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--model.attention", "fibonacci", "--model.attention.help", "fibonacci"])
    help_text = capsys.readouterr().out
    for option in ("--model.attention.window", "--model.attention.schedule", "new_offsets"):
        assert option in help_text
    assert "at the training length T; longer sequences add" in " ".join(help_text.split())


@pytest.mark.slow
def test_an_unreachable_hub_fails_fast_with_one_line(tmp_path, monkeypatch, capsys):
    """HF_HUB_OFFLINE is set for the suite: the paper's hub tokenizer cannot load."""
    monkeypatch.chdir(tmp_path)
    code = main(["fit", "--config", str(ROOT / "configs" / "coprime.yaml")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("error: ") and "configs/data/embedded.yaml" in err[-1]
    assert "Traceback" not in "\n".join(err)
    # the headline command offline is told the exact options, not only a file to use
    assert "add --config configs/quickstart.yaml" in err[-1]
    assert "--data configs/data/embedded.yaml" in err[-1] and "to go online" in err[-1]
