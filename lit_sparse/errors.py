"""Errors a user can act on: the CLI prints their message as one line, without a traceback."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

E = TypeVar("E", bound=BaseException)


class LitSparseError(Exception):
    """Base class: the message names what is wrong and what to do about it."""


class ConfigError(LitSparseError, ValueError):
    """An option value that is not allowed; the message names field, value and what is allowed."""


class CheckpointError(LitSparseError):
    """A checkpoint cannot be read, or does not match the config it is used with."""


class StorageError(LitSparseError, OSError):
    """A file could not be written (full disk, permissions); the previous file is unchanged."""


class RunNotFoundError(LitSparseError, FileNotFoundError):
    """A path that is no run, experiment folder or checkpoint; the message names runs nearby."""


class RunInUseError(LitSparseError):
    """Another process is writing the run folder this command would write."""


class DamagedFileError(LitSparseError, ValueError):
    """A result or metadata file is truncated or not what it should be; the message names it."""


def check_format(
    data: Any, expected: str, what: str, error: type[LitSparseError] = ConfigError
) -> None:
    """Raise ``error`` unless ``data``'s ``"format"`` is ``expected`` (``what``: e.g. "a table")."""
    found = data.get("format") if isinstance(data, Mapping) else None
    if found != expected:
        raise error(f"not {what}: format={found!r}, expected {expected!r}")


class NonFiniteLossError(LitSparseError):
    """Training produced a NaN or infinite loss; training stops at once."""


class KernelCheckError(LitSparseError, RuntimeError):
    """A GPU kernel failed its first-use self-check under ``LIT_SPARSE_KERNEL_CHECK=strict``."""


class MissingExtraError(LitSparseError, ImportError):
    """An optional dependency is missing or too old; the message names what to install."""


def error_chain(err: BaseException | None) -> Iterator[BaseException]:
    """``err``, then its cause/context chain, each error once."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        yield err
        seen.add(id(err))
        err = err.__cause__ or err.__context__


def find_error(err: BaseException | None, kind: type[E]) -> E | None:
    """The error of type ``kind`` in ``err``'s cause/context chain (libraries wrap ours)."""
    return next((e for e in error_chain(err) if isinstance(e, kind)), None)


def find_user_error(err: BaseException | None) -> LitSparseError | None:
    """The LitSparseError behind ``err``, if any."""
    return find_error(err, LitSparseError)


INTERRUPTED = 130
"""The exit status of a command stopped by Ctrl-C (SIGINT), as a shell reports it."""


def interrupted(detail: str = "") -> int:
    """How every command ends on Ctrl-C: stdout flushed, one line on stderr, exit status 130."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    print(f"interrupted (Ctrl-C){f': {detail}' if detail else ''}", file=sys.stderr)
    return INTERRUPTED
