"""The layer map holds: import-linter's contracts in pyproject.toml (the layers, no import
circle inside any folder, the library never importing the studies, the studies importing only
its packages) are kept, and a back-import or a circle breaks them; the studies import only public
names of the library: names in the ``__all__`` of ``lit_sparse`` or one of its packages.

import-linter reads the packages from their files. The observers are installed as
``lit_sparse.callbacks`` from the top-level ``callbacks/`` folder and the studies as
``lit_sparse_studies`` from ``studies/``, so the check runs on a copy laid out as installed.
"""

from __future__ import annotations

import ast
import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import tomllib

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
    assert "Contracts: 5 kept, 0 broken." in done.stdout


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
    with open(tree / "lit_sparse_studies" / "study" / "seeds.py", "a") as module:
        module.write("\nfrom lit_sparse.io.atomic import write_json  # a module, not its package\n")
    done = lint_imports(tree)
    assert done.returncode == 1
    assert "lit_sparse.attention is not allowed to import lit_sparse.runs" in done.stdout
    assert "lit_sparse.formats is not allowed to import lit_sparse.model" in done.stdout
    assert "No cycles are allowed in lit_sparse.io" in done.stdout
    assert "lit_sparse is not allowed to import lit_sparse_studies" in done.stdout
    assert "lit_sparse_studies.study.seeds is not allowed to import lit_sparse.io.atomic" in (
        done.stdout.replace("\n", " ")
    )


def packages() -> list[str]:
    """lit_sparse's packages below the top, as installed (``callbacks/`` is
    ``lit_sparse.callbacks``)."""
    found = [
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "lit_sparse").rglob("__init__.py")
        if init.parent != ROOT / "lit_sparse"
    ]
    return sorted([*found, "lit_sparse.callbacks"])


def test_the_studies_contract_lets_them_import_every_package_and_nothing_else():
    """The studies' forbidden contract forbids every module below lit_sparse; its exceptions,
    each package's ``__init__``, are exactly lit_sparse's packages."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [
        c for c in config["contracts"] if c.get("forbidden_modules") == ["lit_sparse.**"]
    ]
    allowed = [
        imported.split(" -> ")[1]
        for imported in contract["ignore_imports"]
        if imported.startswith("lit_sparse_studies.** -> ")
    ]
    assert allowed == packages()


def non_public_imports(tree: Path) -> list[str]:
    """Each import of lit_sparse in ``tree`` that is not of a public name: ``from M import name``
    where M is ``lit_sparse`` or one of its packages and ``name`` is in M's ``__all__``. A module
    below lit_sparse (``lit_sparse.io.atomic``) is never imported by name or path."""
    found = []
    for path in sorted(tree.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                if (node.module or "").split(".")[0] != "lit_sparse":
                    continue
                module = importlib.import_module(node.module)
                public = getattr(module, "__all__", []) if hasattr(module, "__path__") else []
                bad = [alias.name for alias in node.names if alias.name not in public]
            elif isinstance(node, ast.Import):
                bad = [
                    alias.name
                    for alias in node.names
                    if alias.name.startswith("lit_sparse.")
                    and not hasattr(importlib.import_module(alias.name), "__path__")
                ]
            else:
                continue
            found += [f"{path.relative_to(tree)}:{node.lineno}: {name}" for name in bad]
    return found


def test_the_studies_use_only_public_names_of_the_library(tmp_path):
    assert non_public_imports(ROOT / "studies") == []
    assert non_public_imports(ROOT / "docs" / "recall-study") == []
    (tmp_path / "peek.py").write_text(
        "from lit_sparse.io.atomic import write_json\n"  # a module, not its package
        "from lit_sparse.io import write_json, AtomicFile\n"  # a name the package does not list
        "from lit_sparse.runs import _lazy_names\n"
        "import lit_sparse.io.tables\n"
        "from lit_sparse import LanguageModel\n"  # public
    )
    assert non_public_imports(tmp_path) == [
        "peek.py:1: write_json",
        "peek.py:2: AtomicFile",
        "peek.py:3: _lazy_names",
        "peek.py:4: lit_sparse.io.tables",
    ]
