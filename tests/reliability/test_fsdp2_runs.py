"""FSDP2 (``--trainer.strategy configs/strategy/fsdp2.yaml``) on two CPU processes (gloo):
it trains as DDP does, its sharded checkpoint exports as DDP's file does, and a run killed
in the middle of a save resumes to the uninterrupted run's weights, as a finished run does
from its checkpoint folder named by path. Across strategies (issue 47): DDP's file resumes
under FSDP2, FSDP2's folder is refused under another strategy in one line; a full disk in a
sharded save, a damaged shard without its record and a folder without meta.pt are one line.

Four 2-process fits of a tiny hybrid (configs/hybrid.yaml: a learned-alpha Fibonacci layer 0
and a NoPE dense layer 1; 6 steps, a checkpoint every 2), forked from one process that
imported torch and Lightning: DDP, FSDP2, and FSDP2 killed while saving step 4 then resumed;
the issue 47 tests add four 2-step resumes of copies of them. The hybrid holds two plugins,
so one set of fits covers learned alpha and a plugin of plugins under both strategies.
About 100 worker-seconds, over the 30 of CONTRIBUTING.md: each fit is two processes and what
the tests check is what the two processes do together.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from lit_sparse.errors import CheckpointError
from lit_sparse.runs.checkpoint_files import read_checkpoint
from tests.tiny_runs import scalars

from .cli_runs import (
    OBSERVERS,
    ROOT,
    checkpoint_every,
    config_args,
    copy_run,
    errors,
    fault,
    run_cli,
    tracebacks,
    write_callbacks,
)

pytestmark = pytest.mark.slow

STEPS = 6
HYBRID = [
    "--model.attention.init_args.local_attention.init_args.schedule", "Learned",
    "--model.attention.init_args.every", "2",
    "--model.attention.init_args.global_rope", "false",
]  # fmt: skip
FSDP2 = ["--trainer.strategy", str(ROOT / "configs" / "strategy" / "fsdp2.yaml")]
DDP = ["--trainer.strategy", "ddp"]


def _fit(server, workdir: Path, strategy: list[str], *callbacks: dict, resume: bool = False):
    workdir.mkdir(exist_ok=True)
    # alpha every step, validation NLL by position, 1x / 2x / 4x at the end
    extra = write_callbacks(
        workdir / "callbacks.yaml", checkpoint_every(2), *OBSERVERS, *callbacks, max_steps=STEPS
    )
    args = ["fit", *config_args("hybrid.yaml", extra), *HYBRID, "--trainer.devices", "2"]
    args += strategy
    resuming = ["--ckpt_path", "last"] if resume else []
    return server.run(workdir, *args, *resuming, timeout=300)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, fork_server) -> dict[str, Path]:
    """The run folder of each fit: ``ddp``, ``fsdp2`` and ``resumed`` (killed, resumed)."""
    root = tmp_path_factory.mktemp("fsdp2")
    folders = {}
    for name, strategy in (("ddp", DDP), ("fsdp2", FSDP2)):
        done = _fit(fork_server, root / name, strategy)
        assert done.returncode == 0, done.stderr[-3000:]
        folders[name] = root / name / "runs" / "hybrid" / "version_0"
    killed = _fit(fork_server, root / "resumed", FSDP2, fault("KillAfterShardsAtStep", step=4))
    assert killed.returncode == -9, killed.stderr[-3000:]
    last = root / "resumed" / "runs" / "hybrid" / "version_0" / "checkpoints" / "last.ckpt"
    # the save of step 4 was cut: the checkpoint of step 2 is whole, as it was
    assert read_checkpoint(last, weights=False)["global_step"] == 2
    resumed = _fit(fork_server, root / "resumed", FSDP2, resume=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    folders["resumed"] = last.parent.parent
    return folders


def _losses(run: Path) -> list[float]:

    logged = scalars(run)["train/loss"]
    assert sorted(logged) == list(range(STEPS))
    return [logged[step] for step in range(STEPS)]


def test_fsdp2_trains_as_ddp_does(runs):
    """The same seed and data: the same losses and learned alphas at every step (float32), the
    same held-out NLL by position, the same perplexities at 1x, 2x and 4x the training length
    when fit ends (where process 1 has no 4x window: under FSDP2 a forward is collective,
    unless the weights are whole)."""
    from lit_sparse.runs.analysis import load_run

    torch.testing.assert_close(_losses(runs["fsdp2"]), _losses(runs["ddp"]), rtol=0, atol=1e-5)
    ddp, fsdp2 = load_run(runs["ddp"]), load_run(runs["fsdp2"])
    assert list(fsdp2.alpha_trajectory.steps) == list(range(STEPS + 1))
    alphas = torch.tensor(fsdp2.alpha_trajectory.alphas)
    torch.testing.assert_close(alphas, torch.tensor(ddp.alpha_trajectory.alphas), atol=1e-5, rtol=0)
    assert (alphas[-1] != alphas[0]).all()  # alpha did learn
    # the hybrid's local layer 0 has an alpha line, its dense layer 1 none
    assert fsdp2.alpha_trajectory.layers == ddp.alpha_trajectory.layers == (0,)
    assert "alpha/layer_00" in scalars(runs["fsdp2"]) and "alpha/layer_01" not in scalars(
        runs["fsdp2"]
    )
    assert fsdp2.step == STEPS
    positions = [json.loads((runs[n] / "position_loss.json").read_text()) for n in ("ddp", "fsdp2")]
    assert positions[1]["step"] == positions[0]["step"] == STEPS
    for name, bins in positions[0]["sets"].items():
        torch.testing.assert_close(positions[1]["sets"][name], bins, atol=1e-5, rtol=0)
    tables = [json.loads((runs[n] / "extrapolation.json").read_text()) for n in ("ddp", "fsdp2")]
    for name, lengths in tables[0]["sets"].items():
        assert [v["windows"] for v in lengths.values()] == [4, 2, 1]
        for length, value in lengths.items():
            ppl = tables[1]["sets"][name][length]["ppl"]
            assert ppl == pytest.approx(value["ppl"], rel=1e-5), (name, length)


def test_a_sharded_checkpoint_exports_as_the_ddp_file_does(runs, tmp_path):
    """last.ckpt of the FSDP2 run is a folder of shards, verified file by file; ``export``
    consolidates it into the safetensors the DDP run's file gives (the same tensors)."""
    from lit_sparse.interop.export import export_run

    folder = runs["fsdp2"] / "checkpoints" / "last.ckpt"
    assert folder.is_dir() and (folder / "crc32.json").is_file()
    assert (runs["ddp"] / "checkpoints" / "last.ckpt").is_file()
    weights = {}
    for name in ("ddp", "fsdp2"):
        result = export_run(runs[name], tmp_path / name)
        assert result.step == STEPS and result.checkpoint_bytes > 0
        weights[name] = load_file(tmp_path / name / "model.safetensors")
    assert weights["fsdp2"].keys() == weights["ddp"].keys()
    for key, tensor in weights["ddp"].items():
        assert weights["fsdp2"][key].shape == tensor.shape, key
        torch.testing.assert_close(weights["fsdp2"][key], tensor, atol=1e-5, rtol=0, msg=key)


def test_killed_in_a_save_it_resumes_to_the_uninterrupted_weights(runs):
    expected = read_checkpoint(runs["fsdp2"] / "checkpoints" / "last.ckpt")
    found = read_checkpoint(runs["resumed"] / "checkpoints" / "last.ckpt")
    assert found["global_step"] == expected["global_step"] == STEPS
    assert found["state_dict"].keys() == expected["state_dict"].keys()
    for key, tensor in expected["state_dict"].items():
        assert torch.equal(found["state_dict"][key], tensor), key
    assert found["lr_schedulers"] == expected["lr_schedulers"]
    # the cut save's folder (.last.ckpt.build-<pid>-...) went with the next save
    assert not [p.name for p in (runs["resumed"] / "checkpoints").iterdir() if ".build-" in p.name]
    assert sorted(p.name for p in runs["resumed"].glob("config*.yaml")) == [
        "config.resume-2.yaml",
        "config.yaml",
    ]


def test_validate_scores_the_folder_in_one_process(runs, in_workdir, capsys):
    """``validate`` of the sharded checkpoint on one process (its whole weights) gives the
    held-out loss the two processes logged at that step, and logs under the run's evals/;
    a config of another model is refused before anything is built."""
    run = copy_run(runs["fsdp2"], in_workdir)
    ckpt = ["--config", str(run / "config.yaml"), "--ckpt_path", str(run / "checkpoints/last.ckpt")]
    one = ["--trainer.devices", "1", "--trainer.strategy", "auto"]
    assert run_cli(["validate", *ckpt, *one], capsys)[0] == 0
    logged = scalars(run / "evals" / "validate-step6")["val/loss"]
    assert list(logged.values()) == [pytest.approx(scalars(run)["val/loss"][STEPS], abs=1e-5)]
    # checked against the command's model before anything is built, as a file is
    code, lines = run_cli(["validate", *ckpt, *one, "--model.arch.norm_eps", "1e-5"], capsys)
    assert code == 2
    assert errors(lines) == [
        f"error: ckpt_path={str(run / 'checkpoints/last.ckpt')!r} holds a different model than "
        "the config: model.arch.norm_eps: config 1e-05, checkpoint 1e-06 (use the run's own "
        "config.yaml)"
    ]


def test_a_damaged_shard_is_refused_in_one_line(runs, tmp_path):
    folder = shutil.copytree(runs["fsdp2"] / "checkpoints" / "last.ckpt", tmp_path / "last.ckpt")
    shard = folder / "__1_0.distcp"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x04
    shard.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"__1_0\.distcp' fails its CRC-32 check"):
        read_checkpoint(folder)
    shard.unlink()
    with pytest.raises(CheckpointError, match=r"__1_0\.distcp' is missing"):
        read_checkpoint(folder)


def test_fit_resumes_from_a_sharded_checkpoint_named_by_its_path(runs, tmp_path, fork_server):
    """``fit --ckpt_path <run>/checkpoints/last.ckpt`` names a sharded checkpoint's folder, not
    a run folder: the finished run resumed from it completes in its own run (nothing left to
    train) and saves the resumed part's config beside the original."""
    run = copy_run(runs["fsdp2"], tmp_path)
    folder = run / "checkpoints" / "last.ckpt"
    args = ["fit", "--config", str(run / "config.yaml"), "--ckpt_path", str(folder)]
    done = fork_server.run(tmp_path, *args, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in run.glob("config*.yaml")) == [
        "config.resume-6.yaml",
        "config.yaml",
    ]
    assert read_checkpoint(folder, weights=False)["global_step"] == STEPS


def _resume_to(server, workdir: Path, run: Path, strategy: list[str], *callbacks: dict, steps=8):
    """``fit --ckpt_path <run>/checkpoints/last.ckpt`` of the copied ``run`` (in ``workdir``)
    on two processes under ``strategy``, trained on to ``steps`` (last.ckpt every 2 steps)."""
    extra = write_callbacks(
        workdir / "more.yaml", checkpoint_every(2, top_k=0), *callbacks, max_steps=steps
    )
    args = ["--config", str(run / "config.yaml"), "--config", str(extra)]
    last = ["--ckpt_path", str(run / "checkpoints" / "last.ckpt")]
    return server.run(workdir, "fit", *args, "--trainer.devices", "2", *strategy, *last)


def test_a_sharded_checkpoint_is_not_resumed_under_another_strategy(
    runs, in_workdir, capsys, fork_server
):
    """Issue 47: an FSDP2 run resumed with ``--ckpt_path last`` on one process or under DDP
    (which cannot restore its sharded optimizer states) is refused in one line naming both
    strategies, before anything is written in the run."""
    run = copy_run(runs["fsdp2"], in_workdir)
    before = sorted(p.name for p in run.iterdir())
    last = (run / "checkpoints" / "last.ckpt").relative_to(in_workdir)  # as "last" finds it
    args = ["fit", "--config", str(run / "config.yaml"), "--ckpt_path", "last"]

    def refusal(strategy: str) -> str:
        return (
            f"error: ckpt_path={str(last)!r} was saved by FSDP2 (a folder of shards) and this "
            f"command trains with trainer.strategy={strategy!r}: only FSDP2 resumes its sharded "
            "optimizer states; resume it with --trainer.strategy configs/strategy/fsdp2.yaml "
            "(validate, test, extrapolate and export read it under any strategy)"
        )

    one = ["--trainer.devices", "1", "--trainer.strategy", "auto"]
    code, lines = run_cli([*args, *one], capsys)
    assert (code, errors(lines)) == (2, [refusal("auto")])
    done = fork_server.run(in_workdir, *args, "--trainer.strategy", "ddp", timeout=300)
    assert done.returncode == 2 and not tracebacks(done.stderr), done.stderr[-3000:]
    assert errors(done.stderr.splitlines()) == [refusal("ddp")]
    assert sorted(p.name for p in run.iterdir()) == before


def test_a_ddp_checkpoint_file_resumes_under_fsdp2(runs, tmp_path, fork_server):
    """Issue 47: the DDP run's single-file checkpoint (a full checkpoint, which FSDP2 takes)
    resumed under FSDP2 trains on to the weights the FSDP2 run reaches from its own folder:
    the optimizer states are restored, each to its parameter."""
    found = {}
    for name in ("ddp", "fsdp2"):
        (tmp_path / name).mkdir()
        run = copy_run(runs[name], tmp_path / name)
        done = _resume_to(fork_server, tmp_path / name, run, FSDP2)
        assert done.returncode == 0, done.stderr[-3000:]
        assert (run / "checkpoints" / "last.ckpt").is_dir()
        found[name] = read_checkpoint(run / "checkpoints" / "last.ckpt")
    start = read_checkpoint(runs["ddp"] / "checkpoints" / "last.ckpt")["state_dict"]
    assert found["ddp"]["global_step"] == found["fsdp2"]["global_step"] == 8
    assert found["ddp"]["state_dict"].keys() == found["fsdp2"]["state_dict"].keys()
    for key, tensor in found["fsdp2"]["state_dict"].items():
        torch.testing.assert_close(found["ddp"]["state_dict"][key], tensor, atol=1e-5, rtol=0)
    moved = [k for k, t in found["ddp"]["state_dict"].items() if not torch.equal(t, start[k])]
    assert moved, "it trained on"


@pytest.mark.parametrize("part, rank", [("meta.pt", 0), ("shards", 1)])
def test_a_full_disk_in_a_sharded_save_is_one_line(runs, tmp_path, fork_server, part, rank):
    """Issue 47: the disk fills while an FSDP2 checkpoint is written (torch's zip writer
    stopping short in meta.pt on process 0, or a shard's write on process 1): one line that
    says so, as the single-file path does, and the previous checkpoint stays whole."""
    run = copy_run(runs["fsdp2"], tmp_path)
    last = run / "checkpoints" / "last.ckpt"
    full = fault("FullDiskInShardedSave", step=8, part=part, rank=rank)
    done = _resume_to(fork_server, tmp_path, run, FSDP2, full)
    assert done.returncode == 2 and not tracebacks(done.stderr), done.stderr[-3000:]
    lines = set(errors(done.stderr.splitlines()))  # each process says it
    shown = last.relative_to(tmp_path)  # as the checkpoint callback names it
    assert lines == {
        f"error: cannot write {str(shown)!r}: the disk is full (the previous file, if any, is "
        "unchanged; free space or fix the permissions and run the command again)"
    }
    assert read_checkpoint(last, weights=False)["global_step"] == STEPS
    assert not [p.name for p in last.parent.iterdir() if p.name.startswith(".")]


def test_a_damaged_shard_without_its_record_is_refused_in_one_line(runs, tmp_path):
    """Issue 47: a folder without crc32.json (as Lightning's own strategy writes it) with a
    changed bit in a shard: each record of a shard is a zip with CRC-32s, so the damage is
    found and named, not loaded silently or met as a PytorchStreamReader traceback."""
    folder = shutil.copytree(runs["fsdp2"] / "checkpoints" / "last.ckpt", tmp_path / "last.ckpt")
    (folder / "crc32.json").unlink()
    read_checkpoint(folder)  # whole without its record
    shard = folder / "__1_0.distcp"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x04
    shard.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"its shard '__1_0\.distcp' is damaged") as err:
        read_checkpoint(folder)
    assert "\n" not in str(err.value)


def test_a_sharded_checkpoint_without_meta_pt_is_damaged_not_missing(runs, tmp_path):
    """Issue 47: a checkpoint folder whose meta.pt is gone is an incomplete checkpoint, not
    "no checkpoint found" (nor a silent fall back to an older checkpoint)."""
    from lit_sparse.runs.analysis import load_run
    from lit_sparse.runs.folders import run_checkpoint

    run = copy_run(runs["fsdp2"], tmp_path)
    folder = run / "checkpoints" / "last.ckpt"
    (folder / "meta.pt").unlink()
    assert run_checkpoint(run) == folder
    missing = r"is damaged or incomplete, so it is not used: its meta\.pt is missing"
    with pytest.raises(CheckpointError, match=missing):
        read_checkpoint(folder)
    with pytest.raises(CheckpointError, match=missing):
        load_run(run)
