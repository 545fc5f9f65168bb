"""LengthExtrapolation at the end of fit: tags, values, JSON and Markdown in the run folder."""

from __future__ import annotations

import json

import pytest

from lit_sparse.callbacks import LengthExtrapolation
from lit_sparse.evaluation import ExtrapolationResult, evaluate_lengths
from tests.tiny_runs import SEQ_LEN, end_of_fit_scalars, scalars

LENGTHS = [SEQ_LEN, 2 * SEQ_LEN, 4 * SEQ_LEN]


def test_perplexities_are_logged_at_the_last_step_apart_from_the_curves(learned_run):
    logged = end_of_fit_scalars(learned_run.log_dir, 6)
    assert not [tag for tag in scalars(learned_run.log_dir) if tag.startswith("extrap/")]
    expected = evaluate_lengths(learned_run.module, learned_run.datamodule, LENGTHS)
    for name in learned_run.datamodule.val_set_names:
        for length in LENGTHS:
            values = logged[f"extrap/ppl/{name}/{length}"]
            assert list(values) == [6]
            assert values[6] == pytest.approx(expected.ppl(name, length), rel=1e-6)
        for length in LENGTHS[1:]:
            change = logged[f"extrap/ppl_change_pct/{name}/{length}"][6]
            assert change == pytest.approx(expected.change_pct(name, length), rel=1e-5, abs=1e-6)
        assert f"extrap/ppl_change_pct/{name}/{SEQ_LEN}" not in logged


def test_one_x_equals_the_last_validation_loss(learned_run):
    logged = scalars(learned_run.log_dir)
    extrapolated = end_of_fit_scalars(learned_run.log_dir, 6)
    for name in learned_run.datamodule.val_set_names:
        # the last validation ran on the final weights (Lightning logs it one step earlier)
        last_validation = logged[f"val/ppl/{name}"][max(logged[f"val/ppl/{name}"])]
        at_one_x = extrapolated[f"extrap/ppl/{name}/{SEQ_LEN}"][6]
        assert at_one_x == pytest.approx(last_validation, rel=1e-5)


def test_table_written_as_json_and_markdown(learned_run):
    callback = learned_run.callbacks["LengthExtrapolation"]
    data = json.loads((learned_run.log_dir / "extrapolation.json").read_text())
    result = ExtrapolationResult.from_dict(data)
    assert result.to_dict() == callback.result.to_dict()
    assert data["lengths"] == LENGTHS and data["step"] == 6 and data["reference_length"] == SEQ_LEN
    for name in learned_run.datamodule.val_set_names:
        assert [data["sets"][name][str(t)]["windows"] for t in LENGTHS] == [5, 2, 1]
    markdown = (learned_run.log_dir / "extrapolation.md").read_text()
    assert markdown == result.to_markdown()
    assert f"| set | {SEQ_LEN} (1x) | {2 * SEQ_LEN} (2x) | {4 * SEQ_LEN} (4x) |" in markdown
    for name in learned_run.datamodule.val_set_names:
        assert f"| {name} | {result.ppl(name, SEQ_LEN):.2f} |" in markdown
    assert "| layer |" in markdown  # the new-distance table


def test_unseen_distances_are_reported_per_layer(staggered_run):
    data = json.loads((staggered_run.log_dir / "extrapolation.json").read_text())
    model = staggered_run.module.model
    for length in LENGTHS[1:]:
        assert data["unseen_distances"][str(length)] == {
            str(layer): d for layer, d in model.unseen_distances(length).items()
        }
    # layer 1 (alpha 1.5) reaches past the training length at 2x: 1.5 * 21 = 31.5 -> 32
    assert data["unseen_distances"][str(2 * SEQ_LEN)]["1"] == [32]
    assert data["unseen_distances"][str(2 * SEQ_LEN)]["0"] == []


@pytest.mark.parametrize(
    "kwargs",
    [{"multiples": []}, {"lengths": [0]}, {"new_offsets": "keep"}, {"stages": ["test"]}],
)
def test_bad_options_are_refused(kwargs):
    with pytest.raises(ValueError):
        LengthExtrapolation(**kwargs)
