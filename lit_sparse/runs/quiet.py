"""Filters for Lightning's tips, torch's LeafSpec deprecation and ModelCheckpoint's dirpath note."""

from __future__ import annotations

import logging
import warnings

_RANK_ZERO_LOGGERS = (
    "lightning.pytorch.utilities.rank_zero",
    "lightning.fabric.utilities.rank_zero",
)
_TIP = "💡 Tip:"


class _NoTips(logging.Filter):
    """Drops Lightning's tips about its cloud products."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_TIP)


_FILTER = _NoTips()


def quiet_lightning() -> None:
    """Filter the tips and the deprecation every Lightning command prints (idempotent)."""
    for name in _RANK_ZERO_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    leaf_spec = r"`isinstance\(treespec, LeafSpec\)` is deprecated"
    warnings.filterwarnings("ignore", message=leaf_spec, category=FutureWarning)


def quiet_evaluation() -> None:
    """Also filter ModelCheckpoint's "dirpath has changed" (an evaluation saves nothing)."""
    warnings.filterwarnings(
        "ignore", message=r"The dirpath has changed from ", category=UserWarning
    )
