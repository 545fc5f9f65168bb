"""Which run ``fit --ckpt_path last`` continues: the one whose newest config has the same model,
data, seed and max_steps (ties drop a locked, then a finished run); :data:`RESUMABLE` may change."""

from __future__ import annotations

import copy
import functools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lit_sparse.errors import ConfigError
from lit_sparse.module import RESUMABLE_HPARAMS as RESUMABLE
from lit_sparse.runs.checkpoint_folders import METADATA
from lit_sparse.runs.folders import experiment_runs, run_checkpoint, run_config
from lit_sparse.runs.locks import lock_holder

_NOT_RUN_DATA = ("cache_dir", "num_workers")
"""Data options that do not change what a run trains on."""


def signature(config: dict[str, Any], exact: bool = True) -> dict[str, Any]:
    """A config dump's model, data, seed, steps (``exact=False``: not what a resume may change)."""
    model = copy.deepcopy(dict(config.get("model") or {}))
    model.pop("max_steps", None)  # linked from trainer.max_steps (absent from saved configs)
    if isinstance(model.get("arch"), dict):
        for linked in ("vocab_size", "context_length"):
            model["arch"].pop(linked, None)
    data = copy.deepcopy(config.get("data"))
    if isinstance(data, dict) and isinstance(data.get("init_args"), dict):
        for name in _NOT_RUN_DATA:
            data["init_args"].pop(name, None)
    found = {"model": model, "data": data, "seed_everything": config.get("seed_everything")}
    if exact:
        found["trainer.max_steps"] = (config.get("trainer") or {}).get("max_steps")
    else:
        for name in RESUMABLE:
            model.pop(name, None)
    return found


def _differences(here: Any, run: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    if isinstance(here, dict) and isinstance(run, dict):
        found = []
        for key in sorted(set(here) | set(run), key=str):
            name = f"{prefix}.{key}" if prefix else str(key)
            found += _differences(here.get(key), run.get(key), name)
        return found
    if isinstance(here, (list, tuple)) and isinstance(run, (list, tuple)):
        here, run = list(here), list(run)
    return [] if here == run else [(prefix, here, run)]


def _shown(differences: list[tuple[str, Any, Any]], limit: int = 3) -> str:
    parts = [f"{key} (run {run!r}, here {here!r})" for key, here, run in differences[:limit]]
    more = len(differences) - limit
    return ", ".join(parts) + (f" and {more} more" if more > 0 else "")


@dataclass
class _Candidate:
    path: Path
    checkpoint: Path
    config: dict[str, Any] | None

    @functools.cached_property
    def peek(self) -> tuple[Any, Any]:
        """The checkpoint's step and its schedule's end (not verified: only to choose)."""
        file = self.checkpoint  # a sharded checkpoint: its folder's meta.pt
        file = file / METADATA if file.is_dir() else file
        try:
            saved = torch.load(file, map_location="cpu", weights_only=True, mmap=True)
            return saved.get("global_step"), (saved.get("hyper_parameters") or {}).get("max_steps")
        except Exception:  # damaged: the chosen run's file is verified before use
            return None, None

    @property
    def finished(self) -> bool:
        step, end = self.peek
        return step is not None and end is not None and step >= end

    @property
    def holder(self) -> str | None:
        return lock_holder(self.path)

    def describe(self) -> str:
        step = self.peek[0]
        notes = [f"step {step}" if step is not None else "unreadable checkpoint"]
        if self.finished:
            notes.append("finished")
        if self.holder:
            notes.append(f"in use by {self.holder}")
        return f"{self.path} ({', '.join(notes)})"


def _narrow(candidates: list[_Candidate], use_locks: bool) -> list[_Candidate]:
    """Leave out runs another process is writing, then finished runs, while any remain."""
    tests = [lambda c: c.holder is None] if use_locks else []
    for keep in [*tests, lambda c: not c.finished]:
        kept = [c for c in candidates if keep(c)]
        if kept:
            candidates = kept
    return candidates


def choose_run(
    experiment: str | Path, command: dict[str, Any], use_locks: bool = True
) -> Path | None:
    """The checkpoint ``--ckpt_path last`` means for ``command`` (a config dump) in ``experiment``;
    None when it has no checkpoint yet; ConfigError naming the candidates, or the nearest run and
    what differs. ``use_locks=False`` (a launched process): keep the run rank 0 has locked."""
    experiment = Path(experiment)
    if command.get("seed_everything") is True:  # a random seed: the run's saved one counts
        command = {**command, "seed_everything": None}
    candidates = []
    for run in experiment_runs(experiment):
        if (checkpoint := run_checkpoint(run)) is not None:
            saved = run_config(run)
            if saved is not None and command.get("seed_everything") is None:
                saved = {**saved, "seed_everything": None}
            candidates.append(_Candidate(run, checkpoint, saved))
    if not candidates:
        print(f"no last.ckpt under {experiment}: starting a new run", file=sys.stderr)
        return None
    readable = [c for c in candidates if c.config is not None]
    compared = [(c, _differences(signature(command), signature(c.config))) for c in readable]
    exact = [c for c, found in compared if not found]
    if exact:
        chosen = _narrow(exact, use_locks)
        if len(chosen) == 1:
            return chosen[0].checkpoint
        raise ConfigError(
            f"ckpt_path='last' is ambiguous: {len(chosen)} runs under {experiment} were "
            f"started with this config: {'; '.join(c.describe() for c in chosen)}; resume one "
            f"by its folder, e.g. --ckpt_path {chosen[-1].path}"
        )
    if not readable:
        raise ConfigError(
            f"ckpt_path='last': the runs under {experiment} with a checkpoint have no readable "
            f"config.yaml ({'; '.join(str(c.path) for c in candidates)}), so none can be "
            f"matched to this command: resume one by its folder, e.g. --ckpt_path "
            f"{candidates[-1].path}, or leave out --ckpt_path to start a new run"
        )
    near = [
        (c, found)
        for c, found in compared
        if not _differences(signature(command, exact=False), signature(c.config, exact=False))
    ]
    if near:
        listed = "; ".join(f"{c.path} differs in {_shown(d)}" for c, d in near)
        raise ConfigError(
            f"ckpt_path='last': no run under {experiment} was started with this exact "
            f"config ({listed}): to resume it with this command's values give its folder, "
            f"--ckpt_path {near[-1][0].path}; to start a new run leave out --ckpt_path"
        )
    nearest, found = min(reversed(compared), key=lambda pair: len(pair[1]))
    others = len(readable) - 1
    more = f" ({others} other run{'s' if others > 1 else ''} there differ too)" if others else ""
    raise ConfigError(
        f"ckpt_path='last': no run under {experiment} was started with this exact config "
        f"(the nearest, {nearest.path}, differs in {_shown(found)}){more}: a run of another "
        "model, data or seed cannot be resumed by this command; to start a new run leave out "
        "--ckpt_path"
    )


def changed_values(
    command_model: dict[str, Any], checkpoint_hparams: dict[str, Any]
) -> list[tuple[str, Any, Any]]:
    """(``model.<name>``, checkpoint's value, command's value) per resumable value changed."""
    return [
        (f"model.{name}", checkpoint_hparams[name], command_model[name])
        for name in RESUMABLE
        if name in command_model
        and name in checkpoint_hparams
        and _differences(command_model[name], checkpoint_hparams[name])
    ]


def describe_changes(changes: list[tuple[str, Any, Any]]) -> str:
    """``model.lr=1e-05 (was 0.0003), ...``."""
    return ", ".join(f"{key}={new!r} (was {old!r})" for key, old, new in changes)
