"""The paper's run matrix (lit_sparse_studies/study/paper_matrix.py): each run's config and
window are identified as that run, so ``matrix --table`` finds the paper's numbers for it. The
command: tests/studies/commands/test_matrix.py."""

from __future__ import annotations

from lit_sparse_studies.study.paper_matrix import RUNS, identify


def test_every_matrix_config_is_identified_as_its_run():
    """The attention each run's config and window give names that run (so --table finds the
    paper's numbers for it)."""
    import yaml

    for name, run in RUNS.items():
        attention = yaml.safe_load(run.config_path().read_text())["model"]["attention"]
        if run.window is not None:
            attention["init_args"]["window"] = run.window
        assert identify(attention)[0] == name
