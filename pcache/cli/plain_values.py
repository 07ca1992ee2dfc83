"""Command-line values that need no pydantic: plain strings, integers, decimals and lists of
strings, converted as Typer's own adapters convert them.

Typer (0.25 and later) converts every value through a pydantic `TypeAdapter`, and importing
pydantic costs more than the rest of a small `pcache diff`. `install` gives each parameter of a
built command a conversion that takes the values whose result is certain (a `str`, an integer
or decimal written plainly, within the option's bounds, a list of strings) and hands anything
else to Typer's adapter, so every error message stays Typer's. Typer versions without the
adapters (click's own types) are left as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

try:
    from typer._coercion import RuntimeParam, build_runtime_param
except ImportError:  # Typer converts with click's types: nothing to replace
    RuntimeParam = None

_INTEGER = re.compile(r"-?(0|[1-9][0-9]{0,17})")
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]{0,14})(\.[0-9]{1,15})?")
_UNSURE = object()


def plain(annotation: Any, info: Any, value: Any) -> Any:
    """`value` converted to `annotation` where Typer's adapter would return exactly that, else
    `_UNSURE`."""
    if info.parser is not None or getattr(info, "click_type", None) is not None:
        return _UNSURE
    if annotation is str:
        return value if type(value) is str else _UNSURE
    if annotation is int:
        if type(value) is str and _INTEGER.fullmatch(value):
            value = int(value)
        return value if type(value) is int and _within(value, info) else _UNSURE
    if annotation is float:
        if (type(value) is str and _DECIMAL.fullmatch(value)) or type(value) is int:
            value = float(value)
        return value if type(value) is float and _within(value, info) else _UNSURE
    if annotation is bool:
        return value if type(value) is bool else _UNSURE
    if annotation == list[str] and isinstance(value, list | tuple):
        return list(value) if all(type(item) is str for item in value) else _UNSURE
    return _UNSURE


def _within(number: float, info: Any) -> bool:
    if info.clamp:
        return False
    return (info.min is None or number >= info.min) and (info.max is None or number <= info.max)


if RuntimeParam is not None:

    @dataclass(frozen=True)
    class PlainValues(RuntimeParam):
        """A parameter's conversion: the plain values here, the rest by Typer's adapter."""

        descriptor: Any = None
        fallback: list = field(default_factory=list, compare=False)

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            converted = plain(self.annotation, self.parameter_info, value)
            if converted is not _UNSURE:
                return converted
            if not self.fallback:
                self.fallback.append(build_runtime_param(self.descriptor))
            return self.fallback[0]._coerce_value(value, param=param, ctx=ctx)


def install(command: Any, subcommands: bool = True) -> None:
    """Give every parameter of `command`, its help option (made when first asked for) and, with
    `subcommands`, every parameter of the commands under it the plain conversion."""
    if RuntimeParam is None:
        return
    for parameter in command.params:
        _install(parameter)
    made = command.get_help_option

    def get_help_option(ctx: Any) -> Any:
        option = made(ctx)
        if option is not None:
            _install(option)
        return option

    command.get_help_option = get_help_option
    if subcommands:
        for subcommand in getattr(command, "commands", {}).values():
            install(subcommand)


def _install(parameter: Any) -> None:
    descriptor = getattr(parameter, "type_descriptor", None)
    if descriptor is None or getattr(parameter, "_runtime_param", True) is not None:
        return
    if descriptor.file_annotation is not None:
        return
    parameter._runtime_param = PlainValues(
        parameter_info=descriptor.parameter_info,
        annotation=descriptor.annotation,
        descriptor=descriptor,
    )
