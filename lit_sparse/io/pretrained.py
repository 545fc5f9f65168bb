"""The weights-only form of a model: what ``LanguageModel.save_pretrained`` writes and
``LanguageModel.from_pretrained`` reads (huggingface_hub's mixin calls these).

A folder (or a hub repository) holds:

- ``model.safetensors``: the state dict (no optimizer state, nothing pickled);
- ``config.json``: ``{"format", "arch": ModelConfig fields, "attention": {"class_path",
  "init_args"}}``; a plugin from another package is recorded by its class path, and loading
  names the package when it is not installed. Beside them the keys transformers reads
  (``model_type`` ``lit_sparse``, ``architectures``, ``auto_map``, the standard shape keys,
  ``training_length``; :mod:`lit_sparse.io.stock_formats`), and ``python -m lit_sparse
  export`` adds ``eos_token_id`` / ``bos_token_id``. Two keys guard the folder:
  ``weights_sha256`` (of model.safetensors, checked on load like a checkpoint's CRCs: a
  changed byte is one line naming the file) and ``trained_attention`` (the attention config
  and training length the weights were trained with, and their digest: loading a folder
  whose attention was edited since warns in one line naming the fields);
- ``configuration_lit_sparse.py``, ``modeling_lit_sparse.py``: the remote code that
  ``auto_map`` names (:mod:`lit_sparse.io.remote_code`);
- ``README.md``: a model card (``python -m lit_sparse export`` adds the run's results).

A dense or sliding-window model can instead be saved in a stock layout (``layout="llama"``
or ``"mistral"``: transformers' own names and config, no remote code); :func:`load` reads
those folders back as well.

A damaged folder is one line naming the file, never a traceback: config.json that is not
a JSON object, a truncated or altered model.safetensors, weights whose shapes do not fit
config.json. A user who changed the weights on purpose loads them with
``LanguageModel.from_pretrained(folder, verify_weights=False)`` and saves them again
(``save_pretrained`` records the new digest).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import torch

from lit_sparse.errors import ConfigError, DamagedFileError
from lit_sparse.io import stock_formats
from lit_sparse.io.atomic import write_bytes, write_text
from lit_sparse.io.remote_code import AUTO_MAP, REMOTE_CODE

__all__ = [
    "CONFIG_FILE",
    "FORMAT",
    "LAYOUTS",
    "TRAINED_ATTENTION",
    "WEIGHTS_FILE",
    "WEIGHTS_SHA256",
    "attention_changes",
    "describe_attention",
    "file_sha256",
    "load",
    "model_card",
    "read_config",
    "save",
    "trained_attention",
]

log = logging.getLogger(__name__)

FORMAT = "lit_sparse.io.pretrained/1"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
LAYOUTS = ("lit_sparse", *stock_formats.STOCK_CLASSES)
WEIGHTS_SHA256 = "weights_sha256"
"""config.json key: the sha256 of model.safetensors (hex)."""
TRAINED_ATTENTION = "trained_attention"
"""config.json key: ``{"attention", "context_length", "sha256"}``, what the weights were
trained with (:func:`trained_attention`)."""
FREE_AT_LOAD = ("new_offsets",)
"""Attention options a user may choose at load (the policy beyond the training length)."""


# --------------------------------------------------------------- what guards the folder
def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file (hex), read in 1 MB pieces."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for piece in iter(lambda: handle.read(1 << 20), b""):
            digest.update(piece)
    return digest.hexdigest()


def _record_digest(attention: dict[str, Any], context_length: Any) -> str:
    text = json.dumps({"attention": attention, "context_length": context_length}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def trained_attention(model) -> dict[str, Any]:
    """What ``model``'s weights were trained with: the record it was loaded with, if any
    (so saving a model loaded with another ``new_offsets`` keeps the original), else its
    own attention config and training length."""
    record = getattr(model, "trained_attention", None)
    if isinstance(record, dict):
        return record
    attention, length = model.attention.to_config(), model.config.context_length
    return {
        "attention": attention,
        "context_length": length,
        "sha256": _record_digest(attention, length),
    }


def attention_changes(config: dict[str, Any], attention: dict[str, Any]) -> list[str]:
    """How the attention a folder builds (``attention``: its ``to_config()``) and its training
    length differ from the ``trained_attention`` record in ``config``: ``window=4 (trained
    with 8)`` per changed field, ``new_offsets`` exempt; one entry when the record itself was
    edited (its digest no longer matches). Empty without a record (an older folder)."""
    record = config.get(TRAINED_ATTENTION)
    if not isinstance(record, dict):
        return []
    trained, length = record.get("attention") or {}, record.get("context_length")
    changes = []
    if record.get("sha256") != _record_digest(trained, length):
        changes.append(f"the {TRAINED_ATTENTION} record itself (its sha256 does not match)")
    if attention.get("class_path") != trained.get("class_path"):
        changes.append(f"class_path={attention.get('class_path')!r} (trained with "
                       f"{trained.get('class_path')!r})")  # fmt: skip
    now, before = attention.get("init_args") or {}, trained.get("init_args") or {}
    for name in sorted(set(now) | set(before)):
        if name not in FREE_AT_LOAD and now.get(name) != before.get(name):
            changes.append(f"{name}={now.get(name)!r} (trained with {before.get(name)!r})")
    here = (config.get("arch") or {}).get("context_length")
    if here != length:
        changes.append(f"arch.context_length={here!r} (trained with {length!r})")
    return changes


def read_config(folder: str | os.PathLike) -> dict[str, Any] | None:
    """A local folder's config.json as a dict (None: the folder has none); one
    DamagedFileError line naming it when it is not a JSON object."""
    path = Path(folder) / CONFIG_FILE
    if not path.is_file():
        return None
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise DamagedFileError(
            f"{str(path)!r} is not valid JSON ({type(err).__name__}: {err}): the folder's "
            "config is damaged; export the run again"
        ) from None
    if not isinstance(values, dict):
        raise DamagedFileError(
            f"{str(path)!r}: expected a JSON object, got {type(values).__name__}; export the "
            "run again"
        )
    return values


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
    if layout != "lit_sparse":
        state = stock_formats.to_stock_names(state, model.config.n_layers)
    weights = safetensors_bytes(state, metadata={"format": "pt"})
    dtype = str(model.embedding.weight.dtype).removeprefix("torch.")
    lit_sparse_keys = {
        "format": FORMAT,
        "arch": model.config.to_dict(),
        "attention": model.attention.to_config(),
        WEIGHTS_SHA256: hashlib.sha256(weights).hexdigest(),
        TRAINED_ATTENTION: trained_attention(model),
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
    config.update({"torch_dtype": dtype, **(extra or {})})
    folder = Path(folder)
    write_bytes(folder / WEIGHTS_FILE, weights)
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
    verify_weights: bool = True,
    revision: str | None = None,
    cache_dir: str | Path | None = None,
    force_download: bool = False,
    local_files_only: bool = False,
    token: str | bool | None = None,
):
    """The model of folder or hub repository ``model_id`` whose config.json is ``config``,
    its weights loaded (strictly: a missing or extra tensor is an error), in eval mode.

    ``verify_weights``: check model.safetensors against the sha256 config.json records
    (False: load weights changed on purpose). A mismatch, a file that is not safetensors
    or weights that do not fit config.json are one line naming the file; an attention
    config edited since training loads with a one-line warning naming the fields."""
    config, layout = _lit_sparse_keys(model_id, config)
    try:
        model = cls.from_config(config)
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(
            f"{model_id!r}: its {CONFIG_FILE} does not build a model ({err})"
        ) from None
    weights = _weights_file(model_id, revision, cache_dir, force_download, local_files_only, token)
    if verify_weights and isinstance(config.get(WEIGHTS_SHA256), str):
        if file_sha256(weights) != config[WEIGHTS_SHA256]:
            raise DamagedFileError(
                f"{str(weights)!r} does not match the sha256 its {CONFIG_FILE} records (a "
                "changed or truncated file): export the run again; weights changed on purpose "
                "load with LanguageModel.from_pretrained(..., verify_weights=False), and "
                "save_pretrained records their sha256"
            )
    state = _read_weights(weights, map_location)
    if layout is not None:
        state = stock_formats.from_stock_names(state, model.config.n_layers)
    _check_fit(model, state, model_id, strict)
    model.load_state_dict(state, strict=False)
    changes = attention_changes(config, model.attention.to_config())
    if changes:
        log.warning(
            "warning: %r: its %s attention differs from what the weights were trained with: "
            "%s; the model attends other keys than in training",
            model_id, CONFIG_FILE, ", ".join(changes),
        )  # fmt: skip
    if isinstance(config.get(TRAINED_ATTENTION), dict):
        model.trained_attention = config[TRAINED_ATTENTION]
    return model.to(torch.device(map_location)).eval()


def _weights_file(model_id, revision, cache_dir, force_download, local_files_only, token) -> str:
    if os.path.isdir(model_id):
        weights = os.path.join(model_id, WEIGHTS_FILE)
        if not os.path.isfile(weights):
            raise ConfigError(f"{model_id!r}: no {WEIGHTS_FILE} beside its config.json")
        return weights
    from huggingface_hub import hf_hub_download

    return hf_hub_download(
        repo_id=model_id,
        filename=WEIGHTS_FILE,
        revision=revision,
        cache_dir=cache_dir,
        force_download=force_download,
        token=token,
        local_files_only=local_files_only,
    )


def _read_weights(weights: str, map_location: str) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file; one line naming it when it is not one (truncated,
    a damaged header)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(weights, device=str(map_location))
    except (SafetensorError, OSError, ValueError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DamagedFileError(
            f"{str(weights)!r} cannot be read as safetensors ({reason}): it is truncated or "
            "damaged; export the run again"
        ) from None


def _check_fit(model, state: dict[str, torch.Tensor], model_id: str, strict: bool) -> None:
    """The weights have the tensors and shapes the config builds (one line naming them)."""
    expected = model.state_dict()
    problems = [f"missing {k}" for k in expected if k not in state] if strict else []
    problems += [f"unexpected {k}" for k in state if k not in expected] if strict else []
    problems += [
        f"{k} is {list(t.shape)} in the weights, {list(expected[k].shape)} for the config"
        for k, t in state.items()
        if k in expected and t.shape != expected[k].shape
    ]
    if problems:
        shown = ", ".join(problems[:3]) + (
            f" and {len(problems) - 3} more" if len(problems) > 3 else ""
        )
        raise ConfigError(f"{model_id!r}: {WEIGHTS_FILE} does not fit its config.json ({shown})")


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
