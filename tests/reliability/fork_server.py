"""The process behind :class:`~tests.reliability.cli_runs.ForkServer` (run as ``python -c``
with this file's text): it imports torch and Lightning once, then forks each command it is
asked to run, and each process Lightning launches for a command's other ranks.

Questions come on stdin, one JSON line each, answered on stdout: ``{"run": {...}}`` (fork a
command; its pid), ``{"poll": pid}`` (its exit status, or null while it runs),
``{"kill_after": seconds, "pid": pid}`` (wait up to that long for it to end, then SIGKILL).
A command's process asks on a Unix socket: Lightning's launcher (DDP, FSDP2) starts ranks 1
and up with ``subprocess.Popen([python, lit_sparse/__main__.py, *args], env=...)``, a study
(``matrix --run``) each fit with ``subprocess.Popen([python, -m, lit_sparse, *args])``; here
their Popen is :class:`ForkedPopen`, which has the server fork the process instead, with the
caller's environment, working folder, standard streams and process group. A process so
forked starts in 0.1 s instead of the 7 s of CPU an interpreter spends importing torch and
Lightning; what it runs is the same command line (Lightning's rank-0-only state, set on
import from the environment, is set again from the process's own).
"""

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import lightning.fabric.strategies.launchers.subprocess_script as fabric_launcher
import lightning.pytorch.strategies.launchers.subprocess_script as trainer_launcher
from lightning.fabric.utilities.rank_zero import _get_rank, rank_zero_only

import lit_sparse.cli  # noqa: F401  torch and Lightning: imported once, for every fork below
import lit_sparse_studies.study.runner as study_runner
from lit_sparse.__main__ import __file__ as entry
from lit_sparse.__main__ import main

SOCKET = os.path.join(tempfile.mkdtemp(prefix="fork-server-"), "socket")


def execute(cwd, args):
    """``python -m lit_sparse <args>`` in ``cwd``, in this forked process, to its exit."""
    os.chdir(cwd)
    sys.argv = [entry, *args]
    try:
        code = main(args)
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else int(done.code is not None)
    except BaseException:  # as an uncaught exception ends a process: its traceback, status 1
        traceback.print_exc()
        code = 1
    sys.exit(code)  # and the interpreter's shutdown, as a process of its own ends


class ForkedPopen:
    """What Lightning's launcher gets for ``subprocess.Popen`` in a forked command: the rank
    it starts is a fork of the server (its pid, exit status and signals as a child's)."""

    def __init__(self, args, env=None, cwd=None, preexec_fn=None):
        # preexec_fn (the study's "interrupt my fit when I die") is not run: the rank is a
        # fork of the server, not of the caller, so the caller's death is not its parent's
        command = [sys.executable, "-m", "lit_sparse"]
        start = 3 if list(args[:3]) == command else 2
        assert list(args[:start]) in (command, [sys.executable, entry]), args
        job = {
            "args": list(args[start:]),
            "env": dict(os.environ if env is None else env),
            "cwd": os.path.abspath(cwd or os.getcwd()),
            "group": os.getpgrp(),  # a child starts in its parent's process group
        }
        self.args, self.returncode, self._lock = args, None, threading.Lock()
        self._socket = socket.socket(socket.AF_UNIX)
        self._socket.connect(SOCKET)
        self._answers = self._socket.makefile("r")
        line = (json.dumps({"spawn": job}) + "\n").encode()
        socket.send_fds(self._socket, [line], [0, 1, 2])  # the streams it inherits
        self.pid = json.loads(self._answers.readline())["pid"]

    def poll(self):
        if self.returncode is None:
            with self._lock:
                self._socket.sendall((json.dumps({"status": self.pid}) + "\n").encode())
                self.returncode = json.loads(self._answers.readline())["status"]
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.01)
        return self.returncode

    def send_signal(self, signum):
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)


class Launching:
    """The ``subprocess`` module as Lightning's launchers and the study runner see it."""

    Popen = ForkedPopen
    TimeoutExpired = subprocess.TimeoutExpired


fabric_launcher.subprocess = trainer_launcher.subprocess = study_runner.subprocess = Launching


class Server:
    def __init__(self):
        self.selector = selectors.DefaultSelector()
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(SOCKET)
        self.listener.listen()
        self.selector.register(self.listener, selectors.EVENT_READ, self.accept)
        self.selector.register(sys.stdin.fileno(), selectors.EVENT_READ, self.read_stdin)
        self.clients = {}  # socket -> (bytes read, descriptors received)
        self.stdin = b""
        self.exits = {}  # pid -> exit status (negative: the signal that killed it)
        self.waiting = None  # (pid, deadline) of a kill_after to answer

    def fork(self, cwd, args, streams, group):
        """Fork the command into process group ``group`` (0: its own); the child gets
        ``streams`` (a function giving fds 0, 1, 2)."""
        pid = os.fork()
        if pid:
            return pid
        os.setpgid(0, group)
        for client in self.clients:
            client.close()
        self.listener.close()
        self.selector.close()
        for target, fd in enumerate(streams()):
            if fd is not None and fd != target:
                os.dup2(fd, target)
                os.close(fd)
        execute(cwd, args)

    def answer(self, value):
        sys.stdout.write(json.dumps(value) + "\n")
        sys.stdout.flush()

    def read_stdin(self, fd):
        data = os.read(fd, 65536)
        if not data:
            raise SystemExit(0)  # the tests are done
        self.stdin += data
        while b"\n" in self.stdin:
            line, self.stdin = self.stdin.split(b"\n", 1)
            self.ask(json.loads(line))

    def ask(self, question):
        if "run" in question:
            job = question["run"]

            def streams():
                flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                return None, os.open(job["stdout"], flags), os.open(job["stderr"], flags)

            group = 0 if job.get("own_group") else os.getpgrp()
            self.answer({"pid": self.fork(job["cwd"], job["args"], streams, group)})
        elif "poll" in question:
            self.answer({"status": self.exits.get(question["poll"])})
        elif "kill_after" in question:
            self.waiting = question["pid"], time.monotonic() + question["kill_after"]

    def accept(self, listener):
        client, _ = listener.accept()
        self.clients[client] = (b"", [])
        self.selector.register(client, selectors.EVENT_READ, self.read_client)

    def read_client(self, client):
        try:
            data, fds, _, _ = socket.recv_fds(client, 1 << 20, 3)
        except ConnectionError:  # a client killed (a test's SIGKILL) while a message was due
            data = b""
        if not data:
            self.selector.unregister(client)
            for fd in self.clients.pop(client)[1]:  # streams of a spawn it never asked for
                os.close(fd)
            client.close()
            return
        buffered, received = self.clients[client]
        buffered, received = buffered + data, received + fds
        while b"\n" in buffered:
            line, buffered = buffered.split(b"\n", 1)
            question = json.loads(line)
            if "spawn" in question:
                job, streams = question["spawn"], received
                received = []

                def spawned(job=job, streams=streams):
                    os.environ.clear()
                    os.environ.update(job["env"])
                    rank_zero_only.rank = _get_rank() or 0  # set on import, from the env
                    return streams

                answer = {"pid": self.fork(job["cwd"], job["args"], spawned, job["group"])}
                for fd in streams:
                    os.close(fd)
            else:
                answer = {"status": self.exits.get(question["status"])}
            try:
                client.sendall((json.dumps(answer) + "\n").encode())
            except ConnectionError:  # it was killed before the answer: its reset comes next
                break
        self.clients[client] = (buffered, received)

    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.exits[pid] = os.waitstatus_to_exitcode(status)

    def serve(self):
        while True:
            for key, _ in self.selector.select(timeout=0.01):
                key.data(key.fileobj)
            self.reap()
            if self.waiting is not None:
                pid, deadline = self.waiting
                if pid not in self.exits and time.monotonic() >= deadline:
                    os.kill(pid, signal.SIGKILL)
                    while pid not in self.exits:
                        time.sleep(0.01)
                        self.reap()
                if pid in self.exits:
                    self.waiting = None
                    self.answer({"status": self.exits[pid]})


Server().serve()
