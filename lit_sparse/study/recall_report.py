"""The recall study's tables over seeds (Markdown): MQAR accuracy per setting beside each
pattern's keys per query and decoding cache, distance-task accuracy per bucket at each
length and policy beside the pattern's coverage, whether coverage predicts recall, passkey
accuracy against length and depth, learned alpha's drift, and the comparisons the issue's
questions rest on (marked where they exceed the seed spread)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lit_sparse.io.tables import markdown_table
from lit_sparse.study import seeds
from lit_sparse.study.recall_results import RecallStudy, TaskResults, VariantRecall
from lit_sparse.study.seeds import Spread

__all__ = ["QUESTIONS", "Question", "headline", "recall_tables"]

RULE = (
    "Mean ± sd over seeds (sd: the sample standard deviation). Two variants differ beyond the "
    "seed spread when |mean_a - mean_b| > sd_a + sd_b; with one seed on a side nothing is "
    "marked."
)


KINDS = {"MQARDataModule": "mqar", "DistanceDataModule": "distance", "PasskeyDataModule": "passkey"}


def _task_kind(task: TaskResults) -> str:
    """``mqar``, ``distance`` or ``passkey``: the task's data module."""
    return KINDS.get(str(task.setup.get("data.class_path") or "").rsplit(".", 1)[-1], "other")


def _buckets(task: TaskResults, length: int, within: bool | None = None) -> list[str]:
    """The distance buckets at ``length``; ``within``: only those inside [2, T - 2] (True)
    or beyond it (False)."""
    names = [n for n in task.sets(length) if task.first.distances.get(n)]
    if within is None:
        return names
    limit = task.training_length - 2
    return [n for n in names if (task.first.distances[n][1] <= limit) == within]


def headline(
    task: TaskResults, variant: VariantRecall, policy: str, length: int, part: str = "all"
) -> Spread:
    """A task's one number per run: MQAR the accuracy on its training setting; the distance
    task the mean accuracy over the buckets at ``length`` (``part``: ``within`` or
    ``beyond`` the training length's distances, or ``all``); passkey the share of keys
    recalled whole (every digit), averaged over depths."""
    kind = _task_kind(task)
    if kind == "mqar":
        return variant.spread(policy, length, task.sets(length)[0])
    if kind == "passkey":
        return variant.mean_over(policy, length, task.sets(length), key="exact")
    within = {"all": None, "within": True, "beyond": False}[part]
    return variant.mean_over(policy, length, _buckets(task, length, within))


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


def _offer_cell(variant: VariantRecall, length: int) -> tuple[str, str]:
    offer = variant.offer(length)
    if offer is None:
        return "-", "-"
    keys, rows = offer
    return f"{keys:.1f}", str(rows)


def _mqar_table(study: RecallStudy) -> str | None:
    tasks = [t for t in study.tasks if _task_kind(t) == "mqar"]
    if not tasks:
        return None
    header = ["variant"]
    for task in tasks:
        name = task.sets(task.training_length)[0]
        header += [
            f"{name} accuracy",
            "steps (early stops)",
            f"keys/query at {task.training_length}",
            "cache rows",
        ]
    names = [v.name for v in study.preset.variants if any(t.variant(v.name) for t in tasks)]
    rows = []
    for name in names:
        row = [name]
        for task in tasks:
            variant = task.variant(name)
            if variant is None:
                row += ["-", "-", "-", "-"]
                continue
            keys, cache = _offer_cell(variant, task.training_length)
            accuracy = headline(task, variant, "use", task.training_length).format(3)
            early = sum(r.stopped_early for r in variant.runs)
            steps = Spread.of([r.result.step for r in variant.runs]).format(0)
            row += [accuracy, f"{steps} ({early}/{len(variant.runs)})", keys, cache]
        rows.append(row)
    return seeds.section(
        "MQAR: accuracy per setting",
        "Accuracy at the queries of the held-out examples (per example, averaged over "
        "examples), the optimizer steps trained (a run stops early once held-out accuracy "
        "reaches the config's threshold; the learning curves are in the records and "
        "learning.png), with each pattern's keys per query (mean over layers) and its "
        "decoding cache (rows of the largest layer) at the setting's length.",
        markdown_table(header, rows),
    )


def _distance_summary(task: TaskResults) -> list[str]:
    """One row a variant: its keys per query and cache at T, the mean accuracy over the
    buckets at T, and at the longest length the buckets within and beyond T per policy."""
    length, longest = task.training_length, task.lengths[-1]
    at = f"{longest} ({task.multiple(longest)})"
    columns = [(p, part) for p in task.policies for part in ("within", "beyond")]
    header = ["variant", f"keys/query at {length}", "cache rows", f"{length} (1x)"]
    header += [f"{at} {policy}, {part} T" for policy, part in columns]
    rows = []
    for variant in task.variants:
        row = [variant.name, *_offer_cell(variant, length)]
        row.append(headline(task, variant, task.policies[0], length).format(3))
        row += [headline(task, variant, p, longest, part).format(3) for p, part in columns]
        rows.append(row)
    return [
        "",
        "Mean accuracy over the distance buckets (mean ± sd over seeds): at the training "
        f"length, and at {longest} over the buckets wholly within [2, {length - 2}] and over "
        "the others, under each new_offsets policy; beside each pattern's keys per query "
        "(mean over layers) and decoding cache (rows of the largest layer) at T.",
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


def _bucket_cell(variant: VariantRecall, policy: str, length: int, name: str) -> str:
    coverage = variant.coverage(policy, length, name)
    text = variant.spread(policy, length, name).format(2)
    return text + ("" if coverage is None else f" [{coverage:.2f}]")


def _distance_tables(task: TaskResults) -> list[str]:
    buckets = task.sets()

    def cells(variant: VariantRecall, policy: str, length: int) -> list[str]:
        here = task.sets(length)
        return [_bucket_cell(variant, policy, length, n) if n in here else "" for n in buckets]

    return [
        f"## Distance task ({task.task.name}): accuracy per distance bucket",
        *_distance_summary(task),
        "",
        "Per bucket of the key-to-query distance d: accuracy (mean ± sd over seeds) at each "
        "evaluation length, and in brackets the pattern's coverage of the bucket: the share "
        "of its d whose value (d - 1 before the query) the stack of layers reaches by "
        "composing one attended distance per layer (BigBird's global and random keys not "
        "counted). A plugin without new_offsets has the same numbers under both policies.",
        *_per_policy(task, buckets, cells),
    ]


def coverage_cells(task: TaskResults) -> list[tuple[float, float]]:
    """(coverage, mean accuracy over seeds) of every (variant, policy, length, bucket)."""
    cells = []
    for variant in task.variants:
        policies = task.policies if variant.runs[0].result.has_new_offsets else task.policies[:1]
        for policy in policies:
            for length in task.lengths:
                for name in _buckets(task, length):
                    coverage = variant.coverage(policy, length, name)
                    accuracy = variant.spread(policy, length, name).mean
                    if coverage is not None and math.isfinite(accuracy):
                        cells.append((coverage, accuracy))
    return cells


def _coverage_table(task: TaskResults) -> list[str]:
    cells = coverage_cells(task)
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
        "pattern's coverage of the bucket: the mean accuracy over seeds in each group, and "
        f"the correlation of coverage and accuracy over all {len(cells)} cells "
        f"(Pearson r = {'n/a' if math.isnan(r) else f'{r:.2f}'}).",
        "",
        markdown_table(["cells", "count", "mean accuracy", "min", "max"], rows),
    ]


def _passkey_table(task: TaskResults) -> list[str]:
    depths = task.sets()

    def cells(variant: VariantRecall, policy: str, length: int) -> list[str]:
        names = task.sets(length)
        return [
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
        "the share of digits right, at each evaluation length.",
        *_per_policy(task, [*depths, "mean", "digits right"], cells),
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
        "Alpha at the end and its drift from the start, per layer, over seeds; 'moved' = "
        "the drift differs from zero beyond its seed spread.",
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
    Question("(c) staggered against fixed", "fib_linear", "fib_fixed"),
    Question("(c) staggered against fixed", "fib_coprime", "fib_fixed"),
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
        for v in (*_RUNGS, "dense", "sw_keys")
        for policy in ("use", "drop")
        for part in ("within", "beyond", "all")
    ),  # fmt: skip
)
"""The comparisons behind the issue's questions (a) to (e)."""


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
            part = "within" if item.part == "beyond" and item.against_1x else item.part
            first = headline(task, a, item.policy, length, item.part)
            second = (
                headline(task, b, "use", task.training_length, part)
                if item.against_1x
                else headline(task, b, item.policy, length, item.part)
            )
            if not first.n or not second.n:
                continue
            where = f"{length} ({task.multiple(length)}), {item.policy}"
            if item.part != "all":
                where += f", buckets {item.part} T"
            against = f"{item.b} at 1x" if item.against_1x else item.b
            rows.append(
                [item.question, task.task.name, f"{item.a} - {against}", where]
                + seeds.compared(first, second, 3)
            )
    return rows


def _questions_table(study: RecallStudy) -> str:
    return seeds.comparison_table(
        "Comparisons behind the questions",
        "Each task's headline number (MQAR: accuracy; distance: the mean accuracy over "
        "the buckets; passkey: keys recalled whole, mean over depths) of variant a "
        "against variant b (for (e): against a itself at 1x; 'beyond T' buckets are "
        "compared with a's buckets within T at 1x). Higher is better.",
        ["question", "task", "a - b", "at"],
        _question_rows(study),
    )


def recall_tables(study: RecallStudy) -> str:
    """Every table of the recall study, as one Markdown document."""
    parts: list[str] = ["\n".join(_header(study))]
    mqar = _mqar_table(study)
    if mqar:
        parts.append(mqar)
    for task in study.tasks:
        kind = _task_kind(task)
        if kind == "distance":
            parts.append("\n".join(_distance_tables(task)))
            coverage = _coverage_table(task)
            if coverage:
                parts.append("\n".join(coverage))
        elif kind == "passkey":
            parts.append("\n".join(_passkey_table(task)))
    parts += [_questions_table(study), _alpha_table(study)]
    return "\n\n".join(parts)
