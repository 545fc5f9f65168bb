"""The training path is linear in memory: the conformance kit's check over every built-in
plugin's bench configurations (the ones bench times, W = 12, 23 keys per query; a plugin
from another package runs the kit in its own tests, as examples/ does), and at 16k for
fibonacci (tests/testing/test_plugin_kit.py shows the check failing on a [T, T] path)."""

import pytest

from lit_sparse import build_attention, testing
from lit_sparse.attention.registry import all_bench_cases, builtin_names

pytestmark = pytest.mark.slow  # trains, starts processes or benches

CASES = {
    case: plugin
    for case, plugin in all_bench_cases(keys=23, window=12).items()
    if type(plugin).name in builtin_names()
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_memory_grows_linearly(case):
    testing.check_linear_memory(CASES[case])


def test_fibonacci_memory_at_16k():
    """From 4k to 16k: 48 to 160 MB measured for the fixed schedule (3.2x q, k, v at 16k);
    a [T, T] path would need over 8 GB for its scores alone."""
    plugin = build_attention("fibonacci", window=12)
    testing.check_linear_memory(plugin, lengths=(4096, 16384))
