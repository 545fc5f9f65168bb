"""Fibonacci's alpha schedules (lit_sparse.attention.schedules): bad options are one line naming
the option, the value and what is allowed (issue 57: TB8 and two minor cases)."""

from __future__ import annotations

import sys

import pytest

from lit_sparse import FibonacciAttention
from lit_sparse.attention import build_attention
from lit_sparse.attention.schedules import Custom, Learned, Linear, from_flat_options
from lit_sparse.errors import ConfigError

LINEAR = {"class_path": "Linear", "init_args": {"alpha_min": 0.5}}


def test_a_schedule_of_today_with_an_old_flat_option_is_one_line():
    """TB8: a {class_path, init_args} schedule beside an old flat option raised a bare
    TypeError (unhashable type: 'dict')."""
    spec = {"class_path": "fibonacci", "init_args": {"schedule": LINEAR, "alpha_max": 2.0}}
    with pytest.raises(ConfigError) as info:
        build_attention(spec)
    line = str(info.value)
    assert "\n" not in line and line.startswith("alpha_max=2.0: the flat options")
    assert "schedule.init_args.alpha_max" in line
    with pytest.raises(ConfigError, match="alpha_max=2.0"):
        build_attention("fibonacci", schedule=Linear(), alpha_max=2.0)
    # by name, the flat options are still translated
    assert build_attention("fibonacci", schedule="linear", alpha_max=2.0).schedule.alpha_max == 2


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Linear(alpha_min="0.5"), "alpha_min must be a number, got '0.5'"),
        (lambda: Linear(alpha_max=True), "alpha_max must be a number, got True"),
        (lambda: Custom(alphas=[1.0, "2"]), "alphas[1] must be a number, got '2'"),
        (lambda: Learned(init=[1.0, None]), "init[1] must be a number, got None"),
        (lambda: Learned(init=1.0), "init must be a list of one alpha per layer, got 1.0"),
    ],
)
def test_an_option_that_is_no_number_is_one_line(build, message):
    """Minor: ``Linear(alpha_min="0.5")`` gave a bare comparison TypeError."""
    with pytest.raises(ConfigError) as info:
        build()
    assert str(info.value) == message


def test_a_schedule_module_that_raises_on_import_says_what_it_raised(tmp_path, monkeypatch):
    """Minor: a schedule module that raised on import was reported as "is not a Schedule"."""
    (tmp_path / "raising_schedule.py").write_text('raise RuntimeError("no GPU here")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "raising_schedule", raising=False)
    schedule = {"class_path": "raising_schedule.Mine", "init_args": {}}
    with pytest.raises(ConfigError) as info:
        build_attention("fibonacci", schedule=schedule)
    assert str(info.value) == (
        "schedule: class_path 'raising_schedule.Mine': importing raising_schedule raised "
        "RuntimeError: no GPU here"
    )
    with pytest.raises(ConfigError, match="'no_such_module_here.Mine' is not a Schedule"):
        build_attention("fibonacci", schedule={"class_path": "no_such_module_here.Mine"})


@pytest.mark.parametrize(("n_layers", "same"), [(4, True), (6, True), (5, False), (8, False)])
def test_coprime_warns_when_it_is_the_linear_schedule(n_layers, same, caplog):
    from lit_sparse.attention import schedules

    schedules._warn_coprime_is_linear.cache_clear()
    coprime = FibonacciAttention(schedule="coprime").layer_alphas(n_layers)
    linear = FibonacciAttention(schedule="linear").layer_alphas(n_layers)
    assert (coprime == linear) is same
    warned = [r for r in caplog.records if "is the 'linear' schedule" in r.getMessage()]
    assert bool(warned) is same


@pytest.mark.parametrize(
    ("flat", "message"),
    [
        ({"schedule": "fixed", "alpha_init": [1.0]}, "alpha_init is only read by schedule"),
        ({"schedule": "linear", "alphas": [1.0]}, "alphas is only read by schedule 'custom'"),
        ({"schedule": "fixed", "rung_read": "gaussian"}, "rung_read is only read by schedule"),
        ({"schedule": "cosine", "alpha_min": 0.5}, "schedule='cosine'"),
    ],
)
def test_the_translation_refuses_what_the_flat_options_refused(flat, message):
    with pytest.raises(ValueError, match=message):
        from_flat_options(flat)


def test_todays_form_passes_the_translation_unchanged():
    today = build_attention("fibonacci", schedule=Linear(0.7, 1.2)).init_args()
    assert from_flat_options(today) == today
