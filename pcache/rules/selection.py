"""Which rules run: the default set, `select`, `extend-select` and `ignore` by code or prefix.

Without `select`, the rules on by default run (`Rule.default`: observed breaks and precise
warnings); `select` replaces that set, `extend-select` adds to it (`ALL`: every rule). A code is
selected when the longest matching prefix among the selectors is a select (ties go to ignore;
the default set counts as `ALL`). Selectors from the command line replace those of the
configuration (`select`) or add to them (`extend-select`, `ignore`), as in ruff.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache

from pcache.errors import OptionError, UsageError

ALL = "ALL"


def _match_length(selector: str, code: str) -> int:
    if selector == ALL:
        return 0
    return len(selector) if code.startswith(selector) else -1


@dataclass(frozen=True, slots=True)
class Selection:
    """Which rules run. `select=None`: the rules that are on by default (`Rule.default`).

    `extend` adds to `select` or to the defaults. A code is selected *explicitly* when one of
    the user's `select`/`extend` selectors (`ALL` included) picks it: explicitly selected rules
    also report their hints, and their info findings fail the run.
    """

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    extend: tuple[str, ...] = ()

    def _best(self, code: str) -> tuple[int, int, int]:
        """Longest match among the user's selectors, the defaults (as `ALL`), the ignores."""
        chosen = (*(self.select or ()), *self.extend)
        explicit = max((_match_length(s, code) for s in chosen), default=-1)
        default = 0 if self.select is None and code in default_codes() else -1
        ignored = max((_match_length(s, code) for s in self.ignore), default=-1)
        return explicit, default, ignored

    def is_selected(self, code: str) -> bool:
        explicit, default, ignored = self._best(code)
        return max(explicit, default) >= 0 and max(explicit, default) > ignored

    def is_explicit(self, code: str) -> bool:
        explicit, _, ignored = self._best(code)
        return explicit >= 0 and explicit > ignored

    def codes(self, known: Iterable[str]) -> list[str]:
        return [code for code in known if self.is_selected(code)]


@cache
def default_codes() -> frozenset[str]:
    """The rules on by default, and PC000 (unreadable input)."""
    from pcache.rules import PARSE_ERROR, REGISTRY

    return frozenset(
        {PARSE_ERROR.code, *(module.RULE.code for module in REGISTRY if module.RULE.default)}
    )


def validate(selectors: Iterable[str], known: Iterable[str], what: str) -> tuple[str, ...]:
    known = list(known)
    result = []
    for raw in selectors:
        for selector in (part.strip().upper() for part in raw.split(",")):
            if not selector:
                continue
            if selector != ALL and not any(code.startswith(selector) for code in known):
                reason = f": unknown rule code or prefix {selector!r}"
                if what.startswith("--"):  # an option's flag: the error names the option
                    raise OptionError(what[2:].replace("-", "_"), reason, flag=what)
                raise UsageError(f"{what}{reason}")
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
    select = validate(config.select, known, source) if config.select is not None else None
    extend = validate(config.extend_select, known, source)
    ignore = validate(config.ignore, known, source)
    if cli.select is not None:
        select = validate(cli.select, known, "--select")
        extend = ignore = ()
    extend += validate(cli.extend_select, known, "--extend-select")
    ignore += validate(cli.ignore, known, "--ignore")
    return Selection(select, ignore, extend)
