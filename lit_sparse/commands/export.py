"""``python -m lit_sparse export``: a trained model out of its run folder, weights only."""

from __future__ import annotations

import sys

from lit_sparse.commands import command
from lit_sparse.errors import ConfigError


@command("export", positional=("path",))
def export(
    path: str,
    out: str,
    tokenizer: str | None = None,
    format: str | None = None,
    gguf_type: str | None = None,
) -> int:
    """A run's model as safetensors + config.json + tokenizer + card.

    Writes model.safetensors (no optimizer state), config.json, the run's tokenizer,
    transformers' configs and a model card; the folder loads with
    ``LanguageModel.from_pretrained(DIR)``, with ``python -m lit_sparse generate DIR`` and in
    transformers (dense and sliding-window models as stock Llama / Mistral folders).
    ``--format gguf``: a dense model as one GGUF file for llama.cpp.

        python -m lit_sparse export runs/quickstart/coprime --out exported/quickstart-coprime
        python -m lit_sparse export runs/quickstart/dense --format gguf --out dense.gguf

    Args:
        path: a run folder, an experiment folder or a .ckpt file of a run (--format gguf: or
            an exported folder)
        out: the folder to write (new, empty or an earlier export); --format gguf: the file
        tokenizer: default: the run's own
        format: lit_sparse: any attention, loaded by transformers through the remote-code
            files it carries; llama (dense) / mistral (sliding window): transformers' stock
            classes, no remote code (default: the stock format where one fits, else
            lit_sparse); gguf (dense): one file for llama.cpp
        gguf_type: --format gguf: the matrices' type (default f16; norms stay f32)
    """
    from lit_sparse.formats.gguf import DEFAULT_GGUF_TYPE, GGUF_TYPES
    from lit_sparse.formats.pretrained import LAYOUTS
    from lit_sparse.interop.export import export_gguf, export_run

    if format is not None and format not in (*LAYOUTS, "gguf"):
        raise ConfigError(f"--format {format}: expected one of {', '.join((*LAYOUTS, 'gguf'))}")
    if gguf_type is not None and gguf_type not in GGUF_TYPES:
        raise ConfigError(f"--gguf-type {gguf_type}: expected one of {', '.join(GGUF_TYPES)}")
    if format == "gguf":
        gguf_type = gguf_type or DEFAULT_GGUF_TYPE
        result = export_gguf(path, out, tokenizer, gguf_type, option="--tokenizer")
    elif gguf_type is not None:
        raise ConfigError(
            f"--gguf-type {gguf_type}: only with --format gguf (got --format {format or 'default'})"
        )
    else:
        result = export_run(path, out, tokenizer, format, option="--tokenizer")
    if result.note:
        print(f"note: {result.note}", file=sys.stderr)
    print(result.to_text())
    return 0
