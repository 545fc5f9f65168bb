"""What ``generate`` runs: a model and its tokenizer from a run folder, a checkpoint (with the
run's config.yaml) or an exported folder (``python -m lit_sparse export``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lit_sparse.data.tokenizer import LoadedTokenizer, load_tokenizer, run_tokenizer
from lit_sparse.errors import ConfigError
from lit_sparse.io.pretrained import CONFIG_FILE

__all__ = ["ModelSource", "is_exported", "load_source"]


@dataclass
class ModelSource:
    """A model ready to generate from, and where it came from."""

    model: Any
    """The ``LanguageModel`` (eval mode)."""
    tokenizer: LoadedTokenizer
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
        return ModelSource(model, load_tokenizer(tokenizer or str(folder)), f"{folder} (exported)")
    run = lit_sparse.load_run(folder)
    if run.module is None:
        raise ConfigError(
            f"path={str(path)!r}: no checkpoint found ({run.path}/checkpoints/*.ckpt), and not "
            f"an exported folder ({CONFIG_FILE})"
        )
    step = "" if run.step is None else f" (step {run.step})"
    return ModelSource(
        run.module.model.eval(),
        load_tokenizer(tokenizer or run_tokenizer(run.config)),
        f"{run.checkpoint}{step}",
    )
