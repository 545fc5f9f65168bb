"""``matrix --preset recall`` end to end on tiny seeded runs: the runs it lists are the ones it
trains (each task a folder, the sliding windows matched to fib at each task's length), a
second --run skips them, and --table and --plot report them over seeds. (The preset's
variants, tasks and overlays: test_preset.py.)"""

from __future__ import annotations

import contextlib
import io
import json
import re
import statistics
import sys
from pathlib import Path

import pytest

from lit_sparse.__main__ import main as lit_main
from lit_sparse_studies.study.preset import fib_keys_window

ROOT = Path(__file__).resolve().parents[3]
TINY = ROOT / "tests" / "configs" / "tiny_recall.yaml"
VARIANTS = ("fib_learned", "sw_keys")
TASKS = ("mqar64", "distance", "passkey")
SEEDS = (0, 1)


@pytest.fixture(autouse=True)
def plain_argv(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])


def preset_args(root: Path, *action: str, seeds=SEEDS, variants=VARIANTS, tasks=TASKS):
    return [
        "matrix", "--preset", "recall", "--seeds", *map(str, seeds), "--variants", *variants,
        "--tasks", *tasks, "--root", str(root), *action,
    ]  # fmt: skip


LONG = ("--data.init_args.min_examples", "2")  # the distance and passkey tasks' option


def results_of(root: Path) -> Path:
    return root.parent / "results"


def run_study(root: Path) -> int:
    """mqar64, then distance and passkey with 2 examples per set beyond 1x (an option of
    theirs: each experiment keeps its own options); each finished run's record in
    ``results_of(root)``."""
    results = ("--results", str(results_of(root)))
    first = lit_main(
        preset_args(root, "--run", *results, "--fit_config", str(TINY), tasks=("mqar64",))
    )
    tiny = ("--fit_config", str(TINY), *LONG)
    return first or lit_main(
        preset_args(root, "--run", *results, *tiny, tasks=("distance", "passkey"))
    )


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
    """fib learned and the sliding window at fib's keys, seeds 0 and 1, on mqar64, distance and
    passkey: 4 steps each, then each task's evaluation (1x-64x for distance and passkey)."""
    from lit_sparse_studies.study import runner

    root = tmp_path_factory.mktemp("recall") / "runs" / "recall"
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        patch.setattr(sys, "argv", ["lit_sparse"])
        # each fit through the same CLI in this process: a process per fit is what
        # test_matrix_preset.py checks (crashes, kills, claims); here it would only add
        # twelve interpreter and Lightning start-ups
        patch.setattr(runner, "fit_in_subprocess", lambda args: lit_main(list(args)))
        assert run_study(root) == 0
    return root, out.getvalue()


def recall_json(root: Path, task: str, variant: str, seed: int) -> dict:
    return json.loads((root / task / variant / f"seed{seed}/version_0/recall.json").read_text())


@pytest.mark.slow  # trains the tiny study (12 fits)
def test_run_trains_each_run_into_its_task_folder(tiny_study):
    root, out = tiny_study
    assert out.count(": starting: python -m lit_sparse fit ") == 12
    for task, length, lengths in (
        ("mqar64", 64, [64]),
        ("distance", 256, [256, 1024, 4096, 16384]),
        ("passkey", 256, [256, 1024, 4096, 16384]),
    ):
        for variant in VARIANTS:
            for seed in SEEDS:
                run_dir = root / task / variant / f"seed{seed}" / "version_0"
                table = recall_json(root, task, variant, seed)
                assert table["step"] == 4 and table["lengths"] == lengths
                assert table["training_length"] == length
                config = (run_dir / "config.yaml").read_text()
                assert f"seed_everything: {seed}\n" in config
                if variant == "sw_keys":
                    assert f"window: {fib_keys_window(length)}\n" in config
    assert recall_json(root, "distance", "fib_learned", 0)["has_new_offsets"]
    assert not recall_json(root, "distance", "sw_keys", 0)["has_new_offsets"]


@pytest.mark.slow  # trains the tiny study (12 fits)
def test_a_second_run_skips_the_complete_runs(tiny_study, capsys):
    root, _ = tiny_study
    assert run_study(root) == 0
    out = capsys.readouterr().out
    assert out.count(", skipped") == 12 and "starting" not in out


def table_rows(text: str, title: str) -> list[list[str]]:
    part = text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
    return [
        [c.strip() for c in line.strip("|").split("|")]
        for line in part.splitlines()
        if line.startswith("| ") and not line.startswith("| variant ")
        and not line.startswith("| question ") and not line.startswith("| cells ")
        and not line.startswith("| task ") and not line.startswith("| setting ")
    ]  # fmt: skip


def spread(cell: str) -> tuple[float, float]:
    mean, sd = re.fullmatch(r"([-+\d.]+) ± ([\d.]+)(?: \[[\d.]+\])?", cell).groups()
    return float(mean), float(sd)


def interval(cell: str) -> tuple[float, float, float]:
    """``mean [low, high]``: the mean over seeds and its bootstrap interval."""
    mean, low, high = re.fullmatch(r"([-+\d.]+) \[([-+\d.]+), ([-+\d.]+)\]", cell).groups()
    return float(mean), float(low), float(high)


@pytest.mark.slow  # trains the tiny study (12 fits)
def test_table_reports_means_and_intervals_over_seeds(tiny_study, capsys, tmp_path):
    root, _ = tiny_study
    out_file = tmp_path / "recall.md"
    assert lit_main([*preset_args(root, "--table"), "--out", str(out_file)]) == 0
    text = capsys.readouterr().out
    assert out_file.read_text() == text
    assert "Seeds per variant, distance: fib_learned 2, sw_keys 2." in text

    mqar = {r[1]: r for r in table_rows(text, "MQAR: accuracy per setting")}
    for variant in VARIANTS:
        values = [
            recall_json(root, "mqar64", variant, s)["scores"]["use"]["64"]["L64_kv4"]["accuracy"]
            for s in SEEDS
        ]
        mean, low, high = interval(mqar[variant][2])
        assert mean == pytest.approx(statistics.mean(values), abs=6e-4)
        assert low <= mean <= high
        assert mqar[variant][3] == " / ".join(f"{v:.3f}" for v in values)  # each seed's
    assert mqar["sw_keys"][4] == "4 ± 0 (0/2)"  # steps (none stopped early)
    assert mqar["sw_keys"][5:7] == ["- / -", "- / -"]  # steps to 0.5 and 0.9: never (4 steps)
    assert mqar["sw_keys"][7:10] == ["13.0", "13.0", "13"]  # rows read, slots, cache at 64
    assert mqar["fib_learned"][7:9] == ["17.0", "24.0"]  # a learned rung: one slot, two rows

    rows = table_rows(text, "Distance task (distance): accuracy per distance bucket")
    summary = {r[0]: r for r in rows if len(r) == 11}  # variant, steps, rows, cache, 1x, 6 at 64x
    assert summary["sw_keys"][2:4] == ["16.0", "16"]  # rows read per query and cache rows at 256
    assert summary["sw_keys"][7] == summary["sw_keys"][10] == "16"  # cache at 64x, per policy
    row = next(r for r in rows if r[0] == "fib_learned" and r[1] == "16384 (64x)")
    values = [
        recall_json(root, "distance", "fib_learned", s)["scores"]["use"]["16384"]["d8192-16383"]
        for s in SEEDS
    ]
    mean, _ = spread(row[-1])
    assert mean == pytest.approx(statistics.mean(v["accuracy"] for v in values), abs=6e-3)
    assert row[2] == str(values[0]["examples"])  # examples a bucket at 64x
    assert 0 <= float(row[-1].rsplit("[", 1)[1].rstrip("]")) <= 1  # coverage of the samples
    assert "## Does coverage predict recall? (distance)" in text

    passkey = table_rows(text, "Passkey (passkey): accuracy against length and depth")
    assert {(r[0], r[1]) for r in passkey} >= {
        ("sw_keys", "1024 (4x)"),
        ("fib_learned", "256 (1x)"),
    }
    questions = table_rows(text, "Comparisons behind the questions")
    extrapolation = [r for r in questions if r[2] == "sw_keys - sw_keys at 1x"]
    assert {(r[1], r[3]) for r in extrapolation} == {
        ("distance", "16384 (64x), use, d < 256"),
        ("distance", "16384 (64x), use, d >= 256"),
        ("distance", "16384 (64x), drop, d < 256"),
        ("distance", "16384 (64x), drop, d >= 256"),
        ("passkey", "16384 (64x), use"),
        ("passkey", "16384 (64x), drop"),
    }
    row = next(r for r in extrapolation if r[1] == "passkey" and r[3].endswith("use"))
    per_seed = []
    for s in SEEDS:
        scores = recall_json(root, "passkey", "sw_keys", s)["scores"]["use"]
        at = [scores["16384"][d]["exact"] for d in scores["16384"]]
        base = [scores["256"][d]["exact"] for d in scores["256"]]
        per_seed.append((statistics.mean(at), statistics.mean(base)))
    assert interval(row[4])[0] == pytest.approx(statistics.mean(a for a, _ in per_seed), abs=6e-4)
    assert interval(row[5])[0] == pytest.approx(statistics.mean(b for _, b in per_seed), abs=6e-4)
    alpha = table_rows(text, "Learned alpha: drift per layer")
    assert {(r[0], r[1]) for r in alpha} == {(t, "fib_learned") for t in TASKS}


@pytest.mark.slow  # trains the tiny study (12 fits)
def test_plot_writes_the_figures(tiny_study, capsys, tmp_path):
    from matplotlib.image import imread

    root, _ = tiny_study
    assert lit_main([*preset_args(root, "--plot", str(tmp_path / "plots"))]) == 0
    written = capsys.readouterr().out.split()
    assert [Path(p).name for p in written] == [
        "mqar.png", "distance_use.png", "distance_drop.png", "passkey.png", "alpha_recall.png",
        "learning.png",
    ]  # fmt: skip
    for path in map(Path, written):
        image = imread(path)
        assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 300
        assert len({tuple(px) for px in image.reshape(-1, image.shape[2])[::97]}) > 10


@pytest.mark.slow  # trains the tiny study (12 fits)
def test_each_finished_run_leaves_a_record_to_commit(tiny_study):
    """<results>/<task>/<variant>/seed<K>.json: recall.json whole, the learning curve, the
    alpha trajectory, the steps, the times and the commit, in a few kB."""
    root, out = tiny_study
    records = sorted(results_of(root).rglob("*.json"))
    assert len(records) == 12 and out.count("  record: ") == 12
    for path in records:
        record = json.loads(path.read_text())
        task, variant, seed = path.parent.parent.name, path.parent.name, int(path.stem[4:])
        assert (record["task"], record["variant"], record["seed"]) == (task, variant, seed)
        assert record["recall"] == recall_json(root, task, variant, seed)
        assert record["step"] == record["max_steps"] == 4 and not record["stopped_early"]
        assert record["curve"]["step"] == [4] and 0 <= record["curve"]["val/acc"][0] <= 1
        assert record["wall_s"] > 0 and record["cpu_s"] is not None  # in-process fits here
        assert record["setup"]["model.arch.n_layers"] == 5
        assert record["commit"] is None or re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", record["commit"])
        assert (record["alpha"] is not None) == (variant == "fib_learned")
        assert path.stat().st_size < 30_000


@pytest.mark.slow  # trains the tiny study (12 fits)
def test_table_and_plot_rebuild_from_the_records_alone(tiny_study, capsys, tmp_path):
    """A machine with the committed records and no runs/ gets the same tables."""
    import shutil

    root, _ = tiny_study
    assert lit_main(preset_args(root, "--table")) == 0
    from_runs = capsys.readouterr().out
    records = shutil.copytree(results_of(root), tmp_path / "results")
    elsewhere = ["--results", str(records)]
    assert lit_main([*preset_args(tmp_path / "no-runs", "--table"), *elsewhere]) == 0
    assert capsys.readouterr().out == from_runs
    plots = tmp_path / "plots"
    assert lit_main([*preset_args(tmp_path / "no-runs", "--plot", str(plots)), *elsewhere]) == 0
    assert len(list(plots.glob("*.png"))) == 6
    assert not (tmp_path / "no-runs").exists()


@pytest.mark.slow  # trains the tiny study (12 fits)
def test_records_compare_the_setup_values_both_recorded(tiny_study, capsys, tmp_path):
    """A record written before the preset compared a key (it lacks the key) still joins its
    task's table; a value both records hold that differs is refused, named with both values."""
    import shutil

    root, _ = tiny_study
    records = shutil.copytree(results_of(root), tmp_path / "results")
    args = [*preset_args(tmp_path / "no-runs", "--table"), "--results", str(records)]
    assert lit_main(args) == 0
    expected = capsys.readouterr().out

    def edit(seed: int, change) -> None:
        path = records / "mqar64" / "sw_keys" / f"seed{seed}.json"
        record = json.loads(path.read_text())
        change(record["setup"])
        path.write_text(json.dumps(record))

    edit(1, lambda setup: setup.pop("model.arch.head_dim"))  # an older record's keys
    assert lit_main(args) == 0
    assert capsys.readouterr().out == expected
    edit(1, lambda setup: setup.update({"model.lr": 0.5}))
    assert lit_main(args) == 2
    err = capsys.readouterr().err
    assert "seed1.json was not trained like" in err and "model.lr" in err and "0.5" in err


@pytest.mark.slow  # trains the tiny study (12 fits)
def test_the_distance_summary_reads_each_policy_and_part_of_the_records(
    tiny_study, capsys, tmp_path
):
    """The distance summary's columns: the mean over the buckets at T, then at the longest
    length over the buckets with d < T and with d >= T under use and drop, each the mean
    over seeds; checked on records whose every cell holds a different accuracy (the tiny
    fits score about 0)."""
    import shutil

    root, _ = tiny_study
    records = shutil.copytree(results_of(root), tmp_path / "results")
    expected = {}  # (policy, length, within) -> per-seed means over the buckets
    for seed in SEEDS:
        path = records / "distance" / "fib_learned" / f"seed{seed}.json"
        record = json.loads(path.read_text())
        recall = record["recall"]
        for p, (policy, by_length) in enumerate(recall["scores"].items()):
            for t, (length, cells) in enumerate(by_length.items()):
                for b, (name, cell) in enumerate(cells.items()):
                    cell["accuracy"] = round((0.11 * b + 0.23 * t + 0.31 * p + 0.05 * seed) % 1, 4)
                    low, high = recall["distances"][name]
                    within = True if high < 256 else False if low >= 256 else "neither"
                    for part in (None, within):
                        key = (policy, int(length), part)
                        expected.setdefault(key, {}).setdefault(seed, []).append(cell["accuracy"])
        path.write_text(json.dumps(record))
    args = [*preset_args(tmp_path / "no-runs", "--table"), "--results", str(records)]
    assert lit_main(args) == 0
    rows = table_rows(capsys.readouterr().out, "Distance task (distance): accuracy per distance")
    row = next(r for r in rows if r[0] == "fib_learned" and len(r) == 11)
    columns = [("use", 256, None), *[(p, 16384, w) for p in ("use", "drop") for w in (True, False)]]
    for cell, key in zip([row[4], row[5], row[6], row[8], row[9]], columns, strict=True):
        means = [statistics.mean(values) for values in expected[key].values()]
        assert interval(cell)[0] == pytest.approx(statistics.mean(means), abs=6e-4), key


@pytest.mark.slow  # one fit
def test_a_run_that_stops_early_is_complete(tmp_path, capsys):
    """EarlyStopping at its threshold ends the fit before max_steps; recall.json says so,
    --list shows the step it stopped at and --run counts it complete."""
    stop = ROOT / "tests" / "configs" / "stop_at_first_validation.yaml"
    root = tmp_path / "runs"
    one = {"seeds": (0,), "variants": ("dense",), "tasks": ("mqar64",)}
    options = ("--fit_config", str(TINY), str(stop))
    results = ("--results", str(results_of(root)))
    assert lit_main(preset_args(root, "--run", *results, *options, **one)) == 0
    saved = recall_json(root, "mqar64", "dense", 0)
    assert saved["step"] == 2 and saved["stopped_early"] is True
    record = json.loads((results_of(root) / "mqar64/dense/seed0.json").read_text())
    assert record["stopped_early"] and (record["step"], record["max_steps"]) == (2, 8)
    assert record["cpu_s"] > 1 and record["wall_s"] > 1  # the fit's own process
    capsys.readouterr()
    assert lit_main(preset_args(root, "--list", **one)) == 0
    # the options it was trained with (issue 47), as fit took them
    extra = f"--config {TINY} --config {stop}"
    assert f"| complete (step 2 (stopped early); trained with extra options {extra}) |" in (
        capsys.readouterr().out
    )
    assert lit_main(preset_args(root, "--run", *options, **one)) == 0
    assert ": complete (" in capsys.readouterr().out


@pytest.mark.parametrize("text", ['{"format": "lit_sparse.recall/1"}', '{"step": 3}', None])
def test_a_file_that_is_no_record_is_named_as_damaged(tmp_path, text):
    """Another result's JSON, one without a format, or no file: DamagedFileError naming it."""
    from lit_sparse.errors import DamagedFileError
    from lit_sparse_studies.study.recall_records import read_record

    path = tmp_path / "mqar64" / "dense" / "seed0.json"
    path.parent.mkdir(parents=True)
    if text is not None:
        path.write_text(text)
    with pytest.raises(DamagedFileError, match=rf"recall run record: {re.escape(str(path))}"):
        read_record(path)


@pytest.mark.slow  # the tiny study's runs
def test_an_export_of_a_recall_run_carries_its_accuracy_in_the_card(tiny_study, tmp_path, capsys):
    from lit_sparse.interop.export import export_run
    from lit_sparse.runs.analysis import load_run

    root, _ = tiny_study
    run_dir = root / "mqar64" / "fib_learned" / "seed0"
    run = load_run(run_dir, load_model=False)
    assert run.recall.to_dict()["scores"] == recall_json(root, "mqar64", "fib_learned", 0)["scores"]
    folder = export_run(run_dir, tmp_path / "export").folder
    card = (folder / "README.md").read_text()
    for policy in ("use", "drop"):
        accuracy = run.recall.accuracy(policy, 64, "L64_kv4")
        table = f"| set | 64 (1x) |\n|---|---:|\n| L64_kv4 | {accuracy:.3f} |"
        assert f"new_offsets={policy}:\n\n{table}" in card
    assert "## Recall" in card and "no held-out scores" not in card
    assert "# lit_sparse recall/mqar64/fib_learned/seed0\n" in card
    # the Use section scores the task, not a text prompt, and runs as written
    assert "--prompt" not in card and "pipeline(" not in card
    (snippet,) = re.findall(r"## Use\n\n.*?```python\n(.*?)```", card, re.S)
    exec(compile(snippet.replace("THIS_FOLDER_OR_REPO", str(folder)), "README.md", "exec"), {})
    use = run.recall.accuracy("use", 64, "L64_kv4")
    assert f"| L64_kv4 | {use:.3f} |" in capsys.readouterr().out
