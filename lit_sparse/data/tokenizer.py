"""The tokenizer (embedded, a tokenizer.json path, a saved folder, or a hub name) and the model
vocabulary it implies: largest id + 1 rounded up to a multiple of 64, unless a config asks more."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tokenizers

from lit_sparse.data.embedded import TOKENIZER_PATH
from lit_sparse.data.hub import OFFLINE_HINT, DataSourceUnavailable, is_network_error, require_hub
from lit_sparse.errors import ConfigError
from lit_sparse.formats.pretrained import CONFIG_FILE, TOKENIZER_FILE
from lit_sparse.io.atomic import write_text

# Document separator, first match wins (GPT-2/our BPE, Llama/T5, Llama-3, Gemma).
EOS_CANDIDATES = ("<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>", "<|eos|>")
VOCAB_MULTIPLE = 64


@dataclass(frozen=True)
class Tokenizer:
    """A model's tokenizer: text to ids as the training data was tokenized, and back.

    tokenizer = lit_sparse.Tokenizer.from_pretrained("exported/")  # or "embedded"
    ids = tokenizer.document_prefix + tokenizer.encode("ROMEO: ...")  # a whole document
    text = tokenizer.decode(ids)"""

    tokenizer: tokenizers.Tokenizer
    """The ``tokenizers.Tokenizer`` (truncation and padding disabled)."""
    source: str
    """Where it came from: ``embedded``, a file path, or ``hub:<name>``."""
    sha256: str
    """Hash of its canonical JSON (part of every token-cache key)."""
    size: int
    """Number of ids it can emit: largest id + 1, added tokens included."""
    eos_token: str
    """The end-of-text token that separates documents in training."""
    eos_id: int

    @classmethod
    def from_pretrained(cls, path: str | Path = "embedded") -> Tokenizer:
        """``"embedded"``, a ``tokenizer.json`` file, a folder holding one, or a hub repo name. A
        folder's config.json ``eos_token_id`` is the end-of-text token."""
        loaded = load_tokenizer(str(path))
        config = Path(str(path)).expanduser() / CONFIG_FILE
        eos_id = _config_eos_id(config) if config.is_file() else None
        if eos_id is None or eos_id == loaded.eos_id:
            return loaded
        token = loaded.tokenizer.id_to_token(eos_id)
        if token is None:
            raise ConfigError(
                f"{config}: eos_token_id={eos_id} is not an id of its tokenizer.json "
                f"(ids 0..{loaded.size - 1})"
            )
        return dataclasses.replace(loaded, eos_token=token, eos_id=eos_id)

    def save_pretrained(self, folder: str | Path) -> Path:
        """Write ``tokenizer.json`` (atomically) and the configs ``AutoTokenizer`` and ``generate``
        read into ``folder``; returns the tokenizer.json path."""
        from lit_sparse.formats.transformers_files import transformers_files

        folder = Path(folder).expanduser()
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in transformers_files(self.eos_token, self.eos_id).items():
            write_text(folder / name, text)
        return write_text(folder / TOKENIZER_FILE, self.tokenizer.to_str(pretty=True))

    def encode(self, text: str) -> list[int]:
        """The ids of ``text`` as training tokenized a document (no BOS or EOS added)."""
        try:
            return self.tokenizer.encode(text, add_special_tokens=False).ids
        except TypeError:
            _check_text(text, "text")
            raise

    def encode_batch(self, texts: Iterable[str]) -> list[list[int]]:
        """``encode`` of every text, in one call."""
        texts = list(texts)
        try:
            encoded = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        except TypeError:
            for n, text in enumerate(texts):
                _check_text(text, f"texts[{n}]")
            raise
        return [e.ids for e in encoded]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """The text of ``ids`` (special tokens skipped by default); a bad id is a ConfigError."""
        return self.tokenizer.decode(
            _checked_ids(ids, self.size), skip_special_tokens=skip_special_tokens
        )

    @property
    def document_prefix(self) -> list[int]:
        """What precedes a document, ``[eos_id]`` (training joins ``doc EOS doc EOS ...``)."""
        return [self.eos_id]

    def __len__(self) -> int:
        return self.size


LoadedTokenizer = Tokenizer  # the name of earlier versions


def _check_text(text, name: str) -> None:
    """One ConfigError line unless ``text`` is a string of valid Unicode."""
    if not isinstance(text, str):
        raise ConfigError(f"{name}: expected a string, got {type(text).__name__} {text!r:.60}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ConfigError(
            f"{name}: a lone surrogate {text[err.start]!r} at character {err.start} is not "
            "valid Unicode text; decode the bytes with errors='replace' (or fix the source)"
        ) from None


def _checked_ids(ids, size: int) -> list[int]:
    """``ids`` as a list of ints in [0, size); a ConfigError naming the first that is not."""
    if hasattr(ids, "tolist"):  # a tensor or an array
        ids = ids.tolist()
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise ConfigError(f"ids: expected a sequence of token ids, got {type(ids).__name__}")
    out = []
    for n, i in enumerate(ids):
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise ConfigError(
                f"ids[{n}]={i!r}: expected an integer token id, got {type(i).__name__}"
            )
        if not 0 <= i < size:
            raise ConfigError(f"ids[{n}]={i}: not a token id of the tokenizer (ids 0..{size - 1})")
        out.append(int(i))
    return out


def _config_eos_id(path: Path) -> int | None:
    """The ``eos_token_id`` of a saved model's config.json, if it names one."""
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("eos_token_id")
    except (OSError, ValueError, AttributeError):
        return None  # not our config: the loader of the model reports it
    if isinstance(value, list):  # transformers allows several; the first separates documents
        value = value[0] if value else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def round_up(n: int, multiple: int = VOCAB_MULTIPLE) -> int:
    return -(-n // multiple) * multiple


def _looks_like_path(spec: str) -> bool:
    return spec.startswith(("/", "./", "../", "~")) or spec.endswith(".json") or "\\" in spec


def _hub_tokenizer_file(name: str) -> str:
    """Path of ``tokenizer.json`` of hub repo ``name``: from the local HF cache, else downloaded."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError

    with contextlib.suppress(Exception):  # not cached (LocalEntryNotFoundError...): download
        return hf_hub_download(name, TOKENIZER_FILE, local_files_only=True)
    require_hub(f"tokenizer {name!r}")
    try:
        return hf_hub_download(name, TOKENIZER_FILE)
    except (RepositoryNotFoundError, EntryNotFoundError) as err:
        raise ConfigError(
            f"tokenizer={name!r}: no tokenizer.json in hub repo {name!r} "
            f"({type(err).__name__}); allowed: 'embedded', a tokenizer.json path, or a hub repo "
            "with a tokenizer.json"
        ) from None
    except Exception as err:
        if not is_network_error(err):  # gated repo, bad revision, ...: the hub's own message
            raise
        raise DataSourceUnavailable(
            f"tokenizer {name!r} could not be downloaded from the Hugging Face hub "
            f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); "
            f"{OFFLINE_HINT}"
        ) from None


def load_tokenizer(spec: str) -> Tokenizer:
    """``"embedded"``, a ``tokenizer.json`` (or its folder), or a hub repo name (cached once)."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(
            f"tokenizer={spec!r}: expected 'embedded', a tokenizer.json path or a hub repo name"
        )
    if spec == "embedded":
        path, source = TOKENIZER_PATH, "embedded"
    else:
        local = Path(spec).expanduser()
        if local.is_dir():
            local = local / TOKENIZER_FILE
        if local.is_file():
            path, source = local, str(local.resolve())
        elif _looks_like_path(spec):
            raise ConfigError(f"tokenizer={spec!r}: file not found (expected a tokenizer.json)")
        else:
            path, source = Path(_hub_tokenizer_file(spec)), f"hub:{spec}"
    try:
        tok = tokenizers.Tokenizer.from_file(str(path))
    except Exception as err:
        raise ConfigError(
            f"tokenizer={spec!r}: {path} is not a valid tokenizer.json ({err})"
        ) from None
    tok.no_truncation()
    tok.no_padding()
    vocab = tok.get_vocab(with_added_tokens=True)
    size = max(tok.get_vocab_size(with_added_tokens=True), max(vocab.values(), default=-1) + 1)
    eos = next((t for t in EOS_CANDIDATES if t in vocab), None)
    if eos is None:
        raise ConfigError(
            f"tokenizer={spec!r} has no end-of-text token to separate documents "
            f"(looked for {', '.join(EOS_CANDIDATES)})"
        )
    sha = hashlib.sha256(tok.to_str().encode("utf-8")).hexdigest()
    return Tokenizer(tok, source, sha, size, eos, vocab[eos])


def run_tokenizer(config: dict) -> str:
    """The tokenizer a run's config.yaml names (``embedded`` when none)."""
    data = config.get("data")
    init_args = (data.get("init_args") or {}) if isinstance(data, dict) else {}
    return str(init_args.get("tokenizer") or "embedded")


def resolve_vocab_size(requested: int | None, tokenizer_size: int) -> int:
    """The model vocabulary: ``requested``, or the tokenizer's size rounded up to 64."""
    if requested is None:
        return round_up(tokenizer_size)
    if isinstance(requested, bool) or not isinstance(requested, int):
        raise ConfigError(f"vocab_size={requested!r}: expected an int or None")
    if requested < tokenizer_size:
        raise ConfigError(
            f"vocab_size={requested} is smaller than the tokenizer's size "
            f"{tokenizer_size}; use None (rounds {tokenizer_size} up to "
            f"{round_up(tokenizer_size)}) or a number >= {tokenizer_size}"
        )
    return requested
