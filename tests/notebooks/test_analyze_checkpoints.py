"""notebooks/01-analyze-checkpoints.ipynb: saved without outputs, and runs top to bottom
(nbclient) on runs the test suite makes."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "01-analyze-checkpoints.ipynb"

pytestmark = pytest.mark.slow


def test_saved_without_outputs():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(cell.outputs == [] and cell.execution_count is None for cell in code)
    [parameters] = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert "RUNS =" in parameters.source


def execute(notebook_path: Path, runs: list[str] | None = None) -> list:
    """Run the notebook as Jupyter does (its own folder as the working directory), with
    ``RUNS`` replaced when given; its code cells' outputs."""
    from nbclient import NotebookClient

    notebook = nbformat.read(notebook_path, as_version=4)
    if runs is not None:
        [parameters] = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
        parameters.source = f"RUNS = {runs!r}\nDISTANCE_LENGTH = 64"
    NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(notebook_path.parent)}},
    ).execute()
    outputs = [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs]
    errors = [out for out in outputs if out.output_type == "error"]
    assert not errors, errors[0].get("evalue")
    # no warning of a missing notebook dependency (tqdm's "IProgress not found"): the
    # notebook extra brings ipywidgets
    stderr = "".join(out.get("text", "") for out in outputs if out.get("name") == "stderr")
    assert "IProgress" not in stderr and "Warning" not in stderr, stderr
    return outputs


def test_runs_top_to_bottom_on_the_suite_runs(learned_run, staggered_run, monkeypatch):
    """Relative paths under $LIT_SPARSE_RUNS, and a checkpoint file by its absolute path."""
    monkeypatch.setenv("LIT_SPARSE_RUNS", str(learned_run.log_dir.parent.parent))
    runs = ["learned", str(staggered_run.log_dir / "checkpoints" / "last.ckpt")]
    outputs = execute(NOTEBOOK, runs)

    images = [out for out in outputs if "image/png" in out.get("data", {})]
    # alpha (one figure, two runs), position loss, perplexity, distances (one per run)
    assert len(images) == 5
    text = "".join(out.get("text", "") for out in outputs)
    assert "learned/version_0: step 6" in text
    assert "distinct distances at T=64" in text
    markdown = [out for out in outputs if "text/markdown" in out.get("data", {})]
    assert len(markdown) == 2 and "Length extrapolation" in markdown[0]["data"]["text/markdown"]


def test_its_own_run_paths_start_at_the_repository_root(learned_run, tmp_path, monkeypatch):
    """The notebook as saved, in a checkout's notebooks/ folder, finds the quickstart's run
    in the checkout's runs/ (Jupyter's working directory is notebooks/)."""
    monkeypatch.delenv("LIT_SPARSE_RUNS", raising=False)
    checkout = tmp_path / "checkout"
    (checkout / "notebooks").mkdir(parents=True)
    shutil.copy(NOTEBOOK, checkout / "notebooks" / NOTEBOOK.name)
    shutil.copytree(learned_run.log_dir, checkout / "runs" / "quickstart" / "coprime" / "version_0")
    outputs = execute(checkout / "notebooks" / NOTEBOOK.name)
    text = "".join(out.get("text", "") for out in outputs)
    assert "quickstart/coprime/version_0: step 6" in text  # named as TensorBoard names it
