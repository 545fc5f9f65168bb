"""Loading the tokenizer (embedded, a tokenizer.json path, or a hub name) and what derives from it.

The model's vocabulary size comes from here: the tokenizer's size (largest id + 1, added
tokens included) rounded up to a multiple of 64, unless a config asks for a larger number.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer

from lit_sparse.data.embedded import TOKENIZER_PATH
from lit_sparse.data.hub import OFFLINE_HINT, DataSourceUnavailable, is_network_error, require_hub
from lit_sparse.errors import ConfigError

__all__ = [
    "EOS_CANDIDATES",
    "LoadedTokenizer",
    "load_tokenizer",
    "resolve_vocab_size",
    "round_up",
    "run_tokenizer",
]

# Document separator, first match wins (GPT-2/our BPE, Llama/T5, Llama-3, Gemma).
EOS_CANDIDATES = ("<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>", "<|eos|>")
VOCAB_MULTIPLE = 64


@dataclass(frozen=True)
class LoadedTokenizer:
    """A tokenizer ready to encode documents for the token cache."""

    tokenizer: Tokenizer
    """The ``tokenizers.Tokenizer`` (truncation and padding disabled)."""
    source: str
    """Where it came from: ``embedded``, a file path, or ``hub:<name>``."""
    sha256: str
    """Hash of its canonical JSON (part of every token-cache key)."""
    size: int
    """Number of ids it can emit: largest id + 1, added tokens included."""
    eos_token: str
    eos_id: int


def round_up(n: int, multiple: int = VOCAB_MULTIPLE) -> int:
    return -(-n // multiple) * multiple


def _looks_like_path(spec: str) -> bool:
    return spec.startswith(("/", "./", "../", "~")) or spec.endswith(".json") or "\\" in spec


def _hub_tokenizer_file(name: str) -> str:
    """Path of ``tokenizer.json`` of hub repo ``name``: from the local HF cache, else downloaded."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError

    try:
        return hf_hub_download(name, "tokenizer.json", local_files_only=True)
    except Exception:  # not cached (LocalEntryNotFoundError and friends): download below
        pass
    require_hub(f"tokenizer {name!r}")
    try:
        return hf_hub_download(name, "tokenizer.json")
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


def load_tokenizer(spec: str) -> LoadedTokenizer:
    """Load ``spec``: ``"embedded"``, a ``tokenizer.json`` file or a folder holding one, or a
    hub repo name (downloaded only if not already in the local Hugging Face cache)."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(
            f"tokenizer={spec!r}: expected 'embedded', a tokenizer.json path or a hub repo name"
        )
    if spec == "embedded":
        path, source = TOKENIZER_PATH, "embedded"
    else:
        local = Path(spec).expanduser()
        if local.is_dir():
            local = local / "tokenizer.json"
        if local.is_file():
            path, source = local, str(local.resolve())
        elif _looks_like_path(spec):
            raise ConfigError(f"tokenizer={spec!r}: file not found (expected a tokenizer.json)")
        else:
            path, source = Path(_hub_tokenizer_file(spec)), f"hub:{spec}"
    try:
        tok = Tokenizer.from_file(str(path))
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
    return LoadedTokenizer(tok, source, sha, size, eos, vocab[eos])


def run_tokenizer(config: dict) -> str:
    """The tokenizer a run's config.yaml names (``data.init_args.tokenizer``; ``embedded``
    when it names none)."""
    data = config.get("data")
    if isinstance(data, dict):
        init_args = data.get("init_args") or {}
        if init_args.get("tokenizer"):
            return str(init_args["tokenizer"])
    return "embedded"


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
