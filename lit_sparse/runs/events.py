"""A run's TensorBoard scalars, read back from its event files."""

from __future__ import annotations

from pathlib import Path

__all__ = ["read_scalars"]


def read_scalars(run_dir: str | Path, prefix: str = "") -> dict[str, dict[int, float]]:
    """tag -> step -> value of every scalar tag under ``prefix`` in the run folder's events,
    steps in order; of several values at one step the last written wins (a resume rewrites
    it). Empty without event files."""
    if not any(Path(run_dir).glob("events.out.tfevents.*")):
        return {}
    from tensorboard.backend.event_processing.event_accumulator import (
        SCALARS,
        EventAccumulator,
    )

    events = EventAccumulator(str(run_dir), size_guidance={SCALARS: 0})
    events.Reload()
    found = {}
    for tag in events.Tags().get("scalars", []):
        if tag.startswith(prefix):
            ordered = sorted(events.Scalars(tag), key=lambda e: (e.step, e.wall_time))
            found[tag] = {e.step: float(e.value) for e in ordered}
    return found
