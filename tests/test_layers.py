"""The layer map holds: import-linter's contracts in pyproject.toml (the layers, no import
circle inside any folder, the library never importing the studies) are kept, and a
back-import or a circle breaks them; the studies import no private name of the library.

import-linter reads the packages from their files. The observers are installed as
``lit_sparse.callbacks`` from the top-level ``callbacks/`` folder and the studies as
``lit_sparse_studies`` from ``studies/``, so the check runs on a copy laid out as installed.
"""

from __future__ import annotations

import ast
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
    """``lit_sparse/`` with ``callbacks/`` as ``lit_sparse/callbacks``, and ``studies/`` as
    ``lit_sparse_studies``, under ``tmp_path``."""
    for source, target in (
        ("lit_sparse", "lit_sparse"),
        ("callbacks", "lit_sparse/callbacks"),
        ("studies", "lit_sparse_studies"),
    ):
        shutil.copytree(
            ROOT / source, tmp_path / target, ignore=shutil.ignore_patterns("__pycache__")
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
    assert "Contracts: 4 kept, 0 broken." in done.stdout


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
    with open(package / "runs" / "analysis.py", "a") as module:
        module.write("\nimport lit_sparse_studies.study.seeds  # the library using a study\n")
    done = lint_imports(tree)
    assert done.returncode == 1
    assert "lit_sparse.attention is not allowed to import lit_sparse.runs" in done.stdout
    assert "lit_sparse.formats is not allowed to import lit_sparse.model" in done.stdout
    assert "No cycles are allowed in lit_sparse.io" in done.stdout
    assert "lit_sparse is not allowed to import lit_sparse_studies" in done.stdout


def private_names(tree: Path) -> list[str]:
    """Each ``from lit_sparse... import name`` (or ``import lit_sparse...``) in ``tree`` whose
    module path or name has a part starting with an underscore."""
    found = []
    for path in sorted(tree.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lit_sparse."):
                parts = [*node.module.split("."), *(a.name for a in node.names)]
            elif isinstance(node, ast.Import):
                parts = [
                    p
                    for a in node.names
                    if a.name.startswith("lit_sparse.")
                    for p in a.name.split(".")
                ]
            else:
                continue
            if any(part.startswith("_") and part != "__main__" for part in parts):
                found.append(f"{path.relative_to(tree)}:{node.lineno}")
    return found


def test_the_studies_use_only_public_names_of_the_library(tmp_path):
    assert private_names(ROOT / "studies") == []
    (tmp_path / "peek.py").write_text("from lit_sparse.study_helpers import _hidden\n")
    assert private_names(tmp_path) == ["peek.py:1"]
