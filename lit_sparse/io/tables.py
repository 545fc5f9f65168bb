"""The one Markdown-table helper: every table a command or an evaluation prints or writes."""

from __future__ import annotations

from collections.abc import Sequence

_RULES = {"l": "---", "r": "---:", "c": ":---:"}


def markdown_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], align: str | None = None
) -> str:
    """A Markdown table of string cells; ``align``: ``l``, ``r`` or ``c`` per column."""
    if align is not None and (len(align) != len(header) or set(align) - set(_RULES)):
        raise ValueError(f"align={align!r}: expected one of l, r, c per column ({len(header)})")
    rules = [_RULES[a] for a in align] if align else ["---"] * len(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(rules) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
