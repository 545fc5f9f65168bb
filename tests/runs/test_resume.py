"""What a resume compares (lit_sparse/runs/resume.py): a config's signature (model, data,
seed, steps; without what a resume may change or what does not change the run) and the
schedule values a resume changes, in words. Choosing the run ``last`` means:
tests/reliability/test_runs.py (docs/reliability.md cites it)."""

from __future__ import annotations

from lit_sparse.runs.resume import changed_values, describe_changes, signature

CONFIG = {
    "seed_everything": 42,
    "trainer": {"max_steps": 100, "devices": 2},
    "model": {"lr": 3e-4, "max_steps": 100, "arch": {"d_model": 32, "vocab_size": 64}},
    "data": {"class_path": "TextDataModule", "init_args": {"seq_len": 48, "num_workers": 4}},
}


def test_the_signature_leaves_out_linked_and_run_neutral_values():
    assert signature(CONFIG) == {
        "model": {"lr": 3e-4, "arch": {"d_model": 32}},
        "data": {"class_path": "TextDataModule", "init_args": {"seq_len": 48}},
        "seed_everything": 42,
        "trainer.max_steps": 100,
    }
    assert CONFIG["model"]["arch"]["vocab_size"] == 64  # the config itself is left as it was


def test_the_loose_signature_leaves_out_what_a_resume_may_change():
    loose = signature(CONFIG, exact=False)
    assert loose["model"] == {"arch": {"d_model": 32}} and "trainer.max_steps" not in loose


def test_changed_schedule_values_in_words():
    changes = changed_values(
        {"lr": 1e-5, "warmup_steps": 10, "d_model": 64}, {"lr": 3e-4, "warmup_steps": 10}
    )
    assert changes == [("model.lr", 3e-4, 1e-5)]  # d_model is no schedule value
    assert describe_changes(changes) == "model.lr=1e-05 (was 0.0003)"
    betas = changed_values({"betas": [0.9, 0.99]}, {"betas": (0.9, 0.95)})
    assert describe_changes(betas) == "model.betas=[0.9, 0.99] (was (0.9, 0.95))"
    assert changed_values({"betas": [0.9, 0.95]}, {"betas": (0.9, 0.95)}) == []  # list == tuple
