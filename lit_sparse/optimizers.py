"""The optimizers a run trains with: torch's AdamW, or bitsandbytes' 8-bit AdamW where it runs."""

from __future__ import annotations

import torch

from lit_sparse.errors import ConfigError

OPTIMIZERS = ("adamw", "adamw8bit")


def eight_bit_adamw(device: torch.device | None = None):
    """bitsandbytes' AdamW8bit class; ConfigError when missing or without a ``device`` kernel."""
    try:
        import bitsandbytes
        from bitsandbytes.optim import AdamW8bit
    except ImportError as err:
        raise ConfigError(
            f"model.optimizer='adamw8bit' needs bitsandbytes ({err}): pip install "
            "'lit_sparse[bnb]', or use model.optimizer 'adamw'"
        ) from None
    if device is not None and not _has_kernel(device):
        raise ConfigError(
            f"model.optimizer='adamw8bit': bitsandbytes {bitsandbytes.__version__} has no 8-bit "
            f"optimizer kernel for {device.type} tensors; install a bitsandbytes build for "
            "this device, or use model.optimizer 'adamw'"
        )
    return AdamW8bit


def _has_kernel(device: torch.device) -> bool:
    """Whether bitsandbytes has an 8-bit update kernel for ``device``'s type (True if unknown)."""
    get_kernel = getattr(torch.library, "get_kernel", None)
    if get_kernel is None or not hasattr(torch.ops.bitsandbytes, "optimizer_update_8bit_blockwise"):
        return True
    try:
        get_kernel("bitsandbytes::optimizer_update_8bit_blockwise", device.type.upper())
    except RuntimeError:  # "no kernel for <KEY>"
        return False
    return True
