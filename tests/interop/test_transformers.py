"""lit_sparse models in Hugging Face transformers: loading (remote code, a fresh process),
logits, greedy generate against lit_sparse.generate, padding, the bounded cache, the
transformers round trip and the stock Llama/Mistral exports."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest
import torch

transformers = pytest.importorskip("transformers")

from transformers import AutoConfig, AutoModelForCausalLM, StoppingCriteria  # noqa: E402

from lit_sparse import LanguageModel, build_attention, generate, list_attention  # noqa: E402
from lit_sparse.errors import ConfigError  # noqa: E402
from lit_sparse.formats import pretrained  # noqa: E402
from lit_sparse.interop.hf import (  # noqa: E402
    LitSparseCache,
    LitSparseForCausalLM,
)
from tests.generation.cases import (  # noqa: E402
    TOTAL,
    TRAINING_LENGTH,
    VOCAB,
    generation_cases,
    tiny_model,
)

CASES = generation_cases()
PLUGINS = {name: plugin for name, plugin in CASES.items() if not name.endswith("-drop")}
PAD = VOCAB - 1


@pytest.fixture(autouse=True, scope="module")
def quiet_transformers():
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    yield
    transformers.logging.set_verbosity(verbosity)


def ids(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, PAD, (batch, length), generator=torch.Generator().manual_seed(seed))


def test_every_registered_plugin_is_covered():
    assert {type(plugin).name for plugin in PLUGINS.values()} >= set(list_attention())


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(PLUGINS))
def test_greedy_generate_equals_lit_sparse_generate(case):
    """transformers' generate through the pattern's own cache gives lit_sparse.generate's
    tokens, from a 5-token prompt to 4x the training length (past the largest distance,
    55), batch 2, GQA, learned alphas at non-integer values."""
    network = tiny_model(CASES[case])
    model = LitSparseForCausalLM.from_network(network)
    prompt = ids(2, 5)
    new = TOTAL - 5
    expected = generate(network, prompt, new, temperature=0).run()
    out = model.generate(prompt, max_new_tokens=new, do_sample=False)
    assert torch.equal(out[:, 5:], expected)


def test_generate_uses_the_patterns_bounded_cache_by_default():
    network = tiny_model(build_attention("fibonacci", window=2), n_layers=1, training_length=64)
    model = LitSparseForCausalLM.from_network(network)
    out = model.generate(
        ids(1, 4), max_new_tokens=300, do_sample=False, return_dict_in_generate=True
    )
    cache = out.get("cache", out.get("past_key_values"))
    assert isinstance(cache, LitSparseCache)
    # fixed alpha 1, W = 2: the largest distance at 304 tokens is 233, a ring of 234 rows
    assert cache.get_max_length() == cache.get_max_cache_shape() == 234
    assert cache.get_seq_length() == 303 and cache.describe() == "1 layers: ring of 234 rows"


class CacheSizes(StoppingCriteria):
    """Records the cache's bytes (and its buffers' storage) at some lengths."""

    def __init__(self, cache: LitSparseCache, at: dict[int, str]):
        self.cache, self.at, self.sizes = cache, at, {}

    def __call__(self, input_ids, scores, **kwargs):
        name = self.at.get(input_ids.shape[1])
        if name:
            layer = self.cache.groups[0].decoding.layers[0]
            storage = sum(t.untyped_storage().nbytes() for t in (layer.cache.k, layer.cache.v))
            self.sizes[name] = (self.cache.nbytes, storage)
        return torch.zeros(input_ids.shape[0], dtype=torch.bool)


@pytest.mark.slow
def test_a_fixed_fibonacci_cache_is_the_same_size_after_1k_and_16k_tokens():
    """W = 8, alpha 1: the rungs reach 987, so each layer keeps a ring of 988 rows, whatever
    the generation's length; get_max_cache_shape reports that reach."""
    network = tiny_model(build_attention("fibonacci", window=8), n_layers=1, training_length=64)
    model = LitSparseForCausalLM.from_network(network)
    prompt = ids(1, 4)
    cache = model.new_cache()
    sizes = CacheSizes(cache, {4 + 1000: "1k", 4 + 16000: "16k"})
    # transformers 5.x renames the argument ``cache`` and warns that ``past_key_values``
    # goes in 6.0; the oldest version the hf extra allows (4.56) takes only the old name
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "`past_key_values` is deprecated", FutureWarning)
        model.generate(
            prompt,
            past_key_values=cache,
            max_new_tokens=16000,
            do_sample=False,
            stopping_criteria=[sizes],
        )
    ring = 2 * 1 * 2 * 988 * 8 * 4  # k and v, batch 1, 2 KV heads, 988 rows, head dim 8, fp32
    assert sizes.sizes == {"1k": (ring, ring), "16k": (ring, ring)}
    assert cache.get_max_cache_shape() == cache.get_max_length() == 988


def right_padded(rows: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    batch = torch.full((len(rows), width), PAD)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, row in enumerate(rows):
        batch[i, : len(row)], mask[i, : len(row)] = row, 1
    return batch, mask


def left_padded(rows: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    batch = torch.full((len(rows), width), PAD)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, row in enumerate(rows):
        batch[i, width - len(row) :], mask[i, width - len(row) :] = row, 1
    return batch, mask


@pytest.mark.parametrize("case", sorted(PLUGINS))
def test_padded_scoring_equals_each_row_alone(case):
    """Rows of 40, 23 and 9 tokens, right padded and left padded with an attention mask:
    every row's logits at its real positions are its logits alone."""
    model = LitSparseForCausalLM.from_network(tiny_model(CASES[case]))
    rows = [ids(1, n, seed=n)[0] for n in (40, 23, 9)]
    with torch.inference_mode():
        alone = [model(row[None]).logits[0] for row in rows]
        for pad in (right_padded, left_padded):
            batch, mask = pad(rows)
            logits = model(batch, attention_mask=mask).logits
            for i in range(len(rows)):
                real = mask[i].bool()
                torch.testing.assert_close(logits[i, real], alone[i], rtol=0, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(PLUGINS))
def test_left_padded_generation_equals_each_prompt_alone(case):
    """Prompts of 3, 11 and 7 tokens, left padded: greedy generate gives every row the
    tokens it gets alone (lit_sparse.generate), past 2x the training length."""
    network = tiny_model(CASES[case])
    model = LitSparseForCausalLM.from_network(network)
    prompts = [ids(1, n, seed=n)[0] for n in (3, 11, 7)]
    batch, mask = left_padded(prompts)
    new = 2 * TRAINING_LENGTH + 4
    out = model.generate(
        batch, attention_mask=mask, max_new_tokens=new, do_sample=False, pad_token_id=PAD
    )
    for i, prompt in enumerate(prompts):
        alone = generate(network, prompt[None], new, temperature=0).run()[0]
        assert torch.equal(out[i, batch.shape[1] :], alone), i


def test_the_loss_is_the_shifted_next_token_cross_entropy():
    network = tiny_model(build_attention("fibonacci", window=2))
    model = LitSparseForCausalLM.from_network(network)
    tokens = ids(2, 20)
    labels = tokens.clone()
    labels[0, :5] = -100  # no loss on a prompt's first tokens
    out = model(tokens, labels=labels)
    logits = network(tokens)
    expected = torch.nn.functional.cross_entropy(
        logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(), ignore_index=-100
    )
    torch.testing.assert_close(out.loss, expected)
    out.loss.backward()  # trains like any transformers model
    assert model.blocks[0].attn.q_proj.weight.grad is not None


@pytest.mark.parametrize("case", ["dense", "bigbird", "fibonacci-learned-fibonacci-use"])
def test_a_cache_without_a_length_grows_as_tokens_come(case):
    """A hand-written decoding loop (use_cache=True, no length given): whole-past caches
    grow past the prompt's length, and every position's logits equal the full forward's."""
    network = tiny_model(CASES[case])
    model = LitSparseForCausalLM.from_network(network)
    tokens = ids(2, TOTAL)
    with torch.inference_mode():
        full = network(tokens)
        out = model(tokens[:, :6], use_cache=True)
        cache, logits = out.get("cache", out.get("past_key_values")), [out.logits]
        for t in range(6, TOTAL, 3):  # three tokens a call: fed one at a time inside
            logits.append(model(tokens[:, t : t + 3], past_key_values=cache).logits)
    torch.testing.assert_close(torch.cat(logits, dim=1), full, rtol=0, atol=1e-4)


def test_transformers_round_trip_and_lit_sparse_read_the_same_folder(tmp_path):
    """save_pretrained from transformers, reloaded by transformers (no remote code: the
    classes are registered) and by lit_sparse: the same logits; the folder keeps
    lit_sparse's keys and the remote-code files."""
    network = tiny_model(CASES["fibonacci-learned-fibonacci-use"])
    model = LitSparseForCausalLM.from_network(network)
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["format"] == pretrained.FORMAT and config["arch"] == network.config.to_dict()
    assert config["auto_map"]["AutoConfig"] == "configuration_lit_sparse.LitSparseConfig"
    assert (tmp_path / "modeling_lit_sparse.py").is_file()
    again = AutoModelForCausalLM.from_pretrained(tmp_path)
    back = LanguageModel.from_pretrained(tmp_path)
    tokens = ids(2, 3 * TRAINING_LENGTH)
    with torch.inference_mode():
        expected = network(tokens)
        torch.testing.assert_close(again(tokens).logits, expected, rtol=0, atol=1e-5)
        torch.testing.assert_close(back(tokens), expected, rtol=0, atol=1e-5)
    assert not again.training and type(again) is LitSparseForCausalLM


def test_a_folder_of_the_earlier_format_still_loads(tmp_path):
    """A folder from before the transformers keys (format, arch, attention only) loads in
    lit_sparse, in LitSparseForCausalLM by name, and saved again it loads with the Auto
    classes."""
    network = tiny_model(build_attention("fibonacci", window=2))
    network.save_pretrained(tmp_path / "new")
    config = json.loads((tmp_path / "new" / "config.json").read_text())
    old = tmp_path / "old"
    old.mkdir()
    (old / "model.safetensors").write_bytes((tmp_path / "new" / "model.safetensors").read_bytes())
    keys = {key: config[key] for key in ("format", "arch", "attention")}
    (old / "config.json").write_text(json.dumps(keys))
    tokens = ids(1, 30)
    with torch.inference_mode():
        expected = network(tokens)
        assert torch.equal(LanguageModel.from_pretrained(old)(tokens), expected)
        by_name = LitSparseForCausalLM.from_pretrained(old)
        torch.testing.assert_close(by_name(tokens).logits, expected, rtol=0, atol=1e-6)
        LanguageModel.from_pretrained(old).save_pretrained(tmp_path / "again")
        again = AutoModelForCausalLM.from_pretrained(tmp_path / "again")
        torch.testing.assert_close(again(tokens).logits, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("layout", ["llama", "mistral"])
def test_stock_exports_load_without_remote_code_with_the_same_logits(layout, tmp_path):
    """Dense as LlamaForCausalLM, sliding window (W = 3, distances 0..3) as
    MistralForCausalLM with sliding_window = 4: logits within 1e-4 (fp32) past 2x the
    training length, greedy generate through transformers' own caches equals
    lit_sparse.generate, and lit_sparse reads the folder back."""
    plugin = (
        build_attention("dense")
        if layout == "llama"
        else build_attention("sliding_window", window=3)
    )
    network = tiny_model(plugin)
    pretrained.save(network, tmp_path, layout=layout)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == layout and "auto_map" not in config
    assert not list(tmp_path.glob("*.py"))
    if layout == "mistral":
        assert config["sliding_window"] == 4
    model = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert type(model).__name__ == (
        "LlamaForCausalLM" if layout == "llama" else "MistralForCausalLM"
    )
    tokens = ids(2, 3 * TRAINING_LENGTH)
    with torch.inference_mode():
        expected = network(tokens)
        torch.testing.assert_close(model(tokens).logits, expected, rtol=0, atol=1e-4)
        back = LanguageModel.from_pretrained(tmp_path)
        assert torch.equal(back(tokens), expected) and back.attention == network.attention
    prompt = tokens[:, :5]
    out = model.generate(prompt, max_new_tokens=40, do_sample=False)
    assert torch.equal(out[:, 5:], generate(network, prompt, 40, temperature=0).run())


def test_beam_search_and_several_sequences_through_the_lit_sparse_cache(tmp_path):
    """A dense model's beam search (rows reordered every step) and num_return_sequences
    (rows repeated) through LitSparseCache give the stock Llama export's results, which
    run through transformers' DynamicCache."""
    network = tiny_model(build_attention("dense"))
    ours = LitSparseForCausalLM.from_network(network)
    pretrained.save(network, tmp_path, layout="llama")
    stock = AutoModelForCausalLM.from_pretrained(tmp_path)
    prompt = ids(2, 6)
    for options in (
        {"num_beams": 3, "num_return_sequences": 2},
        {"do_sample": True, "num_return_sequences": 3, "top_k": 5},
    ):
        results = []
        for model in (ours, stock):
            torch.manual_seed(0)
            results.append(model.generate(prompt, max_new_tokens=12, pad_token_id=PAD, **options))
        assert results[0].shape == (2 * options["num_return_sequences"], 18)
        assert torch.equal(*results), options


def test_a_stock_layout_the_pattern_does_not_have_is_refused(tmp_path):
    network = tiny_model(build_attention("fibonacci", window=2))
    with pytest.raises(ConfigError, match="no LlamaForCausalLM form") as err:
        pretrained.save(network, tmp_path, layout="llama")
    assert "\n" not in str(err.value)
    assert not list(tmp_path.iterdir())  # refused before any file is written


def test_bad_input_is_one_line(tmp_path):
    network = tiny_model(build_attention("fibonacci", window=2))
    model = LitSparseForCausalLM.from_network(network)
    tokens = ids(2, 8)
    hole = torch.ones(2, 8, dtype=torch.long)
    hole[1, 3] = 0
    problems = {
        "padding between its tokens": lambda: model(tokens, attention_mask=hole),
        "take input_ids only": lambda: model(inputs_embeds=torch.zeros(2, 8, 32)),
        "own cache": lambda: model(tokens, past_key_values=transformers.DynamicCache()),
        "positions 0, 1, 2": lambda: model(tokens, position_ids=torch.arange(8)[None] + 3),
        "cache_implementation='static'": lambda: model.generate(
            tokens, max_new_tokens=2, cache_implementation="static"
        ),
    }
    for words, call in problems.items():
        with pytest.raises(ConfigError) as err:
            call()
        assert words in str(err.value) and "\n" not in str(err.value), words
    # a prompt padded on the right cannot be continued
    batch, mask = right_padded([tokens[0], tokens[1, :5]])
    with pytest.raises(ConfigError, match="pad prompts on the left"):
        model.generate(batch, attention_mask=mask, max_new_tokens=3, pad_token_id=PAD)


def test_a_folder_for_a_plugin_that_is_not_installed_names_the_package(tmp_path):
    network = tiny_model(build_attention("sliding_window", window=2))
    pretrained.save(network, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["attention"]["class_path"] = "sparse_plugins_not_installed.attention.LocalWindow"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError) as err:
        AutoConfig.from_pretrained(tmp_path)
    message = str(err.value)
    assert "cannot import 'sparse_plugins_not_installed.attention'" in message
    assert "install the package" in message and "\n" not in message


FRESH_PROCESS = """
import json, sys, torch, transformers
from transformers import AutoModelForCausalLM
transformers.logging.set_verbosity_error()
jobs = json.loads(sys.argv[1])
tokens = torch.load(jobs["tokens"])
modules = []
for folder in jobs["folders"]:
    assert "lit_sparse" not in sys.modules or folder != jobs["folders"][0]
    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
    modules.append(type(model).__module__)
    with torch.inference_mode():
        torch.save(model(tokens).logits, folder + "/logits.pt")
    model.save_pretrained(folder + "/resaved")
    again = AutoModelForCausalLM.from_pretrained(folder + "/resaved", trust_remote_code=True)
    with torch.inference_mode():
        torch.save(again(tokens).logits, folder + "/resaved_logits.pt")
print("ok", modules[0])
"""


@pytest.mark.slow
def test_every_plugin_loads_in_a_fresh_process_with_remote_code(tmp_path):
    """A process that never imported lit_sparse: AutoModelForCausalLM with
    trust_remote_code=True, for every case (learned alpha at non-integer values, GQA),
    gives LanguageModel.from_pretrained's logits within 1e-5, and so does its own
    save_pretrained reloaded (and lit_sparse reads that folder too)."""
    tokens = ids(2, 3 * TRAINING_LENGTH)
    torch.save(tokens, tmp_path / "tokens.pt")
    folders = []
    for case in sorted(PLUGINS):
        folder = tmp_path / case
        tiny_model(CASES[case]).save_pretrained(folder)
        folders.append(str(folder))
    job = json.dumps({"tokens": str(tmp_path / "tokens.pt"), "folders": folders})
    done = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, job], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        done.stdout.startswith("ok transformers_modules.") and "modeling_lit_sparse" in done.stdout
    )
    for folder in folders:
        with torch.inference_mode():
            expected = LanguageModel.from_pretrained(folder)(tokens)
            resaved = LanguageModel.from_pretrained(folder + "/resaved")(tokens)
        for name in ("logits.pt", "resaved_logits.pt"):
            got = torch.load(f"{folder}/{name}")
            torch.testing.assert_close(got, expected, rtol=0, atol=1e-5, msg=f"{folder} {name}")
        torch.testing.assert_close(resaved, expected, rtol=0, atol=1e-5)
