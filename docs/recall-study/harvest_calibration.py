"""Record the dense calibration's finished runs and print its table (docs/recall-study.md).

    python docs/recall-study/harvest_calibration.py RUNS_ROOT [COMMIT]

RUNS_ROOT is calibrate.sh's folder: <name>/dense/version_0 per run and <name>.log with the
/usr/bin/time line. Each finished run not recorded yet becomes
docs/recall-study/calibration/<name>.json (the study's record format, COMMIT the commit its
worktree was pinned at); the table is printed from every record there.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from lit_sparse.io import markdown_table
from lit_sparse_studies.study.recall_records import make_record, read_record, write_record

HERE = Path(__file__).parent / "calibration"


def harvest(root: Path, commit: str | None) -> None:
    for log in sorted(root.glob("*.log")):
        name, run_dir = log.stem, root / log.stem / "dense" / "version_0"
        if (HERE / f"{name}.json").exists():  # recorded already (maybe at another commit)
            continue
        timing = re.search(r"wall ([\d.]+) s, cpu ([\d.]+)\+([\d.]+) s", log.read_text())
        if timing is None or not (run_dir / "recall.json").is_file():
            continue
        wall, user, system = map(float, timing.groups())
        record = make_record(
            run_dir, {"task": "calibration", "name": name}, wall, user + system, commit
        )
        write_record(HERE / f"{name}.json", record)


def first_at(curve: dict, threshold: float) -> int | None:
    """The first validated step at which held-out accuracy reached ``threshold``."""
    points = zip(curve["step"], curve["val/acc"], strict=True)
    return next((step for step, acc in points if acc and acc >= threshold), None)


def task(setup: dict) -> str:
    """The run's task as the document names it: MQAR (L, pairs) or distance at T."""
    length = setup["data.init_args.seq_len"]
    if setup["data.class_path"].endswith("MQARDataModule"):
        gap = setup.get("data.init_args.gap") or 0
        name = f"far MQAR ({length}, {setup['data.init_args.num_kv_pairs']}, gap {gap})"
        return name if gap else f"MQAR ({length}, {setup['data.init_args.num_kv_pairs']})"
    pairs = setup.get("data.init_args.pairs") or 1
    no_values = setup.get("data.init_args.values_in_filler") is False
    return (
        f"distance T={length}"
        + (f", {pairs} pairs" if pairs > 1 else "")
        + (", no values in the filler" if no_values else "")
    )


def table() -> str:
    rows = []
    records = [read_record(path) for path in HERE.glob("*.json")]
    for r in sorted(records, key=lambda r: (task(r["setup"]).startswith("distance"), r["name"])):
        setup, curve = r["setup"], r["curve"]
        heads = setup["model.arch.n_heads"]
        early = r["stopped_early"] or r["step"] < r["max_steps"]  # runs before the flag
        batch = setup["data.init_args.batch_size"]
        at = first_at(curve, 0.9)
        per_step = r["cpu_s"] / r["step"]
        final = curve["val/acc"][-1]  # the last validation: the held-out sets at T
        rows.append(
            [
                r["name"],
                task(setup),
                str(setup["model.arch.n_layers"]),
                f"{heads}x{setup['model.arch.d_model'] // heads}",
                "SwiGLU"
                if setup["model.arch.ffn_hidden"] is None
                else str(setup["model.arch.ffn_hidden"]),
                str(batch),
                f"{setup['model.lr']:g}",
                str(setup["data.init_args.vocab_size"]),
                "-" if at is None else f"{at * batch / 1000:.0f}k",
                "-" if at is None else f"{at * per_step / 60:.1f}",
                f"{r['step']}" + (" (early stop)" if early else ""),
                f"{final:.3f}",
                f"{r['cpu_s'] / 60:.1f}",
            ]
        )
    return markdown_table(
        [
            "run",
            "task",
            "layers",
            "heads",
            "MLP",
            "batch",
            "lr",
            "V",
            "examples to 0.9",
            "core-min to 0.9",
            "steps",
            "final acc",
            "core-min",
        ],
        rows,
    )


if __name__ == "__main__":
    if len(sys.argv) > 1:
        harvest(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)
    print(table())
