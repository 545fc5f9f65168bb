"""The presets (lit_sparse_studies.study.preset). The CPU preset: the runs ``matrix --preset
cpu`` lists are the ones it runs, every one builds as the variant it names at one shared shape,
and a seed changes the initialisation and the order of the training windows. The recall
preset: its variants and tasks, each task's overlay at its length, the sliding windows matched
to fib, and what --list prints (its runs end to end: test_recall_preset.py)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
import torch

from lit_sparse.__main__ import main as lit_main
from lit_sparse.cli import LitSparseCLI
from lit_sparse_studies.study.paper_matrix import CONFIG_DIR, identify
from lit_sparse_studies.study.preset import PRESETS, fib_cache_window, fib_keys_window, preset_runs

ROOT = Path(__file__).resolve().parents[3]
TINY = ROOT / "tests" / "configs" / "tiny_study.yaml"
CPU = PRESETS["cpu"]


@pytest.fixture(autouse=True)
def plain_argv(monkeypatch):
    """LightningCLI warns when it sees pytest's own arguments in sys.argv."""
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])


def table_rows(text: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("| ") and not line.startswith("| run ")
    ]


def test_the_preset_runs_the_issues_nine_variants_and_four_hybrids_when_named():
    named = ["hyb_fib_linear", "hyb_fib_linear_nope", "hyb_sw", "hyb_sw_nope"]
    assert [v.name for v in CPU.variants if not v.default] == named
    assert [v.name for v in CPU.variants if v.default] == [
        "dense",
        "fib_fixed",
        "fib_learned",
        "fib_linear",
        "fib_coprime",
        "pow2_fixed",
        "pow2_linear",
        "bigbird",
        "sliding_window",
    ]


def dry_run_commands(capsys, *options: str) -> list[list[str]]:
    assert lit_main(["matrix", "--preset", "cpu", *options, "--run", "--dry-run"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert all(line.startswith("python -m lit_sparse fit ") for line in lines)
    return [shlex.split(line)[4:] for line in lines]  # the options after "fit"


def test_list_and_run_name_the_same_27_runs(capsys, tmp_path):
    root = str(tmp_path / "runs")
    assert lit_main(["matrix", "--preset", "cpu", "--seeds", "0", "1", "2", "--root", root,
                     "--list"]) == 0  # fmt: skip
    listed = table_rows(capsys.readouterr().out)
    commands = dry_run_commands(capsys, "--seeds", "0", "1", "2", "--root", root)
    runs = preset_runs("cpu", [0, 1, 2], root=root)
    assert len(listed) == len(commands) == len(runs) == 27
    assert len({row[0] for row in listed}) == 27
    for row, command, run in zip(listed, commands, runs, strict=True):
        assert row[0] == run.name and row[3] == "not started"
        assert command == run.fit_args()[1:]
        assert row[1] == f"configs/{run.variant.config} configs/study/cpu.yaml"
        # the run's own experiment folder, named by variant and seed
        assert command[-4:] == [
            "--trainer.logger.init_args.save_dir",
            str(Path(root) / run.variant.name),
            "--trainer.logger.init_args.name",
            f"seed{run.seed}",
        ]


@pytest.fixture(scope="module")
def built_runs(tmp_path_factory) -> dict[str, LitSparseCLI]:
    """Every variant of the preset at seed 0, built (not trained) from the exact options the
    preset lists: the real shape, data and callbacks."""
    built = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path_factory.mktemp("build"))
        patch.setattr(sys, "argv", ["lit_sparse"])
        for run in preset_runs("cpu", [0], [v.name for v in CPU.variants]):
            built[run.variant.name] = LitSparseCLI(run.fit_args()[1:], run=False)
    return built


@pytest.mark.slow
def test_every_run_builds_as_its_variant_at_one_shape(built_runs):
    from lit_sparse.callbacks import LengthExtrapolation

    assert set(built_runs) == {v.name for v in CPU.variants}
    shapes = {}
    for variant in CPU.variants:
        cli = built_runs[variant.name]
        attention = cli.config.model.attention
        found, _ = identify(attention.as_dict() if hasattr(attention, "as_dict") else attention)
        if variant.paper_run is not None:
            assert found == variant.paper_run  # the paper's run at W = 8
        elif variant.name.startswith("hyb_"):  # a hybrid: W = 8 local layers, the last dense
            hybrid = cli.model.model.attention
            assert type(hybrid).name == "hybrid" and hybrid.local_attention.window == 8
            assert hybrid.global_layer_indices(5) == [4]
            assert [p.rotary for p in cli.model.model.patterns][-1] == ("nope" not in variant.name)
        else:
            assert type(cli.model.model.attention).name == variant.name
            assert cli.model.model.attention.window == 8  # the same window as every variant
        config, dm, trainer = cli.model.config, cli.datamodule, cli.trainer
        tokens = dm.batch_size * dm.seq_len * trainer.accumulate_grad_batches
        [extrapolation] = [c for c in trainer.callbacks if isinstance(c, LengthExtrapolation)]
        shapes[variant.name] = (
            config.n_layers,
            config.d_model,
            config.n_heads,
            config.n_kv_heads,
            dm.seq_len,
            tokens,
            trainer.max_steps,
            tuple(extrapolation.evaluation_lengths(dm.seq_len)),
            sum(p.numel() for n, p in cli.model.named_parameters() if "theta" not in n),
        )
    # 5 layers, d_model 96, 4 heads, 2 KV heads, T = 256, 2,048 tokens per step, 450 steps,
    # evaluated at 1x, 4x and 16x; the same parameters (learned alpha's theta aside)
    assert set(shapes.values()) == {(5, 96, 4, 2, 256, 2048, 450, (256, 1024, 4096),
                                     shapes["dense"][-1])}  # fmt: skip


def test_coprime_differs_from_linear_at_the_presets_depth(built_runs):
    linear = built_runs["fib_linear"].model.model.alphas()
    coprime = built_runs["fib_coprime"].model.model.alphas()
    assert sorted(linear.tolist()) == pytest.approx(sorted(coprime.tolist()))
    assert not torch.allclose(linear, coprime)  # the same values in another layer order


def first_batch(cli: LitSparseCLI) -> torch.Tensor:
    dm = cli.datamodule
    dm.prepare_data()
    dm.setup("fit")
    x, _ = next(iter(dm.train_dataloader()))
    return x


@pytest.mark.slow
def test_a_seed_changes_the_initialisation_and_the_data_order(tmp_path, monkeypatch):
    """seed_everything alone would change only the weights: the data module's own seed
    orders the windows, so the preset sets both."""
    monkeypatch.chdir(tmp_path)
    by_seed = {run.seed: run for run in preset_runs("cpu", [0, 1], variants=["fib_fixed"])}

    def build(seed: int, *more: str) -> LitSparseCLI:
        args = by_seed[seed].fit_args(["--config", str(TINY)])[1:]
        return LitSparseCLI([*args, *more], run=False)

    zero, one, zero_again = build(0), build(1), build(0)
    weights = [cli.model.state_dict()["model.embedding.weight"] for cli in (zero, one, zero_again)]
    batches = [first_batch(cli) for cli in (zero, one, zero_again)]
    assert torch.equal(weights[0], weights[2]) and torch.equal(batches[0], batches[2])
    assert not torch.equal(weights[0], weights[1])
    assert not torch.equal(batches[0], batches[1])
    # only seed_everything changed: new weights, the same windows in the same order
    init_only = build(0, "--seed_everything", "1")
    assert torch.equal(init_only.model.state_dict()["model.embedding.weight"], weights[1])
    assert torch.equal(first_batch(init_only), batches[0])


def test_bigbirds_random_keys_follow_the_seed():
    [zero, one] = preset_runs("cpu", [0, 1], variants=["bigbird"])
    assert zero.fit_args()[-6:-4] == ["--model.attention.init_args.seed", "0"]
    assert one.fit_args()[-6:-4] == ["--model.attention.init_args.seed", "1"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--preset", "gpu", "--list"], "--preset gpu: unknown preset; allowed: cpu"),
        (["--preset", "cpu", "--seeds", "0", "0", "--list"], "seed 0 is given twice"),
        (["--preset", "cpu", "--seeds", "-1", "--list"], "--seeds -1: a seed must be"),
        (["--preset", "cpu", "--variants", "fib", "--list"], "--variants fib: not a variant"),
        (["--preset", "cpu", "--run", "dense"], "with --preset, --run takes no name"),
        (["--preset", "cpu", "--table", "runs/x"], "with --preset, --table takes no RUN_DIR"),
        (["--seeds", "0", "--list"], "--seeds: only with --preset"),
        (["--plot"], "--plot: only with --preset"),
        (["--run"], "--run: expected a run NAME"),
    ],
)
def test_bad_preset_options_get_one_line(options, message, capsys):
    assert lit_main(["matrix", *options]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]


@pytest.mark.parametrize("action", [["--list"], ["--run", "--dry-run"], ["--table"]])
def test_a_root_that_is_a_file_is_refused_in_one_line(tmp_path, capsys, action):
    """Issue 47: ``--root <a regular file> --list`` listed 102 runs under a file."""
    root = tmp_path / "notes.txt"
    root.write_text("mine")
    assert lit_main(["matrix", "--preset", "recall", "--root", str(root), *action]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0] == f"error: --root {root}: not a folder (a file is there)"
    assert root.read_text() == "mine"


def test_a_run_started_with_a_config_edited_since_is_refused(tmp_path):
    from lit_sparse.errors import ConfigError
    from lit_sparse_studies.study.preset import check_record, write_record

    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("trainer:\n  max_steps: 6\n")
    [run] = preset_runs("cpu", [0], variants=["dense"], root=tmp_path / "runs")
    extra = ["--config", str(overlay)]
    write_record(run, extra)
    overlay.write_text("trainer:\n  max_steps: 7\n")
    check_record(run, extra)  # nothing was trained (no version folder): not binding
    (run.experiment / "version_0").mkdir()
    check_record(run, extra)  # a start that failed before its first checkpoint: not binding
    write_record(run, extra)
    (run.experiment / "version_0" / "checkpoints").mkdir()
    (run.experiment / "version_0" / "checkpoints" / "last.ckpt").write_bytes(b"")
    check_record(run, extra)  # the same options and files: fine
    overlay.write_text("trainer:\n  max_steps: 8\n")
    with pytest.raises(ConfigError, match="config files that have changed since: .*overlay.yaml"):
        check_record(run, extra)


# The recall preset


RECALL = PRESETS["recall"]


def recall_args(
    root: Path,
    *action: str,
    seeds=(0, 1),
    variants=("fib_learned", "sw_keys"),
    tasks=("mqar64", "distance", "passkey"),
):
    return [
        "matrix", "--preset", "recall", "--seeds", *map(str, seeds), "--variants", *variants,
        "--tasks", *tasks, "--root", str(root), *action,
    ]  # fmt: skip


def test_the_preset_has_the_issues_variants_and_tasks():
    assert [v.name for v in RECALL.variants if v.default] == [
        "dense", "fib_fixed", "fib_linear", "fib_coprime", "fib_learned", "pow2_fixed",
        "bigbird", "sw_keys", "sw_cache",
    ]  # fmt: skip
    assert [v.name for v in RECALL.variants if not v.default] == [
        "hyb_fib_linear", "hyb_sw_keys", "sw_relay",  # the hybrid study (issue 56)
        "alphas_05_05", "alphas_15_15", "alphas_15_05",
    ]  # fmt: skip
    assert [t.name for t in RECALL.tasks if t.default] == [
        "mqar64",
        "mqar128",
        "distance",
        "passkey",
    ]
    assert [t.name for t in RECALL.tasks if not t.default] == [
        "mqar256",
        "far_mqar",
        "far_mqar_budget",
        "distance_budget",
    ]
    runs = preset_runs("recall", seeds=[0, 1, 2])
    # the MQAR tasks (4 layers) leave out fib_coprime: there it is fib_linear
    assert len(runs) == (8 + 8 + 9 + 9) * 3 and runs[0].name == "mqar64/dense/seed0"
    assert runs[34].name == "mqar64/dense/seed1"  # seed-major: whole seeds first
    assert {r.setup.name for r in runs if r.variant.name == "fib_coprime"} == {
        "distance",
        "passkey",
    }


def test_the_distance_budget_task_trains_every_variant_2000_steps_with_64_examples_a_bucket():
    """Issue 44, item 4: no early stop, 64 held-out examples per bucket at every length."""
    from lit_sparse.io.yaml_files import load_yaml

    budget = load_yaml(CONFIG_DIR / "study/recall/distance_budget.yaml", "config")
    callbacks = [c["class_path"].rsplit(".", 1)[-1] for c in budget["trainer"]["callbacks"]]
    assert "EarlyStopping" not in callbacks and budget["trainer"]["max_steps"] == 2000
    data = budget["data"]["init_args"]
    assert data["val_examples"] == data["min_examples"] == 64
    original = load_yaml(CONFIG_DIR / "study/recall/distance.yaml", "config")
    assert budget["model"]["arch"] == original["model"]["arch"]
    assert {**original["data"]["init_args"], "min_examples": 64} == data


def test_the_alpha_controls_train_mqar128_with_their_custom_alphas():
    """Issue 44's control: fixed spacing with alphas (0.5, 0.5), (1.5, 1.5), (1.5, 0.5) at
    MQAR (128, 8)'s 2 layers; run only when named, and their records expect those alphas."""
    from lit_sparse.parsing.config_files import read_model_config
    from lit_sparse_studies.study.recall_records import _variant_attention

    controls = {"alphas_05_05": [0.5, 0.5], "alphas_15_15": [1.5, 1.5], "alphas_15_05": [1.5, 0.5]}
    assert not {r.variant.name for r in preset_runs("recall", seeds=[0])} & set(controls)
    runs = preset_runs("recall", seeds=[0], variants=list(controls), tasks=["mqar128"])
    for run in runs:
        task = run.variant.task_options(run.setup)
        spec = read_model_config(run.configs(), task)
        assert spec.attention.layer_alphas(spec.arch.n_layers) == controls[run.variant.name]
        assert all(" " not in option for option in task)  # one shell word each
        schedule = _variant_attention(run)["init_args"]["schedule"]
        assert schedule["init_args"]["alphas"] == controls[run.variant.name]


CALIBRATED = {  # task: (layers, width, lr) as docs/recall-study.md's calibration chose them
    "mqar64": (4, 64, 3e-3),
    "mqar128": (2, 128, 1e-2),  # width 64 levels off at 0.71-0.75; 4 layers of 128 too slow
    "mqar256": (4, 64, 3e-3),
    "distance": (5, 64, 3e-3),
    "passkey": (5, 64, 3e-3),
    "far_mqar": (3, 128, 1e-2),  # MQAR (128, 8)'s width and lr at its calibrated depth
    "far_mqar_budget": (3, 128, 1e-2),  # far MQAR's, 8,000 steps (its overlay)
    "distance_budget": (5, 64, 3e-3),  # the distance task's, at a fixed budget
}


def test_each_task_overlay_is_at_its_length_and_trains_alike():
    """Each task at its length, with its calibrated depth, width and lr; everything else of
    the recipe (one head, no MLP, warmup, cosine, steps, precision) is the same for all."""
    import yaml

    from lit_sparse.attention.schedules import Coprime, Linear

    assert set(CALIBRATED) == {task.name for task in RECALL.tasks}
    shared = None
    for task in RECALL.tasks:
        config = yaml.safe_load((ROOT / "configs" / task.config).read_text())
        assert config["data"]["init_args"]["seq_len"] == task.seq_len
        model, arch = config["model"], config["model"]["arch"]
        layers, width = arch.pop("n_layers"), arch.pop("d_model")
        assert (layers, width, model.pop("lr")) == CALIBRATED[task.name], task.name
        assert arch.pop("head_dim") == width and arch["n_heads"] == 1  # one head of the width
        # where coprime staggering is the linear schedule (2 and 4 layers), the preset skips it
        same = Coprime().layer_alphas(layers) == Linear().layer_alphas(layers)
        assert dict(task.same_as) == ({"fib_coprime": "fib_linear"} if same else {})
        # far MQAR's and the distance budget's runs compile the training forward
        # (model.compile: the same network, a faster step); the tasks before them trained eager
        compiled = ("far_mqar", "far_mqar_budget", "distance_budget")
        assert model.pop("compile", False) == (task.name in compiled)
        for overlay in task.overlays:  # a task that is another's with one change names it
            assert yaml.safe_load((ROOT / "configs" / overlay).read_text()) == {
                "trainer": {"max_steps": 8000}
            }
        recipe = (model, {k: config["trainer"][k] for k in ("max_steps", "precision")})
        assert shared is None or recipe == shared  # one recipe for every task
        shared = recipe
        names = [c["class_path"] for c in config["trainer"]["callbacks"]]
        assert "lit_sparse.callbacks.RecallEvaluation" in names


@pytest.mark.parametrize(("length", "keys", "cache"), [(64, 12, 55), (128, 13, 89), (256, 15, 233)])
def test_the_sliding_windows_match_fib_fixed_at_each_length(length, keys, cache):
    """fib fixed (W = 8): 0..8 and the Fibonacci rungs below T; a window of W' keeps W' + 1
    keys and a ring of W' + 1 rows."""
    from lit_sparse.attention import FibonacciAttention

    distances = FibonacciAttention(window=8).build(0, 5, length).distances(length)
    assert fib_keys_window(length) == keys == len(distances) - 1
    assert fib_cache_window(length) == cache == max(distances)


def test_list_names_the_task_options(capsys, tmp_path):
    assert lit_main(recall_args(tmp_path, "--list", variants=("sw_keys", "sw_cache"))) == 0
    out = capsys.readouterr().out
    rows = [
        [c.strip() for c in line.strip("|").split("|")]
        for line in out.splitlines()
        if line.startswith("| ") and not line.startswith("| run ")
    ]
    assert rows[0][0] == "mqar64/sw_keys/seed0"
    assert rows[0][2].startswith("--model.attention.init_args.window 12 --seed_everything 0")
    window = {r[0]: shlex.split(r[2])[1] for r in rows}
    assert window["distance/sw_cache/seed1"] == "233" and window["passkey/sw_keys/seed0"] == "15"
    assert all(r[3] == "not started" for r in rows) and len(rows) == 2 * 3 * 2


def test_list_ends_with_the_command_that_runs_these_runs(capsys, tmp_path):
    """Issue 36: the --run command left out --root (and --variants, --tasks)."""
    root = tmp_path / "my runs"
    args = recall_args(root, "--list", variants=("sw_keys",), tasks=("distance",))
    assert lit_main(args) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    command = shlex.split(last.split("interrupted ones): ", 1)[1])
    assert command == ["python", "-m", "lit_sparse", *args[:-1], "--run"]
