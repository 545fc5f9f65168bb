"""``python -m lit_sparse export``: a trained model out of its run folder, weights only.

Writes model.safetensors (no optimizer state), config.json (the model's shape, the
attention plugin's config, the EOS id and the training length), the run's tokenizer.json
with its transformers configs, generation_config.json and a model card (README.md: variant,
steps, held-out perplexities, length extrapolation). The folder loads with
``lit_sparse.LanguageModel.from_pretrained(DIR)``, generates with ``python -m lit_sparse
generate DIR``, can be uploaded with the model's ``push_to_hub``, and loads in Hugging Face
transformers: ``AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)`` in
lit_sparse's format (any attention), with no remote code as a stock Llama (dense) or
Mistral (sliding window) folder.

    python -m lit_sparse export runs/quickstart/coprime --out exported/quickstart-coprime
"""

from __future__ import annotations

import argparse
import sys

from lit_sparse.commands import reports_errors
from lit_sparse.formats.pretrained import LAYOUTS as FORMATS
from lit_sparse.parsing.help_text import HelpFormatter

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        formatter_class=HelpFormatter,
        prog="python -m lit_sparse export",
        description=__doc__.split("\n\n")[1],
    )
    parser.add_argument("path", help="a run folder, an experiment folder or a .ckpt file of a run")
    parser.add_argument(
        "--out", required=True, help="the folder to write (new, empty or an earlier export)"
    )
    parser.add_argument("--tokenizer", default=None, help="default: the run's own")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help="lit_sparse: any attention, loaded by transformers through the remote-code files "
        "it carries; llama (dense) / mistral (sliding window): transformers' stock classes, "
        "no remote code (default: the stock format where one fits, else lit_sparse)",
    )
    return parser


@reports_errors
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    from lit_sparse.interop.export import export_run

    result = export_run(args.path, args.out, args.tokenizer, args.format, option="--tokenizer")
    if result.note:
        print(f"note: {result.note}", file=sys.stderr)
    print(result.to_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
