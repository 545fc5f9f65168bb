"""notebooks/01-analyze-checkpoints.ipynb: saved without outputs, and runs top to bottom
(nbclient) on runs the test suite makes."""

from __future__ import annotations

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


def test_runs_top_to_bottom_on_the_suite_runs(learned_run, staggered_run, tmp_path):
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    [parameters] = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    runs = [str(learned_run.log_dir), str(staggered_run.log_dir / "checkpoints" / "last.ckpt")]
    parameters.source = f"RUNS = {runs!r}\nDISTANCE_LENGTH = 64"
    NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()

    outputs = [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs]
    assert not [out for out in outputs if out.output_type == "error"]
    images = [out for out in outputs if "image/png" in out.get("data", {})]
    # alpha (one figure, two runs), position loss, perplexity, distances (one per run)
    assert len(images) == 5
    text = "".join(out.get("text", "") for out in outputs)
    assert "learned/version_0: step 6" in text
    assert "distinct distances at T=64" in text
    markdown = [out for out in outputs if "text/markdown" in out.get("data", {})]
    assert len(markdown) == 2 and "Length extrapolation" in markdown[0]["data"]["text/markdown"]
