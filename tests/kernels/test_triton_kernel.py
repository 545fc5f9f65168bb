"""The Triton kernel equals the dense reference under ``TRITON_INTERPRET=1`` (on the CPU).

The interpreter must be switched on before triton is imported, so the checks run in a
child process with the variable set there only: nothing leaks into the other tests. The
interpreter is float32-only here (it gets bfloat16 wrong) and more lenient than a GPU; the
kernel uses no ``tl.dot`` and only power-of-two blocks, so the GPU limits it ignores do
not apply.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .triton_cases import CASES

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="triton is not installed (extra 'triton')"
)

HERE = Path(__file__).parent

# the child: the interpreter setting is in its environment before triton is imported
CHILD = textwrap.dedent(
    f"""
    import json, sys
    sys.path.insert(0, {str(HERE)!r})
    from triton_cases import compare

    print(json.dumps(compare(json.loads(sys.argv[1]))))
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("block", [16, 32])
def test_triton_kernel_matches_reference_in_the_interpreter(block):
    cases = [dict(case, seed=i, block=block) for i, case in enumerate(CASES)]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    result = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(cases)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    errors = json.loads(result.stdout.strip().splitlines()[-1])
    assert errors, "no comparison ran"
    bad = [e for e in errors if not e["err"] < 2e-5]
    assert not bad, bad


def test_the_interpreter_setting_does_not_leak():
    assert os.environ.get("TRITON_INTERPRET") in (None, "", "0")


def test_dispatch_rules():
    """Relative slots with power-of-two groups go to Triton on CUDA; absolute keys do not."""
    import torch

    from lit_sparse import kernels
    from lit_sparse.kernels import KeySlots, exact_slots

    module = kernels._triton()
    assert module is not None
    q, k = torch.empty(1, 8, 4, 64), torch.empty(1, 2, 4, 64)
    assert module.supported(q, k, exact_slots([0, 1]))
    assert not module.supported(torch.empty(1, 6, 4, 64), k, exact_slots([0, 1]))  # G = 3
    absolute = KeySlots(
        distances=torch.tensor([0]), reach=1, block_keys=torch.zeros(1, 1, dtype=torch.long)
    )
    assert not module.supported(q, k, absolute)
