"""Issue 45: run configs, checkpoints and exports written with the flat schedule options
(before the schedule types, fixtures in legacy_schedules/ written at c05557a) load unchanged
and give the same logits (to float rounding: the fixtures were written on another CPU) and
greedy text, through one translation (lit_sparse.legacy, where the file is read), with a note."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from lit_sparse import LanguageModel
from lit_sparse.attention import build_attention
from lit_sparse.attention.schedules import (
    Coprime,
    Custom,
    Fixed,
    Gaussian,
    Learned,
    Linear,
    from_flat_options,
)
from lit_sparse.generation.generate import generate
from lit_sparse.module import LitLanguageModel
from lit_sparse.parsing.config_files import read_model_config

HERE = Path(__file__).parent / "legacy_schedules"
ROOT = Path(__file__).resolve().parents[2]
CASES = {
    "fixed": Fixed(),
    "coprime": Coprime(0.6, 1.4),
    "custom": Custom([1.7, 0.6, 1.2]),
    "learned": Learned(init=[0.8, 1.3, 1.1]),
    "gaussian": Learned(read=Gaussian(width_start=6.0)),
}
NOTE = r"is in an earlier lit_sparse's form, read as today's: .*attention\.init_args alpha_min"
"""The note naming the flat options gone and the schedule that replaces them."""


def fixture_tokens() -> torch.Tensor:
    return torch.arange(64).remainder(96).unsqueeze(0)  # as make_fixtures.py


@pytest.mark.stored_values
@pytest.mark.parametrize("case", sorted(CASES))
def test_an_old_checkpoint_loads_with_its_schedule_and_gives_the_same_logits(case):
    flat = torch.load(HERE / case / "model.ckpt", weights_only=False)["hyper_parameters"]
    assert "alpha_min" in flat["attention"]["init_args"]  # the file is in the old form
    with pytest.warns(FutureWarning, match=NOTE) as notes:
        model = LitLanguageModel.load_from_checkpoint(HERE / case / "model.ckpt").eval()
    (note,) = [n for n in notes if "earlier lit_sparse" in str(n.message)]  # one for the file
    assert "model.ckpt (hyper_parameters)" in str(note.message)
    assert model.model.attention.schedule == CASES[case]
    with torch.no_grad():
        logits = model.model(fixture_tokens())
    # written on another CPU (a Xeon with AMX): its kernels sum in another order, and an AMD
    # EPYC's AVX-512, AVX2 and scalar kernels differ from its logits (at most 4.7) by up to
    # 2.7e-6, so 1e-5 holds that 4 times over; a wrong translation moves them by about 1
    # (alpha_max 1.4 -> 1.41: 1.1), and the schedule itself is compared exactly above
    torch.testing.assert_close(logits, torch.load(HERE / case / "logits.pt"), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_old_run_config_reads_as_its_checkpoint(case):
    config = HERE / case / "config.yaml"
    assert "alpha_min" in yaml.safe_load(config.read_text())["model"]["attention"]["init_args"]
    with pytest.warns(FutureWarning, match=NOTE) as notes:
        spec = read_model_config([config])
    # one note for the file: its schedule options and its data's class path
    (note,) = [n for n in notes if "earlier lit_sparse" in str(n.message)]
    assert str(note.message).startswith(f"{config} is in an earlier lit_sparse's form")
    assert "\n" not in str(note.message) and "lit_sparse.tasks.MQARDataModule" in str(note.message)
    hparams = torch.load(HERE / case / "model.ckpt", weights_only=False)["hyper_parameters"]
    assert spec.attention == build_attention(hparams["attention"])
    assert spec.attention.schedule == CASES[case]


def test_fit_prints_an_old_run_config_in_todays_form(capsys):
    from lit_sparse.cli import main

    with pytest.raises(SystemExit) as exit_info, pytest.warns(FutureWarning, match=NOTE):
        main(["fit", "--config", str(HERE / "gaussian" / "config.yaml"), "--print_config"])
    assert exit_info.value.code == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["data"]["class_path"] == "lit_sparse.tasks.MQARDataModule"
    attention = printed["model"]["attention"]["init_args"]
    assert "rung_read" not in attention and "alpha_min" not in attention
    schedule = attention["schedule"]
    assert schedule["class_path"] == "lit_sparse.attention.schedules.Learned"
    assert schedule["init_args"]["read"]["init_args"]["width_start"] == 6.0


EXPORTS = torch.load(HERE / "exports.pt")


@pytest.mark.stored_values
@pytest.mark.parametrize("name", sorted(EXPORTS["outputs"]))
def test_an_old_export_gives_the_same_logits_and_greedy_text(name):
    folder = ROOT / "docs" / "recall-study" / "weights" / name
    config = yaml.safe_load((folder / "config.json").read_text())
    assert "schedule" in config["attention"]["init_args"]
    assert isinstance(config["attention"]["init_args"]["schedule"], str)  # the old form
    with pytest.warns(FutureWarning, match=r"config.json is in an earlier .*schedule: \{class"):
        model = LanguageModel.from_pretrained(folder).eval()
    expected, prompt = EXPORTS["outputs"][name], EXPORTS["prompt"]
    # to float rounding: a short prompt of a wide pattern runs masked SDPA, and exports.pt was
    # written on another CPU (a Xeon with AMX); an AMD EPYC's kernels differ from its logits
    # (at most 12) by up to 4.8e-6, about a quarter of what 1e-5 allows there
    with torch.no_grad():
        torch.testing.assert_close(model(prompt), expected["logits"], rtol=1e-5, atol=1e-5)
    greedy = torch.cat(list(generate(model, prompt, 12, temperature=0))).tolist()
    # exactly: along this continuation the top two logits lie at least 0.037 apart, thousands
    # of times what another CPU's rounding moves them
    assert greedy == expected["greedy"]


@pytest.mark.parametrize(
    ("flat", "message"),
    [
        ({"schedule": "fixed", "alpha_init": [1.0]}, "alpha_init is only read by schedule"),
        ({"schedule": "linear", "alphas": [1.0]}, "alphas is only read by schedule 'custom'"),
        ({"schedule": "fixed", "rung_read": "gaussian"}, "rung_read is only read by schedule"),
        ({"schedule": "cosine", "alpha_min": 0.5}, "schedule='cosine'"),
    ],
)
def test_the_translation_refuses_what_the_flat_options_refused(flat, message):
    with pytest.raises(ValueError, match=message):
        from_flat_options(flat)


def test_todays_form_passes_the_translation_unchanged():
    today = build_attention("fibonacci", schedule=Linear(0.7, 1.2)).init_args()
    assert from_flat_options(today) == today
