"""A data source's configuration (lit_sparse.data.sources.SourceConfig): bad values raise
ValueError naming the field, the value and what is allowed; its kind and held-out mode; its
fields' docs as the CLI's help."""

from __future__ import annotations

import dataclasses

import pytest

from lit_sparse.data import SourceConfig

LOCAL = {"path": "json", "data_files": "/x/*.jsonl"}


@pytest.mark.parametrize(
    ("kwargs", "field", "value"),
    [
        ({"name": "a", "path": "embedded:math", "weight": -1.0}, "weight", "-1.0"),
        ({"name": "a", "path": "embedded:math", "weight": float("nan")}, "weight", "nan"),
        ({"name": "a", "path": "embedded:poetry"}, "path", "'embedded:poetry'"),
        ({"name": "a", "path": "json"}, "data_files", "None"),
        ({"name": "a b", "path": "embedded:math"}, "name", "'a b'"),
        ({"name": "a", "path": ""}, "path", "''"),
        ({"name": "a", **LOCAL, "max_tokens": 0}, "max_tokens", "0"),
        ({"name": "a", **LOCAL, "val_tokens": -5}, "val_tokens", "-5"),
        ({"name": "a", **LOCAL, "val_split": "train"}, "val_split", "'train'"),
        ({"name": "a", **LOCAL, "text_template": "no fields"}, "text_template", "'no fields'"),
        ({"name": "a", **LOCAL, "text_template": "{unclosed"}, "text_template", "'{unclosed'"),
        ({"name": "a", **LOCAL, "weight": 0.0}, "weight", "0"),
        ({"name": "a", "path": "embedded:math", "data_files": "x.txt"}, "data_files", "'x.txt'"),
        (
            {"name": "a", "path": "org/ds", "val_data_files": "v.parquet"},
            "val_data_files",
            "'v.parquet'",
        ),
        (
            {"name": "a", "path": "json", "data_files": ["t.json"], "val_data_files": ["t.json"]},
            "val_data_files",
            "['t.json']",
        ),
        ({"name": "a", "path": "json", "data_files": []}, "data_files", "[]"),
        ({"name": "a", **LOCAL, "val_name": "x y"}, "val_name", "'x y'"),
    ],
)
def test_source_config_rejects_bad_values(kwargs, field, value):
    with pytest.raises(ValueError) as info:
        SourceConfig(**kwargs)
    msg = str(info.value)
    assert msg.startswith(f"{field}={value}"), msg
    assert (
        "expected" in msg
        or "allowed" in msg
        or "must" in msg
        or "needs" in msg
        or "names no" in msg
        or "also in" in msg
        or "not applicable" in msg
        or "may contain" in msg
    ), msg


def test_source_config_kinds_and_held_out_modes(tmp_path):
    assert SourceConfig(name="s", path="embedded:shakespeare").val_mode == "embedded"
    assert SourceConfig(name="s", path="embedded:shakespeare", val_tokens=0).val_mode is None
    hub = SourceConfig(name="w", path="wikimedia/wikipedia", config_name="20231101.en")
    assert hub.kind == "hub" and hub.val_mode is None
    assert dataclasses.replace(hub, val_tokens=100).val_mode == "head"
    assert dataclasses.replace(hub, val_split="validation").val_mode == "split"
    local = SourceConfig(name="l", path="text", data_files=str(tmp_path / "*.txt"))
    assert local.kind == "local"
    remote = SourceConfig(name="r", path="parquet", data_files="hf://datasets/o/d/x.parquet")
    assert remote.kind == "hub"
    held_only = SourceConfig(name="v", path="org/ds", weight=0, val_split="test")
    assert not held_only.has_train and held_only.has_val


def test_embedded_source_field_docs_become_cli_help():
    from jsonargparse import ArgumentParser, set_parsing_settings

    set_parsing_settings(docstring_parse_attribute_docstrings=True)
    try:
        parser = ArgumentParser()
        parser.add_class_arguments(SourceConfig, "src")
        help_text = " ".join(parser.format_help().split())
    finally:
        set_parsing_settings(docstring_parse_attribute_docstrings=False)
    for field in dataclasses.fields(SourceConfig):
        assert f"--src.{field.name}" in help_text
    for phrase in [
        "Share of training tokens",
        "Token budget of the training part",
        "Size of the held-out set in tokens",
        "Column holding a document's text",
    ]:
        assert phrase in help_text
