"""Exports are all or nothing, verified when loaded, and a damaged or edited folder is one
line: a full disk at any write of an export leaves the earlier export as it was; a changed
byte of the weights, a truncated file, a broken header, config.json that is not JSON or
whose sizes do not fit the weights are refused naming the file; an attention config edited
since training loads with a one-line warning; a run that is training exports its newest
whole checkpoint."""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import subprocess
import sys

import pytest
import torch

from lit_sparse import LanguageModel, build_attention
from lit_sparse.__main__ import main as lit_main
from lit_sparse.errors import ConfigError, DamagedFileError
from lit_sparse.formats.pretrained import TRAINED_ATTENTION, WEIGHTS_SHA256, file_sha256
from lit_sparse.interop.export import export_run
from lit_sparse.io import atomic
from lit_sparse.runs.checkpoint_files import read_checkpoint

from .cli_runs import copy_run, errors, tracebacks

WRITES = [
    (atomic.os, "fsync"),
    (atomic.os, "replace"),
    (atomic.os, "rename"),
    (atomic.os, "mkdir"),
    (atomic.AtomicFile, "write"),
    (atomic, "_exchange"),
]
"""What an export writes with: every file's write, fsync and rename, every mkdir, the swap."""


def tree(folder) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


class FullDiskAt:
    """Counts the calls of :data:`WRITES`; the ``fail_at``-th (0-based) raises ENOSPC."""

    def __init__(self, monkeypatch, fail_at: int | None = None):
        self.calls, self.fail_at = 0, fail_at
        for owner, name in WRITES:
            monkeypatch.setattr(owner, name, self._wrap(getattr(owner, name)))

    def _wrap(self, real):
        def call(*args, **kwargs):
            self.calls += 1
            if self.calls - 1 == self.fail_at:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(*args, **kwargs)

        return call


@pytest.fixture(scope="module")
def other_run(finished_run, tmp_path_factory):
    """A second run: the finished run with other weights (every tensor moved by 0.01)."""
    run = copy_run(finished_run, tmp_path_factory.mktemp("other"))
    path = run / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    for tensor in checkpoint["state_dict"].values():
        if tensor.is_floating_point():
            tensor.add_(0.01)
    torch.save(checkpoint, path)
    return run


def export_command(run, out, capsys) -> tuple[int, list[str]]:
    try:
        code = lit_main(["export", str(run), "--out", str(out)])
    except BaseException as err:  # noqa: B036 - anything that escapes is the failure
        pytest.fail(f"the export raised {err!r} instead of one line")
    err = capsys.readouterr().err
    assert not tracebacks(err), err
    return code, err.splitlines()


@pytest.mark.slow  # the finished run (trained)
@pytest.mark.parametrize("earlier", [True, False], ids=["over-an-export", "first-export"])
def test_a_full_disk_at_any_write_leaves_the_earlier_export_exactly_as_it_was(
    finished_run, other_run, tmp_path, monkeypatch, capsys, earlier
):
    """The issue's case: export once, fill the disk, export another run into the same
    folder. ENOSPC is injected at each write of the second export in turn."""
    out = tmp_path / "exp"
    if earlier:
        export_run(finished_run, out)
    before = tree(out) if earlier else None
    expected = tree(export_run(other_run, tmp_path / "reference").folder)
    shutil.rmtree(tmp_path / "reference")
    with monkeypatch.context() as patch:
        counter = FullDiskAt(patch)
        export_run(other_run, tmp_path / "counted")
    shutil.rmtree(tmp_path / "counted")
    refused = 0
    for k in range(counter.calls):
        with monkeypatch.context() as patch:
            FullDiskAt(patch, fail_at=k)
            code, err = export_command(other_run, out, capsys)
        leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name != "exp")
        assert leftovers == [], f"write {k}: {leftovers}"
        if code == 0:  # a failure the writer may ignore (a folder's fsync): a whole export
            assert tree(out) == expected, f"write {k}"
            if earlier:
                export_run(finished_run, out)  # the earlier export again, for the next k
            else:
                shutil.rmtree(out)
            continue
        refused += 1
        assert code == 2 and len(errors(err)) == 1, f"write {k}: {err}"
        assert "the disk is full" in err[-1] and str(out) in err[-1], err
        if earlier:
            assert tree(out) == before, f"write {k}: the earlier export changed"
        else:
            assert not out.exists(), f"write {k}: a partial folder was left"
    # the rest are failures the writer rightly ignores (a folder's fsync, mkdir of a folder
    # that exists): the export went through whole
    assert refused >= counter.calls // 2, f"only {refused} of {counter.calls} writes refused"
    assert export_command(other_run, out, capsys)[0] == 0
    assert tree(out) == expected


@pytest.mark.slow  # the finished run (trained)
def test_an_earlier_export_with_files_of_its_own_is_not_replaced(finished_run, tmp_path, capsys):
    out = export_run(finished_run, tmp_path / "exp").folder
    (out / "notes.txt").write_text("mine")
    before = tree(out)
    code, err = export_command(finished_run, out, capsys)
    assert code == 2 and len(errors(err)) == 1
    assert "also holds notes.txt" in err[-1] and "replaced as a whole" in err[-1]
    assert tree(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["exp"]


def another_models_folder(folder) -> None:
    """A stock transformers gpt2 folder: it holds only names an export writes."""
    folder.mkdir()
    gpt2 = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_layer": 12}
    (folder / "config.json").write_text(json.dumps(gpt2))
    (folder / "model.safetensors").write_bytes(b"gpt2's weights")
    (folder / "tokenizer.json").write_text('{"model": "gpt2"}')
    (folder / "README.md").write_text("# gpt2\n")


@pytest.mark.slow  # the finished run (trained)
def test_another_models_folder_is_not_replaced(finished_run, tmp_path, capsys):
    """Issue 36: any folder with a config.json counted as an earlier export, so a gpt2
    folder was replaced (exit 0, every file overwritten). Only a config.json lit_sparse
    wrote makes one: its format key at the top level or under a stock format's
    ``lit_sparse`` key."""
    out = tmp_path / "gpt2"
    another_models_folder(out)
    before = tree(out)
    code, err = export_command(finished_run, out, capsys)
    assert code == 2 and len(errors(err)) == 1, err
    assert f"out={str(out)!r}" in err[-1] and "not an earlier export" in err[-1]
    assert "its config.json is not lit_sparse's" in err[-1]
    assert tree(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["gpt2"]
    readme_only = tmp_path / "notes"
    readme_only.mkdir()
    (readme_only / "README.md").write_text("mine")
    code, err = export_command(finished_run, readme_only, capsys)
    assert code == 2 and "(no config.json)" in err[-1]
    # an earlier export is one, in lit_sparse's format or a stock one (keys under lit_sparse)
    earlier = export_run(finished_run, tmp_path / "earlier").folder
    config = json.loads((earlier / "config.json").read_text())
    stock = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "lit_sparse": config}
    (earlier / "config.json").write_text(json.dumps(stock))
    assert export_command(finished_run, earlier, capsys)[0] == 0
    assert json.loads((earlier / "config.json").read_text())["format"] == config["format"]


@pytest.mark.slow  # the finished run (trained)
def test_a_read_only_file_system_is_one_line(finished_run, tmp_path, monkeypatch, capsys):
    """``export RUN --out ro_fs/new_sub``: the issue saw an OSError traceback from mkdir."""
    read_only = tmp_path / "ro_fs"
    read_only.mkdir()
    real = os.mkdir

    def refused(path, *args, **kwargs):
        if str(path).startswith(str(read_only)):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", refused)
    code, err = export_command(finished_run, read_only / "new_sub", capsys)
    assert code == 2 and len(errors(err)) == 1, err
    assert "read-only" in err[-1] and str(read_only) in err[-1]
    assert list(read_only.iterdir()) == []


@pytest.mark.slow  # the finished run (trained)
def test_a_run_that_is_training_exports_its_newest_whole_checkpoint(finished_run, tmp_path, capsys):
    """The run's lock is held by a live process (a fit): export reads, never writes, the
    run; it says which process trains it and which step it exported."""
    run = copy_run(finished_run, tmp_path)
    code = (
        "import sys, time; from lit_sparse.runs import RunLock; "
        f"RunLock.acquire({str(run)!r}, 'fit'); print('locked', flush=True); time.sleep(600)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = tree(run)
        code, err = export_command(run, tmp_path / "exp", capsys)
        assert code == 0, err
        assert any(
            line.startswith("note: the run is training (process ")
            and f"{holder.pid}" in line
            and "step 4" in line
            for line in err
        ), err
        assert tree(run) == before, "the run was not touched"
    finally:
        holder.kill()
        holder.wait()
    state = read_checkpoint(run / "checkpoints/last.ckpt")["state_dict"]
    model = LanguageModel.from_pretrained(tmp_path / "exp")
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, state[f"model.{name}"]), name


# ------------------------------------------------------------------- damaged folders
@pytest.fixture
def saved(tmp_path):
    """A small fibonacci model saved with save_pretrained (and a tokenizer, for generate)."""
    from lit_sparse.config import ModelConfig
    from lit_sparse.data.tokenizer import load_tokenizer, round_up

    tokenizer = load_tokenizer("embedded")
    config = ModelConfig(
        vocab_size=round_up(tokenizer.size), context_length=32, n_layers=2, d_model=32,
        n_heads=2, n_kv_heads=1, head_dim=16,
    )  # fmt: skip
    torch.manual_seed(0)
    model = LanguageModel(config, build_attention("fibonacci", window=8)).eval()
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    tokenizer.tokenizer.save(str(folder / "tokenizer.json"))
    return folder, model


def generate_line(folder, capsys) -> str:
    """``generate FOLDER`` on the damaged folder: exit status 2 and one error line."""
    code = lit_main(["generate", str(folder), "--prompt", "ROMEO:", "--max_new_tokens", "2"])
    err = capsys.readouterr().err
    assert code == 2 and not tracebacks(err), err
    (line,) = errors(err.splitlines())
    return line


def test_the_weights_sha256_is_recorded_and_checked(saved, capsys):
    folder, model = saved
    config = json.loads((folder / "config.json").read_text())
    assert config[WEIGHTS_SHA256] == file_sha256(folder / "model.safetensors")
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0x10  # one bit of the last tensor's data: safetensors would load it silently
    weights.write_bytes(bytes(data))
    with pytest.raises(DamagedFileError) as caught:
        LanguageModel.from_pretrained(folder)
    message = str(caught.value)
    assert "\n" not in message and str(weights) in message
    assert "does not match the sha256" in message and "verify_weights=False" in message
    assert "does not match the sha256" in generate_line(folder, capsys)

    edited = LanguageModel.from_pretrained(folder, verify_weights=False)  # changed on purpose
    name, tensor = next(reversed(edited.state_dict().items()))
    assert not torch.equal(tensor, model.state_dict()[name])
    edited.save_pretrained(folder)  # records the new digest
    again = LanguageModel.from_pretrained(folder)
    assert torch.equal(again.state_dict()[name], tensor)


@pytest.mark.parametrize("damage", ["truncated", "header bit"])
def test_a_truncated_or_broken_weights_file_is_one_line(saved, capsys, damage):
    folder, _ = saved
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 3]
    else:
        data[12] ^= 0x20  # inside the JSON header: "invalid JSON in header"
    weights.write_bytes(bytes(data))
    assert "does not match the sha256" in generate_line(folder, capsys)
    with pytest.raises(DamagedFileError) as caught:  # unverified: the reader's own refusal
        LanguageModel.from_pretrained(folder, verify_weights=False)
    message = str(caught.value)
    assert "\n" not in message and "cannot be read as safetensors" in message
    assert str(weights) in message


def test_config_sizes_that_do_not_fit_the_weights_are_one_line(saved, capsys):
    folder, _ = saved
    config = json.loads((folder / "config.json").read_text())
    config["arch"]["vocab_size"] += 64
    (folder / "config.json").write_text(json.dumps(config))
    line = generate_line(folder, capsys)
    assert "model.safetensors does not fit its config.json" in line
    assert "embedding.weight is [" in line and "in the weights" in line


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", "\xff\xfe"])
def test_config_json_that_is_not_a_json_object_is_one_line(saved, capsys, text):
    folder, _ = saved
    (folder / "config.json").write_bytes(text.encode("latin-1"))
    line = generate_line(folder, capsys)
    assert str(folder / "config.json") in line
    assert "not valid JSON" in line or "expected a JSON object" in line
    with pytest.raises(DamagedFileError):
        LanguageModel.from_pretrained(folder)


def test_an_edited_attention_config_warns_naming_the_fields(saved, caplog):
    folder, _ = saved
    config_file = folder / "config.json"
    original = json.loads(config_file.read_text())
    record = original[TRAINED_ATTENTION]
    assert record["attention"] == original["attention"] and record["context_length"] == 32

    def load_with(change) -> list[str]:
        config = json.loads(json.dumps(original))
        change(config)
        config_file.write_text(json.dumps(config))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="lit_sparse.formats.pretrained"):
            model = LanguageModel.from_pretrained(folder)
        return model, [r.getMessage() for r in caplog.records]

    def window(c):
        c["attention"]["init_args"]["window"] = 4

    model, warned = load_with(window)
    assert len(warned) == 1 and "\n" not in warned[0], warned
    assert "window=4 (trained with 8)" in warned[0] and "differs from what" in warned[0]
    assert model.attention.window == 4

    def length(c):
        c["arch"]["context_length"] = 64

    assert "arch.context_length=64 (trained with 32)" in load_with(length)[1][0]

    def new_offsets(c):
        c["attention"]["init_args"]["new_offsets"] = "drop"

    model, warned = load_with(new_offsets)
    assert warned == [], "new_offsets may be chosen at load"
    model.save_pretrained(folder)  # the record stays what training used
    assert json.loads(config_file.read_text())[TRAINED_ATTENTION] == record

    def both(c):  # the record edited to match: its digest says so
        c["attention"]["init_args"]["window"] = 4
        c[TRAINED_ATTENTION]["attention"]["init_args"]["window"] = 4

    assert "record itself" in load_with(both)[1][0]


def test_a_folder_without_the_records_still_loads(saved):
    """Folders exported before the records existed: nothing to verify, no warning."""
    folder, model = saved
    config = json.loads((folder / "config.json").read_text())
    del config[WEIGHTS_SHA256], config[TRAINED_ATTENTION]
    (folder / "config.json").write_text(json.dumps(config))
    loaded = LanguageModel.from_pretrained(folder)
    ids = torch.randint(0, 100, (1, 12))
    with torch.inference_mode():
        assert torch.equal(loaded(ids), model(ids))
    with pytest.raises(ConfigError):  # a config whose fields do not build a model
        config["arch"]["d_model"] = 48
        (folder / "config.json").write_text(json.dumps(config))
        LanguageModel.from_pretrained(folder)
