"""The lint rules: one `pcNNN_name` module per rule, found in this package."""

from __future__ import annotations

import importlib
import pkgutil
import re
from types import ModuleType

from pcache.rules.base import Rule

_RULE_MODULE = re.compile(r"pc\d{3}_\w+")


def _rule_modules() -> tuple[ModuleType, ...]:
    """Every `pcNNN_name` module of this package, in code order: a new rule is a new file."""
    names = sorted(
        info.name for info in pkgutil.iter_modules(__path__) if _RULE_MODULE.fullmatch(info.name)
    )
    return tuple(importlib.import_module(f"{__name__}.{name}") for name in names)


REGISTRY: tuple[ModuleType, ...] = _rule_modules()

PARSE_ERROR = Rule(
    code="PC000",
    name="unreadable-input",
    severity="error",
    summary="A file or line could not be read as a request",
)

RULES: dict[str, Rule] = {module.RULE.code: module.RULE for module in REGISTRY}
RULES[PARSE_ERROR.code] = PARSE_ERROR


def _rule_for_cause() -> dict[str, Rule]:
    """Each divergence cause (`pcache.divergence.causes`) and the one rule that reports it: the
    rule module lists it in `CAUSES`."""
    from pcache.divergence.causes import CAUSES, NEUTRAL, RULE_OF_CAUSE

    mapping: dict[str, Rule] = {}
    for module in REGISTRY:
        for cause in getattr(module, "CAUSES", ()):
            assert cause in CAUSES and cause not in NEUTRAL, (module.RULE.code, cause)
            assert cause not in mapping, (cause, mapping.get(cause), module.RULE.code)
            mapping[cause] = module.RULE
    missing = set(CAUSES) - NEUTRAL - set(mapping)
    assert not missing, f"causes no rule reports: {sorted(missing)}"
    declared = {cause: (rule.code, rule.name) for cause, rule in mapping.items()}
    assert declared == RULE_OF_CAUSE, (
        "pcache.divergence.causes.RULE_OF_CAUSE differs from the rules"
    )
    return mapping


RULE_FOR_CAUSE: dict[str, Rule] = _rule_for_cause()


def rule_of(kind: str) -> dict[str, str] | None:
    """The lint rule a divergence cause breaks, as `{"code", "name"}` (None: a neutral cause)."""
    rule = RULE_FOR_CAUSE.get(kind)
    return None if rule is None else {"code": rule.code, "name": rule.name}


def module_for(code: str) -> ModuleType | None:
    for module in REGISTRY:
        if module.RULE.code == code:
            return module
    return None


def documentation(code: str) -> str:
    """The rule's documentation (its module docstring)."""
    module = module_for(code)
    if module is None:
        return "Reported when a file or JSONL line is not valid JSON or not a request shape."
    return (module.__doc__ or "").strip()
