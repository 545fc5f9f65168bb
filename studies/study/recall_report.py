"""The recall study's tables over seeds (Markdown): MQAR accuracy per setting beside each
pattern's rows read per query and decoding cache, distance-task accuracy per bucket at each
length and policy beside the pattern's coverage of the sampled distances and its cache,
whether coverage predicts recall, passkey accuracy against length and depth, learned alpha's
drift, and the comparisons the issue's questions rest on, each with a 95 % bootstrap
interval over seeds and held-out examples
(:func:`lit_sparse_studies.study.seeds.bootstrap_means`)."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lit_sparse import ConfigError
from lit_sparse.io import markdown_table
from lit_sparse_studies.study import coverage as reach_of
from lit_sparse_studies.study import seeds
from lit_sparse_studies.study.recall_results import (
    RecallRun,
    RecallStudy,
    TaskResults,
    VariantRecall,
)
from lit_sparse_studies.study.seeds import Interval, Spread

__all__ = [
    "QUESTIONS",
    "Geometry",
    "Question",
    "headline",
    "headline_interval",
    "held_out_module",
    "recall_tables",
    "strict_reach",
]

BOOTSTRAP_SEED = 0
"""Every interval draws from a generator seeded with this, so the tables are reproducible."""

RULE = (
    "Each number is the mean over seeds, with a 95 % bootstrap interval in brackets: "
    f"{seeds.BOOTSTRAP_DRAWS} draws, each resampling the seeds with replacement and, within "
    "each drawn seed, the held-out examples of every set (a record holds a set's accuracy and "
    "example count, so a set is redrawn as Binomial(count, accuracy) / count; for MQAR, "
    "whose examples hold several queries each, that overstates the example noise). With 3 "
    "seeds the seed part of an interval can be no wider than the seeds' range: read it as a "
    "lower bound on the uncertainty. A difference is marked where its interval excludes 0 "
    "(a paired bootstrap over seeds for a run against itself at 1x). Cache rows: the "
    "decoding cache's rows in its largest layer, the largest over seeds (a learned alpha's "
    "cache differs from seed to seed)."
)


KINDS = {"MQARDataModule": "mqar", "DistanceDataModule": "distance", "PasskeyDataModule": "passkey"}


def _task_kind(task: TaskResults) -> str:
    """``mqar``, ``distance`` or ``passkey``: the task's data module."""
    return KINDS.get(str(task.setup.get("data.class_path") or "").rsplit(".", 1)[-1], "other")


def _buckets(task: TaskResults, length: int, within: bool | None = None) -> list[str]:
    """The distance buckets at ``length``; ``within``: only those with every d < T (True)
    or every d >= T (False), T the training length."""
    names = [n for n in task.sets(length) if task.first.distances.get(n)]
    if within is None:
        return names
    limit = task.training_length
    if within:
        return [n for n in names if task.first.distances[n][1] < limit]
    return [n for n in names if task.first.distances[n][0] >= limit]


PARTS = {"all": None, "within": True, "beyond": False}


def _names(task: TaskResults, length: int, part: str) -> tuple[list[str], str]:
    """The held-out sets behind a task's headline at ``length``, and the score key."""
    kind = _task_kind(task)
    if kind == "mqar":
        return task.sets(length)[:1], "accuracy"
    if kind == "passkey":
        return task.sets(length), "exact"
    return _buckets(task, length, PARTS[part]), "accuracy"


def headline(
    task: TaskResults, variant: VariantRecall, policy: str, length: int, part: str = "all"
) -> Spread:
    """A task's one number per run: MQAR the accuracy on its training setting; the distance
    task the mean accuracy over the buckets at ``length`` (``part``: ``within`` (d < T) or
    ``beyond`` (d >= T) the training length, or ``all``); passkey the share of keys
    recalled whole (every digit), averaged over depths."""
    names, key = _names(task, length, part)
    if len(names) == 1:
        return variant.spread(policy, length, names[0], key)
    return variant.mean_over(policy, length, names, key)


def _cells(
    variant: VariantRecall, policy: str, length: int, names: Sequence[str], key: str
) -> tuple[np.ndarray, np.ndarray]:
    """(S, C) the seeds' scores on ``names`` and (S, C) the examples behind each."""
    values, counts = [], []
    for run in variant.runs:
        cells = [run.result.cell(policy, length, n) or {} for n in names]
        values.append([math.nan if c.get(key) is None else float(c[key]) for c in cells])
        counts.append([int(c.get("examples") or 0) for c in cells])
    return np.array(values, dtype=float), np.array(counts, dtype=np.int64)


def _draws(
    task: TaskResults,
    variant: VariantRecall,
    policy: str,
    length: int,
    part: str,
    rng: np.random.Generator,
    picks: np.ndarray | None = None,
) -> tuple[float, np.ndarray]:
    """(the headline's mean over seeds, its bootstrap draws)."""
    names, key = _names(task, length, part)
    values, counts = _cells(variant, policy, length, names, key)
    mean = headline(task, variant, policy, length, part).mean
    if not names or not math.isfinite(mean):
        return math.nan, np.array([math.nan])
    return mean, seeds.bootstrap_means(values, counts, rng, picks)


def headline_interval(
    task: TaskResults, variant: VariantRecall, policy: str, length: int, part: str = "all"
) -> Interval:
    """:func:`headline`'s mean over seeds with its 95 % bootstrap interval."""
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    mean, draws = _draws(task, variant, policy, length, part, rng)
    return (
        Interval.of(mean, draws) if math.isfinite(mean) else Interval(math.nan, *(2 * [math.nan]))
    )


def _seed_interval(spread: Spread) -> Interval:
    """A quantity with no examples behind it (an alpha drift): seeds resampled only."""
    if not spread.n:
        return Interval(math.nan, math.nan, math.nan)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    values = np.array(spread.values)[:, None]
    return Interval.of(spread.mean, seeds.bootstrap_means(values, None, rng))


def _per_seed(spread: Spread, digits: int = 3) -> str:
    return " / ".join(f"{v:.{digits}f}" for v in spread.values) or "-"


# ---------------------------------------------------------------- what a pattern offers
class Geometry:
    """Per task, what each run's pattern offers, rebuilt from its recorded attention config
    and its last recorded alpha: the distinct key rows a query reads, and its coverage of
    the distances the held-out sets actually sampled (regenerated from the data module and
    its ``val_seed``, as the runs drew them)."""

    def __init__(self, task: TaskResults):
        self.task = task
        self._patterns: dict[tuple[int, str], list] = {}
        self._reach: dict[tuple[int, str, int], np.ndarray] = {}
        self._distances: dict[tuple[int, str], np.ndarray] = {}

    def patterns(self, run: RecallRun, policy: str) -> list:
        key = (id(run), policy)
        if key not in self._patterns:
            if run.attention is None:
                raise ConfigError(f"{run.path}: the record holds no model.attention")
            alphas = None if run.alphas is None or not len(run.alphas) else run.alphas[-1]
            self._patterns[key] = reach_of.recorded_patterns(
                run.attention,
                int(self.task.setup["model.arch.n_layers"]),
                self.task.training_length,
                policy if run.result.has_new_offsets else None,
                None if alphas is None else [float(a) for a in alphas],
            )
        return self._patterns[key]

    def rows(self, variant: VariantRecall, length: int, policy: str = "use") -> float:
        """Rows read per query at ``length``: mean over layers, then over seeds."""
        per_run = [
            np.mean([reach_of.rows_read(p, length) for p in self.patterns(run, policy)])
            for run in variant.runs
        ]
        return float(np.mean(per_run))

    def reach(self, run: RecallRun, policy: str, length: int, hops: str = "stack") -> np.ndarray:
        """(length,) the distances ``run``'s pattern reaches: composed through its stack of
        layers, one attended distance a layer (``stack``), the same with the value's key
        carried along (``strict``: :func:`strict_reach`), or read directly by a layer after
        the first (``one``: :func:`coverage.one_hop_reach`)."""
        key = (id(run), policy, length, hops)
        if key not in self._reach:
            from lit_sparse.attention import composed_reach

            layers = [p.distances(length) for p in self.patterns(run, policy)]
            reached = {"one": reach_of.one_hop_reach, "strict": strict_reach}.get(
                hops, composed_reach
            )
            self._reach[key] = reached(layers, length)
        return self._reach[key]

    def distances(self, length: int, name: str) -> np.ndarray:
        """The key-to-query distances of held-out set ``name`` at ``length``."""
        if (length, name) not in self._distances:
            self._distances.update(_held_out_distances(self.task, length))
        return self._distances[length, name]

    def coverage(
        self, variant: VariantRecall, policy: str, length: int, name: str, hops: str = "stack"
    ) -> float:
        """The share of the set's sampled queries whose value the pattern reaches (``hops``
        as :meth:`reach`); mean over seeds."""
        samples = self.distances(length, name)
        values = [
            reach_of.sampled_coverage(self.reach(run, policy, length, hops), samples)
            for run in variant.runs
        ]
        finite = [v for v in values if v is not None]
        return float(np.mean(finite)) if finite else math.nan


def strict_reach(per_layer: Sequence[Sequence[int]], length: int) -> np.ndarray:
    """(length,) the distances a stack reaches with each value's key carried along: the
    first layer, where a value has not yet read its key (one back), moves it by a distance
    r only where it also reads r + 1, the key, into the same position; later layers, whose
    input already holds the pair, by any distance. ``composed_reach`` counts every first-layer
    hop, also those that leave the key behind."""
    from lit_sparse.attention import composed_reach

    first = {int(d) for d in per_layer[0]} if len(per_layer) else set()
    carried = sorted(r for r in first if r + 1 in first)
    return composed_reach([carried, *per_layer[1:]], length)


def held_out_module(setup: Mapping[str, Any], min_examples: int = 1):
    """The MQAR or distance data module a run's recorded ``setup`` describes, as its held-out
    sets were drawn (``val_seed``: the recorded one, else the module's default)."""
    from lit_sparse.tasks import DistanceDataModule, MQARDataModule

    kind = KINDS.get(str(setup.get("data.class_path") or "").rsplit(".", 1)[-1])
    if kind not in ("mqar", "distance"):
        raise ConfigError(f"data.class_path={setup.get('data.class_path')!r}: not MQAR or distance")
    module_class = MQARDataModule if kind == "mqar" else DistanceDataModule
    default = inspect.signature(module_class).parameters["val_seed"].default
    common = {
        "seq_len": int(setup["data.init_args.seq_len"]),
        "vocab_size": int(setup.get("data.init_args.vocab_size") or 512),
        "val_examples": int(setup["data.init_args.val_examples"]),
        "val_seed": int(setup.get("data.init_args.val_seed") or default),
    }
    if kind == "mqar":
        return MQARDataModule(
            num_kv_pairs=int(setup["data.init_args.num_kv_pairs"]),
            gap=int(setup.get("data.init_args.gap") or 0),
            **common,
        )
    return DistanceDataModule(min_examples=min_examples, **common)


def _held_out_distances(task: TaskResults, length: int) -> dict[tuple[int, str], np.ndarray]:
    """Every held-out set's key-to-query distances at ``length`` (a distance bucket's, or
    every query of an MQAR setting's), from :func:`held_out_module` (the example count: the
    records')."""
    names = task.sets(length)[:1] if _task_kind(task) == "mqar" else _buckets(task, length)
    if not names:
        return {}
    count = int((task.first.cell(task.policies[0], length, names[0]) or {}).get("examples") or 0)
    module = held_out_module(task.setup, max(1, count))
    if module.examples_at(length) != count:
        raise ConfigError(
            f"{task.task.name}: the records hold {count} examples a set at {length}, the "
            f"data module draws {module.examples_at(length)}: cannot regenerate its distances"
        )
    sets = module.recall_sets(length)
    return {(length, n): reach_of.example_distances(*sets[n]) for n in names}


def _setup_line(task: TaskResults) -> str:
    s = task.setup
    data = str(s.get("data.class_path") or "").rsplit(".", 1)[-1]
    extra = [
        f"{label} {s[key]}"
        for key, label in (
            ("data.init_args.num_kv_pairs", "kv"),
            ("data.init_args.vocab_size", "V"),
            ("data.init_args.val_examples", "held-out examples per set"),
        )
        if s.get(key) is not None
    ]
    return (
        f"- **{task.task.name}** ({task.task.label or data}): {data}, T = "
        f"{s.get('data.init_args.seq_len')}, {', '.join(extra)}; {s.get('model.arch.n_layers')} "
        f"layers, d_model {s.get('model.arch.d_model')}, {s.get('model.arch.n_heads')} heads "
        f"({s.get('model.arch.n_kv_heads')} KV); {s.get('trainer.max_steps')} steps of "
        f"{s.get('data.init_args.batch_size')} examples, lr {s.get('model.lr')} "
        f"({s.get('model.warmup_steps')} warmup steps, cosine to x{s.get('model.min_lr_ratio')}); "
        f"evaluated at {', '.join(f'{t} ({task.multiple(t)})' for t in task.lengths)} under "
        f"new_offsets {', '.join(task.policies)}."
    )


def _header(study: RecallStudy) -> list[str]:
    lines = [f"# The {study.preset.name} preset over seeds", "", "Setup:", ""]
    lines += [_setup_line(task) for task in study.tasks]
    lines.append("")
    lines += [
        f"Seeds per variant, {task.task.name}: {seeds.seed_counts(task.variants)}."
        for task in study.tasks
    ]
    if study.missing:
        lines += ["", seeds.left_out(study.missing)]
    return [*lines, "", RULE]


def _cache_rows(variant: VariantRecall, length: int, policy: str = "use") -> str:
    """The decoding cache (rows of the largest layer, the largest over seeds) at ``length``
    under ``policy``."""
    offer = variant.offer(length, policy)
    return "-" if offer is None else str(offer[1])


def _slots(variant: VariantRecall, length: int) -> str:
    offer = variant.offer(length)
    return "-" if offer is None else f"{offer[0]:.1f}"


def _steps(variant: VariantRecall) -> str:
    early = sum(r.stopped_early for r in variant.runs)
    steps = Spread.of([r.result.step for r in variant.runs]).format(0)
    return f"{steps} ({early}/{len(variant.runs)})"


def steps_to(run, share: float) -> int | None:
    """The first evaluated step at which the run's held-out accuracy reached ``share`` (None:
    never), from its learning curve."""
    steps, accuracy = run.curve.get("step") or [], run.curve.get("val/acc") or []
    return next(
        (s for s, a in zip(steps, accuracy, strict=False) if a is not None and a >= share), None
    )


def _steps_to(variant: VariantRecall, share: float) -> str:
    """Each seed's step to ``share`` ("-": never reached)."""
    reached = (steps_to(run, share) for run in variant.runs)
    return " / ".join("-" if step is None else str(step) for step in reached)


HOPS = ("one", "stack", "strict")
"""The MQAR table's reach columns: one hop, composed through the stack, and composed with the
key carried (:func:`strict_reach`)."""


def _mqar_table(study: RecallStudy, geometry: dict[str, Geometry]) -> str | None:
    tasks = [t for t in study.tasks if _task_kind(t) == "mqar"]
    if not tasks:
        return None
    header = [
        "setting", "variant", "accuracy [95 % interval]", "per seed", "steps (early stops)",
        "steps to 0.5", "steps to 0.9",
        "rows read a query", "slots a query", "cache rows", "values in one hop",
        "values through the stack", "values through the stack, strict",
    ]  # fmt: skip
    rows = []
    for task in tasks:
        length, shape = task.training_length, geometry[task.task.name]
        for variant in task.variants:
            name = task.sets(length)[0]
            rows.append(
                [
                    task.sets(length)[0],
                    variant.name,
                    headline_interval(task, variant, "use", length).format(3),
                    _per_seed(headline(task, variant, "use", length)),
                    _steps(variant),
                    _steps_to(variant, 0.5),
                    _steps_to(variant, 0.9),
                    f"{shape.rows(variant, length):.1f}",
                    _slots(variant, length),
                    _cache_rows(variant, length),
                    *(f"{shape.coverage(variant, 'use', length, name, h):.3f}" for h in HOPS),
                ]
            )
    return seeds.section(
        "MQAR: accuracy per setting",
        "Accuracy at the queries of the held-out examples (per example, averaged over "
        "examples) with its bootstrap interval and each seed's value, the optimizer steps "
        "trained (a run stops early once held-out accuracy reaches the config's threshold; "
        "the learning curves are in the records and learning.png), each seed's first "
        "evaluated step with held-out accuracy >= 0.5 and >= 0.9 (-: never; evaluations every "
        "100 steps on far MQAR), and at the setting's "
        "length each pattern's distinct key rows read by a query (mean over layers and "
        "seeds: a learned rung is one slot but reads two rows), its slots (mean over layers), "
        "its decoding cache (rows of the largest layer), and the share of the held-out "
        "queries whose value the pattern reaches (regenerated from the data module's "
        "val_seed; mean over seeds): read directly by a layer after the first (one hop: "
        "the first layer cannot match a key, a value learns its key there), by composing "
        "one attended distance a layer through the whole stack, and strictly so: a hop "
        "through the first layer counts only where that layer also reads the key (one "
        "before the value) into the same position, since a value there does not yet carry "
        "its key. Reach is necessary, not "
        "sufficient: a query must also match its key, and a value passed on through a relay "
        "position shares it with whatever else that position read. BigBird's global and "
        "random keys are not counted.",
        markdown_table(header, rows),
    )


def _distance_summary(task: TaskResults, geometry: Geometry) -> list[str]:
    """One row a variant: its steps, rows read and cache at T, the mean accuracy over the
    buckets at T, and at the longest length the buckets with d < T and d >= T per policy,
    each policy with its cache rows there."""
    length, longest = task.training_length, task.lengths[-1]
    at = f"{longest} ({task.multiple(longest)})"
    header = [
        "variant", "steps (early stops)", f"rows read a query at {length}", "cache rows",
        f"{length} (1x)",
    ]  # fmt: skip
    for policy in task.policies:
        header += [f"{at} {policy}, d < {length}", f"{at} {policy}, d >= {length}"]
        header.append(f"cache rows at {longest}, {policy}")
    rows = []
    for variant in task.variants:
        row = [variant.name, _steps(variant), f"{geometry.rows(variant, length):.1f}"]
        row += [_cache_rows(variant, length)]
        row.append(headline_interval(task, variant, task.policies[0], length).format(3))
        for policy in task.policies:
            row += [
                headline_interval(task, variant, policy, longest, part).format(3)
                for part in ("within", "beyond")
            ]
            row.append(_cache_rows(variant, longest, policy))
        rows.append(row)
    return [
        "",
        "Mean accuracy over the distance buckets, with its bootstrap interval: at the "
        f"training length, and at {longest} over the buckets with every d < {length} "
        f"(training drew d up to {length - 2}) and over those with every d >= {length}, "
        "under each new_offsets policy, each beside the decoding cache (rows of the largest "
        "layer) the pattern keeps at that length under that policy; with the steps each "
        "variant trained (the early stop at 0.99 gives the variants unequal budgets) and "
        "its distinct key rows read by a query at T (mean over layers and seeds).",
        "",
        markdown_table(header, rows),
    ]


def _per_policy(task: TaskResults, columns: list[str], cells: Callable) -> list[str]:
    """A table per new_offsets policy: a row per variant and length, its ``columns`` filled
    by ``cells(variant, policy, length)``."""
    out = []
    for policy in task.policies:
        rows = [
            [variant.name, f"{length} ({task.multiple(length)})", *cells(variant, policy, length)]
            for variant in task.variants
            for length in task.lengths
        ]
        table = markdown_table(["variant", "length", *columns], rows)
        out += ["", f"new_offsets={policy}:", "", table]

    return out


def _bucket_cell(
    geometry: Geometry, variant: VariantRecall, policy: str, length: int, name: str
) -> str:
    text = variant.spread(policy, length, name).format(2)
    coverage = geometry.coverage(variant, policy, length, name)
    return text + ("" if math.isnan(coverage) else f" [{coverage:.2f}]")


def _examples(task: TaskResults, length: int) -> str:
    names = _buckets(task, length)
    cell = task.first.cell(task.policies[0], length, names[0]) if names else None
    return str((cell or {}).get("examples", "-"))


def _distance_tables(task: TaskResults, geometry: Geometry) -> list[str]:
    buckets = task.sets()

    def cells(variant: VariantRecall, policy: str, length: int) -> list[str]:
        here = task.sets(length)
        return [
            _examples(task, length),
            _cache_rows(variant, length, policy),
            *(
                _bucket_cell(geometry, variant, policy, length, n) if n in here else ""
                for n in buckets
            ),
        ]

    return [
        f"## Distance task ({task.task.name}): accuracy per distance bucket",
        *_distance_summary(task, geometry),
        "",
        "Per bucket of the key-to-query distance d: accuracy (mean ± sd over seeds) at each "
        "evaluation length, from the held-out examples a bucket holds there (a bucket of 8 "
        "examples moves in steps of 1/8), beside the decoding cache at that length; in "
        "brackets the pattern's coverage of the distances the bucket's examples actually "
        "sampled: the share whose value (d - 1 before the query) the stack of layers reaches "
        "by composing one attended distance per layer (BigBird's global and random keys not "
        "counted; mean over seeds). A plugin without new_offsets has the same numbers under "
        "both policies.",
        *_per_policy(task, ["examples a bucket", "cache rows", *buckets], cells),
    ]


def coverage_cells(task: TaskResults, geometry: Geometry) -> list[tuple[float, float]]:
    """(coverage of the sampled distances, mean accuracy over seeds) of every (variant,
    policy, length, bucket)."""
    cells = []
    for variant in task.variants:
        policies = task.policies if variant.runs[0].result.has_new_offsets else task.policies[:1]
        for policy in policies:
            for length in task.lengths:
                for name in _buckets(task, length):
                    coverage = geometry.coverage(variant, policy, length, name)
                    accuracy = variant.spread(policy, length, name).mean
                    if math.isfinite(coverage) and math.isfinite(accuracy):
                        cells.append((coverage, accuracy))
    return cells


def _coverage_table(task: TaskResults, geometry: Geometry) -> list[str]:
    cells = coverage_cells(task, geometry)
    if not cells:
        return []
    groups = (
        ("coverage 0", lambda c: c == 0),
        ("0 < coverage < 1", lambda c: 0 < c < 1),
        ("coverage 1", lambda c: c == 1),
    )
    rows = []
    for label, test in groups:
        values = [a for c, a in cells if test(c)]
        stats = [f"{f(values):.3f}" if values else "-" for f in (np.mean, np.min, np.max)]
        rows.append([label, str(len(values)), *stats])
    coverage, accuracy = np.array(cells).T
    r = (
        float(np.corrcoef(coverage, accuracy)[0, 1])
        if coverage.std() > 0 and accuracy.std() > 0
        else math.nan
    )
    return [
        f"## Does coverage predict recall? ({task.task.name})",
        "",
        "Every (variant, policy, length, bucket) cell of the table above, grouped by the "
        "pattern's coverage of the bucket's sampled distances: the mean accuracy over seeds "
        "in each group, and the correlation of coverage and accuracy over all "
        f"{len(cells)} cells (Pearson r = {'n/a' if math.isnan(r) else f'{r:.2f}'}).",
        "",
        markdown_table(["cells", "count", "mean accuracy", "min", "max"], rows),
    ]


def _passkey_table(task: TaskResults) -> list[str]:
    depths = task.sets()

    def cells(variant: VariantRecall, policy: str, length: int) -> list[str]:
        names = task.sets(length)
        return [
            _cache_rows(variant, length, policy),
            *(
                variant.spread(policy, length, d, "exact").format(2) if d in names else ""
                for d in depths
            ),
            headline(task, variant, policy, length).format(2),
            variant.mean_over(policy, length, names).format(2),
        ]

    return [
        f"## Passkey ({task.task.name}): accuracy against length and depth",
        "",
        "The share of held-out keys recalled whole (every digit right) per depth of the "
        "needle (0: at the start of the text, 1: right before the question), their mean, and "
        "the share of digits right, at each evaluation length, beside the decoding cache "
        "(rows of the largest layer) there.",
        *_per_policy(task, ["cache rows", *depths, "mean", "digits right"], cells),
    ]


def _alpha_table(study: RecallStudy) -> str:
    return seeds.alpha_table(
        [
            ([task.task.name, variant.name], variant)
            for task in study.tasks
            for variant in task.variants
        ],
        ["task", "variant"],
        "Learned alpha: drift per layer",
        "Alpha at the end and its drift from the start, per layer, over seeds (mean ± sd); "
        "'moved' = the bootstrap interval of the drift over seeds excludes 0 (with 3 seeds: "
        "every seed's drift has the same sign).",
        moved=lambda drift: _seed_interval(drift).excludes_zero if drift.n >= 2 else None,
    )


@dataclass(frozen=True)
class Question:
    """One comparison behind one of the issue's questions: ``a - b`` on a task's headline."""

    question: str
    a: str
    b: str
    length: str = "1x"
    """``1x`` or ``longest`` (the last evaluation length)."""
    policy: str = "use"
    part: str = "all"
    """Distance task: the buckets ``within`` or ``beyond`` the training length, or ``all``."""
    against_1x: bool = False
    """Compare variant ``a`` at ``length`` against itself at 1x (``b`` ignored)."""


_RUNGS = ("fib_fixed", "fib_linear", "fib_coprime", "fib_learned", "pow2_fixed")
_SPARSE = (*_RUNGS, "bigbird", "sw_keys", "sw_cache")
QUESTIONS: tuple[Question, ...] = (
    *(Question("(a) a sparse pattern against dense", v, "dense") for v in _SPARSE),
    Question("(b) Fibonacci against a window at equal keys per query", "fib_fixed", "sw_keys"),
    Question("(b) Fibonacci against a window at equal keys per query", "fib_linear", "sw_keys"),
    Question("(b) Fibonacci against a window at equal cache", "fib_fixed", "sw_cache"),
    Question("(b) Fibonacci against a window at equal cache", "fib_linear", "sw_cache"),
    *(
        Question(
            f"(b) Fibonacci against a window at equal cache, {policy}",
            v,
            "sw_cache",
            "longest",
            policy,
            part,
        )
        for v in ("fib_fixed", "fib_linear")
        for policy in ("drop", "use")
        for part in ("within", "beyond")
    ),  # fmt: skip
    Question("(c) staggered against fixed", "fib_linear", "fib_fixed"),
    Question("(c) staggered against fixed", "fib_coprime", "fib_fixed"),
    *(
        Question("(c) staggering, or one alpha value? (the alpha control)", "fib_linear", b)
        for b in ("alphas_05_05", "alphas_15_15", "alphas_15_05")
    ),
    Question("(d) learned alpha against fixed", "fib_learned", "fib_fixed"),
    *(
        Question(
            f"(e) extrapolation to the longest length, {policy}",
            v,
            v,
            "longest",
            policy,
            part,
            against_1x=True,
        )
        for v in (*_RUNGS, "dense", "sw_keys", "sw_cache")
        for policy in ("use", "drop")
        for part in ("within", "beyond", "all")
    ),  # fmt: skip
)
"""The comparisons behind the issue's questions (a) to (e)."""


def _compared(
    task: TaskResults, item: Question, a: VariantRecall, b: VariantRecall, length: int
) -> tuple[Interval, Interval, Interval] | None:
    """(a, b, a - b) with their bootstrap intervals; a run against itself at 1x is paired
    over seeds (the same seeds drawn for both lengths)."""
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    picks = seeds.seed_picks(rng, len(a.runs)) if item.against_1x else None
    mean_a, draws_a = _draws(task, a, item.policy, length, item.part, rng, picks)
    if item.against_1x:
        part = "within" if item.part == "beyond" else item.part
        mean_b, draws_b = _draws(task, b, "use", task.training_length, part, rng, picks)
    else:
        mean_b, draws_b = _draws(task, b, item.policy, length, item.part, rng)
    if not (math.isfinite(mean_a) and math.isfinite(mean_b)):
        return None
    first, second = Interval.of(mean_a, draws_a), Interval.of(mean_b, draws_b)
    return first, second, Interval.of(mean_a - mean_b, draws_a - draws_b)


def _question_rows(study: RecallStudy) -> list[list[str]]:
    rows = []
    for item in QUESTIONS:
        for task in study.tasks:
            kind = _task_kind(task)
            if item.part != "all" and kind != "distance":
                continue
            if item.against_1x and (kind == "mqar" or (kind == "distance" and item.part == "all")):
                continue  # MQAR has one length; the distance task: buckets within or beyond
            if item.policy not in task.policies:
                continue
            a, b = task.variant(item.a), task.variant(item.b)
            if a is None or b is None:
                continue
            length = task.training_length if item.length == "1x" else task.lengths[-1]
            if item.against_1x and length == task.training_length:
                continue
            compared = _compared(task, item, a, b, length)
            if compared is None:
                continue
            first, second, difference = compared
            where = f"{length} ({task.multiple(length)}), {item.policy}"
            if item.part != "all":
                where += f", d {'<' if item.part == 'within' else '>='} {task.training_length}"
            against = f"{item.b} at 1x" if item.against_1x else item.b
            b_rows = _cache_rows(b, task.training_length if item.against_1x else length)
            rows.append(
                [item.question, task.task.name, f"{item.a} - {against}", where]
                + [first.format(3), second.format(3), difference.format(3, sign=True)]
                + [seeds.verdict(difference.excludes_zero)]
                + [f"{_steps_mean(a)}; {_steps_mean(b)}"]
                + [f"{_cache_rows(a, length, item.policy)}; {b_rows}"]
            )
    return rows


def _steps_mean(variant: VariantRecall) -> str:
    return f"{Spread.of([r.result.step for r in variant.runs]).mean:.0f}"


def _questions_table(study: RecallStudy) -> str:
    rows = _question_rows(study)
    if not rows:
        return "## Comparisons\n\nNone of the compared variants were run."
    header = ["question", "task", "a - b", "at", "a", "b", "a - b", "interval excludes 0"]
    header += ["steps a; b", "cache rows a; b"]
    return seeds.section(
        "Comparisons behind the questions",
        "Each task's headline number (MQAR: accuracy; distance: the mean accuracy over "
        "the buckets; passkey: keys recalled whole, mean over depths) of variant a "
        "against variant b, each with its 95 % bootstrap interval (for (e): against a "
        "itself at 1x, paired over seeds; buckets with d >= T are compared with a's "
        "buckets at 1x). Higher is better. Beside them the steps each trained (mean over "
        "seeds: the early stop gives unequal budgets) and the decoding cache each keeps "
        "where it is scored.",
        markdown_table(header, rows),
    )


def recall_tables(study: RecallStudy) -> str:
    """Every table of the recall study, as one Markdown document."""
    geometry = {task.task.name: Geometry(task) for task in study.tasks}
    parts: list[str] = ["\n".join(_header(study))]
    mqar = _mqar_table(study, geometry)
    if mqar:
        parts.append(mqar)
    for task in study.tasks:
        kind = _task_kind(task)
        if kind == "distance":
            parts.append("\n".join(_distance_tables(task, geometry[task.task.name])))
            coverage = _coverage_table(task, geometry[task.task.name])
            if coverage:
                parts.append("\n".join(coverage))
        elif kind == "passkey":
            parts.append("\n".join(_passkey_table(task)))
    parts += [_questions_table(study), _alpha_table(study)]
    return "\n\n".join(parts)
