"""Which rules run: `select`, `extend-select` and `ignore` by code or prefix.

A code is selected when the longest matching prefix among the selectors is a select (ties go to
ignore). Selectors from the command line replace those of the configuration (`select`) or add to
them (`extend-select`, `ignore`), as in ruff.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pcache.errors import UsageError

ALL = "ALL"


def _match_length(selector: str, code: str) -> int:
    if selector == ALL:
        return 0
    return len(selector) if code.startswith(selector) else -1


@dataclass(frozen=True, slots=True)
class Selection:
    select: tuple[str, ...] = (ALL,)
    ignore: tuple[str, ...] = ()

    def is_selected(self, code: str) -> bool:
        best_select = max((_match_length(s, code) for s in self.select), default=-1)
        best_ignore = max((_match_length(s, code) for s in self.ignore), default=-1)
        return best_select >= 0 and best_select > best_ignore

    def codes(self, known: Iterable[str]) -> list[str]:
        return [code for code in known if self.is_selected(code)]


def validate(selectors: Iterable[str], known: Iterable[str], what: str) -> tuple[str, ...]:
    known = list(known)
    result = []
    for raw in selectors:
        for selector in (part.strip().upper() for part in raw.split(",")):
            if not selector:
                continue
            if selector != ALL and not any(code.startswith(selector) for code in known):
                raise UsageError(f"{what}: unknown rule code or prefix {selector!r}")
            result.append(selector)
    return tuple(result)


@dataclass(slots=True)
class SelectionInput:
    """Selectors from one source (configuration or command line); None: not given."""

    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)


def resolve(
    config: SelectionInput, cli: SelectionInput, known: Iterable[str], source: str = "config"
) -> Selection:
    """Combine configuration and command line; command-line `select` replaces the config's."""
    known = list(known)
    select = validate(config.select or [ALL], known, source)
    select += validate(config.extend_select, known, source)
    ignore = validate(config.ignore, known, source)
    if cli.select is not None:
        select = validate(cli.select, known, "--select")
        ignore = ()
    select += validate(cli.extend_select, known, "--extend-select")
    ignore += validate(cli.ignore, known, "--ignore")
    return Selection(select, ignore)
