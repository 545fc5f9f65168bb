"""The files transformers' ``AutoTokenizer`` and ``generate`` read beside an exported model,
with the end-of-text token as EOS, BOS and padding; plain JSON."""

from __future__ import annotations

import json

TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_FILE = "special_tokens_map.json"
GENERATION_CONFIG_FILE = "generation_config.json"


def transformers_files(eos_token: str, eos_id: int) -> dict[str, str]:
    """File name -> text of the tokenizer and generation configs for the document separator
    ``eos_token`` (id ``eos_id``), also the BOS (a new document starts after it)."""
    special = {"bos_token": eos_token, "eos_token": eos_token, "pad_token": eos_token}
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **special,
        "clean_up_tokenization_spaces": False,
        "add_bos_token": False,
        "add_eos_token": False,
    }
    generation = {"bos_token_id": eos_id, "eos_token_id": eos_id, "pad_token_id": eos_id}
    return {
        TOKENIZER_CONFIG_FILE: _json(tokenizer_config),
        SPECIAL_TOKENS_FILE: _json(special),
        GENERATION_CONFIG_FILE: _json(generation),
    }


def _json(values: dict) -> str:
    return json.dumps(values, indent=2, sort_keys=True) + "\n"
