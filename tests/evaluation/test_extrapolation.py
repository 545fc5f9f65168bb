"""evaluate_lengths is exact: the same windows as validation, direct NLL at every length,
new_offsets by rebuilding, one reduction across processes, and its table formats."""

from __future__ import annotations

import math

import pytest
import torch

from lit_sparse import FibonacciAttention, LanguageModel
from lit_sparse.evaluation import (
    ExtrapolationResult,
    evaluate_lengths,
    extrapolation_lengths,
    with_new_offsets,
)
from tests.tiny_runs import SEQ_LEN, VAL_WINDOWS, tiny_trainer


def windows(datamodule, length: int, set_name: str) -> tuple[torch.Tensor, torch.Tensor]:
    xs, ys = zip(*datamodule.val_windows_at(length, set_name), strict=True)
    return torch.cat(xs), torch.cat(ys)


def mean_nll(model: LanguageModel, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    with torch.inference_mode():  # as validation; no autograd state
        logits = model(x)
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1).double(), y.flatten()).item()


def test_lengths_default_to_multiples_of_the_training_length():
    assert extrapolation_lengths(1024) == [1024, 2048, 4096]
    assert extrapolation_lengths(32, multiples=[4, 1, 2, 2]) == [32, 64, 128]
    assert extrapolation_lengths(32, lengths=[100, 50]) == [50, 100]
    for bad in ([], [0], [1.5]):
        with pytest.raises(ValueError, match="lengths"):
            extrapolation_lengths(32, lengths=bad)


def test_one_x_equals_the_validation_loss(learned_run, tmp_path):
    dm = learned_run.datamodule
    result = evaluate_lengths(learned_run.module, dm, [SEQ_LEN])
    trainer = tiny_trainer(tmp_path, "validate", [])
    trainer.validate(learned_run.module, datamodule=dm, verbose=False)
    for name in dm.val_set_names:
        assert result.windows[name][SEQ_LEN] == VAL_WINDOWS
        assert result.nll[name][SEQ_LEN] == pytest.approx(
            trainer.callback_metrics[f"val/loss/{name}"].item(), rel=1e-6
        )


def test_longer_windows_join_consecutive_validation_windows(learned_run):
    """At k x T window i covers tokens [i k T, (i + 1) k T]: k validation windows in a row."""
    dm, model = learned_run.datamodule, learned_run.module.model
    result = evaluate_lengths(learned_run.module, dm, [SEQ_LEN, 2 * SEQ_LEN, 4 * SEQ_LEN])
    for name in dm.val_set_names:
        x1, y1 = windows(dm, SEQ_LEN, name)
        for k in (2, 4):
            count = VAL_WINDOWS // k
            x = x1[: count * k].reshape(count, k * SEQ_LEN)
            y = y1[: count * k].reshape(count, k * SEQ_LEN)
            xk, yk = windows(dm, k * SEQ_LEN, name)
            assert torch.equal(xk, x) and torch.equal(yk, y)
            assert result.windows[name][k * SEQ_LEN] == count
            assert result.tokens[name][k * SEQ_LEN] == count * k * SEQ_LEN
            assert result.nll[name][k * SEQ_LEN] == pytest.approx(mean_nll(model, x, y), rel=1e-6)
            assert result.ppl(name, k * SEQ_LEN) == pytest.approx(
                math.exp(result.nll[name][k * SEQ_LEN])
            )


def test_batching_does_not_change_the_result(learned_run):
    lengths = [SEQ_LEN, 4 * SEQ_LEN]
    one = evaluate_lengths(learned_run.module, learned_run.datamodule, lengths, batch_size=1)
    many = evaluate_lengths(learned_run.module, learned_run.datamodule, lengths, batch_size=7)
    for name in one.sets:
        for length in lengths:
            assert one.nll[name][length] == pytest.approx(many.nll[name][length], rel=1e-6)


def test_new_offsets_drop_rebuilds_the_same_weights(staggered_run):
    dm, model = staggered_run.datamodule, staggered_run.module.model
    lengths = [SEQ_LEN, 2 * SEQ_LEN]
    use = evaluate_lengths(model, dm, lengths, new_offsets="use")
    drop = evaluate_lengths(model, dm, lengths, new_offsets="drop")
    assert use.unseen_distances[2 * SEQ_LEN][1] == [32]
    assert drop.unseen_distances[2 * SEQ_LEN] == {0: [], 1: []}
    reference = LanguageModel(
        model.config, FibonacciAttention(**{**model.attention.init_args(), "new_offsets": "drop"})
    )
    reference.load_state_dict(model.state_dict())
    for name in dm.val_set_names:
        assert use.nll[name][SEQ_LEN] == pytest.approx(drop.nll[name][SEQ_LEN], rel=1e-7)
        x, y = windows(dm, 2 * SEQ_LEN, name)
        assert drop.nll[name][2 * SEQ_LEN] == pytest.approx(mean_nll(reference, x, y), rel=1e-6)
        assert use.nll[name][2 * SEQ_LEN] == pytest.approx(mean_nll(model, x, y), rel=1e-6)
        assert use.nll[name][2 * SEQ_LEN] != pytest.approx(drop.nll[name][2 * SEQ_LEN], rel=1e-7)
    assert with_new_offsets(model, None) is model and with_new_offsets(model, "use") is model


def test_drop_is_refused_for_attention_without_the_option():
    from lit_sparse import DenseAttention, ModelConfig

    config = ModelConfig(
        vocab_size=64,
        context_length=16,
        n_layers=1,
        d_model=32,
        n_heads=2,
        n_kv_heads=1,
        head_dim=16,
    )
    dense = LanguageModel(config, DenseAttention())
    assert with_new_offsets(dense, "use") is dense
    with pytest.raises(ValueError, match="new_offsets"):
        with_new_offsets(dense, "drop")


def test_sums_and_counts_go_through_one_reduction(learned_run):
    calls = []

    def doubling(tensor):  # what two identical processes would add up to
        calls.append(tensor.clone())
        return tensor * 2

    result = evaluate_lengths(
        learned_run.module, learned_run.datamodule, [SEQ_LEN], reduce=doubling
    )
    single = evaluate_lengths(learned_run.module, learned_run.datamodule, [SEQ_LEN])
    assert len(calls) == 1 and calls[0].dtype == torch.float64
    for name in result.sets:
        assert result.windows[name][SEQ_LEN] == 2 * VAL_WINDOWS
        assert result.nll[name][SEQ_LEN] == pytest.approx(single.nll[name][SEQ_LEN], rel=1e-12)


def test_a_set_without_a_window_at_some_length_is_nan(learned_run):
    too_long = VAL_WINDOWS * SEQ_LEN * 2
    result = evaluate_lengths(learned_run.module, learned_run.datamodule, [SEQ_LEN, too_long])
    name = result.sets[0]
    assert result.windows[name][too_long] == 0 and math.isnan(result.ppl(name, too_long))
    data = result.to_dict()
    assert data["sets"][name][str(too_long)]["ppl"] is None
    assert f"{too_long} vs {SEQ_LEN}" in result.to_markdown() and "n/a" in result.to_markdown()
    assert f"extrap/ppl/{name}/{too_long}" not in result.metrics()
    with pytest.raises(ValueError, match="unknown held-out set"):
        evaluate_lengths(learned_run.module, learned_run.datamodule, [SEQ_LEN], sets=["nope"])


def test_json_round_trip_and_markdown():
    result = ExtrapolationResult(
        training_length=100,
        lengths=[100, 200],
        nll={"a": {100: 1.0, 200: 1.1}},
        tokens={"a": {100: 1000, 200: 1000}},
        windows={"a": {100: 10, 200: 5}},
        unseen_distances={200: {0: [], 1: list(range(100, 120))}},
        new_offsets="use",
        step=7,
    )
    again = ExtrapolationResult.from_dict(result.to_dict())
    assert again == result
    assert result.change_pct("a", 200) == pytest.approx(100 * (math.exp(0.1) - 1))
    markdown = result.to_markdown()
    assert "| a | 2.72 | 3.00 | +10.5 % |" in markdown
    assert "| 1 | 100, 101, 102, 103, 104, 105, 106, 107, ... (20 in 100..119) |" in markdown
    assert "| 0 | none |" in markdown
    assert result.metrics() == pytest.approx(
        {
            "extrap/ppl/a/100": math.e,
            "extrap/ppl/a/200": math.exp(1.1),
            "extrap/ppl_change_pct/a/200": 100 * (math.exp(0.1) - 1),
        }
    )
    with pytest.raises(ValueError, match="format"):
        ExtrapolationResult.from_dict({"format": "other"})
