"""`make quickstart` / `make test` from a .venv an earlier run left odd: each state recovers or
stops in one line (issue 57). Offline: pip reads a stand-in torch wheel from a local folder."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.test_readme import MAKE_VARIABLES

pytestmark = [
    pytest.mark.slow,  # venvs, ensurepip and pip: about 15 s of CPU
    pytest.mark.skipif(shutil.which("make") is None, reason="no make"),
]

ROOT = Path(__file__).resolve().parents[1]


def stand_in_torch(folder: Path) -> None:
    """A wheel named torch 2.13.0 (the Makefile's TORCH) whose import gives a version string."""
    files = {
        "torch/__init__.py": "__version__ = '2.13.0+stand-in'\n",
        "torch-2.13.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0\n",
        "torch-2.13.0.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{name},sha256={digest.decode()},{len(text)}")
    files["torch-2.13.0.dist-info/RECORD"] = "\n".join([*record, "torch-2.13.0.dist-info/RECORD,,"])
    folder.mkdir()
    with zipfile.ZipFile(folder / "torch-2.13.0-py3-none-any.whl", "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)


@pytest.fixture
def make_torch(tmp_path):
    """Runs the Makefile's ``torch`` step (what both set-up commands start with) in tmp_path,
    pip offline with the stand-in wheel; returns (exit status, output lines)."""
    stand_in_torch(tmp_path / "wheels")
    env = {k: v for k, v in os.environ.items() if k not in MAKE_VARIABLES and k != "VIRTUAL_ENV"}
    env.update(
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(tmp_path / "wheels"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYTHON=sys.executable,
    )

    def run() -> tuple[int, list[str]]:
        done = subprocess.run(
            ["make", "-s", "-f", str(ROOT / "Makefile"), "torch", f"PYTHON={sys.executable}"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        return done.returncode, (done.stdout + done.stderr).splitlines()

    return run


def venv(tmp_path: Path, python: str = sys.executable) -> Path:
    """A .venv without pip, as a `python -m venv` cut short leaves it."""
    subprocess.run([python, "-m", "venv", "--without-pip", str(tmp_path / ".venv")], check=True)
    return tmp_path / ".venv"


def torch_version(folder: Path) -> str:
    done = subprocess.run(
        [folder / "bin" / "python", "-c", "import torch; print(torch.__version__)"],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def said(lines: list[str]) -> list[str]:
    """What the Makefile said (make's own `make: *** [...] Error 1` left out)."""
    return [line for line in lines if line.startswith("make: ") and "***" not in line]


def test_a_venv_cut_short_or_without_torch_gets_pip_and_torch(tmp_path, make_torch):
    folder = venv(tmp_path)
    status, lines = make_torch()
    assert status == 0, lines
    assert said(lines) == ["make: .venv has no pip (a set-up cut short): putting it back"]
    assert torch_version(folder) == "2.13.0+stand-in"
    # an install cut short: pip's record says torch is there, its import fails
    (site,) = folder.glob("lib/python*/site-packages")
    (site / "torch" / "__init__.py").write_text("raise ImportError('cut short')\n")
    status, lines = make_torch()
    assert status == 0, lines
    assert said(lines) == [
        "make: torch is in .venv but does not import (an install cut short): installing it again"
    ]
    assert torch_version(folder) == "2.13.0+stand-in"
    status, lines = make_torch()  # all there: nothing said, nothing installed
    assert status == 0 and not said(lines) and not any("Installing" in ln for ln in lines), lines


def test_a_venv_whose_python_was_removed_is_made_again(tmp_path, make_torch):
    folder = venv(tmp_path)
    for link in (folder / "bin").glob("python*"):
        link.unlink()
        link.symlink_to(tmp_path / "removed" / "python3")  # the Python it was made by is gone
    status, lines = make_torch()
    assert status == 0, lines
    assert said(lines) == [
        "make: .venv has no Python that runs (made by a Python since removed, or cut short): "
        "making it again"
    ]
    assert torch_version(folder) == "2.13.0+stand-in"


def test_a_venv_of_an_old_python_or_one_that_does_not_run_stops_in_one_line(tmp_path, make_torch):
    """A stand-in python that reports 3.8 and fails the version check, as a real 3.8 would;
    then one whose interpreter is gone (make sees the file and does not make it again)."""
    folder = tmp_path / ".venv" / "bin"
    folder.mkdir(parents=True)
    (folder / "python").write_text(
        "#!/bin/sh\ncase \"$*\" in\n  '-c ') ;;\n  *'print('*) echo 3.8 ;;\n  *) exit 1 ;;\nesac\n"
    )
    (folder / "python").chmod(0o755)
    status, lines = make_torch()
    assert status != 0
    assert said(lines) == [
        "make: .venv was made by Python 3.8 and lit_sparse needs 3.10 or later: remove .venv "
        "(rm -rf .venv) and run make again, with PYTHON=python3.11 (say) if python3 is older"
    ]
    assert not any("pip" in line for line in lines if not line.startswith("make: ")), lines
    (folder / "python").write_text("#!/removed/bin/sh\n")  # there, but it does not run
    status, lines = make_torch()
    assert status != 0
    assert said(lines) == [
        "make: .venv/bin/python does not run (made by a Python since removed?): remove .venv "
        "(rm -rf .venv) and run make again"
    ]
