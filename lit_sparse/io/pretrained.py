"""The weights-only form of a model: what ``LanguageModel.save_pretrained`` writes and
``LanguageModel.from_pretrained`` reads (huggingface_hub's mixin calls these).

A folder (or a hub repository) holds:

- ``model.safetensors``: the state dict (no optimizer state, nothing pickled);
- ``config.json``: ``{"format", "arch": ModelConfig fields, "attention": {"class_path",
  "init_args"}}``; a plugin from another package is recorded by its class path, and loading
  names the package when it is not installed;
- ``README.md``: a model card (``python -m lit_sparse export`` adds the run's results).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from lit_sparse.errors import ConfigError
from lit_sparse.io.atomic import write_bytes, write_text

__all__ = ["CONFIG_FILE", "FORMAT", "WEIGHTS_FILE", "describe_attention", "load", "model_card"]

FORMAT = "lit_sparse.io.pretrained/1"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"


def save(model, folder: Path) -> None:
    """``model.safetensors`` and ``config.json`` of ``model`` into ``folder`` (each written
    atomically)."""
    from safetensors.torch import save as safetensors_bytes

    state = {name: t.detach().contiguous().cpu() for name, t in model.state_dict().items()}
    config = {
        "format": FORMAT,
        "arch": model.config.to_dict(),
        "attention": model.attention.to_config(),
    }
    write_bytes(Path(folder) / WEIGHTS_FILE, safetensors_bytes(state, metadata={"format": "pt"}))
    write_text(Path(folder) / CONFIG_FILE, json.dumps(config, indent=2, sort_keys=True) + "\n")


def load(
    cls,
    model_id: str,
    config: dict[str, Any] | None,
    *,
    map_location: str = "cpu",
    strict: bool = True,
    revision: str | None = None,
    cache_dir: str | Path | None = None,
    force_download: bool = False,
    local_files_only: bool = False,
    token: str | bool | None = None,
):
    """The model of folder or hub repository ``model_id`` whose config.json is ``config``,
    its weights loaded (strictly: a missing or extra tensor is an error), in eval mode."""
    from safetensors.torch import load_file

    if not isinstance(config, dict) or config.get("format") != FORMAT:
        found = "no config.json" if config is None else "config.json is not an object"
        if isinstance(config, dict):
            found = f"config.json format {config.get('format')!r}"
        raise ConfigError(
            f"{model_id!r}: {found}; expected a folder written by save_pretrained or "
            f"`python -m lit_sparse export` (format {FORMAT!r})"
        )
    model = cls.from_config(config)
    if os.path.isdir(model_id):
        weights = os.path.join(model_id, WEIGHTS_FILE)
        if not os.path.isfile(weights):
            raise ConfigError(f"{model_id!r}: no {WEIGHTS_FILE} beside its config.json")
    else:
        from huggingface_hub import hf_hub_download

        weights = hf_hub_download(
            repo_id=model_id,
            filename=WEIGHTS_FILE,
            revision=revision,
            cache_dir=cache_dir,
            force_download=force_download,
            token=token,
            local_files_only=local_files_only,
        )
    state = load_file(weights, device=str(map_location))
    result = model.load_state_dict(state, strict=False)
    problems = [f"missing {k}" for k in result.missing_keys]
    problems += [f"unexpected {k}" for k in result.unexpected_keys]
    if strict and problems:
        raise ConfigError(
            f"{model_id!r}: {WEIGHTS_FILE} does not fit its config.json ({', '.join(problems)})"
        )
    return model.to(torch.device(map_location)).eval()


def describe_attention(attention) -> str:
    """A plugin in one line: its registry name (or class path) and its options."""
    config = attention.to_config()
    name = getattr(type(attention), "name", "") or config["class_path"]
    options = ", ".join(f"{k}={v!r}" for k, v in config["init_args"].items())
    return f"{name} ({options})" if options else name


def model_card(model, title: str | None = None, sections: str = "") -> str:
    """A short model card in Markdown with huggingface_hub's metadata header: the model's
    shape and attention, how to load it and generate from it, and ``sections`` (the run's
    results, from ``python -m lit_sparse export``)."""
    config = model.config
    title = title or f"lit_sparse {type(model.attention).name or 'custom'} language model"
    shape = (
        f"{config.n_layers} layers, d_model {config.d_model}, {config.n_heads} query heads "
        f"and {config.n_kv_heads} key/value heads of {config.head_dim}, vocabulary "
        f"{config.vocab_size}, trained at {config.context_length} tokens"
    )
    header = "---\nlibrary_name: lit_sparse\ntags:\n- lit_sparse\n- sparse-attention\n"
    header += "- text-generation\n---\n"
    return (
        f"{header}\n# {title}\n\n"
        f"A decoder-only language model ({model.num_parameters():,} parameters: {shape}) "
        f"whose attention is `{describe_attention(model.attention)}`.\n\n"
        "## Use\n\n"
        "```python\n"
        "import lit_sparse\n"
        'model = lit_sparse.LanguageModel.from_pretrained("THIS_FOLDER_OR_REPO")\n'
        "```\n\n"
        "```bash\n"
        'python -m lit_sparse generate THIS_FOLDER --prompt "Once upon a time"\n'
        "```\n" + (f"\n{sections.strip()}\n" if sections.strip() else "")
    )
