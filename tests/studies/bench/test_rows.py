"""The bench's measuring side (lit_sparse_studies/bench/rows.py): a plugin that fails in the
timing process spares the others, and a train row is measured with subnormals flushed as fit
runs. The command: tests/studies/commands/test_bench.py."""

from __future__ import annotations

from lit_sparse_studies.bench.attention import fibonacci_keys


def test_a_failing_plugin_spares_the_others():
    """A plugin that fails in the timing process is reported; the others are timed."""
    from lit_sparse_studies.bench import rows as bench

    spec = {
        "kind": "attention",
        "length": 32,
        "device": "cpu",
        "window": 12,
        "keys": fibonacci_keys(12, 32),
        "dtype": "float32",
        "batch": 1,
        "heads": 8,
        "kv_heads": 2,
        "dim": 64,
        "repeats": 2,
        "budget": 5.0,
        "plugins": ["fibonacci", "no_such_plugin", "dense"],
        "busy_cores": [0],
    }
    measured = bench._timing(spec)
    assert set(measured["busy"]["0"]) == {"fibonacci", "dense"}
    assert all(timing["runs"] == 2 for timing in measured["busy"]["0"].values())
    assert "no_such_plugin" in measured["failed"]["no_such_plugin"]


def test_training_is_measured_with_subnormals_flushed_as_fit_runs(monkeypatch):
    """A train row reads and writes subnormals as zero while it is measured, as fit does (and
    keeps IEEE floats under LIT_SPARSE_KEEP_DENORMALS, as fit does); an attention row keeps
    IEEE floats. The caller's mode is restored after."""
    from lit_sparse.kernels.denormals import KEEP_VARIABLE, denormals_flushed
    from lit_sparse_studies.bench import rows

    monkeypatch.setattr(rows, "_memory", lambda spec: {"flushed": denormals_flushed()})
    spec = {"kind": "train", "device": "cpu", "mode": "memory"}
    assert rows.measure(spec) == {"flushed": True}
    assert not denormals_flushed()
    assert rows.measure({**spec, "kind": "attention"}) == {"flushed": False}
    monkeypatch.setenv(KEEP_VARIABLE, "1")
    assert rows.measure(spec) == {"flushed": False}
