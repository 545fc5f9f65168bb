"""Export: a run's model as safetensors + config.json + tokenizer + card, loaded back by
``LanguageModel.from_pretrained`` with the checkpoint's logits, a fraction of its size."""

from __future__ import annotations

import json

import pytest
import torch

from lit_sparse import LanguageModel, generate
from lit_sparse.__main__ import main as lit_main
from lit_sparse.attention import AttentionPlugin
from lit_sparse.attention.sliding_window import SlidingWindowPattern
from lit_sparse.errors import ConfigError
from lit_sparse.interop.export import export_run
from lit_sparse.interop.loading import load_source
from lit_sparse.runs.analysis import build_module
from lit_sparse.runs.checkpoint_files import read_checkpoint
from tests.generation.cases import VOCAB, tiny_model


@pytest.fixture(scope="module")
def exported(learned_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "tiny-learned"
    return export_run(learned_run.log_dir, out)


def test_the_folder_holds_weights_config_tokenizer_and_card(exported, learned_run):
    names = sorted(p.name for p in exported.folder.iterdir())
    assert names == [
        "README.md",
        "config.json",
        "configuration_lit_sparse.py",
        "generation_config.json",
        "model.safetensors",
        "modeling_lit_sparse.py",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert sorted(exported.files) == names and exported.format == "lit_sparse"
    config = json.loads((exported.folder / "config.json").read_text())
    assert config["arch"] == learned_run.module.config.to_dict()
    assert config["attention"] == learned_run.module.model.attention.to_config()
    # what transformers and the lm-eval integration read (tests/interop has the loading)
    assert config["model_type"] == "lit_sparse"
    assert config["architectures"] == ["LitSparseForCausalLM"]
    assert config["auto_map"]["AutoModelForCausalLM"] == "modeling_lit_sparse.LitSparseForCausalLM"
    assert config["eos_token_id"] == config["bos_token_id"] == 0  # the embedded <|endoftext|>
    length = learned_run.module.config.context_length
    assert config["training_length"] == config["max_position_embeddings"] == length
    card = (exported.folder / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: lit_sparse\n")
    assert f"optimizer step {exported.step}" in card and "## Held-out perplexity" in card
    assert "## Length extrapolation" in card and "fibonacci" in card
    table = json.loads((learned_run.log_dir / "extrapolation.json").read_text())
    for name, per_length in table["sets"].items():
        ppl = per_length[str(table["training_length"])]["ppl"]
        assert f"| {name} | {ppl:.2f} |" in card


def test_the_card_names_its_task_and_license_and_the_listing_sizes_small_files(exported):
    """Issue 47: the card had no ``pipeline_tag`` or ``license`` (the hub's widget and
    filters read them), and the listing printed "0.00 MB" for six of nine files."""
    import yaml

    from lit_sparse.interop.export import file_size

    card = (exported.folder / "README.md").read_text()
    header = yaml.safe_load(card.split("---\n")[1])
    assert header["pipeline_tag"] == "text-generation" and header["license"] == "apache-2.0"
    listing = exported.to_text()
    assert "0.00 MB" not in listing
    config_line = next(line for line in listing.splitlines() if "config.json" in line)
    assert config_line.rstrip().endswith(" KB"), config_line
    assert [file_size(n) for n in (512, 2048, 3 * 2**20)] == ["512 B", "2.0 KB", "3.00 MB"]


def test_reloaded_logits_equal_the_checkpoints(exported):
    checkpoint = build_module(read_checkpoint(exported.checkpoint)).model
    loaded = LanguageModel.from_pretrained(exported.folder)
    ids = torch.randint(0, checkpoint.config.vocab_size, (2, 70))  # past 2x the training length
    with torch.inference_mode():
        assert torch.equal(loaded(ids), checkpoint(ids))
    assert not loaded.training


def test_the_folder_is_a_fraction_of_the_checkpoint(exported):
    weights = exported.files["model.safetensors"]
    assert weights < 0.45 * exported.checkpoint_bytes  # no optimizer state (2 more copies)
    assert exported.total_bytes < exported.checkpoint_bytes
    assert "of the checkpoint's" in exported.to_text()


def test_generate_reads_an_export_like_its_run(exported, learned_run):
    from_run, from_folder = load_source(learned_run.log_dir), load_source(exported.folder)
    assert from_folder.tokenizer.sha256 == from_run.tokenizer.sha256
    ids = from_run.tokenizer.tokenizer.encode("To be, or not").ids
    a = generate(from_run.model, [ids], 6, temperature=0).run()
    b = generate(from_folder.model, [ids], 6, temperature=0).run()
    assert torch.equal(a, b)


def test_the_export_command(learned_run, tmp_path, capsys):
    out = tmp_path / "exported"
    assert lit_main(["export", str(learned_run.log_dir), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "model.safetensors" in printed and str(out) in printed
    assert lit_main(["export", str(learned_run.log_dir), "--out", str(out)]) == 0  # again: ok


def test_export_refuses_a_folder_with_other_files_and_a_missing_run(learned_run, tmp_path, capsys):
    other = tmp_path / "notes"
    other.mkdir()
    (other / "mine.txt").write_text("keep me")
    assert lit_main(["export", str(learned_run.log_dir), "--out", str(other)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: out=") and "not an earlier export" in err and "\n" not in err
    assert (other / "mine.txt").read_text() == "keep me"
    assert lit_main(["export", str(tmp_path / "nope"), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: path={str(tmp_path / 'nope')!r}: no such run folder or checkpoint"


class LocalWindow(AttentionPlugin):
    """A plugin from "another package" (this test module), never registered."""

    def __init__(self, window: int = 2):
        self.window = window

    def build(self, layer, n_layers, training_length):
        return SlidingWindowPattern(training_length, self.window)


def test_a_plugin_from_another_package_is_recorded_by_class_path(tmp_path):
    model = tiny_model(LocalWindow(window=3))
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["attention"] == {
        "class_path": f"{__name__}.LocalWindow",
        "init_args": {"window": 3},
    }
    loaded = LanguageModel.from_pretrained(tmp_path)
    assert type(loaded.attention) is LocalWindow and loaded.attention.window == 3
    ids = torch.randint(0, VOCAB, (1, 20))
    with torch.inference_mode():
        assert torch.equal(loaded(ids), model(ids))
    config["attention"]["class_path"] = "sparse_plugins_not_installed.attention.LocalWindow"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError) as err:
        LanguageModel.from_pretrained(tmp_path)
    message = str(err.value)
    assert "cannot import 'sparse_plugins_not_installed.attention'" in message
    assert "install the package" in message and "\n" not in message


def test_loading_refuses_a_folder_that_is_not_an_export(tmp_path):
    model = tiny_model(LocalWindow())
    model.save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(ConfigError, match="no model.safetensors beside its config.json"):
        LanguageModel.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 3}))
    with pytest.raises(ConfigError, match="config.json format None; expected a folder written"):
        LanguageModel.from_pretrained(tmp_path)
