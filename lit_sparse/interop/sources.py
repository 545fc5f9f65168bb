"""A model and its tokenizer from a run folder, a checkpoint (with the run's config.yaml) or
an exported folder (``python -m lit_sparse export``): what ``generate``, the evaluators and
``lit_sparse.load_pretrained`` run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lit_sparse.data.tokenizer import Tokenizer, run_tokenizer
from lit_sparse.errors import ConfigError
from lit_sparse.io.pretrained import CONFIG_FILE

__all__ = ["ModelSource", "is_exported", "load_pretrained", "load_source", "resolve_dtype"]

DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
}


@dataclass
class ModelSource:
    """A model ready to generate from, and where it came from."""

    model: Any
    """The ``LanguageModel`` (eval mode)."""
    tokenizer: Tokenizer
    description: str
    """e.g. ``runs/quickstart/coprime/version_0/checkpoints/last.ckpt (step 300)``."""


def is_exported(path: Path) -> bool:
    """Whether ``path`` is a folder written by ``save_pretrained`` / ``export``."""
    return path.is_dir() and (path / CONFIG_FILE).is_file()


def load_source(path: str | Path, tokenizer: str | None = None) -> ModelSource:
    """The model and tokenizer of a run folder (its newest checkpoint), an experiment folder
    (its newest run), a ``.ckpt`` file or an exported folder; ``tokenizer`` overrides the
    one the run or the folder names. A path that is none of these is one ConfigError line."""
    import lit_sparse
    from lit_sparse.model import LanguageModel

    folder = Path(path).expanduser()
    if not folder.exists():
        raise ConfigError(
            f"path={str(path)!r}: no such run folder, checkpoint or exported model folder"
        )
    if is_exported(folder):
        if tokenizer is None and not (folder / "tokenizer.json").is_file():
            raise ConfigError(
                f"path={str(path)!r}: the exported folder has no tokenizer.json; name the "
                "model's tokenizer with --tokenizer"
            )
        model = LanguageModel.from_pretrained(str(folder))
        loaded = Tokenizer.from_pretrained(tokenizer or str(folder))
        return ModelSource(model, loaded, f"{folder} (exported)")
    run = lit_sparse.load_run(folder)
    if run.module is None:
        raise ConfigError(
            f"path={str(path)!r}: no checkpoint found ({run.path}/checkpoints/*.ckpt), and not "
            f"an exported folder ({CONFIG_FILE})"
        )
    step = "" if run.step is None else f" (step {run.step})"
    return ModelSource(
        run.module.model.eval(),
        Tokenizer.from_pretrained(tokenizer or run_tokenizer(run.config)),
        f"{run.checkpoint}{step}",
    )


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    """A torch dtype from a dtype or its name (``float32``, ``bfloat16``, ``float16`` and
    their short forms; ``auto`` or None: as saved)."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    name = str(dtype).removeprefix("torch.").lower()
    if name == "auto":
        return None
    if name not in DTYPES:
        raise ConfigError(f"dtype={dtype!r}: allowed: auto, {', '.join(DTYPES)}")
    return DTYPES[name]


def load_pretrained(
    path: str | Path,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    tokenizer: str | None = None,
) -> tuple[Any, Tokenizer]:
    """The model (eval mode) and tokenizer of an exported folder, a run folder (its newest
    checkpoint), an experiment folder (its newest run) or a ``.ckpt`` file of a run.

        model, tokenizer = lit_sparse.load_pretrained("exported/", device="cuda")
        ids = tokenizer.document_prefix + tokenizer.encode(document)

    A document is scored from its first token by conditioning it on
    ``tokenizer.document_prefix`` (the end-of-text id): training joins documents as
    ``doc EOS doc EOS ...``. The training length is ``model.config.context_length``
    (config.json's ``arch.context_length``).

    Args:
        path: the folder or checkpoint.
        device: where to put the model (default: the CPU).
        dtype: e.g. ``"bfloat16"`` or ``torch.float16`` (default: as saved, float32).
        tokenizer: another tokenizer than the one the folder or the run names.
    """
    torch_dtype = resolve_dtype(dtype)
    try:
        target = torch.device("cpu" if device is None else device)
    except (RuntimeError, TypeError) as err:
        raise ConfigError(f"device={device!r}: {err}") from None
    if target.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device={device!r}: CUDA is not available here")
    source = load_source(path, tokenizer)
    model = source.model.to(device=target, dtype=torch_dtype).eval()
    return model, source.tokenizer
