"""A finished recall run as one small JSON file, committed beside the study's document.

A run folder (checkpoints, events) is large and machine-local; the record is what the
document is built from, so ``matrix --preset recall --table/--plot --results DIR`` rebuilds it
on any machine. ``DIR/<task>/<variant>/seed<K>.json`` holds the run's ``recall.json`` (every
accuracy by policy, length and set, with each pattern's keys per query, decoding cache and
coverage), its learning curve (every logged ``val/*`` scalar over steps), the alpha trajectory,
the final and maximum steps and whether it stopped early, its wall and CPU time, the config
values the study compares (the recall preset's ``setup_keys``), the options that started it
and the commit it ran on.

Before a table counts a record it is checked (:class:`RecordChecks`): its own task, variant and
seed, the options that started it and its attention against its path; against the records
read before it (a copy of one seed as another, the same run in two files, other extra fit
options than its task's other records); and its accuracies (a number in [0, 1], or None for a
set with no examples). Each refusal names the file and the field.
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from lit_sparse import DamagedFileError, check_format
from lit_sparse.io import load_yaml, write_json
from lit_sparse_studies.study.paper_matrix import CONFIG_DIR
from lit_sparse_studies.study.preset import RECALL, PresetRun, extra_options
from lit_sparse_studies.study.seeds import lookup

__all__ = [
    "FORMAT",
    "RecordChecks",
    "check_scores",
    "check_stopped_early",
    "learning_curve",
    "make_record",
    "read_record",
    "run_fields",
    "record_file",
    "source_commit",
    "write_record",
]

FORMAT = "lit_sparse.recall-run/1"


def record_file(results: Path, task: str, variant: str, seed: int) -> Path:
    return Path(results) / task / variant / f"seed{seed}.json"


def learning_curve(run_dir: Path, prefix: str = "val/") -> dict[str, list]:
    """Every scalar tag under ``prefix`` in the run's TensorBoard events, as
    ``{"step": [...], tag: [...]}`` over the steps where validation ran (None where a tag
    was not logged at a step). Later events at a step win (a resume rewrites it)."""
    from lit_sparse.runs import read_scalars

    by_tag = read_scalars(run_dir, prefix)
    steps = sorted({step for values in by_tag.values() for step in values})
    curve: dict[str, list] = {"step": steps}
    for tag in sorted(by_tag):
        values = [by_tag[tag].get(step) for step in steps]
        curve[tag] = [None if v is None else round(v, 6) for v in values]
    return curve


def source_commit() -> str | None:
    """The commit of the lit_sparse checkout this process imports (``+dirty`` with local
    edits), None outside a git checkout."""
    folder = Path(__file__).resolve().parents[2]

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=30
        )

    try:
        head = git("rev-parse", "HEAD")
        if head.returncode:
            return None
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def make_record(
    run_dir: Path,
    labels: dict[str, Any],
    wall_s: float | None = None,
    cpu_s: float | None = None,
    commit: str | None = None,
    keys: Sequence[str] = RECALL.setup_keys,
) -> dict[str, Any]:
    """The record of a finished run folder; ``labels`` name it (task, variant, seed), its
    ``setup`` holds the config values at ``keys``."""
    from lit_sparse.runs import read_result_json

    run_dir = Path(run_dir)
    recall = read_result_json(run_dir / "recall.json")
    if recall is None:
        raise DamagedFileError(f"{run_dir}: no recall.json; the run has not finished")
    check_scores(recall, run_dir / "recall.json", "")
    check_stopped_early(recall.get("stopped_early"), run_dir / "recall.json", "stopped_early")
    return {
        "format": FORMAT,
        **labels,
        "step": recall.get("step"),
        "stopped_early": recall.get("stopped_early") is True,
        **run_fields(run_dir, keys, wall_s, cpu_s, commit),
        "recall": recall,
    }


def run_fields(
    run_dir: Path,
    keys: Sequence[str],
    wall_s: float | None = None,
    cpu_s: float | None = None,
    commit: str | None = None,
) -> dict[str, Any]:
    """What every study's record holds of a finished run folder: the commit, the config values
    at ``keys`` (``setup``), its attention, the options that started it, its times, its
    held-out and training curves and its alpha trajectory (the layers that have one)."""
    from lit_sparse.runs import load_run

    config = load_yaml(run_dir / "config.yaml", "run config")
    trajectory = load_run(run_dir, load_model=False).alpha_trajectory
    started = run_dir.parent / "preset.yaml"
    return {
        "commit": commit,
        "setup": {key: lookup(config, key) for key in keys},
        "attention": lookup(config, "model.attention"),
        "options": load_yaml(started, "run record").get("options") if started.is_file() else None,
        "max_steps": lookup(config, "trainer.max_steps"),
        "wall_s": None if wall_s is None else round(wall_s, 1),
        "cpu_s": None if cpu_s is None else round(cpu_s, 1),
        "curve": learning_curve(run_dir),
        "train_curve": learning_curve(run_dir, "train/loss"),
        "alpha": None
        if trajectory is None
        else {
            "steps": [int(s) for s in trajectory.steps],
            "alphas": [[round(float(a), 6) for a in row] for row in trajectory.alphas],
            "layers": list(trajectory.layers),
        },
    }


def write_record(path: Path, record: dict[str, Any]) -> Path:
    return write_json(path, record)


def read_record(path: Path) -> dict[str, Any]:
    """A record file; DamagedFileError naming it when it is not one."""
    from lit_sparse.runs import read_result_json

    record = read_result_json(path)
    check_format(record, FORMAT, f"a recall run record: {path}", DamagedFileError)
    check_scores(record.get("recall"), path)
    check_stopped_early(record.get("stopped_early"), path, "stopped_early")
    return record


def check_stopped_early(value: Any, path: Path, field: str) -> None:
    """Refuse a ``stopped_early`` that is neither true, false nor absent (the string "no",
    1): only the boolean true counts as an early stop."""
    if value is not None and not isinstance(value, bool):
        raise DamagedFileError(
            f"{path}: its {field} is {value!r}; expected true or false (only true counts as "
            "an early stop)"
        )


SHARES = ("accuracy", "exact", "coverage")
"""The fields of a scored set that are shares: a number in [0, 1], or None (not scored)."""


def check_scores(recall: Any, path: Path, prefix: str = "recall.") -> None:
    """Refuse a share in ``recall``'s scores that is not a finite number in [0, 1] (NaN, an
    infinity, 1.5, the string "0.9", true), a scored set (one with examples) with no
    accuracy, and scores or a cell that is no mapping, naming the file, the field and the
    value."""
    if not isinstance(recall, dict) or "scores" not in recall:
        return  # not a recall table at all: reading it says so

    def refuse(field: str, value: Any, expected: str) -> None:
        shown = f"a {type(value).__name__}" if isinstance(value, list | tuple) else repr(value)
        raise DamagedFileError(f"{path}: {prefix}{field} is {shown}; expected {expected}")

    def mapping(field: str, value: Any, of: str) -> dict:
        if not isinstance(value, dict):
            refuse(field, value, f"a mapping of {of}")
        return value

    scores = mapping("scores", recall["scores"], "policy -> length -> set -> cell")
    for policy, by_length in scores.items():
        field = f"scores.{policy}"
        for length, by_set in mapping(field, by_length, "length -> set -> cell").items():
            at = f"{field}.{length}"
            for name, cell in mapping(at, by_set, "set -> cell").items():
                cell = mapping(f"{at}.{name}", cell, "accuracy, exact, examples, coverage")
                examples = cell.get("examples")
                counted = isinstance(examples, int) and not isinstance(examples, bool)
                if examples is not None and not (counted and examples >= 0):
                    refuse(f"{at}.{name}.examples", examples, "a count of examples (>= 0)")
                for key in SHARES:
                    value = cell.get(key)
                    if value is None:
                        if key != "coverage" and examples:  # a scored set has its shares
                            refuse(
                                f"{at}.{name}.{key}",
                                value,
                                f"a number in [0, 1]: the set was scored on {examples} "
                                "examples (None only for a set with none)",
                            )
                        continue
                    number = isinstance(value, int | float) and not isinstance(value, bool)
                    if number and math.isfinite(value) and 0 <= value <= 1:
                        continue
                    refuse(
                        f"{at}.{name}.{key}",
                        value,
                        "a number in [0, 1] (None for a set with no examples)",
                    )


_NAMING = ("seed", "options", "attention", "commit", "wall_s", "cpu_s")
"""A record's fields that name its run rather than measure it: a copy of one seed's record
relabelled as another seed differs from it in these at most."""


def _measured(record: dict[str, Any]) -> str:
    content = {k: v for k, v in record.items() if k not in _NAMING}
    text = json.dumps(content, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _variant_attention(run: PresetRun) -> dict[str, Any] | None:
    """The attention the variant's config and its options in the task give, in today's form
    (None: the config names none)."""
    config = load_yaml(Path(CONFIG_DIR) / run.variant.config, "variant config")
    attention = lookup(config, "model.attention")
    if not isinstance(attention, dict):
        return None
    init_args = dict(attention.get("init_args") or {})
    options = run.variant.task_options(run.setup)
    for option, value in zip(options[::2], options[1::2], strict=True):
        keys = option.removeprefix("--model.attention.init_args.").split(".")
        _set_option(init_args, keys, yaml.safe_load(value))
    if run.variant.seeded_attention:
        init_args["seed"] = run.seed
    return _today(attention.get("class_path"), init_args)


def _set_option(init_args: dict[str, Any], keys: list[str], value: Any) -> None:
    """``init_args`` with the option of dotted ``keys`` set as jsonargparse sets it, at any
    depth: ``schedule``, ``schedule.alphas`` (a class's ``init_args`` left out) or a hybrid's
    ``local_attention.init_args.schedule``; a class named over a class keeps its init_args."""
    key, rest = keys[0], keys[1:]
    if rest[:1] == ["init_args"]:
        rest = rest[1:]
    nested = init_args.get(key)
    if not rest:
        if isinstance(value, str) and isinstance(nested, dict) and "class_path" in nested:
            value = {**nested, "class_path": value}  # a class by name keeps its init_args
        init_args[key] = value
        return
    if not isinstance(nested, dict):  # --...schedule Custom --...schedule.alphas [...]
        nested = {"class_path": nested, "init_args": {}}
    nested = {**nested, "init_args": dict(nested.get("init_args") or {})}
    _set_option(nested["init_args"], rest, value)
    init_args[key] = nested


def _today(class_path: Any, init_args: dict[str, Any]) -> dict[str, Any]:
    """An attention spec of any version as today's plugin writes it (its options as plain
    data); a spec no plugin builds is returned as it is."""
    from lit_sparse import LitSparseError
    from lit_sparse.attention import build_attention

    try:
        return build_attention({"class_path": class_path, "init_args": init_args}).to_config()
    except (LitSparseError, TypeError):
        return {"class_path": class_path, "init_args": init_args}


def _same_class(a: Any, b: Any) -> bool:
    if a == b:
        return True
    from lit_sparse import LitSparseError
    from lit_sparse.attention import resolve_attention

    try:
        return resolve_attention(str(a)) is resolve_attention(str(b))
    except LitSparseError:
        return False


def _shown(options: Sequence[str]) -> str:
    return " ".join(options) or "none"


SHOWN_ONLY = ("--trainer.enable_progress_bar", "--trainer.enable_model_summary")
"""Fit options that change what a fit prints, never what it trains."""


def _training_options(options: Sequence[str]) -> list[str]:
    """``options`` without the SHOWN_ONLY ones (``--flag value`` or ``--flag=value``)."""
    kept, skip = [], False
    for option in options:
        if skip:
            skip = False
        elif option.split("=", 1)[0] in SHOWN_ONLY:
            skip = "=" not in option
        else:
            kept.append(option)
    return kept


class RecordChecks:
    """The records of one table, checked as they are read (:meth:`add`), and the extra fit
    options each task's records share (:attr:`extra`: task -> (options, the first record))."""

    def __init__(self) -> None:
        self.by_content: dict[str, Path] = {}
        self.by_run: dict[tuple, Path] = {}
        self.extra: dict[str, tuple[list[str], Path]] = {}

    def add(self, record: dict[str, Any], path: Path, run: PresetRun) -> None:
        """Refuse ``record`` (read from ``path``, the place of ``run``) when it is not
        ``run``'s, repeats a record read before, or was trained with other extra options
        than its task's records before it."""
        labels = tuple(record.get(k) for k in ("task", "variant", "seed"))
        # the same results first, then the place: a record whose task was edited to another
        # task's is not that task's (not "a duplicate" of its record)
        self._once(_measured(record), self.by_content, "the same results under another seed", path)
        extra = _check_place(record, path, run)
        self._once(labels, self.by_run, "the same task, variant and seed", path)
        if extra is not None:
            self.trained_alike(run, extra, path)

    @staticmethod
    def _once(key: Any, seen: dict, what: str, path: Path) -> None:
        if key in seen:
            raise DamagedFileError(
                f"{path}: a duplicate of {seen[key]} ({what}); a run counts once: delete the copy"
            )
        seen[key] = path

    def trained_alike(self, run: PresetRun, extra: list[str], path: Path) -> None:
        """Refuse ``run`` (read from ``path``) trained with other ``extra`` options than the
        runs of its task read before it (options that change only what a fit prints aside)."""
        first, where = self.extra.setdefault(run.setup.name, (extra, path))
        if _training_options(first) != _training_options(extra):
            raise DamagedFileError(
                f"{path}: its options add {_shown(extra)!r} to the preset's, {where}'s add "
                f"{_shown(first)!r}: the runs of one task are trained alike (a smoke test's "
                "records among the study's?); keep one setup's records in a results folder"
            )

    @property
    def notes(self) -> list[str]:
        """Per task whose records were trained with extra options: a line saying so."""
        return [
            f"{task}: its runs were trained with extra options {_shown(extra)!r}: not the "
            "preset's own setup"
            for task, (extra, _) in self.extra.items()
            if extra
        ]


def _check_place(record: dict[str, Any], path: Path, run: PresetRun) -> list[str] | None:
    """Refuse a field of ``record`` that is not ``run``'s (its task, variant, seed, the
    options that started it, its attention); its extra options (None: it records none)."""
    where = f"{run.setup.name}/{run.variant.name}/seed{run.seed}"

    def refuse(field: str, value: Any, expected: Any) -> None:
        raise DamagedFileError(
            f"{path}: its {field} {value!r} is not the {expected!r} of its place ({where}); a "
            "record counts for the task, variant and seed its path names: move it to its own "
            "place or delete it"
        )

    for field, expected in (("task", run.setup.name), ("variant", run.variant.name)):
        if record.get(field) != expected:
            refuse(field, record.get(field), expected)
    seed = record.get("seed")
    if seed != run.seed or isinstance(seed, bool):
        refuse("seed", seed, run.seed)
    options = record.get("options")
    extra = None
    if options is not None:
        extra = extra_options(run, options) if isinstance(options, list) else None
        if extra is None:
            expected = run.options(["[extra options]"], config_dir=Path("configs"))
            refuse("options", " ".join(map(str, options)), " ".join(expected))
    attention = record.get("attention")
    # a --config or --model.attention option among its own extra options may set the
    # attention: an init_args option sets that key aside, any other sets the check aside
    model = [o for o in extra or [] if o.startswith(("--config", "-c", "--model.attention"))]
    if isinstance(attention, dict) and all(
        o.startswith("--model.attention.init_args.") for o in model
    ):
        prefix = "--model.attention.init_args."
        set_aside = {o.split("=", 1)[0].removeprefix(prefix).split(".")[0] for o in model}
        _check_attention(attention, run, set_aside, refuse)
    return extra


def _check_attention(attention: dict[str, Any], run: PresetRun, set_aside, refuse) -> None:
    """The record's attention against its variant's, a key in ``set_aside`` aside."""
    expected = _variant_attention(run)
    if expected is None:
        return
    if not _same_class(attention.get("class_path"), expected["class_path"]):
        refuse("attention.class_path", attention.get("class_path"), expected["class_path"])
    given = _today(attention.get("class_path"), dict(attention.get("init_args") or {}))
    given = given["init_args"]
    for key, value in expected["init_args"].items():
        if key in given and key not in set_aside and given[key] != value:
            refuse(f"attention.init_args.{key}", given[key], value)
