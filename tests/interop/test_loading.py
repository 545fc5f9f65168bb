"""A model and its tokenizer from a run (lit_sparse.interop.loading): a run trained on a
synthetic task says so, and ``generate`` does not decode its ids as text without a word
(issue 57, minor). lit_sparse.load_pretrained: the model and its tokenizer from an export, a
run folder or a checkpoint, on a device and in a dtype; save_pretrained takes the tokenizer
(issue 25, 17); bad arguments and an edited tokenizer.json are one line (issue 36)."""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

import lit_sparse
from lit_sparse import LanguageModel
from lit_sparse.__main__ import main as lit_main
from lit_sparse.errors import ConfigError, DamagedFileError
from lit_sparse.interop import loading


@pytest.mark.parametrize(
    ("data", "task"),
    [
        ({"class_path": "lit_sparse.tasks.mqar.MQARDataModule"}, "mqar"),
        ({"class_path": "mqar"}, "mqar"),
        ({"class_path": "lit_sparse_copy.segment_copy.SegmentCopyDataModule"}, "segment_copy"),
        ({"class_path": "lit_sparse.data.TextDataModule"}, None),
        (None, None),
    ],
)
def test_the_synthetic_task_of_a_run_config(data, task):
    assert loading.synthetic_task({"data": data}) == task


def test_generate_refuses_to_decode_a_synthetic_runs_ids_as_text(monkeypatch, capsys):
    """Without --tokenizer, one line naming the task; with one, it is used on purpose."""
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])
    used = []

    def source(path, tokenizer, option):
        used.append(tokenizer)
        return loading.ModelSource(SimpleNamespace(), SimpleNamespace(), "run", task="mqar")

    monkeypatch.setattr(loading, "load_source", source)
    assert lit_main(["generate", "runs/mqar/version_0", "--prompt", "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        "error: path='runs/mqar/version_0': a run of the synthetic task 'mqar': its tokens are "
        "the task's ids, not text"
    )
    assert "--tokenizer" in err and used == [None]


def test_an_export_loads_with_its_tokenizer(random_export):
    model, tokenizer = lit_sparse.load_pretrained(random_export)
    reference = LanguageModel.from_pretrained(random_export)
    ids = torch.randint(0, 8192, (2, 40))
    with torch.inference_mode():
        assert torch.equal(model(ids), reference(ids))
    assert not model.training and next(model.parameters()).device.type == "cpu"
    assert isinstance(tokenizer, lit_sparse.Tokenizer)
    assert tokenizer.sha256 == lit_sparse.Tokenizer.from_pretrained("embedded").sha256
    assert tokenizer.document_prefix == [0]


@pytest.mark.slow  # starts a Python process
def test_loading_an_export_needs_no_lightning(random_export):
    """lm-eval, generate and transformers load exports, and lm-eval builds the shipped tasks:
    Lightning's and torchmetrics' seconds of import are the training side's (``lit_sparse.data``
    and ``lit_sparse.evaluation`` import their modules on first use)."""
    code = (
        "import sys, lit_sparse\n"
        f"model, tokenizer = lit_sparse.load_pretrained({str(random_export)!r})\n"
        "import lit_sparse.interop.lm_eval, lit_sparse.evaluation.held_out_tasks\n"
        "heavy = ('lightning', 'jsonargparse', 'datasets', 'torchmetrics')\n"
        "loaded = [m for m in heavy if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_save_pretrained_writes_the_tokenizer_and_generate_needs_nothing_else(
    random_export, capsys
):
    assert sorted(p.name for p in random_export.iterdir()) == [
        "README.md",
        "config.json",
        "configuration_lit_sparse.py",  # the remote code transformers' auto_map names
        "generation_config.json",  # and the EOS for AutoTokenizer and generate
        "model.safetensors",
        "modeling_lit_sparse.py",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert (
        lit_main(
            [
                "generate",
                str(random_export),
                "--prompt",
                "ROMEO:",
                "--max_new_tokens",
                "4",
                "--temperature",
                "0",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.startswith("ROMEO:")


def test_save_pretrained_without_a_tokenizer_writes_none(tmp_path):
    from .conftest import random_model

    random_model().save_pretrained(tmp_path)
    assert not (tmp_path / "tokenizer.json").exists()
    with pytest.raises(
        ConfigError, match="has no tokenizer.json; name the model's tokenizer"
    ) as err:
        lit_sparse.load_pretrained(tmp_path)
    assert "with tokenizer=..." in str(err.value), "the Python argument, not a CLI flag"
    assert "--tokenizer" not in str(err.value)
    _, tokenizer = lit_sparse.load_pretrained(tmp_path, tokenizer="embedded")
    assert tokenizer.source == "embedded"


def test_dtype_and_the_eos_from_config_json(random_export, tmp_path):
    model, _ = lit_sparse.load_pretrained(random_export, dtype="bfloat16")
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    model, _ = lit_sparse.load_pretrained(random_export, dtype=torch.float16, device="cpu")
    assert {p.dtype for p in model.parameters()} == {torch.float16}
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in random_export.iterdir():
        copy.joinpath(f.name).write_bytes(f.read_bytes())
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "eos_token_id": 5}))
    _, tokenizer = lit_sparse.load_pretrained(copy)
    assert tokenizer.eos_id == 5 and tokenizer.document_prefix == [5]


def absent(kind: str) -> bool:
    backend = getattr(torch, kind, None)
    return not (backend is not None and backend.is_available())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"path": "nowhere"}, "path='nowhere': no such run folder, checkpoint or exported"),
        ({"path": None}, "path=None: expected a run folder, a checkpoint or an exported"),
        ({"dtype": "float8"}, "dtype='float8': allowed: auto, float32"),
        ({"dtype": torch.int64}, "dtype=torch.int64: the weights are floating point; allowed"),
        ({"device": "tpu:x"}, "device='tpu:x'"),
        pytest.param(
            {"device": "mps"},
            "device='mps': MPS is not available here",
            marks=pytest.mark.skipif(not absent("mps"), reason="this machine has MPS"),
        ),
        pytest.param(
            {"device": "xpu"},
            "device='xpu': XPU is not available here",
            marks=pytest.mark.skipif(not absent("xpu"), reason="this machine has an XPU"),
        ),
    ],
    ids=["nowhere", "None", "float8", "int64", "tpu:x", "mps", "xpu"],
)
def test_bad_input_is_one_line_before_the_model_is_read(random_export, tmp_path, kwargs, message):
    """Issue 36: ``dtype=torch.int64``, an absent ``mps`` or ``xpu`` and ``path=None`` were
    tracebacks. The folder's weights are damaged: the bad argument is named first."""
    folder = tmp_path / "model"
    shutil.copytree(random_export, folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    kwargs = {"path": folder, **kwargs}
    with pytest.raises(ConfigError, match=re.escape(message)) as err:
        lit_sparse.load_pretrained(**kwargs)
    assert "\n" not in str(err.value)


def swap_two_token_ids(path) -> None:
    values = json.loads(path.read_text())
    vocab = values["model"]["vocab"]
    vocab["the"], vocab["and"] = vocab["and"], vocab["the"]
    path.write_text(json.dumps(values))


def test_an_edited_tokenizer_json_is_refused_unless_named_on_purpose(
    random_export, tmp_path, capsys, caplog
):
    """Issue 36: config.json recorded no digest of tokenizer.json, so an edited one loaded
    silently (token ids meaning other text than the weights learned)."""
    folder = tmp_path / "model"
    shutil.copytree(random_export, folder)
    config = json.loads((folder / "config.json").read_text())
    assert config["tokenizer_sha256"] == lit_sparse.Tokenizer.from_pretrained().sha256
    edited = folder / "tokenizer.json"
    swap_two_token_ids(edited)
    with pytest.raises(DamagedFileError) as err:
        lit_sparse.load_pretrained(folder)
    message = str(err.value)
    assert "\n" not in message and str(edited) in message
    assert "is not the tokenizer its config.json records" in message
    assert "with tokenizer=..." in message
    code = lit_main(["generate", str(folder), "--prompt", "ROMEO:", "--max_new_tokens", "2"])
    lines = capsys.readouterr().err.splitlines()
    assert code == 2 and len(lines) == 1 and "is not the tokenizer" in lines[0], lines
    assert "with --tokenizer" in lines[0]
    # a tokenizer named on purpose is used as asked, with a note
    with caplog.at_level(logging.WARNING, logger="lit_sparse.interop.loading"):
        _, tokenizer = lit_sparse.load_pretrained(folder, tokenizer=str(edited))
    assert tokenizer.sha256 != config["tokenizer_sha256"]
    (note,) = [r.getMessage() for r in caplog.records]
    assert note.startswith("note: the tokenizer named") and "using it as asked" in note


@pytest.mark.slow
def test_a_run_folder_and_its_checkpoint_load_like_the_export(learned_run, learned_export):
    from_export, tokenizer = lit_sparse.load_pretrained(learned_export)
    ids = torch.randint(0, 8192, (1, 50))
    for source in (learned_run.log_dir, learned_run.log_dir / "checkpoints" / "last.ckpt"):
        model, loaded = lit_sparse.load_pretrained(source)
        with torch.inference_mode():
            torch.testing.assert_close(model(ids), from_export(ids))
        assert loaded.sha256 == tokenizer.sha256
