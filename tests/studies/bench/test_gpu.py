"""``bench gpu``: the plan fits in 8 minutes and covers what the GPU must measure; its dry run
checks every piece on the CPU and fails on a broken one; the runner stops a step at its
budget and reads back each bench's rows. No GPU number is asserted (none runs here)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from lit_sparse_studies.bench import gpu


def main(argv):
    """``python -m lit_sparse bench ...`` in this process."""
    from lit_sparse.__main__ import main as lit_main

    return lit_main(["bench", *argv])


def step(name: str) -> gpu.Step:
    return next(s for s in gpu.PLAN if s.name == name)


def test_the_plan_fits_in_8_minutes_and_covers_the_gpu_pieces():
    assert [s.name for s in gpu.PLAN] == ["tests", "attention", "decode", "train"]
    assert sum(s.budget_s for s in gpu.PLAN) <= 8 * 60
    tests = step("tests").args
    assert tests[:2] == ["pytest", "-q"] and "gpu" in tests and set(gpu.GPU_TESTS) <= set(tests)
    attention = " ".join(step("attention").args)
    for piece in ("--device cuda", "--dtype bfloat16", "--batch 8", "--lengths 4096 16384 65536"):
        assert piece in attention
    assert "fibonacci sliding_window sdpa flex:fibonacci" in attention  # dense always runs
    decode = " ".join(step("decode").args)
    assert decode.startswith("lit_sparse bench decode --device cuda")
    train = " ".join(step("train").args)
    assert "--shape paper" in train and "--repeats 20" in train and "--device cuda" in train
    assert step("attention").floor and step("decode").floor and not step("train").floor


def test_without_cuda_a_run_is_refused_in_one_line(capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    assert main(["gpu", "--json", "out.json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: bench gpu: no CUDA device here") and err.count("\n") == 1


def test_an_unknown_step_is_refused(capsys):
    assert main(["gpu", "--dry-run", "--steps", "nope"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("error: --steps nope: no step of the plan; tests,") and err.count("\n") == 1
    )


@pytest.mark.slow
def test_the_dry_run_prints_the_plan_and_checks_every_piece(capsys):
    assert main(["gpu", "--dry-run"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("GPU plan: 4 steps, at most 480 s")
    for s in gpu.PLAN:
        assert f"{s.name} ({s.budget_s} s)" in out.out
        assert "python -m " + " ".join(s.args) in out.out
    assert "dry run: every piece imports and builds" in out.out
    assert "gpu tests collect" in out.err and "plugins and inputs built" in out.err


def test_a_broken_piece_fails_the_dry_run(monkeypatch, capsys):
    """A plan whose attention step names a row that does not exist, and a decode step whose
    plugin is unknown: the dry run names both and exits 1."""
    attention = replace(step("attention"), args=[*step("attention").args[:-4], "--plugins", "x"])
    decode = replace(step("decode"), args=[*step("decode").args, "--plugins", "nope"])
    monkeypatch.setattr(gpu, "PLAN", [attention, decode])
    assert main(["gpu", "--dry-run"]) == 1
    err = capsys.readouterr().err
    assert "attention: " in err and "decode: " in err and "FAILED" in err


@pytest.mark.slow  # a bench process (torch, the timing of two rows) and one stopped: 10-13 s
def test_the_runner_reads_rows_back_and_stops_a_step_at_its_budget(tmp_path):
    """On the CPU: a small bench step's rows come back in its result; a step that outlives
    its budget is stopped and said so, and the next one still runs."""
    quick = gpu.Step(
        "quick",
        ["lit_sparse", "bench", "attention", "--lengths", "32", "--plugins", "fibonacci"]
        + ["--repeats", "1"],
        300,
        "a small CPU bench",
    )
    slow = gpu.Step("slow", ["timeit", "import time; time.sleep(30)"], 1, "sleeps", bench=False)
    results = [gpu._run_step(s, tmp_path, progress=lambda message: None) for s in (slow, quick)]
    assert results[0]["rc"] is None and "stopped after its budget of 1 s" in results[0]["note"]
    assert results[1]["rc"] == 0
    assert [row["plugin"] for row in results[1]["rows"]] == ["dense", "fibonacci"]
