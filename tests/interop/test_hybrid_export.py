"""A trained hybrid (the shared tiny run: learned-alpha Fibonacci layer 0, NoPE dense layer 1)
leaves the run as every plugin does: exported in lit_sparse's format, loaded by
``from_pretrained``, by transformers and by lm-eval with the run's own logits. (Remote code in
a fresh process: test_transformers.py runs every plugin case, the hybrid's included.)"""

from __future__ import annotations

import pytest
import torch

from lit_sparse import LanguageModel
from lit_sparse.interop.export import export_run

transformers = pytest.importorskip("transformers")
lm_eval = pytest.importorskip("lm_eval")

from lm_eval.api.instance import Instance  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

import lit_sparse.interop.hf  # noqa: E402, F401  (registers the classes)
from lit_sparse.interop.lm_eval import LitSparseLM  # noqa: E402

pytestmark = pytest.mark.slow  # a trained run, an export, lm-eval's import


@pytest.fixture(scope="module")
def exported(hybrid_run, tmp_path_factory):
    return export_run(hybrid_run.log_dir, tmp_path_factory.mktemp("hybrid") / "model")


@pytest.fixture(scope="module")
def windows(hybrid_run):
    dm = hybrid_run.datamodule
    ids, _ = next(iter(dm.val_windows_at(32, dm.val_set_names[0])))
    return ids


def run_logits(hybrid_run, ids):
    with torch.inference_mode():
        return hybrid_run.module.model.eval()(ids)


def test_the_export_is_lit_sparses_format_and_loads_as_the_hybrid(exported, hybrid_run, windows):
    assert exported.format == "lit_sparse"
    loaded = LanguageModel.from_pretrained(exported.folder).eval()
    assert loaded.attention == hybrid_run.module.model.attention
    assert [p.rotary for p in loaded.patterns] == [True, False]
    with torch.inference_mode():
        torch.testing.assert_close(loaded(windows), run_logits(hybrid_run, windows), rtol=0, atol=0)


def test_transformers_gives_the_runs_logits(exported, hybrid_run, windows):
    model = AutoModelForCausalLM.from_pretrained(exported.folder).eval()
    with torch.inference_mode():
        logits = model(windows).logits
    torch.testing.assert_close(logits, run_logits(hybrid_run, windows), rtol=1e-5, atol=1e-5)


def test_lm_eval_scores_a_continuation_as_the_run_does(exported, hybrid_run):
    lm = LitSparseLM(pretrained=str(exported.folder), device="cpu", batch_size=2)
    request = Instance("loglikelihood", doc={}, arguments=("ROMEO: But", " soft"), idx=0)
    [(logprob, _)] = lm.loglikelihood([request])
    whole, context = lm.tokenizer.encode("ROMEO: But soft"), lm.tokenizer.encode("ROMEO: But")
    tokens = torch.tensor([whole[:-1]])
    logprobs = run_logits(hybrid_run, tokens).log_softmax(-1)[0]
    continuation = whole[len(context) :]
    want = sum(float(logprobs[len(context) - 1 + i, t]) for i, t in enumerate(continuation))
    assert logprob == pytest.approx(want, abs=1e-4)
