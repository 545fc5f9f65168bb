"""The registry: built-ins found by discovery, entry points of installed packages, strict
registration, helpful lookup errors, config round trips."""

import logging
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

import lit_sparse.attention
from lit_sparse import FibonacciAttention, build_attention, list_attention, register_attention
from lit_sparse.attention import AttentionPlugin, get_attention, registry
from lit_sparse.attention.registry import builtin_names
from lit_sparse.attention.schedules import Linear

PACKAGE = Path(lit_sparse.attention.__file__).parent


def test_every_plugin_module_of_the_package_is_registered():
    """Discovery finds every ``@register_attention`` in lit_sparse/attention/*.py (nothing
    imports the modules for it), and nothing else is a built-in."""
    declared = {
        name
        for module in PACKAGE.glob("*.py")
        for name in re.findall(r'^@register_attention\("(\w+)"\)', module.read_text(), re.M)
    }
    assert declared and builtin_names() == sorted(declared)
    assert set(builtin_names()) <= set(list_attention())


@pytest.mark.slow
def test_a_new_module_in_the_package_is_all_a_plugin_takes(tmp_path):
    """A module dropped beside the built-ins registers itself; the name then builds, is
    listed, gets conformance cases and a bench row, with no other file touched. (The
    package's folder list is extended with a temporary folder, in a fresh process.)"""
    (tmp_path / "strided.py").write_text(
        textwrap.dedent(
            """
            from lit_sparse.kernels import exact_slots
            from .base import AttentionPlugin, SlotPattern
            from .registry import register_attention

            class StridedPattern(SlotPattern):
                def __init__(self, training_length, stride):
                    super().__init__(training_length)
                    self.stride = stride
                def distances(self, length):
                    return list(range(0, length, self.stride))
                def build_slots(self, length, device):
                    return exact_slots(self.distances(length), device)

            @register_attention("strided_demo")
            class StridedAttention(AttentionPlugin):
                def __init__(self, stride: int = 4):
                    self.stride = stride
                def build(self, layer, n_layers, training_length):
                    return StridedPattern(training_length, self.stride)
            """
        )
    )
    code = textwrap.dedent(
        f"""
        import lit_sparse.attention as package
        from lit_sparse.attention import registry
        package.__path__.append({str(tmp_path)!r})
        registry.ATTENTION.loaded.update(builtins=False, entry_points=False)
        from lit_sparse.attention.registry import all_bench_cases, all_conformance_cases
        assert "strided_demo" in registry.list_attention(), registry.list_attention()
        assert "strided_demo" in registry.builtin_names()
        assert registry.build_attention("strided_demo", stride=3).stride == 3
        assert "strided_demo" in all_conformance_cases(8, 2)
        assert "strided_demo" in all_bench_cases(23, 12)
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr


def test_duplicate_name_raises():
    with pytest.raises(ValueError, match="already registered"):

        @register_attention("fibonacci")
        class Another(FibonacciAttention):
            pass


def test_wrong_base_raises():
    with pytest.raises(TypeError, match="not a subclass of AttentionPlugin"):

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
    assert (plugin.schedule, plugin.window) == (Linear(), 4)


# --- entry points, faked: what a broken or clashing package does ---------------------------


class GoodAttention(FibonacciAttention):
    """A plugin class an entry point names (not registered by a decorator)."""


class FakeEntryPoint(SimpleNamespace):
    """The parts of importlib.metadata.EntryPoint the registry reads."""

    def __init__(self, name, target, dist="fake-dist"):
        super().__init__(
            name=name, value=f"fake_pkg.module:{name}", dist=SimpleNamespace(name=dist)
        )
        self._target = target

    def load(self):
        if isinstance(self._target, BaseException):
            raise self._target
        return self._target


@pytest.fixture
def fresh_entry_points(monkeypatch):
    """The registry as it was, with its entry points read again from ``set(entries)``."""
    saved = dict(registry.ATTENTION.classes)
    monkeypatch.setitem(registry.ATTENTION.loaded, "entry_points", False)

    def install(*entries):
        monkeypatch.setattr(registry.ATTENTION, "entry_points", lambda: list(entries))

    yield install
    registry.ATTENTION.classes.clear()
    registry.ATTENTION.classes.update(saved)
    GoodAttention.name = FibonacciAttention.name


def warnings_of(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_an_entry_point_registers_its_plugin_on_first_use(fresh_entry_points, caplog):
    fresh_entry_points(FakeEntryPoint("good_demo", GoodAttention))
    assert "good_demo" in list_attention()
    assert get_attention("good_demo") is GoodAttention and GoodAttention.name == "good_demo"
    assert isinstance(build_attention("good_demo", window=3), GoodAttention)
    assert warnings_of(caplog) == []


def test_a_broken_entry_point_is_one_warning_and_the_rest_works(fresh_entry_points, caplog):
    fresh_entry_points(
        FakeEntryPoint("broken_demo", ImportError("No module named 'torch_extra'"), "broken-pkg"),
        FakeEntryPoint("good_demo", GoodAttention),
    )
    with caplog.at_level(logging.WARNING):
        names = list_attention()
    assert "good_demo" in names and "broken_demo" not in names
    (line,) = warnings_of(caplog)
    assert "\n" not in line
    assert "'broken_demo'" in line and "broken-pkg" in line
    assert "ImportError: No module named 'torch_extra'" in line
    assert build_attention("fibonacci").window == 8  # the registry still works


def test_an_entry_point_that_is_not_a_plugin_is_refused(fresh_entry_points, caplog):
    fresh_entry_points(FakeEntryPoint("not_a_plugin_demo", dict, "odd-pkg"))
    with caplog.at_level(logging.WARNING):
        assert "not_a_plugin_demo" not in list_attention()
    (line,) = warnings_of(caplog)
    assert "odd-pkg" in line and "not a subclass of AttentionPlugin" in line


def test_an_entry_point_named_like_a_builtin_is_refused_without_loading(fresh_entry_points, caplog):
    clash = FakeEntryPoint("dense", RuntimeError("must not be imported"), "clashing-pkg")
    fresh_entry_points(clash)
    with caplog.at_level(logging.WARNING):
        assert get_attention("dense").__module__ == "lit_sparse.attention.dense"
    (line,) = warnings_of(caplog)
    assert "clashing-pkg" in line and "'dense' is a built-in attention" in line
    assert "must not be imported" not in line
