"""``python -m lit_sparse plugins``: the registered attention plugins."""

from __future__ import annotations

import textwrap

from lit_sparse.commands import command
from lit_sparse.parsing.help_text import plain


def _text(infos) -> str:
    blocks = []
    for info in infos:
        lines = [f"{info.name}  ({info.origin}: {info.class_path})", f"  {plain(info.summary)}"]
        width = max((len(o.name) + len(o.default) for o in info.options), default=0) + 3
        for option in info.options:
            head = f"    {option.name} = {option.default}".ljust(width + 4)
            help_lines = textwrap.wrap(plain(option.help), max(40, 96 - len(head))) or [""]
            lines.append(f"{head}  {help_lines[0]}".rstrip())
            lines += [f"{'':{len(head)}}  {rest}" for rest in help_lines[1:]]
        if not info.options:
            lines.append("    (no options)")
        blocks.append("\n".join(lines))
    usage = (
        "choose one with --model.attention <name>, set an option with "
        "--model.attention.<option> VALUE (fit --model.attention <name> "
        "--model.attention.help <name> gives the full help)"
    )
    return "\n\n".join(blocks) + "\n\n" + textwrap.fill(usage, 96)


@command("plugins", positional=("names",))
def plugins(names: list[str] | None = None) -> int:
    """The registered attention plugins: origin, options, defaults.

    Lists every plugin the registry knows, built-in or from an installed package (the
    ``lit_sparse.attention`` entry point): its name, class, where it comes from, what it attends
    to, and its options with their defaults. A config or the command line chooses one by name,
    ``--model.attention <name> --model.attention.<option> VALUE``.

        python -m lit_sparse plugins
        python -m lit_sparse plugins fibonacci dilated

    Args:
        names: plugins to show (default: every one)
    """
    from lit_sparse.attention.catalog import describe_plugins

    print(_text(describe_plugins(names or None)))
    return 0
