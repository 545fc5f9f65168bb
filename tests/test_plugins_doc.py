"""docs/plugins.md followed literally (issue 57, first hour 1): its plugin file, as a module of
one's own and as a built-in file in lit_sparse/attention/ with the import line and decorator the
guide gives, registers and builds; a built-in file that fails to import is one warning line,
and the commands keep working.

A built-in file is imported while ``lit_sparse.attention`` itself is importing (the registry
finds the built-ins as the first one registers), which is where the guide's import line made a
circle. So each case runs in a fresh process whose ``lit_sparse.attention`` has a temporary
folder on its module path before the package runs: a file there is a file of the package, and
the repository's folder is left alone."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "docs" / "plugins.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", GUIDE, re.S)

pytestmark = pytest.mark.slow  # each case starts a process


def block(first_line: str) -> str:
    """The guide's Python block that starts with ``first_line``."""
    (found,) = [b for b in BLOCKS if b.startswith(first_line)]
    return found


def builtin_file(name: str) -> str:
    """The guide's plugin file made a built-in as the guide says: its import line, and the
    decorator on the plugin class (under ``name``: the example's own name is installed)."""
    plugin_file = block("# examples/lit_sparse_dilated/lit_sparse_dilated/dilated.py")
    builtin = block("# lit_sparse/attention/dilated.py").splitlines()
    (import_line,) = [line for line in builtin if line.startswith("from lit_sparse.attention ")]
    (decorator,) = [line for line in builtin if line.startswith("@register_attention(")]
    decorator = decorator.replace('"dilated"', repr(name))
    source, replaced = re.subn(r"^from lit_sparse\.attention import .*$", import_line,
                               plugin_file, count=1, flags=re.M)  # fmt: skip
    assert replaced == 1, "the guide's plugin file has no `from lit_sparse.attention` line"
    return source.replace("class DilatedAttention(", f"{decorator}\nclass DilatedAttention(")


def run_with_package_folder(folder: Path, code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh process whose lit_sparse.attention also holds ``folder``'s files."""
    prelude = f"""
        import importlib.util, sys
        import lit_sparse
        spec = importlib.util.find_spec("lit_sparse.attention")
        spec.submodule_search_locations.append({str(folder)!r})
        package = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = package
        spec.loader.exec_module(package)
        lit_sparse.attention = package
    """
    source = textwrap.dedent(prelude) + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", source], capture_output=True, text=True)


def test_the_guides_plugin_as_a_built_in_file_registers(tmp_path):
    (tmp_path / "dilated_guide.py").write_text(builtin_file("dilated_guide"))
    done = run_with_package_folder(
        tmp_path,
        """
        from lit_sparse.attention import build_attention, list_attention
        from lit_sparse.attention.registry import builtin_names
        assert "dilated_guide" in builtin_names(), builtin_names()
        assert "dilated_guide" in list_attention()
        print(build_attention("dilated_guide", dilation=32).dilation)
        """,
    )
    assert done.stdout.strip() == "32", done.stderr
    assert "warning" not in done.stderr, done.stderr


def test_the_guides_plugin_in_a_package_of_ones_own_registers_and_loads_by_class_path(tmp_path):
    plugin_file = block("# examples/lit_sparse_dilated/lit_sparse_dilated/dilated.py")
    (tmp_path / "my_pkg").mkdir()
    (tmp_path / "my_pkg" / "__init__.py").write_text("")
    (tmp_path / "my_pkg" / "dilated.py").write_text(plugin_file)
    code = f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from lit_sparse.attention import build_attention, register_attention
        from my_pkg.dilated import DilatedAttention
        plugin = build_attention("my_pkg.dilated.DilatedAttention", dilation=32)
        assert isinstance(plugin, DilatedAttention) and plugin.dilation == 32
        register_attention("dilated_mine")(DilatedAttention)
        print(build_attention("dilated_mine", window=4).window)
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True
    )
    assert done.stdout.strip() == "4", done.stderr


def test_a_broken_built_in_file_is_one_warning_and_the_commands_work(tmp_path):
    broken = builtin_file("dilated_broken").replace(
        "from lit_sparse.attention.options import at_least",
        "from lit_sparse.attention.options import at_leats",
    )
    (tmp_path / "dilated_broken.py").write_text(broken)
    done = run_with_package_folder(
        tmp_path,
        """
        from lit_sparse.__main__ import main
        sys.exit(main(["plugins", "fibonacci"]))
        """,
    )
    assert done.returncode == 0, done.stderr
    assert "fibonacci" in done.stdout
    (line,) = [line for line in done.stderr.splitlines() if "dilated_broken" in line]
    assert line.startswith(
        "warning: attention module lit_sparse.attention.dilated_broken is not loaded"
    ), line
    assert "ImportError: cannot import name 'at_leats'" in line
    assert "Traceback" not in done.stderr, done.stderr
