"""jsonargparse's nested failure reports, condensed to the one line a user reads."""

from __future__ import annotations

import re

from lit_sparse.attention.schedules import FLAT_OPTIONS


def condense_parse_error(message: str) -> str:
    """One line from jsonargparse's report, saying where a moved fibonacci option went."""
    line = _condensed(message)
    moved = re.search(r"Option '(\w+)' is not accepted", line)
    if moved and moved.group(1) in FLAT_OPTIONS:
        line += (
            f" ({moved.group(1)} is an option of the schedule now: --model.attention.schedule "
            "Linear|Coprime|Custom|Learned --model.attention.schedule.<option> VALUE)"
        )
    return line


def _condensed(message: str) -> str:
    """The key and the reasons (the indented "- ..." lines of a nested report)."""
    link = re.search(r"Call to compute_fn of link .* failed: (.*)", message, re.DOTALL)
    if link:  # an argument link (seq_len, vocabulary) rejected its source value
        return " ".join(link.group(1).split())
    keys = re.findall(r'Parser key "([^"]+)":\s*\n\s*(.+)', message)
    reasons = []
    lines = message.splitlines()
    for i, line in enumerate(lines):
        item = line.strip()
        if not item.startswith("- ") or "NoneType" in item or item.startswith("- Parser key"):
            continue
        if not item.endswith(":"):
            reasons.append(item[2:])
            continue
        # a heading over a nested report: keep its plain lines (jsonargparse's own reason,
        # e.g. "Option 'n_random' is not accepted" under the plugin's class_path)
        indent = len(line) - len(line.lstrip())
        nested = []
        for below in lines[i + 1 :]:
            if not below.strip() or len(below) - len(below.lstrip()) <= indent:
                break
            if below.strip().startswith(("- ", "Parser key")):
                break
            nested.append(below.strip())
        if nested:
            heading = re.fullmatch(r"- Problem with given class_path '([^']+)':", item)
            where = f"{heading.group(1)}: " if heading else f"{item[2:]} "
            reasons.append(where + " ".join(nested))
    if keys and reasons:
        return f"{keys[0][0]}: {'; '.join(dict.fromkeys(reasons))}"
    if keys:  # nested reports only (a subclass's own argument): the innermost key's reason
        (outer, _), (inner, reason) = keys[0], keys[-1]
        key = outer if inner == outer else f"{outer}...{inner}"
        return f"{key}: {reason.strip()}"
    return " ".join(message.split())
