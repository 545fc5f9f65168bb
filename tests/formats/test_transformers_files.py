"""The tokenizer and generation configs written beside an exported model
(lit_sparse/formats/transformers_files.py): the end-of-text token as EOS, BOS and padding."""

from __future__ import annotations

import json

from lit_sparse.formats.transformers_files import (
    GENERATION_CONFIG_FILE,
    SPECIAL_TOKENS_FILE,
    TOKENIZER_CONFIG_FILE,
    transformers_files,
)


def test_the_end_of_text_token_is_eos_bos_and_padding_in_each_file():
    files = {name: json.loads(text) for name, text in transformers_files("<|eot|>", 7).items()}
    assert sorted(files) == sorted(
        [TOKENIZER_CONFIG_FILE, SPECIAL_TOKENS_FILE, GENERATION_CONFIG_FILE]
    )
    special = {"bos_token": "<|eot|>", "eos_token": "<|eot|>", "pad_token": "<|eot|>"}
    assert files[SPECIAL_TOKENS_FILE] == special
    assert files[GENERATION_CONFIG_FILE] == {
        "bos_token_id": 7,
        "eos_token_id": 7,
        "pad_token_id": 7,
    }
    tokenizer = files[TOKENIZER_CONFIG_FILE]
    assert tokenizer.items() >= special.items()
    assert tokenizer["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert (tokenizer["add_bos_token"], tokenizer["add_eos_token"]) == (False, False)


def test_each_file_is_sorted_indented_json_ending_in_a_newline():
    for text in transformers_files("</s>", 0).values():
        assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
