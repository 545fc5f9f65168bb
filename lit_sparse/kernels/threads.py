"""How many threads a kernel call may use: the least of the CPU affinity, the cgroup's CPU quota
and torch's thread setting (``os.cpu_count()`` alone overcounts under the first two)."""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path

import torch


def cgroup_cpus(
    root: Path = Path("/sys/fs/cgroup"), membership: Path = Path("/proc/self/cgroup")
) -> float | None:
    """CPUs the smallest cgroup quota (v2 ``cpu.max`` or v1 CFS) of this process's cgroup
    (``membership`` names it) and its ancestors allows; None without a quota."""
    quotas = [_quota(folder, v1) for folder, v1 in _cgroup_folders(root, membership)]
    found = [q for q in quotas if q is not None]
    return min(found) if found else None


def _cgroup_folders(root: Path, membership: Path) -> list[tuple[Path, bool]]:
    """(folder, is v1) for the process's cpu cgroup and every ancestor, in both layouts."""
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        lines = []
    v2_path, v1_path = "/", "/"
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":
            v2_path = path or "/"
        elif "cpu" in controllers.split(","):
            v1_path = path or "/"
    folders = []
    for base, path, v1 in (
        (root, v2_path, False),
        (root / "unified", v2_path, False),
        (root / "cpu", v1_path, True),
        (root / "cpu,cpuacct", v1_path, True),
    ):
        inner = Path(path.strip("/"))
        folders += [(base / part, v1) for part in (inner, *inner.parents)]
    return folders


def _quota(folder: Path, v1: bool) -> float | None:
    try:
        if v1:
            quota = (folder / "cpu.cfs_quota_us").read_text().strip()
            period = (folder / "cpu.cfs_period_us").read_text().strip()
        else:
            quota, period = (folder / "cpu.max").read_text().split()[:2]
        return None if quota in ("max", "-1") else int(quota) / int(period)
    except (OSError, ValueError):
        return None


@functools.cache
def usable_cores() -> int:
    """The CPU cores this process may use: its affinity and its cgroup's CPU quota, the least."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    quota = cgroup_cpus()
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(1, cores)


def usable_threads() -> int:
    """Threads for one call: affinity, cgroup quota and torch.get_num_threads(), the least."""
    return max(1, min(usable_cores(), torch.get_num_threads()))
