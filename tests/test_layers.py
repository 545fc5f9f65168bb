"""The layer map holds: import-linter's contracts in pyproject.toml (the layers, and no import
circle inside any folder) are kept by the package, and a back-import or a circle breaks them.

import-linter reads the package from its files. The observers are installed as
``lit_sparse.callbacks`` from the top-level ``callbacks/`` folder, which a walk of
``lit_sparse/`` would not find, so the check runs on a copy laid out as installed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECK = (
    "import sys; from importlinter.cli import lint_imports; "
    "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))"
)


def installed_layout(tmp_path: Path) -> Path:
    """``lit_sparse/`` with ``callbacks/`` as ``lit_sparse/callbacks``, under ``tmp_path``."""
    shutil.copytree(
        ROOT / "lit_sparse", tmp_path / "lit_sparse", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(
        ROOT / "callbacks",
        tmp_path / "lit_sparse" / "callbacks",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return tmp_path


def lint_imports(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CHECK, str(ROOT / "pyproject.toml")],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_package_keeps_its_import_contracts(tmp_path):
    done = lint_imports(installed_layout(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 2 kept, 0 broken." in done.stdout


def test_a_back_import_or_a_circle_breaks_them(tmp_path):
    tree = installed_layout(tmp_path)
    package = tree / "lit_sparse"
    with open(package / "attention" / "offsets.py", "a") as module:
        module.write("\nimport lit_sparse.runs.folders  # a layer importing one above it\n")
    with open(package / "formats" / "stock.py", "a") as module:
        module.write("\nimport lit_sparse.model  # the format never imports the network\n")
    with open(package / "io" / "tables.py", "a") as module:
        module.write("\nimport lit_sparse.io.yaml_files\n")
    with open(package / "io" / "yaml_files.py", "a") as module:
        module.write("\nimport lit_sparse.io.tables  # and back: a circle in one folder\n")
    done = lint_imports(tree)
    assert done.returncode == 1
    assert "lit_sparse.attention is not allowed to import lit_sparse.runs" in done.stdout
    assert "lit_sparse.formats is not allowed to import lit_sparse.model" in done.stdout
    assert "No cycles are allowed in lit_sparse.io" in done.stdout
