"""The command list of `pcache --help` comes from the registration (no command module
imported) and reads as the commands' own help would; plain option values convert as Typer's
pydantic adapters convert them."""

from __future__ import annotations

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pcache.cli import plain_values
from pcache.cli.app import COMMANDS, app


def _help(group) -> str:
    with typer.Context(group, info_name="pcache") as context:
        return group.get_help(context)


@pytest.mark.parametrize("width", [60, 80, 120])
def test_the_listed_summaries_are_the_commands_own(monkeypatch, width):
    monkeypatch.setenv("COLUMNS", str(width))
    group = typer.main.get_command(app)
    listed = _help(group)
    assert not group.commands.built
    for name in COMMANDS:
        assert group.commands[name].help.split("\n\n")[0] == COMMANDS[name].summary
    assert _help(group) == listed


def test_every_command_runs_through_the_group():
    runner = CliRunner()
    for name in COMMANDS:
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0, result.output
        assert result.output.startswith(f"Usage: pcache {name} ")
    assert "Did you mean 'diff'" in runner.invoke(app, ["dif"]).output


def _typer_value(annotation, value, **bounds):
    from typer._coercion import build_runtime_param, resolve_type_descriptor
    from typer.models import OptionInfo

    descriptor = resolve_type_descriptor(annotation, OptionInfo(**bounds))
    try:
        return build_runtime_param(descriptor)._coerce_value(value, param=None, ctx=None)
    except Exception:
        return plain_values._UNSURE


NUMBERS = st.one_of(
    st.integers(-(10**20), 10**20).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(str),
    st.from_regex(r"[-+ 0-9._e]{0,12}", fullmatch=True),
    st.integers(-5, 5),
    st.floats(-5, 5),
)


@settings(max_examples=300, deadline=None)
@given(value=NUMBERS, low=st.none() | st.integers(-3, 3))
def test_plain_values_convert_as_typer_does(value, low):
    for annotation in (int, float, str):
        info = typer.models.OptionInfo(min=low)
        plain = plain_values.plain(annotation, info, value)
        if plain is not plain_values._UNSURE:
            expected = _typer_value(annotation, value, min=low)
            assert plain == expected and type(plain) is type(expected), (annotation, value)
    assert plain_values.plain(list[str], info, ("a", "b")) == ["a", "b"]
