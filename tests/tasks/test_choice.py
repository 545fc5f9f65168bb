"""LEGO and RULER variable tracking: forced-choice scoring, the callback and the ``tasks``
command on a checkpoint (the generators: test_lego.py, test_ruler.py)."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import ModelCheckpoint
from torch import nn

from lit_sparse import FibonacciAttention, LanguageModel, ModelConfig
from lit_sparse.__main__ import main as lit_main
from lit_sparse.callbacks import TaskAccuracy
from lit_sparse.data.tokenizer import load_tokenizer
from lit_sparse.evaluation.forced_choice import ChoiceItem, choose, score_task
from lit_sparse.tasks import lego_items, ruler_vt_items


@pytest.fixture(scope="module")
def encode():
    tokenizer = load_tokenizer("embedded").tokenizer
    return lambda text: tokenizer.encode(text).ids


class SameAnswer(nn.Module):
    """Ignores its input: the same logits at every position of every prompt."""

    def __init__(self, vocab_size: int = 8192, seed: int = 0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.register_buffer("bias", torch.randn(vocab_size, generator=gen) * 3)

    def forward(self, ids):
        return self.bias.expand(*ids.shape, -1)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_model_that_always_answers_the_same_scores_chance(encode, seed):
    model = SameAnswer(seed=seed)
    lego = score_task("lego", "chain length", model, encode, lego_items(seed=seed))
    ruler = score_task("ruler_vt", "hops", model, encode, ruler_vt_items(seed=seed))
    assert lego.items == 360 and ruler.items == 360
    assert lego.chance == pytest.approx(0.5) and ruler.chance == pytest.approx(1 / 9)
    assert lego.accuracy == pytest.approx(lego.chance) and lego.same_answer == 1.0
    assert ruler.accuracy == pytest.approx(ruler.chance) and ruler.same_answer == 1.0
    assert all(g["same_answer"] == 1.0 for g in [*lego.groups.values(), *ruler.groups.values()])
    assert sorted(lego.groups) == [2, 3, 4] and sorted(ruler.groups) == [2, 3, 4]


def test_choose_matches_unbatched_log_probabilities(encode):
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=8192,
        context_length=64,
        n_layers=1,
        d_model=32,
        n_heads=2,
        n_kv_heads=1,
        head_dim=16,
    )
    model = LanguageModel(config, FibonacciAttention(window=2, n_rungs=6)).eval()
    items = lego_items(per_length=3, seed=5) + ruler_vt_items(per_hops=2, seed=5)
    chosen = choose(model, encode, items, batch_size=5)
    for item, pick in zip(items, chosen, strict=True):
        scores = []
        for text in item.choices:
            prompt, answer = encode(item.prompt), encode(text)
            with torch.no_grad():
                logits = model(torch.tensor([prompt + answer]))[0]
            logprobs = F.log_softmax(logits, -1)[len(prompt) - 1 : -1]
            scores.append(float(logprobs.gather(-1, torch.tensor(answer)[:, None]).sum()))
        assert pick == max(range(len(scores)), key=scores.__getitem__)


def test_a_model_that_knows_the_answer_scores_one(encode):
    """A lookup 'model' that favours the right candidate's token after each prompt."""
    items = lego_items(per_length=10, seed=1)
    answer_of = {tuple(encode(i.prompt)): encode(i.choices[i.answer])[0] for i in items}

    class Knows(nn.Module):
        def forward(self, ids):
            logits = torch.zeros(*ids.shape, 8192)
            for row in range(ids.shape[0]):
                for t in range(ids.shape[1]):
                    token = answer_of.get(tuple(ids[row, : t + 1].tolist()))
                    if token is not None:
                        logits[row, t, token] = 10.0
            return logits

    result = score_task("lego", "chain length", Knows(), encode, items)
    assert result.accuracy == 1.0 and result.same_answer == pytest.approx(0.5)


def test_empty_candidates_are_refused(encode):
    with pytest.raises(ValueError, match="encodes to no tokens"):
        choose(SameAnswer(), encode, [ChoiceItem("a =", ("",), 0, 1)])


@pytest.mark.slow
def test_callback_logs_and_writes_and_the_command_reads_the_checkpoint(tmp_path, capsys):
    from tests.tiny_runs import LEARNED, fit_run, scalars

    callback = TaskAccuracy(per_group=6)
    checkpoint = ModelCheckpoint(save_last=True, every_n_train_steps=3)
    run = fit_run(tmp_path, "tasks", LEARNED, callbacks=[callback, checkpoint])
    state = json.loads((run.log_dir / "tasks.json").read_text())
    assert [entry["step"] for entry in state["history"]] == [3, 6]
    lego = state["tasks"]["lego"]
    assert lego["items"] == 18 and lego["chance"] == 0.5 and 0 <= lego["same_answer"] <= 1
    assert state["tasks"]["ruler_vt"]["chance"] == pytest.approx(1 / 9)
    logged = scalars(run.log_dir)
    for tag in ("tasks/lego/accuracy", "tasks/lego/chance", "tasks/ruler_vt/same_answer"):
        assert set(logged[tag]) == {3, 6}
    assert "tasks/ruler_vt/accuracy_4" in logged

    assert lit_main(["tasks", str(run.log_dir), "--per-group", "6"]) == 0
    out = capsys.readouterr().out
    assert "tokenizer embedded" in out
    rows = [line for line in out.splitlines() if line.startswith("| lego") or "| ruler" in line]
    assert len(rows) == 8  # 3 groups + all, per task
    total = next(r for r in rows if r.startswith("| lego | all"))
    cells = [c.strip() for c in total.strip("|").split("|")]
    assert float(cells[3]) == pytest.approx(lego["accuracy"], abs=5e-5)  # printed to 4 places
    assert float(cells[4]) == 0.5


def test_command_refuses_a_missing_path(capsys, tmp_path):
    assert lit_main(["tasks", str(tmp_path / "nope")]) == 2
    assert "no such run directory or checkpoint" in capsys.readouterr().err
