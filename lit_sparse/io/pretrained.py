"""The weights-only form of a model: what ``LanguageModel.save_pretrained`` writes and
``LanguageModel.from_pretrained`` reads (huggingface_hub's mixin calls these).

A folder (or a hub repository) holds:

- ``model.safetensors``: the state dict (no optimizer state, nothing pickled);
- ``config.json``: ``{"format", "arch": ModelConfig fields, "attention": {"class_path",
  "init_args"}}``; a plugin from another package is recorded by its class path, and loading
  names the package when it is not installed. Beside them the keys transformers reads
  (``model_type`` ``lit_sparse``, ``architectures``, ``auto_map``, the standard shape keys,
  ``training_length``; :mod:`lit_sparse.io.stock_formats`), and ``python -m lit_sparse
  export`` adds ``eos_token_id`` / ``bos_token_id``;
- ``configuration_lit_sparse.py``, ``modeling_lit_sparse.py``: the remote code that
  ``auto_map`` names (:mod:`lit_sparse.io.remote_code`);
- ``README.md``: a model card (``python -m lit_sparse export`` adds the run's results).

A dense or sliding-window model can instead be saved in a stock layout (``layout="llama"``
or ``"mistral"``: transformers' own names and config, no remote code); :func:`load` reads
those folders back as well.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from lit_sparse.errors import ConfigError
from lit_sparse.io import stock_formats
from lit_sparse.io.atomic import write_bytes, write_text
from lit_sparse.io.remote_code import AUTO_MAP, REMOTE_CODE

__all__ = [
    "CONFIG_FILE",
    "FORMAT",
    "LAYOUTS",
    "WEIGHTS_FILE",
    "describe_attention",
    "load",
    "model_card",
    "save",
]

FORMAT = "lit_sparse.io.pretrained/1"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
LAYOUTS = ("lit_sparse", *stock_formats.STOCK_CLASSES)


def save(
    model, folder: Path, *, layout: str = "lit_sparse", extra: dict[str, Any] | None = None
) -> list[str]:
    """``model.safetensors`` and ``config.json`` of ``model`` into ``folder`` (each written
    atomically), with the remote-code files in the ``lit_sparse`` layout; ``extra`` adds
    config.json keys (the export's EOS id). Returns the names of the files written."""
    from safetensors.torch import save as safetensors_bytes

    if layout not in LAYOUTS:
        raise ConfigError(f"layout={layout!r}: must be one of {', '.join(LAYOUTS)}")
    state = {name: t.detach().contiguous().cpu() for name, t in model.state_dict().items()}
    dtype = str(model.embedding.weight.dtype).removeprefix("torch.")
    lit_sparse_keys = {
        "format": FORMAT,
        "arch": model.config.to_dict(),
        "attention": model.attention.to_config(),
    }
    files = {}
    if layout == "lit_sparse":
        config = {
            **lit_sparse_keys,
            "model_type": "lit_sparse",
            "architectures": [stock_formats.LIT_SPARSE_CLASS],
            "auto_map": dict(AUTO_MAP),
            **stock_formats.shape_fields(model.config),
        }
        files.update(REMOTE_CODE)
    else:
        config = stock_formats.stock_config(layout, model.config, lit_sparse_keys)
        state = stock_formats.to_stock_names(state, model.config.n_layers)
    config.update({"torch_dtype": dtype, **(extra or {})})
    folder = Path(folder)
    write_bytes(folder / WEIGHTS_FILE, safetensors_bytes(state, metadata={"format": "pt"}))
    for name, text in files.items():
        write_text(folder / name, text)
    write_text(folder / CONFIG_FILE, json.dumps(config, indent=2, sort_keys=True) + "\n")
    return [WEIGHTS_FILE, *files, CONFIG_FILE]


def _lit_sparse_keys(model_id: str, config: Any) -> tuple[dict[str, Any], str | None]:
    """The format/arch/attention keys of a folder's config.json and its stock layout (None:
    lit_sparse's own names); anything else is one ConfigError line."""
    if isinstance(config, dict) and config.get("format") == FORMAT:
        return config, None
    if isinstance(config, dict) and config.get("model_type") in stock_formats.STOCK_CLASSES:
        keys = config.get("lit_sparse")
        if isinstance(keys, dict) and keys.get("format") == FORMAT:
            return keys, config["model_type"]
        raise ConfigError(
            f"{model_id!r}: a {config['model_type']} folder not written by lit_sparse (its "
            "config.json has no 'lit_sparse' keys); load it with transformers' "
            "AutoModelForCausalLM"
        )
    found = "no config.json" if config is None else "config.json is not an object"
    if isinstance(config, dict):
        found = f"config.json format {config.get('format')!r}"
    raise ConfigError(
        f"{model_id!r}: {found}; expected a folder written by save_pretrained or "
        f"`python -m lit_sparse export` (format {FORMAT!r})"
    )


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

    config, layout = _lit_sparse_keys(model_id, config)
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
    if layout is not None:
        state = stock_formats.from_stock_names(state, model.config.n_layers)
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


def model_card(
    model, title: str | None = None, sections: str = "", layout: str = "lit_sparse"
) -> str:
    """A short model card in Markdown with huggingface_hub's metadata header: the model's
    shape and attention, how to load it (lit_sparse and transformers, per ``layout``) and
    generate from it, and ``sections`` (the run's results, from ``python -m lit_sparse
    export``)."""
    config = model.config
    title = title or f"lit_sparse {type(model.attention).name or 'custom'} language model"
    shape = (
        f"{config.n_layers} layers, d_model {config.d_model}, {config.n_heads} query heads "
        f"and {config.n_kv_heads} key/value heads of {config.head_dim}, vocabulary "
        f"{config.vocab_size}, trained at {config.context_length} tokens"
    )
    library = "lit_sparse" if layout == "lit_sparse" else "transformers"
    header = f"---\nlibrary_name: {library}\ntags:\n- lit_sparse\n- sparse-attention\n"
    header += "- text-generation\n---\n"
    remote = ", trust_remote_code=True" if layout == "lit_sparse" else ""
    stock = stock_formats.STOCK_CLASSES.get(layout)
    loads_as = (
        f" (a stock `{stock}`: no remote code)" if stock else " (remote code: lit_sparse[hf])"
    )
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
        "```\n\n"
        f"In Hugging Face transformers{loads_as}:\n\n"
        "```python\n"
        "from transformers import pipeline\n"
        f'generator = pipeline("text-generation", model="THIS_FOLDER_OR_REPO"{remote})\n'
        "```\n" + (f"\n{sections.strip()}\n" if sections.strip() else "")
    )
