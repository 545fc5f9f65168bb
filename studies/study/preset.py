"""The seeded presets of the run matrix (``cpu``: perplexity at CPU scale; ``recall``: recall
at a distance): which runs, their fit options, their folders, and what each folder already
holds (complete, interrupted, not started).

A preset run is ``fit --config configs/<variant>.yaml --config configs/<task overlay>.yaml
[task options] [extra options] <seed options> <folder options>``. The ``cpu`` preset has one
task (``configs/study/cpu.yaml``); the ``recall`` preset has one per recall task and setting
(MQAR at (L, kv), the distance task, passkey), each a folder level of its own, and gives
some variants options that depend on the task's length (the sliding windows matched to the
Fibonacci pattern's keys per query or its decoding cache at that length):

- seed options: ``--seed_everything K`` (Lightning seeds torch before the model is built: the
  initialisation) and ``--data.init_args.seed K`` (the training windows' order); BigBird's
  random keys are seeded with K too, so a seed changes every random choice of a run;
- folder options: the TensorBoard logger's ``save_dir <root>[/<task>]/<variant>`` and ``name
  seed<K>``, so every run is its own experiment folder ``.../<variant>/seed<K>/version_N``
  and ``--ckpt_path last`` can only find that run's checkpoint.

A run is complete when its version folder holds the preset's end-of-fit results at the
config's ``max_steps`` (``cpu``: ``extrapolation.json`` and ``position_loss.json``;
``recall``: ``recall.json``).

Each experiment folder keeps a record of what started it (``preset.yaml``: the options and a
digest of every config file), so a later invocation with other options or edited configs is
refused instead of mixing two setups in one study. The record binds once the run has a
checkpoint or its end-of-fit results: a start that failed before its first checkpoint (a bad
option, a crash in the first steps) pins nothing, and a corrected rerun starts over with its
own options; a complete run is complete only for the options that trained it (a smoke test's
runs are refused by the real ``--run``, and ``--list`` names their extra options).
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from lit_sparse import ConfigError
from lit_sparse.io import load_yaml
from lit_sparse.runs import has_checkpoint, is_checkpoint
from lit_sparse_studies.study.paper_matrix import CONFIG_DIR

__all__ = [
    "PRESETS",
    "Preset",
    "PresetRun",
    "RunState",
    "RunStatus",
    "Task",
    "Variant",
    "fib_cache_window",
    "fib_keys_window",
    "check_record",
    "extra_options",
    "preset_runs",
    "recorded_options",
    "run_status",
    "write_record",
]

RECORD = "preset.yaml"
"""The file in an experiment folder naming the options that started it."""


@dataclass(frozen=True)
class Task:
    """One training setup of a preset: the overlay layered on every variant's config."""

    name: str
    """Its folder under the preset's root (``mqar64``); "" for a preset of one task."""
    config: str
    """The overlay, relative to ``configs/``."""
    seq_len: int
    """Its training length T (the length-dependent variant options are computed at it)."""
    label: str = ""
    """What it is, in words (``MQAR L=64, kv=4``)."""
    default: bool = True
    """Run when no ``--tasks`` are given (False: only when asked for by name)."""
    same_as: tuple[tuple[str, str], ...] = ()
    """(variant, the variant it equals in this task): not run, since it would train the
    same model (coprime staggering at 2 or 4 layers has stride 1: the linear schedule)."""
    overlays: tuple[str, ...] = ()
    """Further configs layered after ``config`` (relative to ``configs/``): a task that is
    another's with one change (far MQAR at 8,000 steps) names the change, not a copy."""
    variants: tuple[str, ...] | None = None
    """The only variants it runs (None: every variant the preset runs)."""


@functools.cache
def _fib_fixed_distances(seq_len: int) -> tuple[int, ...]:
    from lit_sparse.attention import FibonacciAttention

    return tuple(FibonacciAttention(window=8).build(0, 5, seq_len).distances(seq_len))


def fib_keys_window(seq_len: int) -> int:
    """The sliding window with fib fixed's (W = 8) keys per query at length T: W' + 1 keys."""
    return len(_fib_fixed_distances(seq_len)) - 1


def custom_alphas(*alphas: float) -> tuple[str, ...]:
    """The options of a custom schedule: one alpha per layer."""
    listed = ",".join(f"{a:g}" for a in alphas)  # one shell word
    return (
        "--model.attention.init_args.schedule", "Custom",
        "--model.attention.init_args.schedule.alphas", f"[{listed}]",
    )  # fmt: skip


LOCAL = "--model.attention.init_args.local_attention.init_args"
"""The options of a hybrid's local plugin."""
LAST_LAYER_GLOBAL = (
    "--model.attention.init_args.every", "null",
    "--model.attention.init_args.global_layers", "[-1]",
)  # fmt: skip
"""A hybrid config's period replaced by one global layer, the last."""


def fib_cache_window(seq_len: int) -> int:
    """The sliding window with fib fixed's (W = 8) decoding cache at length T: its largest
    distance (a ring of that + 1 rows, as the window's)."""
    return max(_fib_fixed_distances(seq_len))


@dataclass(frozen=True)
class Variant:
    """One attention variant of a preset."""

    name: str
    """``fib_linear``: the folder name under the preset's root."""
    config: str
    """Its config file, relative to ``configs/``."""
    row: str
    """The paper's name for it (``fib linear``), or ours for the non-paper variants."""
    paper_run: str | None
    """The paper's matrix run at the same window (``fib_linear_w8``), if the paper has it."""
    seeded_attention: bool = False
    """The attention has a ``seed`` of its own (BigBird's random keys): set it to the run's."""
    window: Callable[[int], int] | None = None
    """The attention's window as a function of the task's length T (None: the config's)."""
    window_option: str = "--model.attention.init_args.window"
    """The option that sets that window (a hybrid's local plugin has its own)."""
    options: tuple[str, ...] = ()
    """Attention options it always takes: ``--model.attention.init_args.<key> VALUE`` pairs."""
    default: bool = True
    """Run when no ``--variants`` are given (False: only when named)."""

    def task_options(self, task: Task) -> list[str]:
        """The options this variant takes in ``task``: its window at the task's length, then
        its own ``options``."""
        window = [] if self.window is None else [str(self.window(task.seq_len))]
        return [*([self.window_option, *window] if window else []), *self.options]

    def seed_overrides(self, seed: int) -> list[str]:
        out = ["--seed_everything", str(seed), "--data.init_args.seed", str(seed)]
        if self.seeded_attention:
            out += ["--model.attention.init_args.seed", str(seed)]
        return out


@dataclass(frozen=True)
class Preset:
    """A set of variants trained alike, each under several seeds."""

    name: str
    config: str
    """The overlay layered on every variant's config, relative to ``configs/`` (a preset of
    one task; a preset with ``tasks`` has one per task)."""
    variants: tuple[Variant, ...]
    root: str
    """Default folder of the runs: ``<root>[/<task>]/<variant>/seed<K>``."""
    default_seeds: tuple[int, ...] = (0, 1, 2)
    tasks: tuple[Task, ...] = ()
    """The preset's training setups (none: one, ``config``, with no folder of its own)."""
    results: tuple[str, ...] = ("extrapolation.json", "position_loss.json")
    """The end-of-fit files a complete run holds (the first one names its step)."""
    measures: str = "perplexity"
    """What its tables and plots report: ``perplexity`` (the cpu study) or ``recall``."""
    setup_keys: tuple[str, ...] = ()
    """Config values (dotted keys) every run of one task must share: the attention and the
    seed aside, the runs of a study differ in nothing else."""

    @property
    def all_tasks(self) -> tuple[Task, ...]:
        return self.tasks or (Task("", self.config, 0),)

    def task(self, name: str) -> Task:
        if task := next((t for t in self.all_tasks if t.name == name), None):
            return task
        allowed = ", ".join(t.name for t in self.tasks) or "none (the preset has one task)"
        raise ConfigError(f"--tasks {name}: not a task of preset {self.name!r}; allowed: {allowed}")

    def variant(self, name: str) -> Variant:
        if variant := next((v for v in self.variants if v.name == name), None):
            return variant
        raise ConfigError(
            f"--variants {name}: not a variant of preset {self.name!r}; allowed: "
            + ", ".join(v.name for v in self.variants)
        )


CPU = Preset(
    name="cpu",
    config="study/cpu.yaml",
    root="runs/cpu",
    setup_keys=tuple(
        "model.arch.n_layers model.arch.d_model model.arch.n_heads model.arch.n_kv_heads "
        "model.arch.head_dim model.lr model.warmup_steps data.init_args.seq_len "
        "data.init_args.batch_size data.init_args.val_windows trainer.max_steps "
        "trainer.accumulate_grad_batches trainer.devices".split()
    ),
    variants=(
        Variant("dense", "dense.yaml", "dense", "dense"),
        Variant("fib_fixed", "fixed.yaml", "fib fixed", "fib_fixed_w8"),
        Variant("fib_learned", "learned.yaml", "fib learned", "fib_learned_w8"),
        Variant("fib_linear", "staggered.yaml", "fib linear", "fib_linear_w8"),
        Variant("fib_coprime", "coprime.yaml", "fib coprime", "fib_coprime_w8"),
        Variant("pow2_fixed", "pow2.yaml", "pow2 fixed", "pow2_fixed_w8"),
        Variant("pow2_linear", "pow2_staggered.yaml", "pow2 linear", "pow2_linear_w8"),
        Variant("bigbird", "bigbird.yaml", "bigbird", None, seeded_attention=True),
        Variant("sliding_window", "sliding_window.yaml", "sliding window", None),
        # hybrid stacks (issue 56): the last of the 5 layers dense, with RoPE or NoPE
        *(
            Variant(
                f"{name}{suffix}",
                config,
                f"hybrid: {local} local, the last layer dense{nope}",
                None,
                options=(*LAST_LAYER_GLOBAL, *options, *global_rope),
                default=False,
            )
            for name, config, local, options in (
                ("hyb_fib_linear", "hybrid.yaml", "fib linear", (f"{LOCAL}.schedule", "Linear")),
                ("hyb_sw", "sliding_window_hybrid.yaml", "sliding window", ()),
            )
            for suffix, nope, global_rope in (
                ("", "", ()),
                ("_nope", " (NoPE)", ("--model.attention.init_args.global_rope", "false")),
            )
        ),
    ),
)
"""Nine variants at W = 8 on the embedded corpus, 5 layers, T = 256 (configs/study/cpu.yaml),
and four hybrid stacks run only when named."""

_COPRIME_IS_LINEAR = (("fib_coprime", "fib_linear"),)
"""The MQAR tasks' 2 or 4 layers: the coprime stride is 1 there, so coprime is linear (also
at 3 and 6 layers; it differs at 5, 7 and 8)."""

RECALL_TASKS = (
    Task("mqar64", "study/recall/mqar64.yaml", 64, "MQAR L=64, kv=4", same_as=_COPRIME_IS_LINEAR),
    Task(
        "mqar128", "study/recall/mqar128.yaml", 128, "MQAR L=128, kv=8", same_as=_COPRIME_IS_LINEAR
    ),
    Task(
        "mqar256",
        "study/recall/mqar256.yaml",
        256,
        "MQAR L=256, kv=16",
        default=False,
        same_as=_COPRIME_IS_LINEAR,
    ),
    Task(
        "far_mqar",
        "study/recall/far_mqar.yaml",
        256,
        "far MQAR L=256, kv=8, gap 96",
        default=False,
        same_as=_COPRIME_IS_LINEAR,
    ),
    Task(
        "far_mqar_budget",
        "study/recall/far_mqar.yaml",
        256,
        "far MQAR L=256, kv=8, gap 96, 8,000 steps",
        default=False,
        same_as=_COPRIME_IS_LINEAR,
        overlays=("study/recall/budget_8000.yaml",),
        variants=("fib_linear",),
    ),
    Task("distance", "study/recall/distance.yaml", 256, "distance task, T=256"),
    Task(
        "distance_budget",
        "study/recall/distance_budget.yaml",
        256,
        "distance task, T=256, a fixed 2,000 steps",
        default=False,
    ),
    Task("passkey", "study/recall/passkey.yaml", 256, "passkey, T=256"),
)

RECALL = Preset(
    name="recall",
    config="study/recall/mqar64.yaml",
    root="runs/recall",
    tasks=RECALL_TASKS,
    results=("recall.json",),
    measures="recall",
    setup_keys=tuple(
        "model.arch.n_layers model.arch.d_model model.arch.n_heads model.arch.n_kv_heads "
        "model.arch.head_dim model.arch.ffn_hidden model.lr model.warmup_steps "
        "model.min_lr_ratio model.weight_decay data.class_path data.init_args.seq_len "
        "data.init_args.batch_size data.init_args.vocab_size data.init_args.num_kv_pairs "
        "data.init_args.gap model.compile "
        "data.init_args.pairs data.init_args.values_in_filler data.init_args.val_examples "
        "trainer.max_steps".split()
    ),
    variants=(
        Variant("dense", "dense.yaml", "dense", None),
        Variant("fib_fixed", "fixed.yaml", "fib fixed", None),
        Variant("fib_linear", "staggered.yaml", "fib linear", None),
        Variant("fib_coprime", "coprime.yaml", "fib coprime", None),
        Variant("fib_learned", "learned.yaml", "fib learned", None),
        Variant("pow2_fixed", "pow2.yaml", "pow2 fixed", None),
        Variant("bigbird", "bigbird.yaml", "bigbird", None, seeded_attention=True),
        Variant(
            "sw_keys",
            "sliding_window.yaml",
            "sliding window, fib's keys per query",
            None,
            window=fib_keys_window,
        ),
        Variant(
            "sw_cache",
            "sliding_window.yaml",
            "sliding window, fib's decoding cache",
            None,
            window=fib_cache_window,
        ),
        # hybrid stacks (issue 56): the local layers of a variant above, the last layer dense
        Variant(
            "hyb_fib_linear",
            "hybrid.yaml",
            "hybrid: fib linear local layers, the last layer dense",
            None,
            options=(*LAST_LAYER_GLOBAL, f"{LOCAL}.schedule", "Linear"),
            default=False,
        ),
        Variant(
            "hyb_sw_keys",
            "sliding_window_hybrid.yaml",
            "hybrid: sliding-window local layers (fib's keys per query), the last layer dense",
            None,
            window=fib_keys_window,
            window_option=f"{LOCAL}.window",
            options=LAST_LAYER_GLOBAL,
            default=False,
        ),
        # the relay control (issue 56): a window that reaches no far-MQAR value in one hop
        # but most in two, with no rungs
        Variant(
            "sw_relay",
            "sliding_window.yaml",
            "sliding window of 96 keys (the relay control)",
            None,
            options=("--model.attention.init_args.window", "95"),
            default=False,
        ),
        # the alpha control (issue 44): staggering, or one alpha value? MQAR (128, 8)'s 2 layers
        *(
            Variant(
                name,
                "fixed.yaml",
                f"fib alphas {a}, {b}",
                None,
                options=custom_alphas(a, b),
                default=False,
            )
            for name, a, b in (
                ("alphas_05_05", 0.5, 0.5),
                ("alphas_15_15", 1.5, 1.5),
                ("alphas_15_05", 1.5, 0.5),
            )
        ),
    ),
)
"""Recall at a distance (issue 28): nine variants (W = 8; the two sliding windows matched to
fib fixed at each task's length) on MQAR, the distance task and passkey."""

PRESETS = {CPU.name: CPU, RECALL.name: RECALL}


@dataclass(frozen=True)
class PresetRun:
    """One (task, variant, seed) run of a preset, in its folder under ``root``."""

    preset: Preset
    variant: Variant
    seed: int
    root: Path
    task: Task | None = None
    """None: the preset's only task."""

    @property
    def setup(self) -> Task:
        return self.task or self.preset.all_tasks[0]

    @property
    def name(self) -> str:
        run = f"{self.variant.name}/seed{self.seed}"
        return f"{self.setup.name}/{run}" if self.setup.name else run

    @property
    def variant_dir(self) -> Path:
        """``<root>[/<task>]/<variant>``: the logger's save_dir."""
        return self.root / self.setup.name / self.variant.name

    @property
    def experiment(self) -> Path:
        """``<root>[/<task>]/<variant>/seed<K>``: the logger's save_dir/name, holding
        ``version_N``."""
        return self.variant_dir / f"seed{self.seed}"

    def configs(self, config_dir: Path = CONFIG_DIR) -> list[Path]:
        names = (self.variant.config, self.setup.config, *self.setup.overlays)
        return [Path(config_dir) / name for name in names]

    def options(self, extra: Sequence[str] = (), config_dir: Path = CONFIG_DIR) -> list[str]:
        """The fit options that define the run (its folder aside): configs, the variant's
        options in this task, extra, seed."""
        configs = [arg for path in self.configs(config_dir) for arg in ("--config", str(path))]
        task = self.variant.task_options(self.setup)
        return [*configs, *task, *extra, *self.variant.seed_overrides(self.seed)]

    def fit_args(self, extra: Sequence[str] = (), resume: bool = False) -> list[str]:
        """``fit`` and its options; the folder options come last, so no extra option moves
        the run out of its folder."""
        folder = [
            "--trainer.logger.init_args.save_dir",
            str(self.variant_dir),
            "--trainer.logger.init_args.name",
            f"seed{self.seed}",
        ]
        return ["fit", *self.options(extra), *folder, *(["--ckpt_path", "last"] if resume else [])]


def parse_seeds(seeds: Sequence[int] | None, preset: Preset) -> list[int]:
    """Distinct seeds >= 0, in the order given (default: the preset's)."""
    values = list(preset.default_seeds if seeds is None else seeds)
    if not values:
        raise ConfigError("--seeds: expected at least one seed")
    bad = [s for s in values if isinstance(s, bool) or not isinstance(s, int) or s < 0]
    if bad:
        raise ConfigError(f"--seeds {bad[0]}: a seed must be an integer >= 0")
    repeated = sorted({s for s in values if values.count(s) > 1})
    if repeated:
        raise ConfigError(f"--seeds: seed {repeated[0]} is given twice; seeds must be distinct")
    return values


def get_preset(preset: Preset | str) -> Preset:
    if isinstance(preset, Preset):
        return preset
    if preset not in PRESETS:
        raise ConfigError(
            f"--preset {preset}: unknown preset; allowed: {', '.join(sorted(PRESETS))}"
        )
    return PRESETS[preset]


def _check_root(root: Path) -> Path:
    if root.exists() and not root.is_dir():
        raise ConfigError(f"--root {root}: not a folder (a file is there)")
    return root


def preset_runs(
    preset: Preset | str,
    seeds: Sequence[int] | None = None,
    variants: Sequence[str] | None = None,
    root: str | Path | None = None,
    tasks: Sequence[str] | None = None,
) -> list[PresetRun]:
    """The runs of a preset, seed-major (every task and variant at the first seed, then the
    next), so a study stopped part-way has whole seeds to compare."""
    preset = get_preset(preset)
    chosen = (
        [v for v in preset.variants if v.default]
        if not variants
        else [preset.variant(name) for name in variants]
    )
    if tasks and not preset.tasks:
        raise ConfigError(f"--tasks: preset {preset.name!r} has one task; leave --tasks out")
    if tasks:
        setups = [preset.task(name) for name in dict.fromkeys(tasks)]
    else:
        setups = [t for t in preset.tasks if t.default] if preset.tasks else [None]
    folder = _check_root(Path(preset.root if root is None else root))
    return [
        PresetRun(preset, variant, seed, folder, task)
        for seed in parse_seeds(seeds, preset)
        for task in setups
        for variant in chosen
        if task is None
        or (
            variant.name not in dict(task.same_as)
            and variant.name in (task.variants or [variant.name])
        )
    ]


# ------------------------------------------------------------------------------- records
def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError as err:
        raise ConfigError(f"--config {path}: cannot be read ({err.strerror or err})") from None


def _record(run: PresetRun, extra: Sequence[str]) -> dict[str, Any]:
    """What started a run: its options (repository configs as ``configs/...``) and a digest
    of every config file they name."""
    options = run.options(extra, config_dir=Path("configs"))
    real = run.options(extra)
    digests = {
        shown: _digest(Path(path))
        for i, (shown, path) in enumerate(zip(options, real, strict=True))
        if i > 0 and options[i - 1] in ("--config", "-c")
    }
    return {
        "preset": run.preset.name,
        **({"task": run.setup.name} if run.setup.name else {}),
        "variant": run.variant.name,
        "seed": run.seed,
        "options": options,
        "config_digests": digests,
    }


def _bound(run: PresetRun) -> bool:
    """Whether the run has a record that binds: a version folder with a checkpoint or the
    end-of-fit results (something trained with the recorded options; a smoke test's complete
    run whose checkpoints were deleted binds as well)."""
    if not (run.experiment / RECORD).is_file():
        return False
    versions = _versions(run.experiment)
    return any(has_checkpoint(v) or finish(v, run.preset.results) for v in versions)


def recorded_options(run: PresetRun) -> list[str] | None:
    """The options the run's record (``preset.yaml``) says started it; None without one."""
    if not (run.experiment / RECORD).is_file():
        return None
    options = load_yaml(run.experiment / RECORD, "run record").get("options")
    return [str(o) for o in options] if isinstance(options, list) else None


def extra_options(run: PresetRun, options: Sequence[str]) -> list[str] | None:
    """The extra options in ``options`` (a run's recorded ones): what stands between the
    run's configs and task options and its seed options; None when ``options`` do not start
    and end as this run's do (another variant's, task's or seed's)."""
    head = run.options((), config_dir=Path("configs"))
    tail = run.variant.seed_overrides(run.seed)
    head = head[: len(head) - len(tail)]
    options = [str(o) for o in options]
    if len(options) < len(head) + len(tail) or options[: len(head)] != head:
        return None
    if options[len(options) - len(tail) :] != tail:
        return None
    return options[len(head) : len(options) - len(tail)]


def check_record(run: PresetRun, extra: Sequence[str]) -> None:
    """Refuse to continue, or to count as complete, a run that was started with other
    options or config files (a record without any checkpoint or end-of-fit results is a start
    that failed before its first checkpoint: not binding)."""
    if not _bound(run):
        return
    found = load_yaml(run.experiment / RECORD, "run record")
    wanted = _record(run, extra)
    advice = (
        "; finish the study with the same options and configs, give another --root, or "
        f"delete {run.experiment} to train that run again from the start"
    )
    if found.get("options") != wanted["options"]:
        before = " ".join(map(str, found.get("options") or []))
        raise ConfigError(
            f"{run.experiment} was started with options {before!r}, now "
            f"{' '.join(wanted['options'])!r}{advice}"
        )
    before, now = found.get("config_digests") or {}, wanted["config_digests"]
    changed = [name for name in sorted(set(before) | set(now)) if before.get(name) != now.get(name)]
    if changed:
        raise ConfigError(
            f"{run.experiment} was started with config files that have changed since: "
            f"{', '.join(changed)}{advice}"
        )


def write_record(run: PresetRun, extra: Sequence[str]) -> None:
    import yaml

    from lit_sparse.io import write_text

    if not _bound(run):
        write_text(run.experiment / RECORD, yaml.safe_dump(_record(run, extra), sort_keys=False))


# ------------------------------------------------------------------------------- status
class RunState(str, Enum):
    COMPLETE = "complete"
    INTERRUPTED = "interrupted"
    NEW = "not started"


@dataclass
class RunStatus:
    """What a run's folder holds."""

    state: RunState
    run_dir: Path | None = None
    """The complete version folder, or the one whose last.ckpt a resume continues."""
    detail: str = ""
    versions: list[Path] = field(default_factory=list)


def _versions(experiment: Path) -> list[Path]:
    """``version_N`` folders, oldest (lowest N) first."""
    found = [p for p in experiment.glob("version_*") if p.is_dir()]
    return sorted(
        found, key=lambda p: int(m[1]) if (m := re.fullmatch(r"version_(\d+)", p.name)) else -1
    )


def finish(
    run_dir: Path, results: Sequence[str] = ("extrapolation.json", "position_loss.json")
) -> tuple[int, bool] | None:
    """(step, stopped early) of a version folder that holds the end-of-fit ``results``: the
    first one's step at its config's ``max_steps``, or before it when the fit stopped early
    (an early stop at its target), the others present; None for an unfinished folder."""
    import json

    config_file, first = run_dir / "config.yaml", run_dir / results[0]
    if not (config_file.is_file() and all((run_dir / name).is_file() for name in results)):
        return None
    max_steps = (load_yaml(config_file, "run config").get("trainer") or {}).get("max_steps")
    try:
        saved = json.loads(first.read_text())
        step, early = saved.get("step"), saved.get("stopped_early") is True
    except (OSError, ValueError, AttributeError):
        return None
    if step is None or max_steps is None:
        return None
    return (step, early) if step == max_steps or (early and step < max_steps) else None


def run_status(run: PresetRun) -> RunStatus:
    """Complete (a version folder holds the end-of-fit results; the detail names the extra
    options its record says trained it), interrupted (a ``last.ckpt`` to resume from: ``fit
    --ckpt_path last`` picks it) or not started."""
    versions = _versions(run.experiment)
    for version in reversed(versions):
        done = finish(version, run.preset.results)
        if done is not None:
            detail = f"step {done[0]}" + (" (stopped early)" if done[1] else "")
            options = recorded_options(run)
            extra = None if options is None else extra_options(run, options)
            if extra:
                detail += f"; trained with extra options {' '.join(extra)}"
            elif options is not None and extra is None:
                detail += f"; trained with other options {' '.join(options)}"
            return RunStatus(RunState.COMPLETE, version, detail, versions)
    saved = [v for v in versions if is_checkpoint(v / "checkpoints" / "last.ckpt")]
    if saved:
        return RunStatus(RunState.INTERRUPTED, saved[-1], "has a last.ckpt", versions)
    return RunStatus(RunState.NEW, None, "", versions)
