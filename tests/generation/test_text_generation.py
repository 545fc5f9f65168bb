"""lit_sparse.generate_text: prompts of unequal lengths, batched (prompts of one token length
together, no padding) equal to one by one for every registered plugin, ended at the first
stop string with the text before it, and the length policy one line or a warned clip."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import lit_sparse
from lit_sparse import LanguageModel
from lit_sparse.errors import ConfigError
from lit_sparse.generation.text_generation import cut_at_stop

from .cases import generation_cases, tiny_config

CASES = generation_cases()
PROMPTS = ["ROMEO:", "Q: What is 2 + 3?\nA:", "", "To be, or not", "HAMLET:"]


@pytest.fixture(scope="module")
def tokenizer():
    return lit_sparse.Tokenizer.from_pretrained("embedded")


def text_model(plugin, seed: int = 0) -> LanguageModel:
    """A random model with the embedded tokenizer's vocabulary, in eval mode."""
    torch.manual_seed(seed)
    config = dataclasses.replace(tiny_config(), vocab_size=8192)
    return LanguageModel(config, plugin).eval()


class CountingForwards:
    """Counts the model's forward calls (one for the prompt, one per later token)."""

    def __init__(self, model):
        self.calls = 0
        model.register_forward_hook(self)

    def __call__(self, *args):
        self.calls += 1


@pytest.mark.parametrize("name", list(CASES))
def test_batched_equals_one_by_one_for_every_plugin(name, tokenizer):
    model = text_model(CASES[name])
    batched = lit_sparse.generate_text(model, tokenizer, PROMPTS, 8, stop=["\n"], batch_size=4)
    alone = [lit_sparse.generate_text(model, tokenizer, [p], 8, stop=["\n"])[0] for p in PROMPTS]
    assert batched == alone
    assert all("\n" not in text for text in batched)


def test_equals_lit_sparse_generate_decoded(tokenizer):
    model = text_model(CASES["fibonacci-coprime-fibonacci-use"])
    ids = tokenizer.encode("To be, or not")
    tokens = lit_sparse.generate(model, [ids], 12, temperature=0).run()[0].tolist()
    expected = tokenizer.decode(tokens[: tokens.index(0)] if 0 in tokens else tokens)
    got = lit_sparse.generate_text(model, tokenizer, ["To be, or not"], 12)
    assert got == [expected]


def test_generation_stops_at_the_first_stop_string_and_returns_the_text_before_it(tokenizer):
    model = text_model(CASES["dense"], seed=3)
    (full,) = lit_sparse.generate_text(model, tokenizer, ["ROMEO:"], 30, stop_at_eos=False)
    assert len(full) > 20
    first, later = full[8:10], full[14:17]  # two stop strings, the later one listed first
    assert full.find(first) < full.find(later)
    counter = CountingForwards(model)
    (text,) = lit_sparse.generate_text(
        model, tokenizer, ["ROMEO:"], 30, stop=[later, first], stop_at_eos=False
    )
    assert text == full[: full.find(first)]
    steps = len(tokenizer.encode(full[: full.find(first) + len(first)]))
    assert counter.calls <= steps + 1 < 30  # stopped there, not at max_new_tokens


def test_cut_at_stop():
    assert cut_at_stop("a b\nc", ["\n", " "]) == ("a", True)
    assert cut_at_stop("abc", ["x"]) == ("abc", False)
    assert cut_at_stop("abc", []) == ("abc", False)


def test_a_prompt_too_long_is_one_error_or_clipped_from_the_left(tokenizer):
    model = text_model(CASES["sliding_window"])
    prompt = "ROMEO: " * 10
    n = len(tokenizer.encode(prompt))
    with pytest.raises(ConfigError, match=rf"prompts\[0\]: {n} tokens \+ max_new_tokens=4 exceed "):
        lit_sparse.generate_text(model, tokenizer, [prompt], 4, max_length=12)
    with pytest.warns(UserWarning, match="1 of 1 prompts clipped from the left"):
        (clipped,) = lit_sparse.generate_text(
            model, tokenizer, [prompt], 4, max_length=12, truncation="left"
        )
    tail = tokenizer.decode(tokenizer.encode(prompt)[-8:])
    assert clipped == lit_sparse.generate_text(model, tokenizer, [tail], 4)[0]
    with pytest.raises(ConfigError, match="max_new_tokens=12: leaves no room for a prompt"):
        lit_sparse.generate_text(model, tokenizer, ["a"], 12, max_length=12, truncation="left")


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("ROMEO:", 4), {}, "prompts: expected a list of strings, got one string"),
        (([3], 4), {}, r"prompts\[0\]: expected a string, got int 3"),
        ((["a"], 0), {}, "max_new_tokens=0: must be >= 1"),
        ((["a"], 4), {"stop": [""]}, "stop: expected non-empty strings, got ''"),
        ((["a"], 4), {"top_p": 2.0}, r"top_p=2.0: must be in \(0, 1\]"),
        ((["a"], 4), {"batch_size": 0}, "batch_size=0: must be an integer >= 1"),
        ((["a"], 4), {"stop": 5}, "stop=5: expected a string or a list of strings, got int"),
        (([None], 4), {}, r"prompts\[0\]: expected a string, got NoneType None"),
        ((["a", "b", 7], 4), {}, r"prompts\[2\]: expected a string, got int 7"),
    ],
)
def test_bad_input_is_one_line(tokenizer, args, kwargs, message):
    model = text_model(CASES["dense"])
    with pytest.raises(ConfigError, match=message) as err:
        lit_sparse.generate_text(model, tokenizer, *args, **kwargs)
    assert "\n" not in str(err.value)


class CountingDecodes:
    """The tokenizer, counting the ids it is asked to decode."""

    def __init__(self, tokenizer):
        self.inner, self.decoded = tokenizer, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __len__(self):
        return len(self.inner)

    def decode(self, ids, **kwargs):
        self.decoded += len(ids)
        return self.inner.decode(ids, **kwargs)


def test_each_step_decodes_a_few_tokens_not_the_whole_continuation(tokenizer):
    """Issue 36: the whole continuation was decoded again at every step (n^2 / 2 ids: 19.9 s
    against generate's 11.2 s for 4,000 tokens); the text is the same."""
    model, n = text_model(CASES["fibonacci-coprime-fibonacci-use"]), 300
    counting = CountingDecodes(tokenizer)
    (text,) = lit_sparse.generate_text(
        model, counting, ["ROMEO:"], n, stop=["never in this text"], stop_at_eos=False
    )
    tokens = lit_sparse.generate(model, [tokenizer.encode("ROMEO:")], n, temperature=0).run()
    assert text == tokenizer.decode(tokens[0].tolist())
    assert counting.decoded < 40 * n  # the old way: n (n + 1) / 2 = 45,150


def test_a_vocabulary_padded_past_the_tokenizer_never_yields_its_padding_ids(tokenizer):
    """The model's vocabulary is the tokenizer's rounded up (or larger); decode refuses the
    ids past the tokenizer's, so generate_text never samples them."""
    torch.manual_seed(0)
    config = dataclasses.replace(tiny_config(), vocab_size=8192 + 64)
    model = LanguageModel(config, CASES["sliding_window"]).eval()
    prompt, sampling = tokenizer.encode("ROMEO:"), dict(temperature=1.0, seed=3)
    free = lit_sparse.generate(model, [prompt], 400, **sampling).run()
    assert int(free.max()) >= 8192  # unlimited, this seed samples a padding id
    limited = lit_sparse.generate(model, [prompt], 400, vocab_limit=8192, **sampling).run()
    assert int(limited.max()) < 8192
    (text,) = lit_sparse.generate_text(
        model, tokenizer, ["ROMEO:"], 400, stop_at_eos=False, **sampling
    )
    assert text == tokenizer.decode(limited[0].tolist())
