"""What a crashed test worker was doing, in the run's output.

xdist reports a worker that died (a segfault, an OOM kill, pytest-timeout's thread method
ending a hang) only as "node down: Not properly terminated": the worker's stderr, where
Python's fault handler and the timeout's stack dump go, is not shown. Each worker writes
them to a file of its own instead (the fault handler on a fatal signal; every thread's
stack one second before the timeout ends it), and the controller prints that file when the
worker goes down.
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import tempfile
from pathlib import Path

import pytest

_log = None
"""This worker's crash log (an open file), None in the controller or without xdist."""


@pytest.hookimpl(trylast=True)  # after pytest's own fault handler took stderr
def pytest_configure(config) -> None:
    global _log
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        if config.pluginmanager.hasplugin("dsession"):  # the xdist controller
            config._crash_logs = Path(tempfile.mkdtemp(prefix="pytest-crash-logs-"))
        return
    folder = workerinput.get("crash_logs")
    if folder:
        _log = open(Path(folder) / f"{workerinput['workerid']}.log", "w")  # noqa: SIM115
        faulthandler.enable(file=_log, all_threads=True)


def pytest_unconfigure(config) -> None:
    if getattr(config, "_crash_logs", None) is not None:
        shutil.rmtree(config._crash_logs, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    node.workerinput["crash_logs"] = str(node.config._crash_logs)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    if not error:
        return
    log = Path(node.config._crash_logs) / f"{node.workerinput['workerid']}.log"
    text = log.read_text(errors="replace").strip() if log.is_file() else ""
    reporter = node.config.pluginmanager.getplugin("terminalreporter")
    if text and reporter is not None:
        reporter.write_sep("!", f"{node.gateway.id} went down while running this")
        reporter.write_line(text[-20000:])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logstart(nodeid, location) -> None:
    """The log holds the current test only: its name, then what the handlers write."""
    if _log is not None:
        os.ftruncate(_log.fileno(), 0)
        os.lseek(_log.fileno(), 0, os.SEEK_SET)
        os.write(_log.fileno(), f"{nodeid}\n".encode())


@pytest.hookimpl(optionalhook=True)
def pytest_timeout_set_timer(item, settings):
    if _log is not None and settings.timeout and settings.timeout > 1:
        faulthandler.dump_traceback_later(settings.timeout - 1, file=_log)
    # None: pytest-timeout's own implementation sets the timer that ends the test


@pytest.hookimpl(optionalhook=True)
def pytest_timeout_cancel_timer(item):
    if _log is not None:
        faulthandler.cancel_dump_traceback_later()
