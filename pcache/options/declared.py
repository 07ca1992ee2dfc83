"""An option declared once, beside its field: `option(default, flags=..., help=..., panel=...)`.

A field of an options dataclass made with `option` carries its `Declared` in its metadata: the
flags, help text and panel the command line shows, and the command line's own default, type,
bounds and reading of the value where they differ from the field's (a flag left out is None,
so the field's default applies). The commands build their parameters from these declarations
(`pcache.cli.replay_parameters`), and the library API names a refused option by the field.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, field
from typing import Any

PANELS = {
    "input": "Input",
    "simulate": "Simulate (--simulate, the default)",
    "engine": "Engine (--engine cpu|gpu, --gpu)",
    "endpoint": "Endpoint (--endpoint URL)",
    "fleet": "Fleet (--simulate --replicas)",
    "settings": "Rendering and hashing",
    "output": "Output",
}
"""The panels of a command's help, in their order: a name to its heading."""
NOT_GIVEN = None
"""The command line's default of most options: left out, the field's default applies."""


@dataclass(frozen=True, slots=True)
class Declared:
    """An option as the command line shows it: flags, help, panel; its default there (None:
    not given), its type there (None: the field's), the bounds it is checked against as it is
    parsed, and how a given value becomes the field's (`read`)."""

    flags: tuple[str, ...]
    help: str
    panel: str
    command_default: Any = NOT_GIVEN
    type: Any = None
    metavar: str | None = None
    minimum: float | None = None
    """A bound the parser checks and the help shows (`[x>=1]`)."""
    maximum: float | None = None
    checked: tuple[float, float] | None = None
    """Bounds checked as the value is parsed, in `check_number`'s words (the help shows none)."""
    read: Callable[[Any], Any] | None = None

    @property
    def flag(self) -> str:
        """The long flag (`--cache-blocks`), the one messages name."""
        return next(name for name in self.flags if name.startswith("--")).split("/")[0]


def option(default: Any = MISSING, *, default_factory: Any = MISSING, **declared: Any) -> Any:
    """A dataclass field whose metadata declares its option (`Declared`'s fields as keywords,
    or `declared=` one made once for fields of several classes)."""
    made = declared.pop("declared", None) or Declared(**declared)
    return field(default=default, default_factory=default_factory, metadata={"declared": made})


def declared_of(item: Field) -> Declared | None:
    """The declaration of a field made with `option`, else None."""
    return item.metadata.get("declared")


def flag_of(item: Field) -> str:
    """A field's command-line flag: its declaration's, else its `metadata["flag"]` (a field
    that several flags set), else `--` and its name in kebab case."""
    declared = declared_of(item)
    if declared is not None:
        return declared.flag
    return item.metadata.get("flag") or "--" + item.name.replace("_", "-")


def default_of(item: Field) -> Any:
    """A field's default (MISSING when it has none)."""
    if item.default is not MISSING:
        return item.default
    return item.default_factory() if item.default_factory is not MISSING else MISSING
