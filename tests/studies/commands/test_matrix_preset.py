"""``matrix --preset cpu`` end to end on tiny seeded runs: --run trains each run into its own
folder and skips complete ones on a second call, a killed study resumes its interrupted run,
--table reports mean and sd over seeds with the comparisons marked, --plot writes PNGs."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import statistics
import sys
import time
from pathlib import Path

import pytest

from lit_sparse.__main__ import main as lit_main
from lit_sparse.runs.locks import lock_holder

pytestmark = pytest.mark.slow  # trains, starts processes or benches

ROOT = Path(__file__).resolve().parents[3]
TINY = ROOT / "tests" / "configs" / "tiny_study.yaml"
VARIANTS = ("fib_fixed", "fib_learned")
SEEDS = (0, 1)


@pytest.fixture(autouse=True)
def plain_argv(monkeypatch):
    """LightningCLI warns when it sees pytest's own arguments in sys.argv."""
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])


def preset_args(root: Path, *action: str, seeds=SEEDS, variants=VARIANTS) -> list[str]:
    return [
        "matrix",
        "--preset",
        "cpu",
        "--seeds",
        *map(str, seeds),
        "--variants",
        *variants,
        "--root",
        str(root),
        *action,
    ]


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory) -> tuple[Path, str]:
    """fib fixed and fib learned, seeds 0 and 1, 6 steps each at T = 16 (the preset's
    callbacks and evaluation lengths), run by ``matrix --preset cpu --run``."""
    from lit_sparse_studies.study import runner

    root = tmp_path_factory.mktemp("study") / "runs" / "cpu"
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        patch.setattr(sys, "argv", ["lit_sparse"])
        # each fit through the same CLI in this process: a process per fit is what the
        # claim, crash and kill tests below check; here it would only add four interpreter
        # and Lightning start-ups (9 s of CPU each)
        patch.setattr(runner, "fit_in_subprocess", lambda args: lit_main(list(args)))
        assert lit_main(preset_args(root, "--run", "--fit_config", str(TINY))) == 0
    return root, out.getvalue()


def table_rows(text: str, first: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("| ") and not line.startswith(f"| {first} ")
    ]


def section(text: str, title: str) -> str:
    return text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def spread_cell(cell: str) -> tuple[float, float]:
    mean, sd = re.fullmatch(r"([-+\d.]+) ± ([\d.]+)(?: \*)?", cell).groups()
    return float(mean), float(sd)


def test_run_trains_each_run_into_its_own_folder(tiny_study):
    root, out = tiny_study
    for variant in VARIANTS:
        for seed in SEEDS:
            experiment = root / variant / f"seed{seed}"
            assert [p.name for p in experiment.glob("version_*")] == ["version_0"]
            run_dir = experiment / "version_0"
            extrapolation = json.loads((run_dir / "extrapolation.json").read_text())
            assert extrapolation["step"] == 6 and extrapolation["lengths"] == [16, 64, 256]
            config = (run_dir / "config.yaml").read_text()
            assert f"seed_everything: {seed}\n" in config
            assert f"    seed: {seed}\n" in config  # the data module's seed
            assert f"- --seed_everything\n- '{seed}'" in (experiment / "preset.yaml").read_text()
    assert out.count(": starting: python -m lit_sparse fit ") == 4


def test_a_second_run_skips_the_complete_runs(tiny_study, capsys):
    root, _ = tiny_study
    assert lit_main(preset_args(root, "--run", "--fit_config", str(TINY))) == 0
    out = capsys.readouterr().out
    assert out.count("complete (") == 4 and out.count(", skipped") == 4
    assert "starting" not in out and "resuming" not in out
    assert len(list(root.glob("*/seed*/version_*"))) == 4
    assert lit_main(preset_args(root, "--list")) == 0
    rows = table_rows(capsys.readouterr().out, "run")
    # the step it finished at, and the options it was trained with besides the preset's
    assert [row[3] for row in rows] == [
        f"complete (step 6; trained with extra options --config {TINY})"
    ] * 4
    assert lit_main(preset_args(root, "--run", "--dry-run", "--fit_config", str(TINY))) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4 and all(line.endswith("/version_0), skipped") for line in lines)


def test_records_rebuild_the_tables_without_the_run_folders(tiny_study, capsys, tmp_path):
    """``--run --results DIR`` over the complete runs writes a record per run (skipped runs
    get theirs too); ``--table --results DIR`` from those records alone prints the tables the
    run folders give."""
    root, _ = tiny_study
    results = tmp_path / "results"
    assert (
        lit_main(
            [*preset_args(root, "--run", "--fit_config", str(TINY)), "--results", str(results)]
        )
        == 0
    )
    assert sorted(p.relative_to(results).as_posix() for p in results.rglob("*.json")) == [
        f"{variant}/seed{seed}.json" for variant in sorted(VARIANTS) for seed in SEEDS
    ]
    capsys.readouterr()
    assert lit_main(preset_args(root, "--table")) == 0
    from_runs = capsys.readouterr().out
    away = tmp_path / "elsewhere"  # the run folders gone: the records alone
    assert lit_main([*preset_args(away, "--table"), "--results", str(results)]) == 0
    assert capsys.readouterr().out == from_runs
    record = json.loads((results / "fib_learned" / "seed0.json").read_text())
    record["variant"] = "fib_fixed"  # a record copied under another run's name
    (results / "fib_learned" / "seed0.json").write_text(json.dumps(record))
    assert lit_main([*preset_args(away, "--table"), "--results", str(results)]) == 2
    assert "the record is not this path's run: variant 'fib_fixed'" in capsys.readouterr().err


def test_other_options_for_a_started_run_are_refused(tiny_study, capsys):
    root, _ = tiny_study
    args = preset_args(root, "--run", "--fit_config", str(TINY), "--model.lr", "0.01")
    assert lit_main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert f"{root / 'fib_fixed' / 'seed0'} was started with options" in err[0]


def test_table_reports_mean_and_sd_over_seeds(tiny_study, capsys, tmp_path):
    root, _ = tiny_study
    out_file = tmp_path / "study.md"
    assert lit_main([*preset_args(root, "--table", seeds=(0, 1, 2)), "--out", str(out_file)]) == 0
    text = capsys.readouterr().out
    assert out_file.read_text() == text
    assert "Seeds per variant: fib_fixed 2, fib_learned 2." in text
    assert "left out: fib_fixed/seed2 (not started), fib_learned/seed2 (not started)" in text

    def per_seed(variant: str) -> list[dict]:
        return [
            json.loads((root / variant / f"seed{s}/version_0/extrapolation.json").read_text())
            for s in SEEDS
        ]

    rows = table_rows(section(text, "Perplexity against evaluation length"), "variant")
    assert {(r[0], r[1]) for r in rows} == {
        (v, s) for v in VARIANTS for s in ("shakespeare", "math")
    }
    for variant, set_name, seeds, *cells in rows:
        assert seeds == "2"
        runs = [r["sets"][set_name] for r in per_seed(variant)]
        for cell, length in zip(cells[:3], ("16", "64", "256"), strict=True):
            values = [r[length]["ppl"] for r in runs]
            mean, sd = spread_cell(cell)
            assert mean == pytest.approx(statistics.mean(values), abs=0.006)
            assert sd == pytest.approx(statistics.stdev(values), abs=0.006)
        for cell, length in zip(cells[3:], ("64", "256"), strict=True):
            values = [r[length]["change_pct"] for r in runs]
            mean, sd = spread_cell(cell)
            assert mean == pytest.approx(statistics.mean(values), abs=0.06)
            assert cell.endswith(" *") == (abs(statistics.mean(values)) > statistics.stdev(values))

    comparisons = table_rows(section(text, "Comparisons behind the paper's claims"), "claim")
    learned_fixed = [r for r in comparisons if r[1] == "fib_learned - fib_fixed"]
    assert {r[3] for r in learned_fixed} == {"shakespeare", "math"}
    for row in learned_fixed:
        (a, sd_a), (b, sd_b) = spread_cell(row[4]), spread_cell(row[5])
        assert float(row[6]) == pytest.approx(a - b, abs=0.011)
        assert float(row[7]) == pytest.approx(sd_a + sd_b, abs=0.011)
        assert row[8] == ("yes" if abs(a - b) > sd_a + sd_b else "no")
    # only the variants that were run are compared
    assert all("fib_linear" not in r[1] and "dense" not in r[1] for r in comparisons)

    alpha = table_rows(section(text, "Learned alpha"), "variant")
    assert [(r[0], r[1]) for r in alpha] == [("fib_learned", str(k)) for k in range(5)]
    trajectories = [
        json.loads((root / "fib_learned" / f"seed{s}/version_0/alpha_trajectory.json").read_text())
        for s in SEEDS
    ]
    for layer, row in enumerate(alpha):
        drifts = [t["alphas"][-1][layer] - t["alphas"][0][layer] for t in trajectories]
        mean, sd = spread_cell(row[4])
        assert mean == pytest.approx(statistics.mean(drifts), abs=6e-5)
        assert sd == pytest.approx(statistics.stdev(drifts), abs=6e-5)
        assert row[5] == (
            "yes" if abs(statistics.mean(drifts)) > statistics.stdev(drifts) else "no"
        )

    bins = table_rows(section(text, "Position-binned NLL"), "variant")
    position = [
        json.loads((root / "fib_fixed" / f"seed{s}/version_0/position_loss.json").read_text())
        for s in SEEDS
    ]
    row = next(r for r in bins if r[:2] == ["fib_fixed", "math"])
    for k, cell in enumerate(row[2:10]):
        mean, _ = spread_cell(cell)
        assert mean == pytest.approx(
            statistics.mean(p["sets"]["math"][k] for p in position), abs=6e-4
        )

    paper = section(text, "The paper's numbers (a different scale: qualitative reference only)")
    paper_rows = table_rows(paper, "variant")
    assert [r[:3] for r in paper_rows] == [
        ["fib_fixed", "fib_fixed_w8", "44.08"],
        ["fib_learned", "fib_learned_w8", "43.70"],
    ]


def test_plot_writes_the_three_figures(tiny_study, capsys, tmp_path):
    from matplotlib.image import imread

    root, _ = tiny_study
    assert lit_main([*preset_args(root, "--plot", str(tmp_path / "plots"))]) == 0
    written = capsys.readouterr().out.split()
    names = ["ppl_vs_length.png", "position_nll.png", "alpha_trajectories.png"]
    assert [Path(p).name for p in written] == names
    for path in map(Path, written):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        image = imread(path)
        assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 300
        assert len({tuple(px) for px in image.reshape(-1, image.shape[2])[::97]}) > 10


def test_table_without_complete_runs_says_so(tmp_path, capsys):
    assert lit_main(preset_args(tmp_path / "none", "--table")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no complete run under" in err[0]


def study_callbacks(path: Path, *faults: dict) -> Path:
    """A config with the preset's callbacks (configs/study/cpu.yaml) and ``faults`` after
    them (a list in a later config replaces the earlier list)."""
    import yaml

    preset = yaml.safe_load((ROOT / "configs" / "study" / "cpu.yaml").read_text())
    callbacks = [*preset["trainer"]["callbacks"], *faults]
    path.write_text(yaml.safe_dump({"trainer": {"callbacks": callbacks}}))
    return path


def fault(name: str, **init_args) -> dict:
    return {"class_path": f"tests.reliability.faults.{name}", "init_args": init_args}


@pytest.fixture(scope="module")
def studies():
    """Studies as processes: forks of one process that imported torch and Lightning, and so
    are the fits each starts (a process of its own per fit, as ``fit_in_subprocess`` starts
    it: ``tests/reliability/fork_server.py``); the fault callbacks import; tiny steps: one
    thread is quicker."""
    from tests.reliability.cli_runs import ForkServer

    server = ForkServer(OMP_NUM_THREADS="1")
    yield server
    server.close()


def output(files: tuple[Path, Path]) -> str:
    return "".join(path.read_text() for path in files)


@pytest.mark.slow
def test_two_studies_on_one_root_never_train_a_run_twice(tmp_path, studies):
    """The issue's case: two ``matrix --run`` at once on one root. Each run is claimed
    while it trains: the other study skips it (naming the holder) and takes the next."""
    root = tmp_path / "runs" / "cpu"
    slow = study_callbacks(tmp_path / "slow.yaml", fault("SleepAtTrainStart", seconds=3))
    args = preset_args(root, "--run", "--fit_config", str(TINY), str(slow), seeds=(0,))
    files = {}  # pid -> its stdout and stderr
    for name in ("first", "second"):
        started = studies.start(tmp_path, *args, name=name)
        files[studies.pid] = started
    codes = [studies.kill_after(900, pid) for pid in files]
    outputs = [output(started) for started in files.values()]
    assert codes == [0, 0], [o[-3000:] for o in outputs]
    both = "\n".join(outputs)
    for variant in VARIANTS:
        name = f"{variant}/seed0"
        assert both.count(f"] {name}: starting: ") == 1, both[-4000:]
        assert [p.name for p in (root / variant / "seed0").glob("version_*")] == ["version_0"]
        skipped = re.search(rf"\] {name}: (in use by process \d+ .*|complete \(.*), skipped", both)
        assert skipped, f"the other study did not skip {name}: {both[-4000:]}"


def test_a_killed_study_resumes_its_run_and_a_crashed_fit_spares_the_next(
    tmp_path, studies, capsys
):
    """Two tests in one study (their fits in processes are the cost), issue 33's merge of
    'a killed study resumes its interrupted run' and 'a crashed fit is reported and the
    study goes on'. SIGKILL a study of fib learned after its run's first checkpoint; the
    same options again for fib fixed and fib learned: fib fixed's fit dies of SIGSEGV (each
    fit is its own process: the study reports it and goes on), fib learned resumes in its
    own folder (fit --ckpt_path last) instead of starting over."""
    root = tmp_path / "runs" / "cpu"
    crash = study_callbacks(tmp_path / "crash.yaml", fault("SegfaultIn", part="fib_fixed"))
    longer = ["--fit_config", str(TINY), str(crash), "--trainer.max_steps", "100",
              "--trainer.val_check_interval", "50"]  # fmt: skip
    first = preset_args(root, "--run", *longer, seeds=(0,), variants=("fib_learned",))
    args = preset_args(root, "--run", *longer, seeds=(0,))  # fib fixed, then fib learned
    studies.start(tmp_path, *first, name="killed", own_group=True)
    study = studies.pid
    experiment = root / "fib_learned" / "seed0"
    checkpoint = experiment / "version_0" / "checkpoints" / "last.ckpt"
    try:
        deadline = time.monotonic() + 600
        while not checkpoint.is_file() and studies.poll(study) is None:
            assert time.monotonic() < deadline, "no checkpoint within 10 minutes"
            time.sleep(0.05)
    finally:
        os.killpg(study, signal.SIGKILL)
        studies.kill_after(60, study)
    # the study is reaped, but its fit child, killed with it, may still be closing its files:
    # the run is free once the kernel has dropped the child's locks
    deadline = time.monotonic() + 60
    while lock_holder(experiment) or lock_holder(experiment / "version_0"):
        assert time.monotonic() < deadline, lock_holder(experiment)
        time.sleep(0.05)
    assert not (experiment / "version_0" / "extrapolation.json").exists()
    assert lit_main([*args, "--dry-run"]) == 0
    planned = capsys.readouterr().out.strip().splitlines()
    assert planned[-1].endswith("--ckpt_path last") and "fib_learned" in planned[-1]

    done = studies.run(tmp_path, *args)
    assert done.returncode == 1, done.stderr[-3000:]  # a run failed
    out = done.stdout
    assert re.search(
        r"^\| fib_fixed/seed0 \| started \| failed \(killed by SIGSEGV\) \|", out, re.M
    )
    assert "[2/2] fib_learned/seed0: resuming: python -m lit_sparse fit " in out
    assert re.search(r"^\| fib_learned/seed0 \| resumed \| complete \| \d+ \|$", out, re.M)
    assert [p.name for p in experiment.glob("version_*")] == ["version_0"]
    run_dir = experiment / "version_0"
    resumed = list(run_dir.glob("config.resume-*.yaml"))
    assert len(resumed) == 1 and int(resumed[0].stem.split("-")[-1]) % 50 == 0
    assert (run_dir / "extrapolation.json").is_file()
    extrapolation = json.loads((run_dir / "extrapolation.json").read_text())
    assert extrapolation["step"] == 100 and extrapolation["lengths"] == [16, 64, 256]
