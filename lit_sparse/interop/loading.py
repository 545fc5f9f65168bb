"""A model and its tokenizer from a run folder, a checkpoint or an exported folder, the tokenizer
checked against the weights' record (one named on purpose: used, with a note when it differs)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lit_sparse.data.tokenizer import Tokenizer, run_tokenizer
from lit_sparse.errors import ConfigError
from lit_sparse.formats import pretrained

log = logging.getLogger(__name__)

DTYPES = {
    **dict.fromkeys(("float32", "fp32"), torch.float32),
    **dict.fromkeys(("bfloat16", "bf16"), torch.bfloat16),
    **dict.fromkeys(("float16", "fp16", "half"), torch.float16),
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
    task: str | None = None
    """The synthetic task a run was trained on (its tokens are the task's ids, not text);
    None for a run on text and for an exported folder."""


def synthetic_task(config: dict) -> str | None:
    """The synthetic task a run's config trains (its registered name, else its class name),
    or None for text data."""
    data = config.get("data") if isinstance(config, dict) else None
    class_path = data.get("class_path") if isinstance(data, dict) else None
    if not isinstance(class_path, str) or class_path.startswith("lit_sparse.data."):
        return None  # text data (lit_sparse.data holds no task): no task module imported
    from lit_sparse.io.class_paths import import_class
    from lit_sparse.tasks import TASKS, RecallDataModule, list_tasks

    synthetic = list_tasks("synthetic")
    cls = TASKS.get(class_path) if class_path in synthetic else import_class(class_path)
    if not (isinstance(cls, type) and issubclass(cls, RecallDataModule)):
        return None
    return vars(cls).get("name") or cls.__name__  # a subclass: its own name


def is_exported(path: Path) -> bool:
    """Whether ``path`` is a folder written by ``save_pretrained`` / ``export``."""
    return path.is_dir() and (path / pretrained.CONFIG_FILE).is_file()


def _note_other_tokenizer(named: str, loaded: Tokenizer, trained: Any, weights: str) -> None:
    if isinstance(trained, str) and trained != loaded.sha256:
        log.warning(
            "note: the tokenizer named (%r, sha256 %s...) is not the one %s records (%s...); "
            "using it as asked",
            named, loaded.sha256[:12], weights, trained[:12],
        )  # fmt: skip


def run_tokenizer_checked(run, tokenizer: str | None = None, option: str = PYTHON_OPTION):
    """A loaded run's tokenizer (its config.yaml's, checked against the checkpoint's), or
    ``tokenizer`` on purpose; ``option``: how the caller names another, for the message."""
    from lit_sparse.runs.checkpoint_files import check_tokenizer

    spec = tokenizer or run_tokenizer(run.config)
    loaded = Tokenizer.from_pretrained(spec)
    if tokenizer is None:
        hint = (
            "it changed since training: restore the run's tokenizer, or choose another on "
            f"purpose with {option}"
        )
        check_tokenizer(run.tokenizer_sha256, loaded.sha256, spec, run.checkpoint, hint=hint)
    else:
        _note_other_tokenizer(tokenizer, loaded, run.tokenizer_sha256, f"{run.checkpoint}")
    return loaded


def _folder_tokenizer(folder: Path, tokenizer: str | None, option: str) -> Tokenizer:
    """An exported folder's tokenizer, checked against config.json; ``tokenizer``: another."""
    records = (pretrained.lit_sparse_keys(pretrained.read_config(folder)) or ({}, None))[0]
    if tokenizer is not None:
        loaded = Tokenizer.from_pretrained(tokenizer)
        recorded = records.get(pretrained.TOKENIZER_SHA256)
        _note_other_tokenizer(tokenizer, loaded, recorded, str(folder))
        return loaded
    file = folder / pretrained.TOKENIZER_FILE
    if not file.is_file():
        raise ConfigError(
            f"path={str(folder)!r}: the exported folder has no {file.name}; name the "
            f"model's tokenizer with {option}"
        )
    loaded = Tokenizer.from_pretrained(str(folder))
    pretrained.check_tokenizer_digest(file, records, loaded.sha256, option)
    return loaded


def load_source(
    path: str | Path,
    tokenizer: str | None = None,
    *,
    verify_weights: bool = True,
    option: str = PYTHON_OPTION,
) -> ModelSource:
    """The model and tokenizer of a run, experiment, ``.ckpt`` or exported folder."""
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
    from lit_sparse.runs.analysis import load_run

    run = load_run(folder, load_model="network")
    if run.model is None:
        raise ConfigError(
            f"path={str(path)!r}: no checkpoint found ({run.path}/checkpoints/*.ckpt), and not "
            f"an exported folder ({pretrained.CONFIG_FILE})"
        )
    step = "" if run.step is None else f" (step {run.step})"
    loaded = run_tokenizer_checked(run, tokenizer, option)
    task = synthetic_task(run.config)
    return ModelSource(run.model, loaded, f"{run.checkpoint}{step}", task)


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    """A torch dtype from a dtype or its name (``auto`` or None: as saved), else ConfigError."""
    allowed = f"allowed: auto, {', '.join(DTYPES)}"
    if isinstance(dtype, torch.dtype):
        if dtype not in DTYPES.values():
            raise ConfigError(f"dtype={dtype}: the weights are floating point; {allowed}")
        return dtype
    name = "auto" if dtype is None else str(dtype).removeprefix("torch.").lower()
    if name != "auto" and name not in DTYPES:
        raise ConfigError(f"dtype={dtype!r}: {allowed}")
    return DTYPES.get(name)


def resolve_device(device: str | torch.device | None) -> torch.device:
    """A torch device this machine has (default: the CPU), else one ConfigError line."""
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
    """The model (eval mode) and tokenizer of an exported folder, a run folder, an experiment folder
    or a ``.ckpt`` file of a run; the tokenizer is checked against the weights' recorded digest.

        model, tokenizer = lit_sparse.load_pretrained("exported/", device="cuda")
        ids = tokenizer.document_prefix + tokenizer.encode(document)

    Args:
        device: where to put the model (default: the CPU).
        dtype: e.g. ``"bfloat16"`` or ``torch.float16`` (default: as saved, float32).
        tokenizer: another tokenizer (with a note when the weights were trained with another).
        verify_weights: check an exported folder's weights' sha256 (False: changed on purpose).
        option: how the caller names another tokenizer, in the messages.
    """
    torch_dtype = resolve_dtype(dtype)
    target = resolve_device(device)
    source = load_source(path, tokenizer, verify_weights=verify_weights, option=option)
    model = source.model.to(device=target, dtype=torch_dtype).eval()
    return model, source.tokenizer
