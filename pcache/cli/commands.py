"""The commands of a group by name, each imported and built the first time it is asked for.

`pcache --help` lists every command from its registration (name and summary) and imports
none of their modules; `pcache diff ...` imports `pcache.cli.diff` alone. A command is built
as `app.command(...)` or `app.add_typer(...)` would build it, on a Typer holding only it, and
converts its plain values without pydantic (`pcache.cli.plain_values`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

import typer
from typer.core import TyperCommand

from pcache.cli import plain_values
from pcache.cli.process_policy import ProcessPolicy, applied


@dataclass(frozen=True)
class Registered:
    """One command as registered: where it lives and what `pcache --help` says of it."""

    target: str
    """`module:attribute`: the command's function, or the Typer app of a command group."""
    summary: str
    """The first paragraph of the command's help, the line the group's `--help` lists (a test
    holds it equal to the help the command itself has)."""
    policy: ProcessPolicy | None = None
    """What the command asks of the process (`pcache.cli.process_policy`), if anything."""
    command_class: str | None = None
    """The click command class, an attribute of the command's module, if not Typer's own."""


def build(name: str, registered: Registered, **settings: Any) -> Any:
    """The click command of `registered`, made by a Typer with the group's `settings`."""
    module_name, attribute = registered.target.split(":")
    module = importlib.import_module(module_name)
    target = getattr(module, attribute)
    holder = typer.Typer(**settings)
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name)
    else:
        extra = (
            {"cls": getattr(module, registered.command_class)} if registered.command_class else {}
        )
        function = applied(target, registered.policy) if registered.policy else target
        holder.command(name, **extra)(function)
    command = typer.main.get_group(holder).commands[name]
    plain_values.install(command)
    return command


class LazyCommands(MutableMapping[str, Any]):
    """A group's commands: the registered names, each built on its first lookup."""

    def __init__(self, registered: dict[str, Registered], make: Callable[[str], Any]):
        self.registered = registered
        self.built: dict[str, Any] = {}
        self._make = make

    def __getitem__(self, name: str) -> Any:
        if name not in self.built:
            if name not in self.registered:
                raise KeyError(name)
            self.built[name] = self._make(name)
        return self.built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self.built[name] = command

    def __delitem__(self, name: str) -> None:
        self.built.pop(name)

    def __iter__(self) -> Iterator[str]:
        yield from self.registered
        yield from (name for name in self.built if name not in self.registered)

    def __len__(self) -> int:
        return len(self.registered) + sum(1 for name in self.built if name not in self.registered)

    def listed(self, name: str) -> Any:
        """The command as the group's `--help` lists it: itself once built, else a command
        holding only its registered summary (its module is not imported)."""
        if name in self.built:
            return self.built[name]
        return TyperCommand(name=name, help=self.registered[name].summary)
