"""``python -m lit_sparse plugins``: every registered plugin with where it comes from, a
one-line description and its options with their defaults."""

from __future__ import annotations

import importlib.metadata

import pytest

from lit_sparse.__main__ import main
from lit_sparse.attention import list_attention
from lit_sparse.attention.catalog import describe_plugins
from lit_sparse.commands import COMMANDS


def blocks(text: str) -> dict[str, list[str]]:
    """The printed listing: plugin name -> its lines."""
    found = {}
    for block in text.strip().split("\n\n")[:-1]:  # the last paragraph says how to choose one
        lines = block.splitlines()
        found[lines[0].split()[0]] = lines
    return found


def test_every_registered_plugin_with_origin_summary_and_defaults(capsys):
    assert main(["plugins"]) == 0
    listed = blocks(capsys.readouterr().out)
    assert sorted(listed) == list_attention()
    fibonacci = listed["fibonacci"]
    path = "lit_sparse.attention.fibonacci.FibonacciAttention"
    assert fibonacci[0] == f"fibonacci  (built-in: {path})"
    assert fibonacci[1].strip().startswith("Window W plus rung distances")
    options = {line.split()[0]: line.split()[2] for line in fibonacci[2:] if " = " in line}
    assert options["window"] == "8" and options["new_offsets"] == "'use'"
    assert options["schedule"] == "'fixed'" and "alphas" not in options
    window = next(line for line in fibonacci if line.split()[0] == "window")
    assert "every distance 0..W is attended" in window
    assert all("``" not in line for lines in listed.values() for line in lines)  # plain text


def test_a_plugin_from_a_package_names_its_distribution(capsys):
    entry = {e.name: e for e in importlib.metadata.entry_points(group="lit_sparse.attention")}
    if "dilated" not in entry:
        pytest.skip("the example package (examples/lit_sparse_dilated) is not installed")
    assert main(["plugins", "dilated"]) == 0
    [(name, lines)] = blocks(capsys.readouterr().out).items()
    dist = entry["dilated"].dist
    assert name == "dilated"
    assert lines[0].startswith(f"dilated  (package {dist.name} {dist.version}: ")
    [info] = describe_plugins(["dilated"])
    assert [o.name for o in info.options] == ["window", "dilation", "n_dilated"]


def test_an_unknown_name_is_one_line_listing_the_registered_ones(capsys):
    assert main(["plugins", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ")
    assert all(name in err for name in list_attention())


def test_the_top_level_help_lists_it(capsys):
    assert "plugins" in COMMANDS.builtin_names()
    assert main(["--help"]) == 0
    assert "  plugins " in capsys.readouterr().out
