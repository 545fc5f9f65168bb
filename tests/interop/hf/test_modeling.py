"""The transformers route verifies what ``lit_sparse.load_pretrained`` verifies (issue 36):
``AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)`` and ``pipeline``
refuse a changed model.safetensors or tokenizer.json, a config.json without ``arch`` or
``attention`` or whose shape the weights do not fit, in the same line as lit_sparse; an
edited attention warns in the same line; ``verify_weights=False`` loads weights changed on
purpose; what transformers initialises itself gets lit_sparse's own initialisation."""

from __future__ import annotations

import json
import logging

import pytest
import torch

transformers = pytest.importorskip("transformers")

from transformers import AutoModelForCausalLM, pipeline  # noqa: E402

import lit_sparse  # noqa: E402
from lit_sparse.errors import ConfigError, DamagedFileError  # noqa: E402
from tests.interop.conftest import random_model  # noqa: E402

WINDOW = 8
FIBONACCI = {"class_path": "fibonacci", "init_args": {"window": WINDOW}}


@pytest.fixture(autouse=True)
def quiet_transformers():
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    yield
    transformers.logging.set_verbosity(verbosity)


@pytest.fixture
def folder(tmp_path):
    """A fibonacci model (window 8) saved with its tokenizer, as the README loads it."""
    folder = tmp_path / "model"
    tokenizer = lit_sparse.Tokenizer.from_pretrained()
    random_model(FIBONACCI).save_pretrained(folder, tokenizer=tokenizer)
    return folder


def edit_config(folder, change) -> None:
    config = json.loads((folder / "config.json").read_text())
    change(config)
    (folder / "config.json").write_text(json.dumps(config))


def flip_a_weight_bit(folder) -> None:
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0x40  # the last tensor's data: safetensors reads it silently
    weights.write_bytes(bytes(data))


def swap_two_token_ids(folder) -> None:
    path = folder / "tokenizer.json"
    values = json.loads(path.read_text())
    vocab = values["model"]["vocab"]
    vocab["the"], vocab["and"] = vocab["and"], vocab["the"]
    path.write_text(json.dumps(values))


def transformers_load(folder, **kwargs):
    return AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True, **kwargs)


DAMAGE = {
    "a flipped bit in model.safetensors": (
        flip_a_weight_bit,
        DamagedFileError,
        "model.safetensors' does not match the sha256 its config.json records",
    ),
    "config.json without attention": (
        lambda f: edit_config(f, lambda c: c.pop("attention")),
        ConfigError,
        "its config.json has no 'attention' (the attention plugin)",
    ),
    "arch.n_layers 2 -> 3": (
        lambda f: edit_config(f, lambda c: c["arch"].update(n_layers=3)),
        ConfigError,
        "model.safetensors does not fit its config.json (missing blocks.2.",
    ),
    "config.json without arch": (
        lambda f: edit_config(f, lambda c: c.pop("arch")),
        ConfigError,
        "its config.json has no 'arch' (the model's shape)",
    ),
    "an edited tokenizer.json": (
        swap_two_token_ids,
        DamagedFileError,
        "tokenizer.json' is not the tokenizer its config.json records",
    ),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_folder_is_refused_as_lit_sparse_refuses_it(folder, case):
    """Each loaded before (inf or NaN logits, a dense model with Fibonacci weights, the
    paper's 60M shape and a 20-row size report); now one line, the same as lit_sparse's."""
    damage, kind, words = DAMAGE[case]
    damage(folder)
    with pytest.raises(kind) as by_transformers:
        transformers_load(folder)
    with pytest.raises(kind) as by_lit_sparse:
        lit_sparse.load_pretrained(folder)
    message = str(by_transformers.value)
    assert words in message and str(folder) in message and "\n" not in message, message
    # the same check: the same line up to the advice on what to do
    assert message.split(";")[0] == str(by_lit_sparse.value).split(";")[0]


def test_the_pipeline_refuses_them_too_and_verify_weights_false_loads_them(folder):
    """The README's pipeline: refused (transformers' pipeline wraps every loading error of
    its model classes in its own ValueError, with our line in it)."""
    flip_a_weight_bit(folder)
    with pytest.raises(ValueError, match="does not match the sha256 its config.json records"):
        pipeline("text-generation", model=str(folder), trust_remote_code=True)
    # weights changed on purpose: loaded as asked, by both routes
    loaded = transformers_load(folder, verify_weights=False)
    generator = pipeline(
        "text-generation",
        model=str(folder),
        trust_remote_code=True,
        model_kwargs={"verify_weights": False},
    )
    reference, _ = lit_sparse.load_pretrained(folder, verify_weights=False)
    ids = torch.randint(0, 8192, (1, 12))
    with torch.inference_mode():
        torch.testing.assert_close(loaded(ids).logits, reference(ids), rtol=0, atol=1e-5)
        torch.testing.assert_close(generator.model(ids).logits, reference(ids), rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (
            lambda c: c["attention"]["init_args"].update(window=4),
            f"window=4 (trained with {WINDOW})",
        ),
        (
            lambda c: c.update(attention={"class_path": "dense", "init_args": {}}),
            "class_path='lit_sparse.attention.dense.DenseAttention' (trained with "
            "'lit_sparse.attention.fibonacci.FibonacciAttention')",
        ),
    ],
    ids=["window 8 -> 4", "attention replaced"],
)
def test_an_attention_edited_since_training_warns_as_lit_sparse_warns(
    folder, caplog, change, words
):
    edit_config(folder, change)
    warned = {}
    for route, load in [
        ("transformers", transformers_load),
        ("lit_sparse", lit_sparse.load_pretrained),
    ]:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="lit_sparse.formats.pretrained"):
            load(folder)
        warned[route] = [record.getMessage() for record in caplog.records]
    (line,) = warned["transformers"]
    assert words in line and "differs from what the weights were trained with" in line, line
    assert warned["transformers"] == warned["lit_sparse"]


def test_what_transformers_initialises_gets_lit_sparse_s_init(folder):
    """New embedding rows (``resize_token_embeddings`` without mean resizing) had torch's
    N(0, 1), five times the model's N(0, d_model^-0.5)."""
    model = transformers_load(folder)
    model.resize_token_embeddings(8192 + 640, mean_resizing=False)
    new_rows = model.get_input_embeddings().weight[8192:].detach()
    std = model.config.model_config.std
    assert float(new_rows.std()) == pytest.approx(std, rel=0.1)
    assert model.config.arch["vocab_size"] == model.network.config.vocab_size == 8192 + 640
