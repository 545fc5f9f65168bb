"""The model folder ``LanguageModel.save_pretrained`` writes and ``from_pretrained`` reads:
``model.safetensors``, ``config.json`` (configs, transformers' keys, digests guarding the
folder), remote code and a model card, or a stock layout (:mod:`.stock`). A damaged file is one
line naming it; the checks are functions because transformers' remote-code loader runs them."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import torch

from lit_sparse.errors import ConfigError, DamagedFileError
from lit_sparse.formats import stock
from lit_sparse.formats.remote import AUTO_MAP, REMOTE_CODE
from lit_sparse.io.atomic import write_bytes, write_text
from lit_sparse.legacy import translate

log = logging.getLogger(__name__)

FORMAT = "lit_sparse.io.pretrained/1"  # every folder saved so far: a name, not a module path
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
LAYOUTS = ("lit_sparse", *stock.STOCK_CLASSES)
WEIGHTS_SHA256 = "weights_sha256"
"""config.json key: the sha256 of model.safetensors (hex)."""
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_SHA256 = "tokenizer_sha256"
"""config.json key: the shipped tokenizer's ``Tokenizer.sha256`` (as a checkpoint records it)."""
TRAINED_ATTENTION = "trained_attention"
"""config.json key: what the weights were trained with (:func:`trained_attention`)."""
FREE_AT_LOAD = ("new_offsets",)
"""Attention options a user may choose at load (the policy beyond the training length)."""


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
    """What ``model``'s weights were trained with: its loaded record, else its own attention."""
    record = getattr(model, "trained_attention", None)
    if isinstance(record, dict):
        return record
    attention, length = model.attention.to_config(), model.config.context_length
    digest = _record_digest(attention, length)
    return {"attention": attention, "context_length": length, "sha256": digest}


def attention_changes(config: dict[str, Any], attention: dict[str, Any]) -> list[str]:
    """How ``attention`` (a ``to_config()``) differs from ``config``'s ``trained_attention``, e.g.
    ``window=4 (trained with 8)``; one entry when the record itself was edited."""
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


def warn_attention_changes(
    model_id: str, config: dict[str, Any], attention: dict[str, Any]
) -> None:
    """One warning line when ``attention`` differs from what the weights were trained with."""
    changes = attention_changes(config, attention)
    if changes:
        log.warning(
            "warning: %r: its %s attention differs from what the weights were trained with: "
            "%s; the model attends other keys than in training",
            model_id, CONFIG_FILE, ", ".join(changes),
        )  # fmt: skip


def check_model_keys(config: dict[str, Any], model_id: str | None = None) -> None:
    """ConfigError unless ``config`` names the shape (``arch``) and plugin (``attention``)."""
    wanted = {"arch": "the model's shape", "attention": "the attention plugin"}
    missing = [
        f"{key!r} ({what})"
        for key, what in wanted.items()
        if not isinstance(config.get(key), dict) and not (key == "attention" and config.get(key))
    ]
    if missing:
        where = CONFIG_FILE if model_id is None else f"{model_id!r}: its {CONFIG_FILE}"
        raise ConfigError(
            f"{where} has no {' and no '.join(missing)}; a lit_sparse folder records both: it "
            "is damaged or was not written by lit_sparse (export the run again)"
        )


def check_weights_digest(weights: str | os.PathLike, config: dict[str, Any]) -> None:
    """DamagedFileError unless ``weights`` has the sha256 ``config`` records (if any)."""
    recorded = config.get(WEIGHTS_SHA256)
    if isinstance(recorded, str) and file_sha256(weights) != recorded:
        raise DamagedFileError(
            f"{str(weights)!r} does not match the sha256 its {CONFIG_FILE} records (a changed or "
            "truncated file): export the run again; weights changed on purpose load with "
            "verify_weights=False (LanguageModel.from_pretrained, lit_sparse.load_pretrained, "
            "transformers' from_pretrained), and save_pretrained records their sha256"
        )


def check_tokenizer_digest(
    tokenizer: str | os.PathLike,
    config: dict[str, Any],
    sha256: str,
    option: str = "tokenizer=...",
) -> None:
    """DamagedFileError unless ``tokenizer`` (of digest ``sha256``) is the one ``config`` records
    (no record: passes); ``option`` names how to choose another on purpose."""
    recorded = config.get(TOKENIZER_SHA256)
    if isinstance(recorded, str) and recorded != sha256:
        raise DamagedFileError(
            f"{str(tokenizer)!r} is not the tokenizer its {CONFIG_FILE} records "
            f"({TOKENIZER_SHA256} {recorded[:12]}..., the file {sha256[:12]}...): its token ids "
            "would mean other text than the weights learned; export the run again, or choose "
            f"another tokenizer on purpose with {option}"
        )


def weight_shapes(weights: str | os.PathLike) -> dict[str, tuple[int, ...]]:
    """name -> shape of a safetensors file's tensors (its header); else DamagedFileError."""
    from safetensors import safe_open

    try:
        with safe_open(str(weights), framework="pt") as handle:
            return {name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()}
    except Exception as err:  # SafetensorError, OSError, a header that is not JSON
        raise _unreadable(weights, err) from None


def check_fit(
    expected: dict[str, Any], found: dict[str, Any], model_id: str, strict: bool = True
) -> None:
    """ConfigError unless ``found`` has ``expected``'s shapes (``strict``: and the same names)."""
    problems = [f"missing {k}" for k in expected if k not in found] if strict else []
    problems += [f"unexpected {k}" for k in found if k not in expected] if strict else []
    problems += [
        f"{k} is {list(shape)} in the weights, {list(expected[k])} for the config"
        for k, shape in found.items()
        if k in expected and tuple(shape) != tuple(expected[k])
    ]
    if problems:
        more = f" and {len(problems) - 3} more" if len(problems) > 3 else ""
        shown = ", ".join(problems[:3]) + more
        raise ConfigError(f"{model_id!r}: {WEIGHTS_FILE} does not fit its config.json ({shown})")


def read_config(folder: str | os.PathLike) -> dict[str, Any] | None:
    """A local folder's config.json (None: absent); DamagedFileError if not a JSON object."""
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


def check_savable(model) -> None:
    """One ConfigError line when ``model`` holds int8 weights (``quantize_int8``)."""
    int8 = [name for name, t in model.state_dict().items() if t.dtype == torch.int8]
    if int8:
        raise ConfigError(
            f"save_pretrained: int8 weights ({len(int8)} tensors, e.g. {int8[0]}, made by "
            "quantize_int8) have no pretrained-folder form: they would replace the float "
            "weights every loader reads; save the float model (the one before quantize_int8) "
            "and quantize after loading it"
        )


def save(
    model,
    folder: Path,
    *,
    layout: str = "lit_sparse",
    extra: dict[str, Any] | None = None,
    tokenizer_sha256: str | None = None,
) -> list[str]:
    """Write ``model.safetensors``, ``config.json`` (plus ``extra`` keys) and, in the
    ``lit_sparse`` layout, the remote code into ``folder``; returns the file names."""
    from safetensors.torch import save as safetensors_bytes

    if layout not in LAYOUTS:
        raise ConfigError(f"layout={layout!r}: must be one of {', '.join(LAYOUTS)}")
    check_savable(model)
    state = {name: t.detach().contiguous().cpu() for name, t in model.state_dict().items()}
    if layout != "lit_sparse":
        state = stock.to_stock_names(state, model.config.n_layers)
    weights = safetensors_bytes(state, metadata={"format": "pt"})
    dtype = str(model.embedding.weight.dtype).removeprefix("torch.")
    keys = {
        "format": FORMAT,
        "arch": model.config.to_dict(),
        "attention": model.attention.to_config(),
        WEIGHTS_SHA256: hashlib.sha256(weights).hexdigest(),
        TRAINED_ATTENTION: trained_attention(model),
    }
    if tokenizer_sha256 is None:  # the tokenizer LanguageModel.save_pretrained writes beside
        tokenizer_sha256 = getattr(getattr(model, "_tokenizer_to_save", None), "sha256", None)
    if isinstance(tokenizer_sha256, str):
        keys[TOKENIZER_SHA256] = tokenizer_sha256
    files = {}
    if layout == "lit_sparse":
        config = {
            **keys,
            "model_type": "lit_sparse",
            "architectures": [stock.LIT_SPARSE_CLASS],
            "auto_map": dict(AUTO_MAP),
            **stock.shape_fields(model.config),
        }
        files.update(REMOTE_CODE)
    else:
        config = stock.stock_config(layout, model.config, keys)
    config.update({"torch_dtype": dtype, **(extra or {})})
    folder = Path(folder)
    write_bytes(folder / WEIGHTS_FILE, weights)
    for name, text in files.items():
        write_text(folder / name, text)
    write_text(folder / CONFIG_FILE, json.dumps(config, indent=2, sort_keys=True) + "\n")
    return [WEIGHTS_FILE, *files, CONFIG_FILE]


def lit_sparse_keys(config: Any) -> tuple[dict[str, Any], str | None] | None:
    """A config.json's lit_sparse keys and stock layout (None: lit_sparse did not write it)."""
    if not isinstance(config, dict):
        return None
    if config.get("format") == FORMAT:
        return config, None
    keys = config.get("lit_sparse")
    if config.get("model_type") in stock.STOCK_CLASSES and isinstance(keys, dict):
        if keys.get("format") == FORMAT:
            return keys, config["model_type"]
    return None


def _lit_sparse_keys(model_id: str, config: Any) -> tuple[dict[str, Any], str | None]:
    """:func:`lit_sparse_keys`, and anything else one ConfigError line."""
    found = lit_sparse_keys(config)
    if found is not None:
        return found
    if isinstance(config, dict) and config.get("model_type") in stock.STOCK_CLASSES:
        raise ConfigError(
            f"{model_id!r}: a {config['model_type']} folder not written by lit_sparse (its "
            "config.json has no 'lit_sparse' keys); load it with transformers' AutoModelForCausalLM"
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
    """The model (eval mode) of folder or hub repository ``model_id`` whose config.json is
    ``config``; ``verify_weights``: check the recorded sha256 (False: changed on purpose)."""
    config, layout = _lit_sparse_keys(model_id, config)
    config = translate(config, f"{model_id}/{CONFIG_FILE}")  # an earlier version's: a note
    check_model_keys(config, model_id)
    try:
        model = cls.from_config(config)
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(
            f"{model_id!r}: its {CONFIG_FILE} does not build a model ({err})"
        ) from None
    weights = _weights_file(model_id, revision, cache_dir, force_download, local_files_only, token)
    if verify_weights:
        check_weights_digest(weights, config)
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        state = load_file(weights, device=str(map_location))
    except (SafetensorError, OSError, ValueError) as err:
        raise _unreadable(weights, err) from None
    if layout is not None:
        state = stock.from_stock_names(state, model.config.n_layers)
    expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    check_fit(expected, {name: tuple(t.shape) for name, t in state.items()}, model_id, strict)
    model.load_state_dict(state, strict=False)
    warn_attention_changes(model_id, config, model.attention.to_config())
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


def _unreadable(weights: str | os.PathLike, err: Exception) -> DamagedFileError:
    reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return DamagedFileError(
        f"{str(weights)!r} cannot be read as safetensors ({reason}): it is truncated or "
        "damaged; export the run again"
    )


def describe_attention(attention) -> str:
    """A plugin in one line: its registry name (or class path) and its options."""
    config = attention.to_config()
    name = getattr(type(attention), "name", "") or config["class_path"]
    options = ", ".join(f"{k}={v!r}" for k, v in config["init_args"].items())
    return f"{name} ({options})" if options else name


def model_card(
    model,
    title: str | None = None,
    sections: str = "",
    layout: str = "lit_sparse",
    use: str | None = None,
) -> str:
    """A Markdown model card (hub metadata header, shape, attention, usage) and ``sections``;
    ``use`` replaces the usage (a text model's) with its own Markdown."""
    config = model.config
    title = title or f"lit_sparse {type(model.attention).name or 'custom'} language model"
    shape = (
        f"{config.n_layers} layers, d_model {config.d_model}, {config.n_heads} query heads "
        f"and {config.n_kv_heads} key/value heads of {config.head_dim}, vocabulary "
        f"{config.vocab_size}, trained at {config.context_length} tokens"
    )
    library = "lit_sparse" if layout == "lit_sparse" else "transformers"
    # the task and license (the project's) feed the hub's widget and filters
    header = (
        f"---\nlibrary_name: {library}\npipeline_tag: text-generation\nlicense: apache-2.0\n"
        "tags:\n- lit_sparse\n- sparse-attention\n- text-generation\n---\n"
    )
    remote = ", trust_remote_code=True" if layout == "lit_sparse" else ""
    cls = stock.STOCK_CLASSES.get(layout)
    loads_as = f" (a stock `{cls}`: no remote code)" if cls else " (remote code: lit_sparse[hf])"
    use = use or (
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
        "```\n"
    )
    return (
        f"{header}\n# {title}\n\n"
        f"A decoder-only language model ({model.num_parameters():,} parameters: {shape}) "
        f"whose attention is `{describe_attention(model.attention)}`.\n\n"
        f"## Use\n\n{use.strip()}\n" + (f"\n{sections.strip()}\n" if sections.strip() else "")
    )
