"""The Markdown-table helper (lit_sparse/io/tables.py)."""

from __future__ import annotations

import pytest

from lit_sparse.io import markdown_table


def test_a_table_has_a_header_a_rule_per_column_and_a_line_per_row():
    text = markdown_table(["T", "plugin"], [["1024", "dense"], ["4096", "fibonacci"]])
    assert text.splitlines() == [
        "| T | plugin |",
        "|---|---|",
        "| 1024 | dense |",
        "| 4096 | fibonacci |",
    ]


def test_alignment_sets_each_columns_rule():
    text = markdown_table(["a", "b", "c"], [], align="lrc")
    assert text.splitlines() == ["| a | b | c |", "|---|---:|:---:|"]


@pytest.mark.parametrize("align", ["lr", "lrx"])
def test_a_bad_alignment_names_itself_and_the_columns(align):
    expected = rf"align='{align}': expected one of l, r, c per column \(3\)"
    with pytest.raises(ValueError, match=expected):
        markdown_table(["a", "b", "c"], [], align=align)
