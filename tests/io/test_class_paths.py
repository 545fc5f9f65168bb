"""A config's class_path resolved once for every caller (lit_sparse.io.class_paths)."""

from __future__ import annotations

from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.strategies import ModelParallelStrategy

from lit_sparse.io.class_paths import import_class, names_subclass


def test_a_class_path_names_its_object_or_nothing():
    assert import_class("lightning.pytorch.callbacks.ModelCheckpoint") is ModelCheckpoint
    for bad in (None, 3, "ModelCheckpoint", "no_such_module.Thing", "lightning.NoSuchThing"):
        assert import_class(bad) is None


def test_an_instance_or_a_group_naming_a_subclass_is_one():
    group = {"class_path": "lightning.pytorch.callbacks.ModelCheckpoint", "init_args": {}}
    assert names_subclass(group, Callback) and names_subclass(ModelCheckpoint(), Callback)
    assert not names_subclass(group, ModelParallelStrategy)
    assert not names_subclass("ddp", ModelParallelStrategy)
    assert not names_subclass({"class_path": "lightning.pytorch.Trainer"}, Callback)
