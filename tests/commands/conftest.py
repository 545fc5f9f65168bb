"""The commands' tests read the interop tests' exports: a random tiny model and the shared
tiny learned run's (``lm-eval`` on an export, tests/commands/test_lm_eval.py)."""

from tests.interop.conftest import learned_export, random_export  # noqa: F401
