"""The 8-bit AdamW a run may train with (lit_sparse/optimizers.py): bitsandbytes' class, or
one ConfigError line saying what to install or choose instead."""

from __future__ import annotations

import sys

import pytest
import torch

from lit_sparse.errors import ConfigError
from lit_sparse.optimizers import OPTIMIZERS, eight_bit_adamw


def test_adamw8bit_without_a_kernel_for_the_device_is_one_line():
    """bitsandbytes registers its 8-bit update for the CPU, not for Apple's MPS: torch's
    operator registry (``torch.library.get_kernel``) tells, and the refusal names the device."""
    pytest.importorskip("bitsandbytes")
    from bitsandbytes.optim import AdamW8bit

    assert eight_bit_adamw(torch.device("cpu")) is AdamW8bit
    with pytest.raises(ValueError, match="has no 8-bit optimizer kernel for mps tensors"):
        eight_bit_adamw(torch.device("mps"))


def test_without_bitsandbytes_the_line_says_what_to_install_or_choose(monkeypatch):
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)  # import fails
    with pytest.raises(ConfigError) as err:
        eight_bit_adamw()
    message = str(err.value)
    assert message.startswith("model.optimizer='adamw8bit' needs bitsandbytes (")
    assert message.endswith("pip install 'lit_sparse[bnb]', or use model.optimizer 'adamw'")
    assert OPTIMIZERS == ("adamw", "adamw8bit")
