"""The registry described for people (lit_sparse/attention/catalog.py): each plugin's origin,
class path, first sentence and options with defaults and their docstring entries."""

from __future__ import annotations

import pytest

from lit_sparse.attention import AttentionPlugin
from lit_sparse.attention.catalog import PluginOption, describe_plugins
from lit_sparse.attention.registry import ATTENTION, register_attention
from lit_sparse.errors import ConfigError


class Demo(AttentionPlugin):
    """Keys at a stride. The stride is the
    distance between two keys.

    A second paragraph, not in the summary.

    Args:
        mode: how ``rows`` combine
    """

    def __init__(self, stride: int, mode: str = "sum", note=None, *extra, **more):
        """
        Args:
            stride: distance between
                two keys
        """

    def build(self, layer, n_layers, training_length):
        raise NotImplementedError


@pytest.fixture
def demo(monkeypatch) -> str:
    """``Demo`` registered at run time for one test (the registry as it was after)."""
    ATTENTION.load()
    monkeypatch.setattr(ATTENTION, "classes", dict(ATTENTION.classes))
    register_attention("catalog_demo")(Demo)
    return "catalog_demo"


def test_a_plugin_registered_at_run_time_is_described_from_its_docstrings(demo):
    [info] = describe_plugins([demo])
    assert (info.name, info.class_path) == (demo, f"{__name__}.Demo")
    assert info.origin == f"registered at run time by {__name__}"
    assert info.summary == "Keys at a stride."
    assert info.options == (
        PluginOption("stride", "required", "distance between two keys"),
        PluginOption("mode", "'sum'", "how ``rows`` combine"),
        PluginOption("note", "None", ""),
    )


def test_every_plugin_sorted_built_ins_named_so(demo):
    infos = describe_plugins()
    names = [info.name for info in infos]
    assert names == sorted(names) and demo in names
    window = next(info for info in infos if info.name == "sliding_window")
    assert window.origin == "built-in"
    assert window.class_path == "lit_sparse.attention.sliding_window.SlidingWindowAttention"
    assert [option.name for option in window.options] == ["window"]


def test_an_unknown_name_lists_the_registered_ones():
    with pytest.raises(ConfigError, match=r"^attention='nope': unknown attention; registered: "):
        describe_plugins(["nope"])
