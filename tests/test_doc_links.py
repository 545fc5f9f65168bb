"""Every relative link and image in README.md and docs/*.md names a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def relative_targets(document: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", document.read_text(), flags=re.S)  # code is not a link
    targets = (m.group(1).partition("#")[0] for m in LINK.finditer(text))
    return [t for t in targets if t and not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_name_files_that_exist(document):
    missing = [t for t in relative_targets(document) if not (document.parent / t).exists()]
    assert not missing, f"{document.name} links to missing files: {missing}"


def test_the_readme_links_the_study_report():
    assert "docs/cpu-study.md" in relative_targets(ROOT / "README.md")


def test_the_readme_set_up_links_the_install_page_and_it_matches_the_makefile():
    """Issue 57: the disk and time of each set-up step, the caches, how to skip llama.cpp."""
    readme = (ROOT / "README.md").read_text()
    set_up = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    assert "(docs/install.md)" in set_up
    install = (ROOT / "docs" / "install.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert "LLAMA_CPP ?= 0" in makefile and "make test LLAMA_CPP=1" in install
    for cache in ("TORCH_EXTENSIONS_DIR", "LIT_SPARSE_CACHE", "ATEN_CPU_CAPABILITY"):
        assert cache in install
