"""A resumed run's TensorBoard file sorts after its killed run's: TensorBoard reads a folder's
event files in name order (``events.out.tfevents.<second>.<host>.<pid>``) and drops the
steps a later-read file's lower steps follow, so a resume that started within the killed
run's second from a lower-sorting pid lost its steps (seen once in test_resume's kill and
resume: alpha logged at steps 0-4 of 0-6)."""

from __future__ import annotations

import time
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.utils.tensorboard import SummaryWriter


def write_steps(folder: Path, name: str, steps: range, resumed: bool) -> None:
    """An event file of ``steps`` of one scalar, renamed to ``name`` in ``folder``; a resumed
    run's starts with TensorBoard's restart mark at its first step (``purge_step``, as the
    CLI's resume in place sets it)."""
    scratch = folder / f"scratch-{name}"
    with SummaryWriter(str(scratch), purge_step=steps.start if resumed else None) as writer:
        for step in steps:
            writer.add_scalar("loss", float(step), step)
    (made,) = scratch.glob("events.out.tfevents.*")
    made.rename(folder / name)
    scratch.rmdir()


def logged_steps(folder: Path) -> list[int]:
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    events.Reload()
    return [event.step for event in events.Scalars("loss")]


def test_a_resume_in_the_killed_resumes_second_is_hidden_unless_its_file_sorts_later(tmp_path):
    """A run killed after step 3, its resume from step 2 killed after step 4, a second resume
    from step 4 to the end: read in name order, the second resume's file must come last."""
    second = int(time.time())
    for folder, last_second in ((tmp_path / "same", second + 1), (tmp_path / "later", second + 2)):
        folder.mkdir()
        write_steps(folder, f"events.out.tfevents.{second}.host.5.0", range(0, 4), False)
        write_steps(folder, f"events.out.tfevents.{second + 1}.host.9.0", range(2, 5), True)
        write_steps(folder, f"events.out.tfevents.{last_second}.host.10.0", range(4, 7), True)
    # pid 10 sorts before 9: the first resume's restart mark, read last, drops steps 4-6
    assert logged_steps(tmp_path / "same") == [0, 1, 2, 3, 4]
    assert logged_steps(tmp_path / "later") == [0, 1, 2, 3, 4, 5, 6]
