"""A registry of one kind of plugin (attention patterns, tasks, commands): short name -> object."""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import pkgutil
import traceback
from collections.abc import Callable
from typing import Generic, TypeVar

from lit_sparse.errors import ConfigError

log = logging.getLogger(__name__)

P = TypeVar("P", bound=type)


class Registry(Generic[P]):
    """Subclasses of ``base`` by name: built-ins from ``package``, others from ``group``.
    A kind whose plugins are not classes (commands: functions) overrides :meth:`refuses`."""

    def __init__(self, kind: str, base: type, package: str, group: str):
        self.kind, self.base, self.package, self.group = kind, base, package, group
        self.classes: dict[str, P] = {}
        self.loaded = {"builtins": False, "entry_points": False}

    def register(self, name: str) -> Callable[[P], P]:
        """Class decorator: register a subclass of ``base`` under ``name``."""

        def register(cls: P) -> P:
            if problem := self.refuses(cls, repr(cls)):
                raise TypeError(f"{self.kind} {name!r}: {problem}")
            if not cls.__module__.startswith(self.package + "."):
                # a name from elsewhere is checked against every built-in; a built-in's is
                # checked against those registered before it (discovering them here would
                # import the package's modules while the package itself is still importing)
                self.discover_builtins()
            if name in self.classes:
                owner = self.classes[name].__qualname__
                raise ValueError(f"{self.kind} {name!r} is already registered by {owner}")
            cls.name = name
            self.classes[name] = cls
            return cls

        return register

    def discover_builtins(self) -> None:
        """Import every module of the package once; the plugins among them register."""
        if self.loaded["builtins"]:
            return
        self.loaded["builtins"] = True  # first: the modules register through the decorator
        for module in pkgutil.iter_modules(importlib.import_module(self.package).__path__):
            if not module.ispkg and not module.name.startswith("_"):
                name = f"{self.package}.{module.name}"
                try:
                    importlib.import_module(name)
                except (Exception, SystemExit) as err:  # one broken file breaks nothing else
                    log.warning(
                        "warning: %s module %s is not loaded, its plugins are not registered: %s",
                        self.kind, name, _raised(err),
                    )  # fmt: skip

    def builtin_names(self) -> list[str]:
        """The names registered by the package's own modules, sorted."""
        self.discover_builtins()
        prefix = self.package + "."
        return sorted(n for n, cls in self.classes.items() if cls.__module__.startswith(prefix))

    def refuses(self, obj: object, shown: str) -> str:
        """Why ``obj`` (``shown`` in the message) cannot be registered; '' when it can."""
        if isinstance(obj, type) and issubclass(obj, self.base):
            return ""
        return f"{shown} is not a subclass of {self.base.__name__}"

    def entry_points(self) -> list[importlib.metadata.EntryPoint]:
        return list(importlib.metadata.entry_points(group=self.group))

    def load(self) -> dict[str, P]:
        """Every class by name, built-ins and installed entry points loaded."""
        if not self.loaded["entry_points"]:
            self.loaded["entry_points"] = True  # first: a plugin may look names up as it loads
            builtins = set(self.builtin_names())
            for entry in self.entry_points():
                if problem := self._register_entry_point(entry, builtins):
                    dist = getattr(entry.dist, "name", None) or "an unknown distribution"
                    log.warning(
                        "warning: %s plugin %r (%s, from %s) is not registered: %s",
                        self.kind, entry.name, entry.value, dist, problem,
                    )  # fmt: skip
        return self.classes

    def _register_entry_point(self, entry, builtins: set[str]) -> str:
        """Register one entry point; '' when done, else why it was refused."""
        if entry.name in builtins:
            owner = self.classes[entry.name].__name__
            return f"the name {entry.name!r} is a built-in {self.kind} ({owner})"
        try:
            cls = entry.load()
        except SystemExit as err:  # a package that exits as it imports ends nothing else
            return f"it called sys.exit({err.code!r}) as it was imported"
        except Exception as err:  # anything a broken package raises on import
            return f"{type(err).__name__}: {' '.join(str(err).split())}"
        if problem := self.refuses(cls, entry.value):
            return problem
        registered = self.classes.get(entry.name)
        if registered is cls:  # the class registered itself under this name as it loaded
            return ""
        if registered is not None:
            return f"the name {entry.name!r} is already registered by {registered.__module__}"
        if getattr(cls, "name", None) and self.classes.get(cls.name) is cls:
            return f"{entry.value} is already registered as {cls.name!r}"
        cls.name = entry.name
        self.classes[entry.name] = cls
        return ""

    def names(self) -> list[str]:
        """Registered names (built-in and from entry points), sorted."""
        return sorted(self.load())

    def unknown(self, value: str, field: str) -> ConfigError:
        """The error for a name that is not registered, listing the ones that are."""
        return ConfigError(
            f"{field}={value!r}: unknown {self.kind}; registered: {', '.join(self.names())}"
        )

    def get(self, name: str, field: str | None = None) -> P:
        """The class registered under ``name``; an unknown name lists the valid ones."""
        try:
            return self.load()[name]
        except KeyError:
            raise self.unknown(name, field or self.kind) from None


def _raised(err: BaseException) -> str:
    """One line: what an import raised, and where (the innermost file and line)."""
    if isinstance(err, SystemExit):
        return f"it called sys.exit({err.code!r}) as it was imported"
    where = ""
    if not isinstance(err, SyntaxError) and (frames := traceback.extract_tb(err.__traceback__)):
        where = f" ({frames[-1].filename}, line {frames[-1].lineno})"
    return f"{type(err).__name__}: {' '.join(str(err).split())}{where}"
