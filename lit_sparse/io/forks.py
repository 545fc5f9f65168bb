"""A function's JSON-able result computed in a fork of this process (Linux): a fresh process's
result without its start-up (a fork's VmHWM starts at the parent's)."""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any


def call_in_fork(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` in a fork, its result passed back as JSON; ChildProcessError when the
    child fails (its traceback on stderr)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the call, then out without the parent's exit work
        os.close(read)
        code = 1
        try:
            os.write(write, json.dumps(function(*args)).encode())
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stderr.flush()
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        answer = pipe.read()
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code != 0 or not answer:
        raise ChildProcessError(f"the forked process failed (exit {code})")
    return json.loads(answer)
