"""``--help`` text as a terminal shows it: docstrings' reST markup removed, defaults shown."""

from __future__ import annotations

import argparse
import re

_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`(~?)([^`<]*?)(?:\s*<[^>]*>)?`")
_LITERAL = re.compile(r"``(.+?)``", re.S)
_LINK = re.compile(r"`([^`<]+?)\s*<[^>]+>`_+")


def plain(text: str) -> str:
    """``text`` without reST markup: ````x````, :role:`x` and `x <url>`_ become x (``~a.b``: b)."""
    text = _ROLE.sub(lambda m: m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2), text)
    text = _LINK.sub(r"\1", text)
    return _LITERAL.sub(r"\1", text)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter with plain text and the defaults worth showing (not None or False)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return super()._fill_text(plain(text), width, indent)

    def _get_help_string(self, action: argparse.Action) -> str:
        help_text = plain(action.help or "")
        default = action.default
        worth = default is not None and default is not False and default != argparse.SUPPRESS
        if worth and action.option_strings and "default" not in help_text:
            help_text += " (default: %(default)s)"
        return help_text
