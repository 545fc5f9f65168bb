"""How many threads the CPU kernels run on (lit_sparse/kernels/threads.py): the CPU quota of the
process's cgroup (v2 or v1, its own and its ancestors'), its affinity and torch's setting."""

from __future__ import annotations

import torch

from lit_sparse.kernels import threads


def test_the_quota_is_read_from_cgroup_v2_or_v1(tmp_path):
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert threads.cgroup_cpus(tmp_path) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert threads.cgroup_cpus(tmp_path) is None
    (tmp_path / "cpu.max").unlink()
    v1 = tmp_path / "cpu"
    v1.mkdir()
    (v1 / "cpu.cfs_quota_us").write_text("50000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    assert threads.cgroup_cpus(tmp_path) == 0.5


def test_the_quota_is_read_where_the_process_is(tmp_path):
    """The process's own cgroup (from /proc/self/cgroup) and its ancestors, the smallest
    quota winning: a job placed in a child cgroup with 1 CPU on a machine with none."""
    membership = tmp_path / "membership"
    membership.write_text("4:memory:/x\n1:cpu:/jobs/bench\n0::/a/b\n")
    v1 = tmp_path / "cpu"
    (v1 / "jobs" / "bench").mkdir(parents=True)
    (v1 / "cpu.cfs_quota_us").write_text("-1\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    (v1 / "jobs" / "bench" / "cpu.cfs_quota_us").write_text("100000\n")
    (v1 / "jobs" / "bench" / "cpu.cfs_period_us").write_text("100000\n")
    assert threads.cgroup_cpus(tmp_path, membership) == 1.0
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "cpu.max").write_text("50000 100000\n")  # the parent's is smaller
    (tmp_path / "a" / "b" / "cpu.max").write_text("max 100000\n")
    assert threads.cgroup_cpus(tmp_path, membership) == 0.5
    (tmp_path / "a" / "cpu.max").unlink()
    (v1 / "jobs" / "bench" / "cpu.cfs_quota_us").unlink()
    assert threads.cgroup_cpus(tmp_path, membership) is None


def test_threads_follow_affinity_quota_and_torch(monkeypatch):
    threads.usable_cores.cache_clear()
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(threads, "cgroup_cpus", lambda: 1.5)
    saved = torch.get_num_threads()
    try:
        torch.set_num_threads(4)
        assert threads.usable_threads() == 2  # a quota of 1.5 CPUs: 2 threads, not 4
        torch.set_num_threads(1)
        assert threads.usable_threads() == 1  # the user asked torch for one thread
    finally:
        torch.set_num_threads(saved)
        threads.usable_cores.cache_clear()
