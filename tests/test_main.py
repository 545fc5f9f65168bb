"""``python -m lit_sparse``: other packages add commands through the ``lit_sparse.commands``
entry point group, listed by ``--help``, run with their arguments, isolated when broken."""

from __future__ import annotations

import importlib.metadata

import pytest

import lit_sparse.__main__ as entry
from lit_sparse.commands import COMMANDS, GROUP, entry_summary

CALLS: list[list[str]] = []


def hello(x: int = 0, name: str = "world") -> int:
    """A third party's command: records its arguments."""
    CALLS.append([x, name])
    return 7


def _points(*pairs: tuple[str, str]) -> list[importlib.metadata.EntryPoint]:
    return [importlib.metadata.EntryPoint(name, value, GROUP) for name, value in pairs]


@pytest.fixture
def installed(monkeypatch):
    """Installed packages' commands are these entry points (the registry as it was after)."""
    COMMANDS.builtin_names()  # discovered first: kept as they are
    saved = dict(COMMANDS.classes)

    def use(*pairs):
        points = _points(*pairs)
        monkeypatch.setattr(type(COMMANDS).__mro__[1], "entry_points", lambda self: points)
        COMMANDS._installed = None
        for name in [n for n, target in COMMANDS.classes.items() if n not in saved]:
            del COMMANDS.classes[name]

    yield use
    COMMANDS.classes.clear()
    COMMANDS.classes.update(saved)
    COMMANDS._installed = None


def warnings_of(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning")]


def test_an_installed_command_runs_with_its_arguments_and_is_listed(installed, capsys):
    installed(("hello", f"{__name__}:hello"))
    CALLS.clear()
    assert entry.main(["hello", "--x", "1"]) == 7 and CALLS == [[1, "world"]]
    assert entry.main(["--help"]) == 0
    listing = capsys.readouterr().out
    assert "commands of installed packages (lit_sparse.commands):" in listing
    # the first sentence of the command module's docstring, read without importing it
    assert "  hello         other packages add commands through the ``lit_sparse.commands``" in (
        listing
    )


def test_a_command_is_listed_by_its_docstring_or_else_its_target():
    (point,) = _points(("lazy", "lit_sparse._lazy:lazy_names"))
    assert entry_summary(point) == "Public names of a package that import on first use (PEP 562 ..."
    (point,) = _points(("gone", "no_such_module_here:main"))
    assert entry_summary(point) == "no_such_module_here:main"


def test_the_studies_commands_join_through_the_entry_point(capsys):
    """lit_sparse_studies adds its commands the way a third party would."""
    assert {"bench", "coverage", "flops", "matrix", "probe"} <= set(COMMANDS.installed())
    assert not {"bench", "matrix"} & set(COMMANDS.builtin_names())
    assert entry.main(["--help"]) == 0
    assert "  matrix        the paper's run matrix" in capsys.readouterr().out


def test_a_broken_command_is_one_line_and_a_taken_name_is_not_added(installed, capsys):
    installed(("broken", "no_such_module_here:main"), ("export", f"{__name__}:hello"))
    assert entry.main(["broken"]) == 2
    err = capsys.readouterr().err
    assert "error: command 'broken' (no_such_module_here:main) cannot be loaded: " in err
    assert "ModuleNotFoundError" in err and "Traceback" not in err
    COMMANDS._installed = None
    assert "export" not in COMMANDS.installed()
    (warning,) = warnings_of(capsys)  # the built-in export stays
    assert warning.startswith("warning: command 'export'") and "is not added" in warning
    assert "export" not in COMMANDS.installed()
    assert COMMANDS.find("export")[0].__module__ == "lit_sparse.commands.export"


@pytest.mark.parametrize("name", ["fit", "generate", "matrix", "bench"])
def test_a_third_party_command_never_replaces_a_built_in_one(installed, capsys, name):
    """Every built-in name (Lightning's, lit_sparse's, the studies') is kept, whichever entry
    point is found first; the other is one warning line."""
    studies = (
        [(name, f"lit_sparse_studies.commands.{name}:main")] if name in ("matrix", "bench") else []
    )
    installed((name, f"{__name__}:hello"), *studies, ("ok", f"{__name__}:hello"))
    assert "ok" in COMMANDS.installed()
    (warning,) = warnings_of(capsys)
    assert warning.startswith(f"warning: command {name!r} ({__name__}:hello, ")
    kept = COMMANDS.installed().get(name)
    assert (kept.value if kept else None) == (studies[0][1] if studies else None)
    assert COMMANDS.find(name)[0] is not hello


NOT_CALLABLE = 42


def refuses() -> int:
    """A third party's command that raises a ConfigError without reports_errors."""
    from lit_sparse.errors import ConfigError

    raise ConfigError("--size 0 is no size; expected a positive number")


def test_a_third_party_command_never_replaces_a_studies_command(installed, capsys):
    """Issue 57 (SW2): a third party's ``matrix`` silently replaced the studies' ``matrix``;
    the studies' command is kept whichever is found first, and the other is one warning."""
    studies = "lit_sparse_studies.commands.matrix:main"
    pair = [("matrix", f"{__name__}:hello"), ("matrix", studies)]
    for order in (pair, pair[::-1]):
        installed(*order)
        assert COMMANDS.installed()["matrix"].value == studies
        (warning,) = warnings_of(capsys)
        assert f"warning: command 'matrix' ({__name__}:hello, " in warning and studies in warning


def test_two_packages_with_one_command_name_keep_the_first_and_warn(installed, capsys):
    installed(("hi", f"{__name__}:hello"), ("hi", f"{__name__}:refuses"))
    assert COMMANDS.installed()["hi"].value == f"{__name__}:hello"
    (warning,) = warnings_of(capsys)
    assert f"warning: command 'hi' ({__name__}:refuses, " in warning


def test_an_entry_point_that_is_not_callable_is_one_line(installed, capsys):
    """Issue 57 (TB7): a command entry point naming an int raised a bare TypeError."""
    installed(("num", f"{__name__}:NOT_CALLABLE"))
    assert entry.main(["num"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: command 'num' ({__name__}:NOT_CALLABLE) cannot be loaded: ")
    assert "names a int, not a function or a class" in err and err.count("\n") == 1


def test_a_third_party_config_error_is_one_line(installed, capsys):
    """Issue 57 (minor): a third party's ConfigError showed a traceback."""
    installed(("sized", f"{__name__}:refuses"))
    assert entry.main(["sized"]) == 2
    err = capsys.readouterr().err
    assert err == "error: --size 0 is no size; expected a positive number\n"


def test_an_unknown_command_lists_every_command(installed, capsys):
    """Issue 57 (minor): an unknown command's error listed only fit/validate/test/extrapolate."""
    installed(("hello", f"{__name__}:hello"))
    assert entry.main(["helo"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown command 'helo' (did you mean 'hello'?)")
    assert all(name in err for name in ("fit", "extrapolate", "generate", "plugins", "hello"))
    assert err.count("\n") == 1


def test_a_command_package_that_exits_on_import_is_one_line(
    installed, capsys, tmp_path, monkeypatch
):
    (tmp_path / "exiting_command.py").write_text("import sys\nsys.exit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    installed(("exiting", "exiting_command:main"))
    assert entry.main(["exiting"]) == 2
    err = capsys.readouterr().err
    why = "it called sys.exit(3) as it was imported"
    assert err == f"error: command 'exiting' (exiting_command:main) cannot be loaded: {why}\n"
