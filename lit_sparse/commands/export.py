"""``python -m lit_sparse export``: a trained model out of its run folder, weights only.

Writes model.safetensors (no optimizer state), config.json, the run's tokenizer, transformers'
configs and a model card; the folder loads with ``LanguageModel.from_pretrained(DIR)``, with
``python -m lit_sparse generate DIR`` and in transformers (dense and sliding-window models as
stock Llama / Mistral folders). ``--format gguf``: a dense model as one GGUF file for llama.cpp.

    python -m lit_sparse export runs/quickstart/coprime --out exported/quickstart-coprime
    python -m lit_sparse export runs/quickstart/dense --format gguf --out dense.gguf
"""

from __future__ import annotations

import argparse
import sys

from lit_sparse.commands import command_parser, reports_errors
from lit_sparse.errors import ConfigError
from lit_sparse.formats.gguf import DEFAULT_GGUF_TYPE, GGUF_TYPES
from lit_sparse.formats.pretrained import LAYOUTS

FORMATS = (*LAYOUTS, "gguf")


def _parser() -> argparse.ArgumentParser:
    parser = command_parser("export", __doc__.split("\n\n")[1])
    parser.add_argument(
        "path",
        help="a run folder, an experiment folder or a .ckpt file of a run (--format gguf: or "
        "an exported folder)",
    )
    parser.add_argument(
        "--out",
        required=True,
        help="the folder to write (new, empty or an earlier export); --format gguf: the file",
    )
    parser.add_argument("--tokenizer", help="default: the run's own")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        help="lit_sparse: any attention, loaded by transformers through the remote-code files "
        "it carries; llama (dense) / mistral (sliding window): transformers' stock classes, "
        "no remote code (default: the stock format where one fits, else lit_sparse); "
        "gguf (dense): one file for llama.cpp",
    )
    parser.add_argument(
        "--gguf-type",
        choices=GGUF_TYPES,
        help=f"--format gguf: the matrices' type (default {DEFAULT_GGUF_TYPE}; norms stay f32)",
    )
    return parser


@reports_errors
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from lit_sparse.interop.export import export_gguf, export_run

    if args.format == "gguf":
        gguf_type = args.gguf_type or DEFAULT_GGUF_TYPE
        result = export_gguf(args.path, args.out, args.tokenizer, gguf_type, option="--tokenizer")
    elif args.gguf_type is not None:
        raise ConfigError(
            f"--gguf-type {args.gguf_type}: only with --format gguf (got --format "
            f"{args.format or 'default'})"
        )
    else:
        result = export_run(args.path, args.out, args.tokenizer, args.format, option="--tokenizer")
    if result.note:
        print(f"note: {result.note}", file=sys.stderr)
    print(result.to_text())
    return 0
