"""A run's TensorBoard scalars, read back, and the order a resume's event file must take."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

EVENT_FILES = "events.out.tfevents.*"


def wait_for_a_later_event_file(run_dir: str | Path) -> float:
    """Sleep (< 1 s) until a new event file sorts after ``run_dir``'s (TensorBoard's order)."""
    seconds = [
        int(stamp)
        for path in Path(run_dir).rglob(EVENT_FILES)
        if (stamp := path.name.split(".")[3]).isdigit()
    ]
    wait = max(0.0, max(seconds, default=0) + 1 - time.time())
    time.sleep(wait)
    return wait


def read_scalars(run_dir: str | Path, prefix: str = "") -> dict[str, dict[int, float]]:
    """tag -> step -> value of the scalars under ``prefix`` (the last value at a step wins)."""
    if not any(Path(run_dir).glob(EVENT_FILES)):
        return {}
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={SCALARS: 0})
    events.Reload()
    found = {}
    for tag in events.Tags().get("scalars", []):
        if tag.startswith(prefix):
            ordered = sorted(events.Scalars(tag), key=lambda e: (e.step, e.wall_time))
            found[tag] = {e.step: float(e.value) for e in ordered}
    return found


def writer_file(logger: Any) -> str:
    """The event file a TensorBoardLogger's writer appends to ("" if none is open)."""
    writer = getattr(logger.experiment, "file_writer", None)
    return getattr(getattr(writer, "event_writer", None), "_file_name", None) or ""
