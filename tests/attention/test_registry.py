"""The registry: strict registration, helpful lookup errors, config round trips."""

import re

import pytest

from lit_sparse import FibonacciAttention, build_attention, list_attention, register_attention
from lit_sparse.attention import AttentionPlugin, get_attention


def test_builtins_are_registered():
    assert list_attention() == ["bigbird", "dense", "fibonacci", "sliding_window"]


def test_duplicate_name_raises():
    with pytest.raises(ValueError, match="already registered"):

        @register_attention("fibonacci")
        class Another(FibonacciAttention):
            pass


def test_wrong_base_raises():
    with pytest.raises(TypeError, match="not an AttentionPlugin"):

        @register_attention("not_a_plugin")
        class NotAPlugin:
            pass

    assert "not_a_plugin" not in list_attention()


def test_unknown_name_lists_registered_names():
    registered = re.escape(", ".join(list_attention()))
    with pytest.raises(
        ValueError, match=f"'fibonaci': unknown attention; registered: {registered}"
    ):
        get_attention("fibonaci")
    with pytest.raises(ValueError, match=f"'nope': unknown attention; registered: {registered}"):
        build_attention({"class_path": "nope", "init_args": {}})


def test_a_class_path_from_a_missing_package_names_it():
    with pytest.raises(
        ValueError, match="cannot import 'no_such_pkg.plugins'.*install the package"
    ):
        build_attention("no_such_pkg.plugins.DilatedAttention")


@pytest.mark.parametrize(
    "spec",
    [
        "fibonacci",
        "FibonacciAttention",
        "lit_sparse.attention.fibonacci.FibonacciAttention",
        {"class_path": "fibonacci", "init_args": {"window": 12}},
        {"class_path": "lit_sparse.FibonacciAttention", "init_args": {"window": 12}},
    ],
)
def test_build_from_name_class_path_and_dict(spec):
    plugin = build_attention(spec)
    assert isinstance(plugin, FibonacciAttention)
    assert plugin.window == (12 if isinstance(spec, dict) else 8)


@pytest.mark.parametrize("name", list_attention())
def test_to_config_round_trips(name):
    plugin = build_attention(name)
    config = plugin.to_config()
    assert set(config) == {"class_path", "init_args"}
    assert build_attention(config) == plugin
    assert isinstance(plugin, AttentionPlugin) and type(plugin).name == name


def test_overrides_apply_to_instances():
    plugin = build_attention(FibonacciAttention(schedule="linear"), window=4)
    assert (plugin.schedule, plugin.window) == ("linear", 4)
