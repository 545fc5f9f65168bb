"""The random tiny export the format tests write out (shared with the interop tests)."""

from tests.interop.conftest import random_export  # noqa: F401  (a fixture, by name)
