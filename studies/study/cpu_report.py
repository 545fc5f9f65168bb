"""The cpu study's tables over seeds (Markdown): perplexity at each evaluation length and its
change against 1x, position-binned NLL, learned alpha's drift per layer, the comparisons the
paper's claims rest on (marked where they exceed the seed spread), and the paper's numbers as
a qualitative reference at its own, different scale."""

from __future__ import annotations

from dataclasses import dataclass

from lit_sparse.io import markdown_table
from lit_sparse_studies.study import seeds
from lit_sparse_studies.study.cpu_results import StudyResults
from lit_sparse_studies.study.paper_matrix import PAPER, PAPER_ARCH
from lit_sparse_studies.study.preset import CPU
from lit_sparse_studies.study.seeds import Spread, beyond_spread

__all__ = ["CLAIMS", "Comparison", "comparisons", "study_tables"]

RULE = (
    "Beyond the seed spread: two variants differ when |mean_a - mean_b| > sd_a + sd_b; a change "
    "against 1x or an alpha drift differs from zero when |mean| > sd (sd: the sample standard "
    "deviation over seeds). `*` marks a change beyond its spread; with one seed nothing is "
    "marked."
)


@dataclass(frozen=True)
class Comparison:
    """Variant ``a`` against variant ``b`` (None: against zero) on one metric."""

    claim: str
    a: str
    b: str | None
    metric: str
    """``ppl`` (at 1x), ``change_4x`` or ``change_16x`` (the change against 1x at the preset's
    4x or 16x: the middle and the longest evaluation length)."""


_SPARSE = tuple(v.name for v in CPU.variants if v.name != "dense")
CLAIMS: tuple[Comparison, ...] = (
    *(
        Comparison(
            "dense degrades beyond its training length, sparse stays flat", "dense", v, "change_16x"
        )
        for v in _SPARSE
    ),
    Comparison("staggered beats fixed", "fib_linear", "fib_fixed", "ppl"),
    Comparison("staggered beats fixed", "fib_coprime", "fib_fixed", "ppl"),
    Comparison("coprime is about as good as linear", "fib_coprime", "fib_linear", "ppl"),
    Comparison("static staggered schedules beat learned alpha", "fib_learned", "fib_linear", "ppl"),
    Comparison("learned alpha against fixed", "fib_learned", "fib_fixed", "ppl"),
    Comparison("pow2 degrades at 4x", "pow2_fixed", "fib_fixed", "change_4x"),
    Comparison("pow2 degrades at 4x", "pow2_fixed", None, "change_4x"),
    Comparison("Fibonacci rungs beat powers of two", "pow2_linear", "fib_linear", "ppl"),
    Comparison("Fibonacci rungs beat powers of two", "pow2_fixed", "fib_fixed", "ppl"),
    Comparison("rungs add to the window (not a paper claim)", "sliding_window", "fib_fixed", "ppl"),
    Comparison("BigBird against Fibonacci (not a paper claim)", "bigbird", "fib_fixed", "ppl"),
)
"""The comparisons the paper's qualitative claims rest on (docs/paper.md section 6)."""


def _mark(spread: Spread, digits: int, sign: bool = False) -> str:
    text = spread.format(digits, sign)
    return text + " *" if beyond_spread(spread) else text


def _length(results: StudyResults, metric: str) -> int | None:
    """The evaluation length a metric reads: 1x for ``ppl``; for ``change_16x`` the longest,
    for ``change_4x`` the one before it (None: no length beyond the training length)."""
    if metric == "ppl":
        return results.training_length
    longer = [t for t in results.lengths if t != results.training_length]
    if not longer:
        return None
    return longer[-1] if metric == "change_16x" or len(longer) < 2 else longer[-2]


def _metric(results: StudyResults, name: str, metric: str, set_name: str) -> Spread | None:
    variant, length = results.variant(name), _length(results, metric)
    if variant is None or length is None:
        return None
    if metric == "ppl":
        return variant.ppl(set_name, length)
    return variant.change(set_name, length)


def _metric_label(results: StudyResults, metric: str) -> str:
    length = _length(results, metric)
    if metric == "ppl":
        return f"ppl at 1x ({length})"
    return f"change at {results.multiple(length)} ({length}) %"


def comparisons(results: StudyResults) -> list[list[str]]:
    """One row per claim comparison and held-out set whose variants were run."""
    rows = []
    for item in CLAIMS:
        for set_name in results.sets:
            a = _metric(results, item.a, item.metric, set_name)
            b = None if item.b is None else _metric(results, item.b, item.metric, set_name)
            if a is None or not a.n or (item.b is not None and (b is None or not b.n)):
                continue
            digits, signed = (2, False) if item.metric == "ppl" else (1, True)
            label = _metric_label(results, item.metric)
            rows.append(
                [item.claim, f"{item.a} - {item.b or '0'}", label, set_name]
                + seeds.compared(a, b, digits, signed)
            )
    return rows


def _setup_line(results: StudyResults) -> str:
    s = results.setup
    tokens = None
    if all(s.get(k) is not None for k in ("data.init_args.batch_size", "data.init_args.seq_len")):
        tokens = (
            s["data.init_args.batch_size"]
            * s["data.init_args.seq_len"]
            * (s.get("trainer.accumulate_grad_batches") or 1)
            * (s.get("trainer.devices") if isinstance(s.get("trainer.devices"), int) else 1)
        )
    return (
        f"Setup (every run): {s.get('model.arch.n_layers')} layers, d_model "
        f"{s.get('model.arch.d_model')}, {s.get('model.arch.n_heads')} heads of "
        f"{s.get('model.arch.head_dim')} ({s.get('model.arch.n_kv_heads')} KV heads), "
        f"T = {s.get('data.init_args.seq_len')}, {s.get('trainer.max_steps')} steps of "
        f"{tokens} tokens, lr {s.get('model.lr')}; held-out sets: {', '.join(results.sets)} "
        f"({s.get('data.init_args.val_windows')} windows of T each, the same tokens at every "
        f"length: {', '.join(f'{t} ({results.multiple(t)})' for t in results.lengths)})."
    )


def _header(results: StudyResults) -> list[str]:
    lines = [f"# The {results.preset.name} preset over seeds", "", _setup_line(results), ""]
    lines.append(f"Seeds per variant: {seeds.seed_counts(results.variants)}.")
    if results.missing:
        lines.append(seeds.left_out(results.missing))
    return [*lines, "", RULE]


def _ppl_table(results: StudyResults) -> str:
    train = results.training_length
    longer = [t for t in results.lengths if t != train]
    header = [
        "variant",
        "set",
        "seeds",
        *(f"ppl {results.multiple(t)} ({t})" for t in results.lengths),
        *(f"change {results.multiple(t)} %" for t in longer),
    ]
    rows = [
        [
            variant.name,
            set_name,
            str(len(variant.runs)),
            *(variant.ppl(set_name, t).format(2) for t in results.lengths),
            *(_mark(variant.change(set_name, t), 1, sign=True) for t in longer),
        ]
        for variant in results.variants
        for set_name in results.sets
    ]
    return seeds.section(
        "Perplexity against evaluation length",
        "Held-out perplexity (mean ± sd over seeds) at 1x the training length and beyond, "
        "and each seed's change against its own 1x, averaged.",
        markdown_table(header, rows),
    )


def _bins_table(results: StudyResults) -> str:
    cells = [
        (v, s, [b.format(3) for b in v.bins(s)]) for v in results.variants for s in results.sets
    ]
    n_bins = max((len(bins) for _, _, bins in cells), default=0)
    rows = [
        [v.name, s, *bins, *["-"] * (n_bins - len(bins)), v.first_last(s).format(3)]
        for v, s, bins in cells
    ]
    header = ["variant", "set", *(f"b{k}" for k in range(n_bins)), f"b0 - b{n_bins - 1}"]
    return seeds.section(
        "Position-binned NLL",
        f"Mean NLL in {n_bins} bins of position within the training-length window, at the "
        f"last validation (mean ± sd over seeds); b0 - b{n_bins - 1}: how much lower the loss "
        "is late in the window.",
        markdown_table(header, rows),
    )


def _alpha_table(results: StudyResults) -> str:
    return seeds.alpha_table(
        [([variant.name], variant) for variant in results.variants],
        ["variant"],
        "Learned alpha: total drift per layer",
        "Alpha at step 0 and at the end, and the drift (end minus start) per layer, over "
        "seeds; 'moved' = the drift differs from zero beyond its seed spread.",
        start=True,
    )


def _comparison_table(results: StudyResults) -> str:
    return seeds.comparison_table(
        "Comparisons behind the paper's claims",
        "Difference of means (a - b) against the sum of the seed standard deviations; "
        "'beyond spread' applies the rule above. Lower perplexity is better.",
        ["claim", "a - b", "metric", "set"],
        comparisons(results),
    )


def _paper_table(results: StudyResults) -> str:
    rows = []
    for variant in results.variants:
        run = variant.variant.paper_run
        paper = PAPER.get(run or "", {})
        if not paper:
            continue
        ppl = (paper.get("ppl") or {}).get("fineweb_edu")
        extrap_run = run
        extrap = (paper.get("extrap") or {}).get("fineweb_edu")
        if extrap is None:  # the paper gives linear and coprime extrapolation at W=12 only
            extrap_run = run.replace("_w8", "_w12")
            extrap = (PAPER.get(extrap_run, {}).get("extrap") or {}).get("fineweb_edu")
        changes = ["-", "-"]
        if extrap:
            values = list(extrap.values())
            note = "" if extrap_run == run else f" ({extrap_run})"
            changes = [f"{100 * (v / values[0] - 1):+.1f}{note}" for v in values[1:3]]
        bins = (paper.get("bins") or {}).get("fineweb_edu")
        rows.append(
            [
                variant.name,
                run or "-",
                "-" if ppl is None else f"{ppl:.2f}",
                *changes,
                "-" if not bins else f"{bins[0] - bins[-1]:.3f}",
            ]
        )
    arch = PAPER_ARCH
    return seeds.section(
        "The paper's numbers (a different scale: qualitative reference only)",
        f"The paper's runs: {arch['n_layers']} layers, d_model {arch['d_model']}, T = 1024, "
        "13,000 steps x 32,768 tokens on FineWeb-Edu, Wikipedia, TinyStories and math, one "
        "seed each (docs/paper.md section 6). Its extrapolation lengths are 2x and 4x (ours "
        "4x and 16x), its data and scale are not ours: no number here is comparable to the "
        "tables above, only the direction of a difference.",
        markdown_table(
            ["variant", "paper run", "FineWeb-Edu ppl (1024)", "change at 2x %"]
            + ["change at 4x %", "b0 - b7"],
            rows,
        ),
    )


def study_tables(results: StudyResults) -> str:
    """Every table of the study, as one Markdown document."""
    return "\n\n".join(
        [
            "\n".join(_header(results)),
            _ppl_table(results),
            _comparison_table(results),
            _bins_table(results),
            _alpha_table(results),
            _paper_table(results),
        ]
    )
