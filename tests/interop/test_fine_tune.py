"""A model fine-tuned in transformers comes back (issue 36): one optimizer step and a resized
vocabulary in transformers, ``save_pretrained``, then ``lit_sparse.load_pretrained`` and
lm-eval's ``lit_sparse`` model read it with the fine-tune's weights; weights another tool
saved without their digest load with ``verify_weights=False``."""

from __future__ import annotations

import json
import math

import pytest
import torch

transformers = pytest.importorskip("transformers")
lm_eval = pytest.importorskip("lm_eval")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

import lit_sparse  # noqa: E402
from lit_sparse.errors import DamagedFileError  # noqa: E402
from lit_sparse.formats.pretrained import file_sha256  # noqa: E402
from lit_sparse.interop.lm_eval import LitSparseLM  # noqa: E402
from lit_sparse.interop.shipped_tasks import TASKS_DIR  # noqa: E402

pytestmark = pytest.mark.slow  # lm-eval's import and an evaluation

RESIZED = 8256


@pytest.fixture(scope="module")
def fine_tuned(random_export, tmp_path_factory):
    """The random export after one AdamW step and ``resize_token_embeddings(8256)`` in
    transformers, saved there with its tokenizer; and the transformers model itself."""
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        model = AutoModelForCausalLM.from_pretrained(random_export, trust_remote_code=True)
        tokenizer = AutoTokenizer.from_pretrained(random_export)
        model.train()
        ids = torch.tensor([tokenizer.encode("ROMEO: But soft, what light through yonder")])
        model(ids, labels=ids).loss.backward()
        torch.optim.AdamW(model.parameters(), lr=1e-2).step()
        model.resize_token_embeddings(RESIZED)
        folder = tmp_path_factory.mktemp("fine_tuned") / "model"
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    finally:
        transformers.logging.set_verbosity(verbosity)
    return folder, model.eval()


def test_a_fine_tune_saved_in_transformers_loads_in_lit_sparse(fine_tuned, random_export):
    """It was refused as damaged (the starting weights' sha256 kept), and config.json said
    vocab_size 8256 beside arch.vocab_size 8192."""
    folder, tuned = fine_tuned
    config = json.loads((folder / "config.json").read_text())
    assert config["weights_sha256"] == file_sha256(folder / "model.safetensors")
    assert config["vocab_size"] == config["arch"]["vocab_size"] == RESIZED
    model, tokenizer = lit_sparse.load_pretrained(folder)
    start, _ = lit_sparse.load_pretrained(random_export)
    ids = torch.randint(0, 8192, (2, 20))
    with torch.inference_mode():
        torch.testing.assert_close(model(ids), tuned(ids).logits, rtol=0, atol=1e-5)
        assert not torch.allclose(model(ids)[..., :8192], start(ids), atol=1e-3)
    assert model.config.vocab_size == RESIZED
    assert tokenizer.sha256 == lit_sparse.Tokenizer.from_pretrained().sha256


def test_lm_eval_evaluates_the_fine_tune(fine_tuned):
    folder, _ = fine_tuned
    results = lm_eval.simple_evaluate(
        model=LitSparseLM(pretrained=str(folder), device="cpu", batch_size=4),
        tasks=["lit_sparse_math_ppl"],
        limit=2,
        task_manager=lm_eval.tasks.TaskManager(include_path=str(TASKS_DIR), include_defaults=False),
    )
    assert math.isfinite(results["results"]["lit_sparse_math_ppl"]["word_perplexity,none"])


def test_weights_saved_without_their_digest_load_with_verify_weights_false(fine_tuned, tmp_path):
    """Another tool's save (safetensors alone, config.json as it was): refused as damaged,
    naming the way out; ``load_pretrained`` and lm-eval's model take ``verify_weights``."""
    from safetensors.torch import save_file

    source, _ = fine_tuned
    folder = tmp_path / "model"
    folder.mkdir()
    for file in source.iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    model, _ = lit_sparse.load_pretrained(folder)
    state = {name: tensor * 1.01 for name, tensor in model.state_dict().items()}
    save_file(state, folder / "model.safetensors")
    with pytest.raises(DamagedFileError, match="verify_weights=False"):
        lit_sparse.load_pretrained(folder)
    with pytest.raises(DamagedFileError, match="verify_weights=False"):
        LitSparseLM(pretrained=str(folder), device="cpu")
    changed, _ = lit_sparse.load_pretrained(folder, verify_weights=False)
    assert torch.equal(changed.embedding.weight, state["embedding.weight"])
    lm = LitSparseLM(pretrained=str(folder), device="cpu", verify_weights=False)
    assert torch.equal(lm.model.embedding.weight, state["embedding.weight"])
