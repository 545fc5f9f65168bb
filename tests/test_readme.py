"""Every shell command in the fenced blocks of README.md and of the docs pages its user path
moved out (docs/training.md, docs/experiments.md) runs exactly as written (through bash,
same quoting) in a copy of the repository's configs shrunk to a tiny model and a few steps,
or is listed in SKIPPED with the reason it cannot run here. A new command is picked up
automatically and fails the suite until it is one or the other.

The pages run in DOCUMENTS' order, each top to bottom: docs/training.md's paper-scale fit
makes the run the README's paper-scale evaluation reads; the README's quickstart makes the run its
generate and evaluation commands read (as a reader following it has). The README's
"Generating text" commands also run in this process, as written, on a tiny trained run
standing in for the quickstart's (``runs/quickstart/coprime``)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lit_sparse.__main__ import main as lit_main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCUMENTS = [ROOT / "docs" / "training.md", README, ROOT / "docs" / "experiments.md"]
TINY = ROOT / "tests" / "configs" / "tiny.yaml"

pytestmark = pytest.mark.slow

SKIPPED = {
    "make quickstart": "the set-up (a .venv and pip installs) and the quickstart's fit; the fit "
    "runs below, as written, and `make -n quickstart` is checked against the README's install "
    "in test_the_set_up_commands_run_what_the_readme_says",
    "make test": "the set-up and this test suite itself (.ci/run calls it)",
    "pip install torch==2.13.0": "the install: `make quickstart` and `make test` (so .ci/run) "
    "perform it, as written",
    "pip install -e .": "the install: `make quickstart` performs it, as written",
    "python -m pytest -q -m not slow": "this test suite's fast tier",
    "python -m lit_sparse fit --config configs/coprime.yaml --trainer.devices 4 "
    "--trainer.strategy ddp --trainer.accumulate_grad_batches 1 "
    "--trainer.val_check_interval 500": "four DDP processes; two-process DDP runs in "
    "tests/callbacks/test_callbacks_ddp.py and tests/data/test_ddp.py",
    "python -m lit_sparse fit --config configs/coprime.yaml --trainer.devices 4 "
    "--trainer.strategy configs/strategy/fsdp2.yaml --trainer.accumulate_grad_batches 1 "
    "--trainer.val_check_interval 500": "four FSDP2 processes; two-process FSDP2 runs of the "
    "same strategy config in tests/reliability/test_fsdp2_runs.py",
    "torchrun --nnodes 4 --nproc-per-node 8 --node-rank $NODE_RANK --master-addr $HEAD_NODE "
    "--master-port 29500 -m lit_sparse fit --config configs/coprime.yaml --trainer.strategy "
    "configs/strategy/fsdp2.yaml --trainer.num_nodes 4 --trainer.devices 8 --data.batch_size 1 "
    "--trainer.accumulate_grad_batches 1": "32 processes on 4 machines",
    "srun python -m lit_sparse fit --config configs/coprime.yaml --trainer.strategy "
    "configs/strategy/fsdp2.yaml --trainer.num_nodes 4 --trainer.devices 8 --data.batch_size 1 "
    "--trainer.accumulate_grad_batches 1": "a SLURM allocation of 4 machines",
    "tensorboard --logdir runs": "starts a server that runs until stopped",
    "python -m lit_sparse probe --depths 2 4 8 --inits uniform staggered --seeds 0 1": "trains "
    "24 probe runs (hours on a CPU); tests/studies/commands/test_probe.py runs a shrunk depth-2 "
    "one",
    "python -m lit_sparse matrix --run fib_linear_w12": "launches a paper-scale run (13,000 "
    "steps); tests/studies/commands/test_matrix.py launches shrunk ones",
    "python -m lit_sparse matrix --table runs/fib_fixed_w8 runs/fib_linear_w8 --out tables.md": (
        "needs two finished runs of the matrix; tests/studies/commands/test_matrix.py builds tables"
    ),
    "python -m lit_sparse tasks runs/quickstart/coprime/version_0": "scores 720 LEGO and RULER "
    "items (minutes of CPU even for a tiny model); tests/tasks/test_choice.py runs the "
    "command on a tiny run with --per-group 6",
    "python -m lit_sparse matrix --preset cpu --seeds 0 1 2 --run": "trains the study's 27 runs "
    "(about 2 hours); tests/studies/study/test_preset.py runs --run on tiny seeded runs",
    "python -m lit_sparse matrix --preset cpu --seeds 0 1 2 --table --out runs/cpu/study.md": (
        "needs the study's finished runs; tests/studies/study/test_preset.py builds it from tiny "
        "ones"
    ),
    "python -m lit_sparse matrix --preset cpu --seeds 0 1 2 --plot": "needs the study's finished "
    "runs; tests/studies/study/test_preset.py draws the plots from tiny ones",
}


def readme_commands(text: str) -> list[str]:
    """The commands of the fenced ``bash``/``sh``/``shell`` blocks, each as written (lines
    ending in a backslash continue it), comment-only lines left out."""
    commands = []
    for block in re.findall(r"^```(?:bash|sh|shell)\n(.*?)^```", text, re.S | re.M):
        current = ""
        for line in block.splitlines():
            if not current and (not line.strip() or line.lstrip().startswith("#")):
                continue
            current += line + "\n"
            if not line.rstrip().endswith("\\"):
                commands.append(current.rstrip("\n"))
                current = ""
    return commands


def key(command: str) -> str:
    """A command's words without quoting, continuation or a trailing comment."""
    return " ".join(shlex.split(command.replace("\\\n", " "), comments=True))


COMMANDS = [command for page in DOCUMENTS for command in readme_commands(page.read_text())]
TO_RUN = [c for c in COMMANDS if key(c) not in SKIPPED]


def test_every_readme_command_is_run_or_skipped_with_a_reason():
    assert len(COMMANDS) >= 15
    assert all(reason.strip() for reason in SKIPPED.values())
    stale = set(SKIPPED) - {key(c) for c in COMMANDS}
    assert not stale, f"SKIPPED lists commands the README no longer has: {sorted(stale)}"
    # what runs is the training, evaluation and experiment commands a user starts with
    run = {key(c).split()[3] for c in TO_RUN if key(c).startswith("python -m lit_sparse")}
    assert {"fit", "validate", "extrapolate", "test", "coverage", "flops", "matrix"} <= run


# make's own variables, and the Makefile's (`NAME ?= value`): make exports a command line's
# variables (`make test PYTEST=...`, as .ci/run calls it) into its recipes' environment
MAKE_VARIABLES = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES") + tuple(
    re.findall(r"^(\w+) \?=", (ROOT / "Makefile").read_text(), flags=re.MULTILINE)
)


def test_the_set_up_commands_run_what_the_readme_says():
    """Issue 47: the set-up is two commands from a fresh clone (`make quickstart`, `make
    test`), each installing what it needs; what they run (``make -n``, nothing executed) is
    the README's install by hand, its quickstart fit and the suite, and .ci/run calls the
    second."""

    # CI runs the suite inside `make test PYTEST=...`: a sub-make would inherit that override
    # (through MAKEFLAGS and the environment), so the plan is read as a fresh shell's
    fresh = {k: v for k, v in os.environ.items() if k not in MAKE_VARIABLES}

    def planned(target: str, *variables: str) -> list[str]:
        done = subprocess.run(
            ["make", "-n", target, "VENV=.venv-new", *variables],
            cwd=ROOT,
            env=fresh,
            capture_output=True,
            text=True,
            check=True,
        )
        return [" ".join(shlex.split(line)) for line in done.stdout.splitlines()]

    readme = {key(c) for c in COMMANDS}
    quickstart, test = planned("quickstart"), planned("test")
    # after the line that says when an odd .venv is made again (tests/test_makefile.py)
    assert quickstart[1] == "python3 -m venv --clear .venv-new" == test[2]
    assert any(line.endswith("|| .venv-new/bin/pip install torch==2.13.0") for line in quickstart)
    assert ".venv-new/bin/pip install -e ." in quickstart and "pip install -e ." in readme
    assert not any("[test]" in line or "pytest" in line for line in quickstart), "a lean install"
    fit = "python -m lit_sparse fit --config configs/coprime.yaml --config configs/quickstart.yaml"
    assert quickstart[-1] == f".venv-new/bin/{fit}" and fit in readme
    for line in (
        ".venv-new/bin/pip install -e .[test]",
        ".venv-new/bin/pip install -e examples/lit_sparse_dilated -e examples/lit_sparse_copy",
    ):
        assert line in test
    assert test[-1] == ". .venv-new/bin/activate && python -m pytest -q"
    assert "\nmake test LLAMA_CPP=1 " in (ROOT / ".ci" / "run").read_text()  # CI runs them

    # issue 57: llama.cpp (a 10-minute build behind a bare spinner) only when asked, and the
    # first line says so: what it costs and how to ask, or how to leave it out
    llama_cpp = ".venv-new/bin/pip install -e .[llama-cpp]"
    assert llama_cpp not in test
    assert test[0].startswith("echo make test: llama.cpp is left out"), test[0]
    assert "LLAMA_CPP=1" in test[0] and "11 minutes" in test[0]
    asked = planned("test", "LLAMA_CPP=1")
    assert llama_cpp in asked and "11 minutes" in asked[0] and "LLAMA_CPP=0" in asked[0]


def merged(base: dict, override: dict) -> dict:
    out = dict(base)
    for name, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(name), dict):
            out[name] = merged(out[name], value)
        else:
            out[name] = value
    return out


def tiny_configs(folder: Path) -> None:
    """configs/ as in the repository, each training config with tests/configs/tiny.yaml
    layered in (a 2-layer model, 4 steps, the embedded corpus); its logger name kept, and
    the model summary printed as a user sees it."""
    shutil.copytree(ROOT / "configs", folder / "configs")
    tiny = yaml.safe_load(TINY.read_text())
    tiny["trainer"].pop("logger")
    tiny["trainer"].pop("enable_model_summary")
    for path in (folder / "configs").glob("*.yaml"):
        values = yaml.safe_load(path.read_text())
        if "trainer" in values:
            path.write_text(yaml.safe_dump(merged(values, tiny), sort_keys=False))


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """Every command to run, in the README's order (fit before what reads its run)."""
    folder = tmp_path_factory.mktemp("readme")
    tiny_configs(folder)
    env = {
        **__import__("os").environ,
        "PATH": f"{Path(sys.executable).parent}:{__import__('os').environ['PATH']}",
    }
    done = {}
    for command in TO_RUN:
        done[command] = subprocess.run(
            ["bash", "-c", command],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    return done


@pytest.mark.parametrize("command", TO_RUN, ids=[key(c)[:60] for c in TO_RUN])
def test_readme_command_runs_as_written(command, results):
    done = results[command]
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr
    words = key(command).split()
    held_out = "| metric | shakespeare | math | mean over sets |"  # a column per held-out set
    expected = {
        "fit": ["length extrapolation (extrapolation.md)"],  # a finished run resumed: its table
        # the baseline, and a column of the longest length asked for
        "extrapolate": [
            "changes against the training length",
            *[w for w in words if w.isdigit()][-1:],
        ],
        "test": [held_out, "| test/ppl |"],
        "validate": [held_out, "| val/ppl |"],
    }.get(words[3] if len(words) > 3 else "", [])
    for text in expected:
        assert text in done.stdout, done.stdout[-2000:]


# What a command printed that is not the user's business (issue 25, item 9): Lightning's
# litlogger tip, torch's LeafSpec deprecation, "Total FLOPs: 0" in the model summary and
# ModelCheckpoint's "dirpath has changed" on an evaluation
NOISE = (
    "Tip: For seamless",
    "litlogger",
    "litmodels",
    "LeafSpec",
    "Total FLOPs: 0\n",
    "Total Flops",
    "The dirpath has changed",
)


@pytest.mark.parametrize("command", TO_RUN, ids=[key(c)[:60] for c in TO_RUN])
def test_readme_command_prints_no_noise(command, results):
    """Every README command (fit, validate, generate, export, ...) as a user runs it prints
    none of NOISE; a fit's model summary counts the FLOPs of one training sequence."""
    done = results[command]
    printed = done.stdout + done.stderr
    found = [line for line in NOISE if line in printed]
    assert not found, f"{command} printed {found}:\n{printed[-3000:]}"
    words = key(command).split()
    if words[3:4] == ["fit"] and "--ckpt_path" not in words:
        [flops] = re.findall(r"Total FLOPs: ([\d.]+ ?[KMGT]?)", printed)
        assert float(flops.rstrip(" KMGT")) > 0, printed[-3000:]


def section_commands(title: str) -> list[str]:
    """Every ``python -m lit_sparse`` command in the bash blocks of a README section."""
    text = README.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    blocks = re.findall(r"```bash\n(.*?)```", text[start:end], flags=re.S)
    commands = []
    for block in blocks:
        for command in block.replace("\\\n", " ").splitlines():
            if command.startswith("python -m lit_sparse "):
                commands.append(command)
    return commands


def test_the_generating_text_commands_run_as_written(learned_run, tmp_path, monkeypatch, capsys):
    runs = tmp_path / "runs" / "quickstart"
    runs.mkdir(parents=True)
    (runs / "coprime").symlink_to(learned_run.log_dir.parent, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    commands = section_commands("Generating text")
    assert [shlex.split(c)[3] for c in commands] == ["generate", "export", "generate"]
    for command in commands:
        assert lit_main(shlex.split(command)[3:]) == 0, command
        out = capsys.readouterr().out
        if " generate " in command:
            assert out.startswith("ROMEO:"), command
    assert (tmp_path / "exported" / "quickstart-coprime" / "model.safetensors").is_file()
