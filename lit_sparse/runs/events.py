"""A run's TensorBoard scalars, read back from its event files, and the order a resumed
run's event files must take after them."""

from __future__ import annotations

import time
from pathlib import Path

__all__ = ["read_scalars", "wait_for_a_later_event_file"]

EVENT_FILES = "events.out.tfevents.*"


def wait_for_a_later_event_file(run_dir: str | Path) -> float:
    """Sleep (under a second) until an event file created now sorts after every one under
    ``run_dir``; returns the seconds slept.

    An event file is named ``events.out.tfevents.<unix second>.<host>.<pid>...`` and
    TensorBoard reads a folder's files in name order, dropping the steps of earlier-read
    files that a later-read file's lower steps follow (its purge of orphaned data). A resume
    that starts within the second its killed run wrote a file, from a process whose pid
    sorts lower, would be read first and then hidden by the killed run's file.
    """
    seconds = [
        int(stamp)
        for path in Path(run_dir).rglob(EVENT_FILES)
        if (stamp := path.name.split(".")[3]).isdigit()
    ]
    wait = max(seconds, default=0) + 1 - time.time()
    if wait <= 0:
        return 0.0
    time.sleep(wait)
    return wait


def read_scalars(run_dir: str | Path, prefix: str = "") -> dict[str, dict[int, float]]:
    """tag -> step -> value of every scalar tag under ``prefix`` in the run folder's events,
    steps in order; of several values at one step the last written wins (a resume rewrites
    it). Empty without event files."""
    if not any(Path(run_dir).glob(EVENT_FILES)):
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
