"""``lit_sparse.load_run(path)``: a run for analysis (no CLI, jsonargparse or TensorBoard)."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from lit_sparse.errors import ConfigError, DamagedFileError, RunNotFoundError
from lit_sparse.io.yaml_files import load_yaml
from lit_sparse.legacy import translate
from lit_sparse.runs.checkpoint_files import checkpoint_tokenizer, is_checkpoint, read_checkpoint
from lit_sparse.runs.folders import experiment_runs, run_checkpoint

if TYPE_CHECKING:  # the results' modules import torchmetrics: read_* imports them when used
    from lit_sparse.evaluation.extrapolation import ExtrapolationResult
    from lit_sparse.evaluation.recall import RecallResult

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AlphaHistory:
    """The alpha of every layer that has one, over optimizer steps; unpacks as
    ``steps, alphas = history``."""

    steps: np.ndarray
    """(S,) optimizer steps."""
    alphas: np.ndarray
    """(S, A) alpha of each such layer at each step (A = L unless a hybrid's layers lack one)."""
    layers: tuple[int, ...] = ()
    """The A layers, in column order."""

    def __iter__(self):
        return iter((self.steps, self.alphas))


@dataclass
class Run:
    """Everything one run left behind; missing pieces are None."""

    path: Path
    """The run directory."""
    checkpoint: Path | None
    """The checkpoint the model and the callback state come from."""
    config: dict[str, Any]
    """config.yaml of the run (the checkpoint's hyperparameters when there is none)."""
    module: Any = None
    """The LitLanguageModel with the checkpoint's weights, in eval mode, on the CPU."""
    network: Any = None
    """The LanguageModel alone (``load_run(..., load_model="network")``: without Lightning)."""
    step: int | None = None
    """Optimizer step of the checkpoint."""
    alpha_trajectory: AlphaHistory | None = None
    position_loss: dict[str, Any] | None = None
    """position_loss.json: ``edges``, ``sets`` {set: [bin values]}, ``history``..."""
    extrapolation: ExtrapolationResult | None = None
    recall: RecallResult | None = None
    """recall.json: accuracy on a recall task's held-out sets (RecallEvaluation)."""
    tokenizer_sha256: str | None = None
    """The sha256 of the tokenizer the checkpoint was trained with (None: not recorded)."""

    @property
    def name(self) -> str:
        """The run as TensorBoard names it, e.g. ``quickstart/coprime/version_0``."""
        return run_name(self.path)

    @property
    def model(self):
        """The LanguageModel (None without a checkpoint)."""
        return self.network if self.module is None else self.module.model

    def distances(self, length: int | None = None) -> list[list[int]]:
        """Each layer's attended distances at ``length`` (default: the training length)."""
        if self.model is None:
            raise ValueError(f"run {self.path} has no checkpoint: no model to ask")
        return self.model.distances(length)


def run_name(path: Path) -> str:
    """A run's path under ``$LIT_SPARSE_RUNS`` or the nearest ``runs``, else ``<parent>/<run>``."""
    path = Path(path).absolute()
    under = os.environ.get(RUNS_VARIABLE)
    roots = [Path(under).expanduser().absolute()] if under else []
    roots += [parent for parent in path.parents if parent.name == "runs"]
    for root in roots:
        if root in path.parents:
            return path.relative_to(root).as_posix()
    return f"{path.parent.name}/{path.name}"


def resolve_run_dir(path: Path, version: int | str | None = None) -> Path:
    """A run directory, or an experiment's ``version_N`` (``version``; default: the newest
    with a checkpoint, else the newest, said in one line when there was a choice)."""
    markers = ("checkpoints", "config.yaml", "hparams.yaml")
    if version is None and (any((path / m).exists() for m in markers) or any(path.glob("*.json"))):
        return path
    versions = experiment_runs(path)
    if version is not None:
        name = version if str(version).startswith("version_") else f"version_{version}"
        chosen = path / name
        if chosen not in versions:
            have = ", ".join(v.name for v in versions) or "none"
            raise RunNotFoundError(
                f"load_run: {path} has no {name} (version={version!r}); its versions: {have}"
            )
        return chosen
    trained = [v for v in versions if run_checkpoint(v) is not None]
    picked = (trained or versions or [path])[-1]
    if len(versions) > 1:
        which = "the newest with a checkpoint" if trained else "the newest"
        log.warning(
            "load_run: %s has %d versions (%s); loaded %s, %s (load_run(path, version=N) or "
            "the version's folder loads another)",
            path, len(versions), ", ".join(v.name for v in versions), picked.name, which,
        )  # fmt: skip
    return picked


find_checkpoint = run_checkpoint
"""``checkpoints/last.ckpt`` of a run, else its newest checkpoint, else None."""


def read_result_json(path: str | Path) -> dict[str, Any] | None:
    """A run's result file as a dict (None if missing; DamagedFileError naming it if invalid)."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        values = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise DamagedFileError(
            f"{path}: not a readable result file ({type(err).__name__}: {err}); it is "
            "truncated or damaged: delete it and evaluate again (fit --ckpt_path <run folder> "
            "completes a finished run's end-of-fit evaluation)"
        ) from None
    if not isinstance(values, dict):
        raise DamagedFileError(
            f"{path}: expected a JSON object, got {type(values).__name__}; delete it and "
            "evaluate again"
        )
    return values


def read_extrapolation(path: str | Path) -> ExtrapolationResult | None:
    """An ``extrapolation.json`` (None if missing; DamagedFileError naming it if invalid)."""
    from lit_sparse.evaluation.extrapolation import ExtrapolationResult

    return _read_table(path, ExtrapolationResult, "an extrapolation table")


def read_recall(path: str | Path) -> RecallResult | None:
    """A ``recall.json`` (None if missing; DamagedFileError naming it if invalid)."""
    if not Path(path).exists():
        return None
    from lit_sparse.evaluation.recall import RecallResult  # torchmetrics: only when there

    return _read_table(path, RecallResult, "a recall table")


def _read_table(path: str | Path, table: type, what: str):
    saved = read_result_json(path)
    if saved is None:
        return None
    try:
        return table.from_dict(saved)
    except (ConfigError, KeyError, TypeError, ValueError, AttributeError) as err:
        raise DamagedFileError(
            f"{path}: not {what} ({type(err).__name__}: {err}); delete it and evaluate again"
        ) from None


def _callback_state(checkpoint: dict[str, Any], name: str) -> dict[str, Any] | None:
    for key, state in (checkpoint.get("callbacks") or {}).items():
        if str(key) == name or str(key).startswith(name + "{"):
            return state
    return None


def _alpha_history(state: dict[str, Any] | None) -> AlphaHistory | None:
    if not state or not state.get("steps"):
        return None
    alphas = np.asarray(state["alphas"], dtype=np.float64)
    layers = state.get("layers")  # absent before hybrids: every layer
    layers = tuple(range(alphas.shape[-1])) if layers is None else tuple(map(int, layers))
    return AlphaHistory(np.asarray(state["steps"], dtype=np.int64), alphas, layers)


def build_module(checkpoint: dict[str, Any]):
    """The LitLanguageModel of a checkpoint dict, from its plain hyperparameters, in eval mode."""
    from lit_sparse.module import LitLanguageModel

    hparams = dict(checkpoint.get("hyper_parameters") or {})
    for key in ("_instantiator", "_class_path"):
        hparams.pop(key, None)
    module = LitLanguageModel(**hparams)
    module.load_state_dict(checkpoint["state_dict"])
    return module.eval()


def build_network(checkpoint: dict[str, Any]):
    """The LanguageModel of a checkpoint dict (its ``model.`` weights), in eval mode, built
    from the plain hyperparameters without the LightningModule around it."""
    from lit_sparse.attention import build_attention
    from lit_sparse.config import ModelConfig
    from lit_sparse.model import LanguageModel

    hparams = checkpoint.get("hyper_parameters") or {}
    arch = hparams.get("arch")
    arch = ModelConfig.from_dict(arch) if isinstance(arch, dict) else ModelConfig()
    model = LanguageModel(arch, build_attention(hparams.get("attention")))
    prefix = "model."
    weights = checkpoint["state_dict"]
    model.load_state_dict({k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)})
    return model.eval()


RUNS_VARIABLE = "LIT_SPARSE_RUNS"


def resolve_run_path(path: str | Path) -> Path:
    """``path`` if it exists or is absolute, else under ``$LIT_SPARSE_RUNS`` if there."""
    path = Path(path).expanduser()
    under = os.environ.get(RUNS_VARIABLE)
    if path.exists() or path.is_absolute() or not under:
        return path
    candidate = Path(under).expanduser() / path
    return candidate if candidate.exists() else path


def runs_near(path: Path, limit: int = 5) -> list[str]:
    """The newest run folders under the nearest existing folder above a missing ``path``."""
    base = next((p for p in path.parents if p.is_dir()), Path("."))
    found = [
        folder
        for depth in range(1, 5)
        for folder in base.glob("/".join(["*"] * depth))
        if folder.name.startswith("version_") and (folder / "checkpoints").is_dir()
    ]
    found.sort(key=lambda folder: folder.stat().st_mtime, reverse=True)
    return [str(folder) for folder in found[:limit]]


def load_run(
    path: str | Path,
    load_model: bool | Literal["network"] = True,
    version: int | str | None = None,
) -> Run:
    """Load a run for analysis.

    Args:
        path: ``runs/<name>/version_N``, ``runs/<name>`` (its newest version with a
            checkpoint, named in a warning when it has several) or a ``.ckpt`` file (the run
            around it); a relative path is looked up in the current folder, then under
            ``$LIT_SPARSE_RUNS``.
        load_model: rebuild the model from the checkpoint (False: state and files only;
            ``"network"``: the LanguageModel alone, ``Run.model``, without importing
            Lightning: what generating or exporting needs).
        version: with ``runs/<name>``, the version to load (``3`` or ``"version_3"``).
    """
    path = resolve_run_path(path)
    if version is not None and not (path.is_dir() and experiment_runs(path)):
        raise ConfigError(
            f"load_run: version={version!r} picks a version_N folder of an experiment folder; "
            f"{path} has none"
        )
    if is_checkpoint(path):  # a file, or a sharded checkpoint's folder
        checkpoint_path: Path | None = path
        run_dir = path.parent.parent if path.parent.name == "checkpoints" else path.parent
    elif path.is_dir():
        run_dir = resolve_run_dir(path, version)
        checkpoint_path = run_checkpoint(run_dir)
    else:
        under = os.environ.get(RUNS_VARIABLE)
        searched = f"{Path.cwd()}" + (f" and ${RUNS_VARIABLE}={under}" if under else "")
        nearby = runs_near(path)
        raise RunNotFoundError(
            f"load_run: {path} is neither a run directory nor a checkpoint (relative paths "
            f"are looked up in {searched}; set {RUNS_VARIABLE} to a folder of runs to look "
            "there too)" + (f"; runs there: {', '.join(nearby)}" if nearby else "")
        )

    # verified: a damaged file is refused
    checkpoint = {} if checkpoint_path is None else read_checkpoint(checkpoint_path)
    if checkpoint.get("hyper_parameters"):  # an earlier version's: today's form, with a note
        where = f"{checkpoint_path} (hyper_parameters)"
        checkpoint["hyper_parameters"] = translate(checkpoint["hyper_parameters"], where)
    config_file = run_dir / "config.yaml"
    if config_file.is_file():
        config = translate(load_yaml(config_file, "run config"), str(config_file))
    else:
        config = {"model": dict(checkpoint.get("hyper_parameters") or {})}

    # a checkpoint file's own state; for a run, the file the callback writes at the end when
    # it goes further (the final checkpoint is saved before the run's last alphas are taken)
    trajectory = _alpha_history(_callback_state(checkpoint, "AlphaTrajectory"))
    written = _alpha_history(read_result_json(run_dir / "alpha_trajectory.json"))
    if written is not None and (
        trajectory is None
        or (not is_checkpoint(path) and int(written.steps[-1]) > int(trajectory.steps[-1]))
    ):
        trajectory = written
    position = read_result_json(run_dir / "position_loss.json")
    state = _callback_state(checkpoint, "PositionLoss")
    if position is None and state and state.get("history"):
        latest = state["history"][-1]
        position = {"step": latest["step"], "sets": latest["sets"], "history": state["history"]}
    extrapolation = read_extrapolation(run_dir / "extrapolation.json")
    return Run(
        path=run_dir,
        checkpoint=checkpoint_path,
        config=config,
        module=build_module(checkpoint) if checkpoint and load_model is True else None,
        network=build_network(checkpoint) if checkpoint and load_model == "network" else None,
        step=checkpoint.get("global_step"),
        alpha_trajectory=trajectory,
        position_loss=position,
        extrapolation=extrapolation,
        recall=read_recall(run_dir / "recall.json"),
        tokenizer_sha256=checkpoint_tokenizer(checkpoint) if checkpoint else None,
    )
