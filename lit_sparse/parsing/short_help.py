"""The short ``--help`` of the Lightning commands: the options a user sets, one entry each."""

from __future__ import annotations

import argparse
import copy
import shutil

from lit_sparse.parsing.help_text import HelpFormatter, plain
from lit_sparse.parsing.list_options import list_kind

FULL_HELP = "--help=full"
"""The option that prints every option of a Lightning command (LightningCLI's own help)."""

DESCRIPTIONS = {
    "fit": "Train a model: python -m lit_sparse fit --config configs/<variant>.yaml "
    "(add --config configs/quickstart.yaml for a CPU run of minutes).",
    "validate": "Score a checkpoint on every held-out set (logged as val/*): --config "
    "<run>/config.yaml --ckpt_path <run>/checkpoints/last.ckpt.",
    "test": "Score a checkpoint on the held-out sets as validate does (logged as test/*).",
    "extrapolate": "Perplexity of a checkpoint at several evaluation lengths on every "
    "held-out set, with the change against the training length.",
}

OPTIONS = {
    "help": "show this help and exit (--help=full: every option)",
    "config": "a config file; repeat to layer them (configs/coprime.yaml, then "
    "configs/quickstart.yaml)",
    "seed_everything": "the seed set before the model is built (the configs: 42; default: "
    "true, a random one)",
}

REWORDED = {
    "model.attention.help": "print a plugin's options and exit: --model.attention.help fibonacci",
    "model.attention": "the attention plugin: a registered name (fibonacci, dense, bigbird, "
    "sliding_window, ...) or a class path (default: dense)",
    "data.help": "print a data class's options and exit: --data.help TextDataModule",
    "data": "a data config file (configs/data/embedded.yaml, configs/data/paper.yaml) or a "
    "class_path with init_args",
}
"""Help written for this project where LightningCLI's is generic."""

TRAINER = {
    "accelerator": '"cpu", "gpu", "auto", ... (default: auto)',
    "devices": 'devices per node: a count, a list of indices, or "auto" (default: auto)',
    "num_nodes": "machines; devices x num_nodes processes under DDP (default: 1)",
    "strategy": '"ddp" for several devices, "auto" for one (default: auto)',
    "precision": '"32-true", "bf16-mixed", "16-mixed", ... (the paper\'s configs: bf16-mixed)',
    "max_steps": "optimizer steps to train; the learning-rate cosine ends there (no default: "
    "every config sets it)",
    "accumulate_grad_batches": "micro-batches per optimizer step (default: 1)",
    "gradient_clip_val": "clip the gradient norm at this value (the paper's configs: 1.0)",
    "val_check_interval": "micro-batches between validations (the training stream has no "
    "epochs; the paper's configs: 2000, every 500 optimizer steps)",
    "log_every_n_steps": "steps between logged training scalars (default: 50)",
    "logger": "where the logs go, as class_path and init_args (default: TensorBoard in "
    "runs/<name>/version_N); false: no logger",
    "callbacks": "callbacks, as class_path and init_args (the configs add the observers: "
    "alpha, position loss, extrapolation, throughput)",
    "fast_dev_run": "run 1 (or N) batches of training and validation as a smoke test; keeps "
    "no files (default: false)",
}
"""The trainer options shown, in this order, with their short help."""

CKPT_PATH = {
    "fit": 'resume a run: "last" (the run this command started), a run folder or a .ckpt '
    "file (default: a new run)",
}
CKPT_PATH_EVALUATED = "the checkpoint whose weights are scored (a run's checkpoints/last.ckpt)"

SECTIONS = (
    ("model", "the model: its attention plugin, optimizer and schedule"),
    ("model.arch", "the network's shape (vocab_size and context_length come from the data)"),
    ("data", "the data (--data.help TextDataModule lists the text data's options)"),
)


def _shown(action: argparse.Action, text: str | None = None) -> argparse.Action:
    """A copy of ``action`` to print, with help ``text`` and a metavar from its last key."""
    shown = copy.copy(action)
    if text is not None:
        shown.help = text
    name = action.dest.rpartition(".")[2].upper()
    if list_kind(getattr(action, "_typehint", None)) == "list":
        # space-separated, as the command line takes it; the "--<option>+" form left out
        shown.metavar = f"{name} [{name} ...]"
        shown.option_strings = [o for o in action.option_strings if not o.endswith("+")]
    elif shown.metavar is None and shown.nargs != 0:
        shown.metavar = name
    return shown


def _group_actions(parser, key: str) -> list[argparse.Action]:
    """A group's options to print, without its config-file option (``--model CONFIG``)."""
    actions = getattr(parser.groups.get(key), "_group_actions", [])
    return [
        _shown(a, REWORDED.get(a.dest))
        for a in actions
        if type(a).__name__ != "_ActionConfigLoad" and a.help != argparse.SUPPRESS
    ]


def short_help(parser) -> str:
    """The short help of a Lightning command's parser."""
    command = parser.prog.split()[-1]
    by_dest = {action.dest: action for action in parser._actions}
    width = min(shutil.get_terminal_size((100, 24)).columns, 100)
    formatter = HelpFormatter(parser.prog, max_help_position=34, width=width)
    usage = f"python -m lit_sparse {command} [-c CONFIG] [--<option> VALUE ...]"
    formatter.add_usage(usage, [], [])
    formatter.add_text(DESCRIPTIONS.get(command, parser.description))

    options = [_shown(by_dest[d], OPTIONS[d]) for d in OPTIONS if d in by_dest]
    sections = [("options", options)]
    sections += [(title, _group_actions(parser, key)) for key, title in SECTIONS]
    own = _group_actions(parser, command)
    for i, action in enumerate(own):
        if action.dest == "ckpt_path":
            own[i] = _shown(action, CKPT_PATH.get(command, CKPT_PATH_EVALUATED))
    sections.append((f"{command}'s own options", [a for a in own if a.dest != "weights_only"]))
    trainer = [
        _shown(by_dest[f"trainer.{name}"], text)
        for name, text in TRAINER.items()
        if f"trainer.{name}" in by_dest
    ]
    sections.append(("the trainer (Lightning's; the options set most)", trainer))
    for title, actions in sections:
        if actions:
            formatter.start_section(title)
            formatter.add_arguments(actions)
            formatter.end_section()

    every = sum(1 for action in parser._actions if action.help != argparse.SUPPRESS)
    formatter.add_text(
        f"These are the options set most; {FULL_HELP} lists all {every}, Lightning's Trainer's "
        "among them. A plugin's options: --model.attention <name> --model.attention.help "
        "<name> (python -m lit_sparse plugins lists every plugin with its options)."
    )
    return plain(formatter.format_help())
