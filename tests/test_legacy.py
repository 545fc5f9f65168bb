"""Files an earlier version wrote (run configs, checkpoints, exports) name module paths that
have moved: they are read in today's form where the file is read (lit_sparse.legacy), with one
note naming the file, each old form and its new one; the old paths themselves are gone, and
no config in configs/ names one; run configs, checkpoints and exports written with the flat
schedule options load unchanged, with the same logits and greedy text (issue 45)."""

from __future__ import annotations

import importlib
import shutil
import sys
import warnings
from pathlib import Path

import pytest
import torch
import yaml

from lit_sparse import LanguageModel
from lit_sparse.attention import build_attention
from lit_sparse.attention.schedules import Coprime, Custom, Fixed, Gaussian, Learned
from lit_sparse.generation.generate import generate
from lit_sparse.io.class_paths import import_class
from lit_sparse.legacy import MOVED, REMOVED_IN, current_path, translate, translate_config_args
from lit_sparse.module import LitLanguageModel
from lit_sparse.parsing.config_files import read_model_config

ROOT = Path(__file__).resolve().parents[1]
LEGACY = ROOT / "tests" / "attention" / "legacy_schedules"


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_names_what_lives_at_its_new_home(old):
    new = current_path(old)
    assert new == MOVED[old]
    found = import_class(new) or importlib.import_module(new)
    assert found is not None


@pytest.mark.parametrize(
    ("old", "name"),
    [
        ("lit_sparse.data.recall_data", "MQARDataModule"),
        ("lit_sparse.data.recall_data", "recall_data_from_config"),
        ("lit_sparse.data.recall", "multiquery_ar"),
        ("lit_sparse.data.recall", "passkey"),
        ("lit_sparse.data", "DistanceDataModule"),
        ("lit_sparse.evaluation.lego", "lego_items"),
        ("lit_sparse.attention.kernels.csr", "CHUNK_BYTES"),
    ],
)
def test_a_name_in_a_moved_module_keeps_its_name(old, name):
    """Run configs saved before the task registry name ``lit_sparse.data.recall_data.*``."""
    new = current_path(f"{old}.{name}")
    assert new.rpartition(".")[2] == name and not new.startswith(old + ".")
    if name != "CHUNK_BYTES":
        import lit_sparse.tasks

        assert import_class(new) is getattr(lit_sparse.tasks, name)


@pytest.mark.parametrize(
    "old", ["lit_sparse.analysis", "lit_sparse.checkpoints", "lit_sparse.tables"]
)
def test_the_old_module_paths_no_longer_import(old):
    sys.modules.pop(old, None)
    with pytest.raises(ModuleNotFoundError, match=old):
        importlib.import_module(old)


def test_the_data_package_names_no_task():
    import lit_sparse.data

    assert not {"MQARDataModule", "DistanceDataModule", "PasskeyDataModule"} & set(
        lit_sparse.data.__all__
    )
    with pytest.raises(AttributeError):
        lit_sparse.data.MQARDataModule  # noqa: B018


def test_no_config_names_an_old_path():
    def strings(value):
        if isinstance(value, dict):
            for item in value.values():
                yield from strings(item)
        elif isinstance(value, list):
            for item in value:
                yield from strings(item)
        elif isinstance(value, str):
            yield value

    found = [
        f"{path.relative_to(ROOT)}: {value}"
        for path in sorted((ROOT / "configs").rglob("*.yaml"))
        for value in strings(yaml.safe_load(path.read_text()))
        if current_path(value) != value
    ]
    assert found == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # today's form: no note
        for path in sorted((ROOT / "configs").rglob("*.yaml")):
            args = ["--config", str(path)]
            assert translate_config_args(args) == args


def test_the_note_is_one_line_naming_the_file_and_each_change_and_this_caller():
    saved = {
        "trainer": {"plugins": [{"class_path": "lit_sparse.checkpoints.AtomicCheckpointIO"}]},
        "data": {"class_path": "lit_sparse.data.MQARDataModule", "init_args": {"seq_len": 64}},
    }
    with pytest.warns(FutureWarning) as notes:
        today = translate(saved, "runs/x/config.yaml")
    assert today == {
        "trainer": {"plugins": [{"class_path": "lit_sparse.runs.checkpoints.AtomicCheckpointIO"}]},
        "data": {"class_path": "lit_sparse.tasks.MQARDataModule", "init_args": {"seq_len": 64}},
    }
    (note,) = notes
    assert str(note.message) == (
        "runs/x/config.yaml is in an earlier lit_sparse's form, read as today's: "
        "lit_sparse.checkpoints.AtomicCheckpointIO -> lit_sparse.runs.checkpoints."
        "AtomicCheckpointIO; lit_sparse.data.MQARDataModule -> lit_sparse.tasks.MQARDataModule "
        f"(write the new form there; lit_sparse {REMOVED_IN} reads only it)"
    )
    assert Path(note.filename) == Path(__file__)  # the user's line, not lit_sparse's
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert translate(saved, None) == today  # quietly: to compare with a saved run
        assert translate(today, "runs/y/config.yaml") == today


def old_run(tmp_path: Path) -> Path:
    """A run folder an earlier version wrote: flat schedule options, lit_sparse.data's task,
    lit_sparse.checkpoints' CheckpointIO."""
    run = tmp_path / "custom" / "version_0"
    (run / "checkpoints").mkdir(parents=True)
    shutil.copy(LEGACY / "custom" / "model.ckpt", run / "checkpoints" / "last.ckpt")
    text = (LEGACY / "custom" / "config.yaml").read_text()
    text = text.replace("lit_sparse.runs.checkpoints.", "lit_sparse.checkpoints.")
    assert "lit_sparse.checkpoints.AtomicCheckpointIO" in text and "data.MQARData" in text
    (run / "config.yaml").write_text(text)
    return run


def test_an_old_run_loads_with_a_note_for_each_file(tmp_path):
    from lit_sparse.attention.schedules import Custom
    from lit_sparse.runs.analysis import load_run

    run_dir = old_run(tmp_path)
    with pytest.warns(FutureWarning) as notes:
        run = load_run(run_dir)
    assert sorted(str(n.message).split(" is in ")[0] for n in notes) == [
        f"{run_dir / 'checkpoints' / 'last.ckpt'} (hyper_parameters)",
        str(run_dir / "config.yaml"),
    ]
    assert run.config["data"]["class_path"] == "lit_sparse.tasks.MQARDataModule"
    plugins = run.config["trainer"]["plugins"]
    assert plugins == [{"class_path": "lit_sparse.runs.checkpoints.AtomicCheckpointIO"}]
    assert run.model.attention.schedule == Custom([1.7, 0.6, 1.2])


def test_fit_reads_an_old_run_config_in_todays_form(tmp_path, capsys):
    from lit_sparse.cli import main

    config = old_run(tmp_path) / "config.yaml"
    with pytest.raises(SystemExit) as exit_info, pytest.warns(FutureWarning) as notes:
        main(["fit", "--config", str(config), "--print_config"])
    assert exit_info.value.code == 0
    (note,) = [n for n in notes if "earlier lit_sparse" in str(n.message)]
    assert str(note.message).startswith(f"{config} is in an earlier lit_sparse's form")
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["data"]["class_path"] == "lit_sparse.tasks.MQARDataModule"
    plugins = printed["trainer"]["plugins"]
    assert [p["class_path"] for p in plugins] == ["lit_sparse.runs.checkpoints.AtomicCheckpointIO"]
    assert "alpha_min" not in printed["model"]["attention"]["init_args"]


# The flat schedule options (issue 45): run configs, checkpoints and exports written before
# the schedule types (fixtures in attention/legacy_schedules/, written at c05557a) load
# unchanged and give the same logits (to float rounding: the fixtures were written on another
# CPU) and greedy text, through the one translation where the file is read, with a note.

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
    flat = torch.load(LEGACY / case / "model.ckpt", weights_only=False)["hyper_parameters"]
    assert "alpha_min" in flat["attention"]["init_args"]  # the file is in the old form
    with pytest.warns(FutureWarning, match=NOTE) as notes:
        model = LitLanguageModel.load_from_checkpoint(LEGACY / case / "model.ckpt").eval()
    (note,) = [n for n in notes if "earlier lit_sparse" in str(n.message)]  # one for the file
    assert "model.ckpt (hyper_parameters)" in str(note.message)
    assert model.model.attention.schedule == CASES[case]
    with torch.no_grad():
        logits = model.model(fixture_tokens())
    # written on another CPU (a Xeon with AMX): its kernels sum in another order, and an AMD
    # EPYC's AVX-512, AVX2 and scalar kernels differ from its logits (at most 4.7) by up to
    # 2.7e-6, so 1e-5 holds that 4 times over; a wrong translation moves them by about 1
    # (alpha_max 1.4 -> 1.41: 1.1), and the schedule itself is compared exactly above
    torch.testing.assert_close(
        logits, torch.load(LEGACY / case / "logits.pt"), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_old_run_config_reads_as_its_checkpoint(case):
    config = LEGACY / case / "config.yaml"
    assert "alpha_min" in yaml.safe_load(config.read_text())["model"]["attention"]["init_args"]
    with pytest.warns(FutureWarning, match=NOTE) as notes:
        spec = read_model_config([config])
    # one note for the file: its schedule options and its data's class path
    (note,) = [n for n in notes if "earlier lit_sparse" in str(n.message)]
    assert str(note.message).startswith(f"{config} is in an earlier lit_sparse's form")
    assert "\n" not in str(note.message) and "lit_sparse.tasks.MQARDataModule" in str(note.message)
    hparams = torch.load(LEGACY / case / "model.ckpt", weights_only=False)["hyper_parameters"]
    assert spec.attention == build_attention(hparams["attention"])
    assert spec.attention.schedule == CASES[case]


def test_fit_prints_an_old_run_config_in_todays_form(capsys):
    from lit_sparse.cli import main

    with pytest.raises(SystemExit) as exit_info, pytest.warns(FutureWarning, match=NOTE):
        main(["fit", "--config", str(LEGACY / "gaussian" / "config.yaml"), "--print_config"])
    assert exit_info.value.code == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["data"]["class_path"] == "lit_sparse.tasks.MQARDataModule"
    attention = printed["model"]["attention"]["init_args"]
    assert "rung_read" not in attention and "alpha_min" not in attention
    schedule = attention["schedule"]
    assert schedule["class_path"] == "lit_sparse.attention.schedules.Learned"
    assert schedule["init_args"]["read"]["init_args"]["width_start"] == 6.0


EXPORTS = torch.load(LEGACY / "exports.pt")


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
