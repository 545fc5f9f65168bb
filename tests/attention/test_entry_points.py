"""Plugins from other installed packages, found through the ``lit_sparse.attention`` entry
point group: the example package under examples/ (installed by CI, README "Test"), and a
broken distribution installed into a temporary folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

from lit_sparse import build_attention, list_attention
from lit_sparse.cli import main

pytestmark = pytest.mark.slow  # trains, starts processes or benches

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "lit_sparse_dilated"
TINY = ROOT / "tests" / "configs" / "tiny.yaml"
SLIDING = ROOT / "configs" / "sliding_window.yaml"


@pytest.fixture(scope="module")
def example_installed():
    """The example package, installed from this repository (``pip install -e
    examples/lit_sparse_dilated``: the README's test setup and CI do it)."""
    try:
        dist = metadata.distribution("lit-sparse-dilated")
    except metadata.PackageNotFoundError:
        pytest.fail(
            "the example plugin package is not installed: "
            "pip install -e examples/lit_sparse_dilated"
        )
    import lit_sparse_dilated

    assert Path(lit_sparse_dilated.__file__).resolve().is_relative_to(EXAMPLE), (
        f"lit_sparse_dilated is installed from {lit_sparse_dilated.__file__}, not {EXAMPLE}"
    )
    return dist


def test_the_example_is_registered_by_its_entry_point(example_installed):
    from lit_sparse_dilated import DilatedAttention

    (entry,) = [e for e in example_installed.entry_points if e.group == "lit_sparse.attention"]
    assert (entry.name, entry.value) == ("dilated", "lit_sparse_dilated.dilated:DilatedAttention")
    assert "dilated" in list_attention()
    assert type(build_attention("dilated", window=3)) is DilatedAttention


def test_the_example_trains_from_the_cli_by_its_name(example_installed, tmp_path, monkeypatch):
    """``--model.attention dilated`` selects it; a few steps train; the checkpoint and the
    saved config name its class path."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])
    args = ["fit", "--config", str(SLIDING), "--config", str(TINY)]
    args += ["--model.attention", "dilated", "--model.attention.dilation", "5"]
    assert main(args) == 0
    (run,) = tmp_path.glob("runs/dilated/version_*")  # named by the attention trained
    config = (run / "config.yaml").read_text()
    assert "lit_sparse_dilated.dilated.DilatedAttention" in config and "dilation: 5" in config
    from lit_sparse.runs.checkpoint_files import read_checkpoint

    saved = read_checkpoint(run / "checkpoints" / "last.ckpt")
    assert saved["global_step"] == 4
    assert saved["hyper_parameters"]["attention"]["init_args"]["dilation"] == 5


def test_its_options_are_listed_by_name(example_installed, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--model.attention", "dilated", "--model.attention.help", "dilated"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--model.attention.dilation" in out and "the step between the distances" in out


def test_bench_times_it_by_name(example_installed, tmp_path):
    from tests.command_line import command

    bench = command("bench")

    path = tmp_path / "rows.json"
    args = ["attention", "--lengths", "32", "--plugins", "dilated", "--repeats", "1"]
    assert bench([*args, "--json", str(path)]) == 0
    rows = json.loads(path.read_text())
    assert [row["plugin"] for row in rows] == ["dense", "dilated"]
    assert rows[1]["ms"] > 0


BROKEN_MODULE = "raise ImportError('this plugin needs torch_extra')\n"


def broken_distribution(folder: Path) -> None:
    """What pip installs for a package whose plugin module fails on import: the module and a
    dist-info folder with its entry point."""
    (folder / "broken_plugin.py").write_text(BROKEN_MODULE)
    info = folder / "broken_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[lit_sparse.attention]\nbroken = broken_plugin:BrokenAttention\n"
        "dense = broken_plugin:Dense\n"
    )


def test_a_broken_installed_plugin_does_not_break_the_cli(tmp_path):
    """``fit --model.attention <name> --print_config`` works (the name makes the registry
    read the entry points); stderr has one warning line per refused entry point, each
    naming the distribution and why."""
    broken_distribution(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    command = [sys.executable, "-m", "lit_sparse", "fit", "--config", str(SLIDING)]
    done = subprocess.run(
        [*command, "--config", str(TINY), "--model.attention", "sliding_window", "--print_config"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "SlidingWindowAttention" in done.stdout
    warnings = [line for line in done.stderr.splitlines() if "broken-plugin" in line]
    assert len(warnings) == 2, done.stderr
    broken, clash = sorted(warnings)
    assert "'broken'" in broken and "ImportError: this plugin needs torch_extra" in broken
    assert "'dense'" in clash and "is a built-in attention" in clash
    assert "Traceback" not in done.stderr


def test_a_broken_installed_plugin_is_named_when_selected(tmp_path):
    broken_distribution(tmp_path)
    code = textwrap.dedent(
        """
        from lit_sparse.cli import main
        raise SystemExit(main(["fit", "--model.attention", "broken"]))
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].startswith(
        "error: model.attention='broken': unknown attention; registered: "
    )
