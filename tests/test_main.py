"""``python -m lit_sparse``: other packages add commands through the ``lit_sparse.commands``
entry point group, listed by ``--help``, run with their arguments, isolated when broken."""

from __future__ import annotations

import importlib.metadata

import pytest

import lit_sparse.__main__ as entry

CALLS: list[list[str]] = []


def hello(argv: list[str]) -> int:
    """A third party's command: records its arguments."""
    CALLS.append(argv)
    return 7


def _points(*pairs: tuple[str, str]) -> list[importlib.metadata.EntryPoint]:
    group = entry.COMMAND_ENTRY_POINTS
    return [importlib.metadata.EntryPoint(name, value, group) for name, value in pairs]


@pytest.fixture
def installed(monkeypatch):
    def use(*pairs):
        points = _points(*pairs)
        monkeypatch.setattr(
            entry.importlib.metadata, "entry_points", lambda group: points if group else []
        )

    return use


def test_an_installed_command_runs_with_its_arguments_and_is_listed(installed, capsys):
    installed(("hello", f"{__name__}:hello"))
    CALLS.clear()
    assert entry.main(["hello", "--x", "1"]) == 7 and CALLS == [["--x", "1"]]
    assert entry.main(["--help"]) == 0
    listing = capsys.readouterr().out
    assert "commands of installed packages (lit_sparse.commands):" in listing
    # the first sentence of the command module's docstring, read without importing it
    assert "  hello         other packages add commands through the ``lit_sparse.commands``" in (
        listing
    )


def test_a_command_is_listed_by_its_docstring_or_else_its_target():
    (point,) = _points(("lazy", "lit_sparse._lazy:lazy_names"))
    assert entry.summary(point) == "Public names of a package that import on first use (PEP 562 ..."
    (point,) = _points(("gone", "no_such_module_here:main"))
    assert entry.summary(point) == "no_such_module_here:main"


def test_the_studies_commands_join_through_the_entry_point(capsys):
    """lit_sparse_studies adds its commands the way a third party would."""
    assert {"bench", "coverage", "flops", "matrix", "probe"} <= set(entry.installed_commands())
    assert not {"bench", "matrix"} & set(entry.OWN_COMMANDS)
    assert entry.main(["--help"]) == 0
    assert "  matrix        the paper's run matrix" in capsys.readouterr().out


def test_a_broken_command_is_one_line_and_a_taken_name_is_not_added(installed, capsys):
    installed(("broken", "no_such_module_here:main"), ("export", f"{__name__}:hello"))
    assert entry.main(["broken"]) == 2
    err = capsys.readouterr().err
    assert "error: command 'broken' (no_such_module_here:main) cannot be loaded: " in err
    assert "ModuleNotFoundError" in err and "Traceback" not in err
    assert "export" not in entry.installed_commands()
    assert "warning: command 'export'" in capsys.readouterr().err


NOT_CALLABLE = 42


def refuses(argv: list[str]) -> int:
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
        assert entry.installed_commands()["matrix"].value == studies
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert f"warning: command 'matrix' ({__name__}:hello, " in err and studies in err


def test_two_packages_with_one_command_name_keep_the_first_and_warn(installed, capsys):
    installed(("hi", f"{__name__}:hello"), ("hi", f"{__name__}:refuses"))
    assert entry.installed_commands()["hi"].value == f"{__name__}:hello"
    err = capsys.readouterr().err
    assert f"warning: command 'hi' ({__name__}:refuses, " in err and err.count("\n") == 1


def test_an_entry_point_that_is_not_callable_is_one_line(installed, capsys):
    """Issue 57 (TB7): a command entry point naming an int raised a bare TypeError."""
    installed(("num", f"{__name__}:NOT_CALLABLE"))
    assert entry.main(["num"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: command 'num' ({__name__}:NOT_CALLABLE) cannot be run: ")
    assert "int" in err and err.count("\n") == 1


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
    assert (
        err == "error: command 'exiting' (exiting_command:main) cannot be loaded: SystemExit: 3\n"
    )
