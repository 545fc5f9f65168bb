"""Module paths of earlier versions still import (saved run configs name them), as the same
objects at their new homes, with a DeprecationWarning naming the new path."""

from __future__ import annotations

import importlib
import sys

import pytest

from lit_sparse._moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_the_module_at_its_new_home(old):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=MOVED[old].replace(".", r"\.")):
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])


def test_a_saved_config_naming_the_old_checkpoint_io_still_loads():
    from jsonargparse import ArgumentParser
    from lightning.pytorch.plugins.io import CheckpointIO

    from lit_sparse.runs.checkpoints import AtomicCheckpointIO

    sys.modules.pop("lit_sparse.checkpoints", None)
    parser = ArgumentParser(exit_on_error=False)
    parser.add_argument("--plugin", type=CheckpointIO)
    with pytest.warns(DeprecationWarning):
        config = parser.parse_args(["--plugin", "lit_sparse.checkpoints.AtomicCheckpointIO"])
    assert isinstance(parser.instantiate_classes(config).plugin, AtomicCheckpointIO)
