"""Packaging: every package is installed, the observers live under lit_sparse's namespace, and
a user's own ``callbacks.py`` cannot shadow them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]


def _declared_packages() -> dict[str, Path]:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = setuptools.get("package-dir", {})
    folders = {}
    for name in setuptools["packages"]:
        parent = next((p for p in sorted(mapped, key=len, reverse=True) if name.startswith(p)), "")
        rest = name[len(parent) :].lstrip(".").split(".") if name != parent else []
        base = ROOT / mapped[parent] if parent else ROOT
        folders[name] = base.joinpath(*[part for part in rest if part])
    return folders


def _package_data_folders() -> set[str]:
    """The dotted names of the folders that hold package data (setuptools' view of them)."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    declared = _declared_packages()
    folders = set()
    for package, patterns in setuptools["package-data"].items():
        base = declared[package]
        for pattern in patterns:
            for file in base.glob(pattern):
                parts = file.parent.relative_to(base).parts
                folders.add(".".join([package, *parts]))
    return folders


def test_every_folder_of_package_data_is_a_listed_package():
    """Issue 57: setuptools warned "Package would be ignored" on every ``pip install -e .``,
    once for each folder of data files (configs/data, lm_eval_tasks, ...) not in the list."""
    unlisted = _package_data_folders() - set(_declared_packages())
    assert not unlisted, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(unlisted)}"


def test_the_package_list_covers_every_package_folder():
    declared = _declared_packages()
    data_only = _package_data_folders() - {
        name for name, folder in declared.items() if (folder / "__init__.py").is_file()
    }
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "lit_sparse").rglob("__init__.py")
    }
    on_disk.add("lit_sparse.callbacks")  # the mapped top-level folders
    on_disk |= {
        ".".join(["lit_sparse_studies", *p.parent.relative_to(ROOT / "studies").parts])
        for p in (ROOT / "studies").rglob("__init__.py")
    }
    assert set(declared) == on_disk | data_only
    for name, folder in declared.items():
        assert name in data_only or (folder / "__init__.py").is_file(), name


def test_observers_import_under_the_package_namespace():
    import lit_sparse.callbacks as observers

    assert Path(observers.__file__).parent == ROOT / "callbacks"
    assert observers.LengthExtrapolation.__module__ == "lit_sparse.callbacks.extrapolation"


@pytest.mark.slow
def test_a_local_callbacks_module_does_not_shadow_the_observers(tmp_path):
    (tmp_path / "callbacks.py").write_text("raise ImportError('a user module named callbacks')\n")
    (tmp_path / "callbacks").mkdir()  # and a folder of that name
    code = "import lit_sparse.cli, lit_sparse.callbacks; print(lit_sparse.callbacks.__file__)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).parent == ROOT / "callbacks"


@pytest.mark.slow
def test_the_console_script_is_the_module_entry_point(tmp_path):
    script = shutil.which("lit-sparse", path=str(Path(sys.executable).parent))
    assert script, "the lit-sparse console script is not installed"
    by_script = subprocess.run([script, "--help"], capture_output=True, text=True, check=True)
    by_module = subprocess.run(
        [sys.executable, "-m", "lit_sparse", "--help"], capture_output=True, text=True, check=True
    )
    assert by_script.stdout == by_module.stdout
    assert "fit" in by_script.stdout


def test_package_data_ships_every_lm_eval_task_file():
    """The task YAMLs and their utils.py are package data (no __init__.py: not a package)."""
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]
    folder = ROOT / "lit_sparse" / "interop"
    shipped = {p for pattern in package_data["lit_sparse.interop"] for p in folder.glob(pattern)}
    files = set((folder / "lm_eval_tasks").iterdir()) - {folder / "lm_eval_tasks" / "__pycache__"}
    assert files and files == shipped
    assert {p.suffix for p in files} == {".yaml", ".py"}


def test_package_data_ships_every_config():
    """configs/ ships as lit_sparse/configs (a link to it in the checkout: one copy)."""
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["lit_sparse"]
    shipped = {p.resolve() for pattern in patterns for p in (ROOT / "lit_sparse").glob(pattern)}
    configs = {p.resolve() for p in (ROOT / "configs").rglob("*") if p.is_file()}
    assert configs and shipped == configs


@pytest.mark.slow  # builds and installs a wheel
def test_a_wheel_install_finds_the_configs(tmp_path):
    """The commands find the configs in the installed package, not beside a checkout."""
    source, site = tmp_path / "source", tmp_path / "site"
    skip = shutil.ignore_patterns("__pycache__", "callbacks", "*.egg-info")
    for folder in ("lit_sparse", "configs", "callbacks", "studies"):
        shutil.copytree(ROOT / folder, source / folder, symlinks=True, ignore=skip)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    wheel = [*pip, "wheel", str(source), "--no-deps", "--no-build-isolation", "-w", str(tmp_path)]
    built = subprocess.run([*wheel, "-vv"], check=True, capture_output=True, text=True)
    assert "would be ignored" not in built.stdout + built.stderr  # setuptools' warnings (issue 57)
    (built,) = tmp_path.glob("lit_sparse-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(built)], check=True)
    shutil.rmtree(source)  # nothing of the checkout is left to find
    done = subprocess.run(
        [sys.executable, "-m", "lit_sparse", "matrix", "--run", "fib_fixed_w8", "--dry-run"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=True,
    )
    words = done.stdout.split()
    config = Path(words[words.index("--config") + 1])
    assert config == site / "lit_sparse" / "configs" / "fixed.yaml"
    assert config.is_file()


def test_no_test_folder_stands_in_for_an_installed_package():
    """The suite is the package ``tests``: ``tests/kernels`` must not answer ``import kernels``
    (transformers 5.25 imports the ``kernels`` distribution and found this folder instead)."""
    import importlib.util

    tests = ROOT / "tests"
    for folder in sorted(p for p in tests.iterdir() if (p / "__init__.py").is_file()):
        spec = importlib.util.find_spec(folder.name)
        origin = Path(spec.origin).resolve() if spec and spec.origin else None
        assert origin is None or tests not in origin.parents, (folder.name, origin)


def test_no_file_the_suite_reads_is_ignored_by_git():
    """A fixture that git ignores passes here and fails in a clean clone (CI)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(
        ["git", "ls-files", "--others", "--ignored", "--exclude-standard", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    caches = ("__pycache__", ".pytest_cache", ".hypothesis", ".ipynb_checkpoints")
    ignored = [path for path in listed if not any(part in caches for part in Path(path).parts)]
    assert ignored == [], f"git ignores these files under tests/; a clean clone lacks: {ignored}"


def test_every_test_path_named_outside_the_suite_exists():
    """CI's scripts, the Makefile and the docs name test files (and tests) by path; a moved test
    file left CI's minimum-versions step running nothing (pytest exit 5)."""
    import re

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(
        ["git", "ls-files", ".ci", "Makefile", "*.md", "docs", "examples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    placeholder = "tests/x/test_y.py"  # CONTRIBUTING's example of a path
    reference = re.compile(r"(?<![\w/.-])(tests/[\w/]+\.py)(?:::(\w+))?")
    missing = []
    for name in tracked:
        path = ROOT / name
        if not path.is_file() or path.suffix not in ("", ".md", ".sh", ".toml", ".yaml", ".py"):
            continue
        for file, test in reference.findall(path.read_text(errors="replace")):
            target = ROOT / file
            if file == placeholder:
                continue
            if not target.is_file():
                missing.append(f"{name}: {file}")
            elif test and not re.search(rf"def {test}\b", target.read_text()):
                missing.append(f"{name}: {file}::{test}")
    assert missing == [], f"these name a test file or test that does not exist: {missing}"
