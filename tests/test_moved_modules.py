"""The module paths of earlier versions that have users (saved run configs, notebooks) still
import, as the same objects at their new homes, with a FutureWarning that reaches the user:
it names the new path and the version that removes the old one."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

from lit_sparse._moved import MOVED, REMOVED_IN


def import_fresh(old: str):
    sys.modules.pop(old, None)
    return importlib.import_module(old)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_the_module_at_its_new_home(old):
    with warnings.catch_warnings(record=True) as seen:  # the suite's filters, not pytest.warns'
        module = import_fresh(old)
    assert module is importlib.import_module(MOVED[old])
    (warning,) = [w for w in seen if old in str(w.message)]
    assert warning.category is FutureWarning
    assert f"moved to {MOVED[old]}; the old path will be removed in lit_sparse {REMOVED_IN}" in (
        str(warning.message)
    )


@pytest.mark.slow  # a process importing torch and Lightning
def test_a_user_sees_the_warning_with_pythons_default_filters():
    done = subprocess.run(
        [sys.executable, "-c", "import lit_sparse.analysis"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "FutureWarning: lit_sparse.analysis moved to lit_sparse.runs.analysis" in done.stderr


@pytest.mark.parametrize("old", ["lit_sparse.tables", "lit_sparse.resume", "lit_sparse.export"])
def test_the_paths_without_users_are_gone(old):
    with pytest.raises(ModuleNotFoundError, match=old):
        import_fresh(old)


def test_a_saved_config_naming_the_old_checkpoint_io_still_loads():
    from jsonargparse import ArgumentParser
    from lightning.pytorch.plugins.io import CheckpointIO

    from lit_sparse.runs.checkpoints import AtomicCheckpointIO

    sys.modules.pop("lit_sparse.checkpoints", None)
    parser = ArgumentParser(exit_on_error=False)
    parser.add_argument("--plugin", type=CheckpointIO)
    with pytest.warns(FutureWarning, match=f"removed in lit_sparse {REMOVED_IN}"):
        config = parser.parse_args(["--plugin", "lit_sparse.checkpoints.AtomicCheckpointIO"])
    assert isinstance(parser.instantiate_classes(config).plugin, AtomicCheckpointIO)


@pytest.mark.parametrize(
    ("old", "name"),
    [
        ("lit_sparse.data.recall_data", "MQARDataModule"),
        ("lit_sparse.data.recall_data", "recall_data_from_config"),
        ("lit_sparse.data.recall", "multiquery_ar"),
        ("lit_sparse.data.recall", "passkey"),
        ("lit_sparse.evaluation.lego", "lego_items"),
    ],
)
def test_the_recall_tasks_old_names_are_the_tasks_own(old, name):
    """Run configs saved before the task registry name ``lit_sparse.data.recall_data.*``."""
    import lit_sparse.tasks
    from lit_sparse.io.class_paths import import_class

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        sys.modules.pop(old, None)
        found = import_class(f"{old}.{name}")
    assert found is not None and found is getattr(lit_sparse.tasks, name)
