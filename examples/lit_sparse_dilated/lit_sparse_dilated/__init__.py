"""An example third-party lit_sparse attention plugin (see docs/plugins.md)."""

from .dilated import DilatedAttention

__all__ = ["DilatedAttention"]
