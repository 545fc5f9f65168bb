"""The ``hf`` extra is optional: lit_sparse works without transformers, and the integration
says in one line what to install when it is missing or too old."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

from lit_sparse.interop.extras import (
    MIN_TRANSFORMERS,
    MissingExtraError,
    require_transformers,
)


def bench_main(argv):
    """``python -m lit_sparse bench ...`` in this process."""
    from lit_sparse.__main__ import main as lit_main

    return lit_main(["bench", *argv])


def test_a_too_old_transformers_names_the_minimum():
    with pytest.raises(MissingExtraError) as err:
        require_transformers(installed="4.55.4")
    message = str(err.value)
    assert message.startswith("transformers 4.55.4 is installed;")
    assert f"transformers>={MIN_TRANSFORMERS}" in message and "\n" not in message
    assert require_transformers(installed=MIN_TRANSFORMERS) == MIN_TRANSFORMERS


@pytest.fixture
def no_transformers(monkeypatch):
    """importlib.metadata as it answers where transformers is not installed."""
    version = importlib.metadata.version

    def without(name):
        if name == "transformers":
            raise importlib.metadata.PackageNotFoundError(name)
        return version(name)

    monkeypatch.setattr(importlib.metadata, "version", without)


def test_missing_transformers_names_the_extra(no_transformers, capsys):
    with pytest.raises(MissingExtraError) as err:
        require_transformers()
    message = str(err.value)
    assert "needs the `hf` extra" in message and 'pip install "lit_sparse[hf]"' in message
    assert "\n" not in message and isinstance(err.value, ImportError)
    # a command that needs it refuses before any work, in one line
    assert bench_main(["decode", "--transformers", "--contexts", "64"]) == 2
    err_text = capsys.readouterr().err
    assert err_text.startswith("error: the Hugging Face transformers integration needs the")
    assert err_text.count("\n") == 1


@pytest.mark.slow
def test_lit_sparse_and_its_export_do_not_import_transformers():
    code = (
        "import sys, lit_sparse, lit_sparse.interop.export, lit_sparse.formats.pretrained\n"
        "import lit_sparse.commands.export\n"
        "assert 'transformers' not in sys.modules, 'transformers was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
