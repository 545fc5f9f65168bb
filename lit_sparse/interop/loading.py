"""A model and its tokenizer from a run folder, a checkpoint (with the run's config.yaml) or
an exported folder (``python -m lit_sparse export``): what ``generate``, the evaluators and
``lit_sparse.load_pretrained`` run.

Every route checks the tokenizer against the weights: a run's against the digest its
checkpoint records, an exported folder's tokenizer.json against the one config.json records
(``tokenizer_sha256``). A tokenizer the caller names on purpose is used as asked, with a
note when it is not the one the weights were trained with.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lit_sparse.data.tokenizer import Tokenizer, run_tokenizer
from lit_sparse.errors import ConfigError
from lit_sparse.formats.pretrained import (
    CONFIG_FILE,
    TOKENIZER_FILE,
    TOKENIZER_SHA256,
    check_tokenizer_digest,
    lit_sparse_keys,
    read_config,
)

__all__ = [
    "ModelSource",
    "is_exported",
    "load_pretrained",
    "load_source",
    "resolve_device",
    "resolve_dtype",
    "run_tokenizer_checked",
]

log = logging.getLogger(__name__)

DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
}
PYTHON_OPTION = "tokenizer=..."
"""How a Python caller names another tokenizer (a command passes its own flag)."""


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


def _note_other_tokenizer(named: str, loaded: Tokenizer, trained: Any, weights: str) -> None:
    if isinstance(trained, str) and trained != loaded.sha256:
        log.warning(
            "note: the tokenizer named (%r, sha256 %s...) is not the one %s records (%s...); "
            "using it as asked",
            named, loaded.sha256[:12], weights, trained[:12],
        )  # fmt: skip


def run_tokenizer_checked(run, tokenizer: str | None = None, option: str = PYTHON_OPTION):
    """The tokenizer of a loaded run (``lit_sparse.load_run``): the one its config.yaml names,
    refused in one line when it is not the one its checkpoint was trained with (the file
    changed since); ``tokenizer`` names another on purpose (used, with a note when it
    differs). ``option``: how the caller names another tokenizer, for the message."""
    from lit_sparse.runs.checkpoints import check_tokenizer  # lightning: runs only

    spec = tokenizer or run_tokenizer(run.config)
    loaded = Tokenizer.from_pretrained(spec)
    if tokenizer is None:
        check_tokenizer(
            run.tokenizer_sha256,
            loaded.sha256,
            spec,
            run.checkpoint,
            hint=(
                "it changed since training: restore the run's tokenizer, or choose another "
                f"on purpose with {option}"
            ),
        )
    else:
        _note_other_tokenizer(tokenizer, loaded, run.tokenizer_sha256, f"{run.checkpoint}")
    return loaded


def _folder_tokenizer(folder: Path, tokenizer: str | None, option: str) -> Tokenizer:
    """The tokenizer of an exported folder, checked against the digest its config.json
    records; ``tokenizer`` names another on purpose."""
    config = read_config(folder)
    records = (lit_sparse_keys(config) or ({}, None))[0]
    if tokenizer is not None:
        loaded = Tokenizer.from_pretrained(tokenizer)
        _note_other_tokenizer(tokenizer, loaded, records.get(TOKENIZER_SHA256), str(folder))
        return loaded
    if not (folder / TOKENIZER_FILE).is_file():
        raise ConfigError(
            f"path={str(folder)!r}: the exported folder has no {TOKENIZER_FILE}; name the "
            f"model's tokenizer with {option}"
        )
    loaded = Tokenizer.from_pretrained(str(folder))
    check_tokenizer_digest(folder / TOKENIZER_FILE, records, loaded.sha256, option)
    return loaded


def load_source(
    path: str | Path,
    tokenizer: str | None = None,
    *,
    verify_weights: bool = True,
    option: str = PYTHON_OPTION,
) -> ModelSource:
    """The model and tokenizer of a run folder (its newest checkpoint), an experiment folder
    (its newest run), a ``.ckpt`` file or an exported folder; ``tokenizer`` overrides the
    one the run or the folder names. A path that is none of these is one ConfigError line.

    ``verify_weights``: check an exported folder's model.safetensors against its recorded
    sha256 (False: weights changed on purpose; a checkpoint's records are always checked).
    ``option``: how the caller names another tokenizer, for the messages (a command passes
    its flag)."""
    from lit_sparse.model import LanguageModel

    if not isinstance(path, (str, os.PathLike)):
        raise ConfigError(
            f"path={path!r}: expected a run folder, a checkpoint or an exported model folder "
            "(a str or a Path)"
        )
    folder = Path(path).expanduser()
    if not folder.exists():
        raise ConfigError(
            f"path={str(path)!r}: no such run folder, checkpoint or exported model folder"
        )
    if is_exported(folder):
        loaded = _folder_tokenizer(folder, tokenizer, option)
        model = LanguageModel.from_pretrained(str(folder), verify_weights=verify_weights)
        return ModelSource(model, loaded, f"{folder} (exported)")
    from lit_sparse.runs.analysis import load_run  # lightning: a run only, not an export

    run = load_run(folder)
    if run.module is None:
        raise ConfigError(
            f"path={str(path)!r}: no checkpoint found ({run.path}/checkpoints/*.ckpt), and not "
            f"an exported folder ({CONFIG_FILE})"
        )
    step = "" if run.step is None else f" (step {run.step})"
    loaded = run_tokenizer_checked(run, tokenizer, option)
    return ModelSource(run.module.model.eval(), loaded, f"{run.checkpoint}{step}")


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    """A torch dtype from a dtype or its name (``float32``, ``bfloat16``, ``float16`` and
    their short forms; ``auto`` or None: as saved); anything else is one ConfigError line."""
    allowed = f"allowed: auto, {', '.join(DTYPES)}"
    if dtype is None:
        return None
    if isinstance(dtype, torch.dtype):
        if dtype not in DTYPES.values():
            raise ConfigError(f"dtype={dtype}: the weights are floating point; {allowed}")
        return dtype
    name = str(dtype).removeprefix("torch.").lower()
    if name == "auto":
        return None
    if name not in DTYPES:
        raise ConfigError(f"dtype={dtype!r}: {allowed}")
    return DTYPES[name]


def resolve_device(device: str | torch.device | None) -> torch.device:
    """A torch device that is here (default: the CPU); a malformed name, or a device whose
    kind or index this machine lacks (``cuda``, ``mps``, ``xpu``, ...), is one ConfigError
    line."""
    try:
        target = torch.device("cpu" if device is None else device)
    except (RuntimeError, TypeError) as err:
        raise ConfigError(f"device={device!r}: {err}") from None
    if target.type == "cpu":
        return target
    backend = getattr(torch, target.type, None)
    is_available = getattr(backend, "is_available", None)
    if not callable(is_available) or not is_available():
        raise ConfigError(f"device={device!r}: {target.type.upper()} is not available here")
    count = getattr(backend, "device_count", None)
    if target.index is not None and callable(count) and target.index >= count():
        raise ConfigError(
            f"device={device!r}: there are {count()} {target.type} devices here "
            f"({target.type}:0 to {target.type}:{count() - 1})"
        )
    return target


def load_pretrained(
    path: str | Path,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    tokenizer: str | None = None,
    verify_weights: bool = True,
    *,
    option: str = PYTHON_OPTION,
) -> tuple[Any, Tokenizer]:
    """The model (eval mode) and tokenizer of an exported folder, a run folder (its newest
    checkpoint), an experiment folder (its newest run) or a ``.ckpt`` file of a run.

        model, tokenizer = lit_sparse.load_pretrained("exported/", device="cuda")
        ids = tokenizer.document_prefix + tokenizer.encode(document)

    A document is scored from its first token by conditioning it on
    ``tokenizer.document_prefix`` (the end-of-text id): training joins documents as
    ``doc EOS doc EOS ...``. The training length is ``model.config.context_length``
    (config.json's ``arch.context_length``).

    The tokenizer is checked against the weights (the digest the checkpoint or config.json
    records): a changed tokenizer.json is one line, as a changed model.safetensors is.

    Args:
        path: the folder or checkpoint.
        device: where to put the model (default: the CPU).
        dtype: e.g. ``"bfloat16"`` or ``torch.float16`` (default: as saved, float32).
        tokenizer: another tokenizer than the one the folder or the run names (used as
            asked, with a note when it is not the one the weights were trained with).
        verify_weights: check an exported folder's model.safetensors against the sha256 its
            config.json records; False loads weights changed on purpose (a fine-tune saved
            by another tool).
        option: how the caller names another tokenizer, in the messages (a tool built on
            this function passes its own, e.g. lm-eval's ``model_args tokenizer=...``).
    """
    torch_dtype = resolve_dtype(dtype)
    target = resolve_device(device)
    source = load_source(path, tokenizer, verify_weights=verify_weights, option=option)
    model = source.model.to(device=target, dtype=torch_dtype).eval()
    return model, source.tokenizer
