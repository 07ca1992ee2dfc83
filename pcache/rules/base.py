"""What a lint rule is, what it reports, and the findings a check yields."""

from __future__ import annotations

from dataclasses import dataclass, field

SEVERITIES = ("error", "warning", "info")
FIX_AVAILABILITY = ("none", "sometimes", "always")


@dataclass(frozen=True, slots=True)
class Rule:
    """A rule's identity: code, kebab-case name, default severity, one-line summary."""

    code: str
    name: str
    severity: str
    summary: str
    fix_availability: str = "none"

    def __post_init__(self) -> None:
        assert self.severity in SEVERITIES, self.severity
        assert self.fix_availability in FIX_AVAILABILITY, self.fix_availability
        assert self.code[:2] == "PC" and self.code[2:].isdigit() and len(self.code) == 5


@dataclass(frozen=True, slots=True)
class Violation:
    """What a check yields: a message anchored at a JSON path of the current request.

    `token_position` is set by checks that know it (template positions); otherwise the runner
    finds the token of character `offset` of the text rendered from `json_path`. `severity`
    overrides the rule's default (single-request suspicions are lower than cross-request
    evidence).
    """

    message: str
    json_path: str
    offset: int = 0
    token_position: int | None = None
    severity: str | None = None
    fix_title: str | None = None
    fixable: bool = False
    tokens_reprefilled: int | None = None
    """Set by checks whose cost is not "everything after the position" (e.g. PC510)."""


@dataclass(slots=True)
class Diagnostic:
    """One finding as reported: where it is, why it costs, and how much."""

    code: str
    name: str
    severity: str
    file: str
    request: str
    line: int
    column: int
    json_path: str
    token_position: int | None
    tokens_reprefilled: int
    message: str
    fix_title: str | None = None
    fixable: bool = False
    extra: dict[str, object] = field(default_factory=dict)

    def sort_key(self) -> tuple:
        return (self.file, self.line, self.column, self.token_position or 0, self.code)

    def as_dict(self) -> dict[str, object]:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "file": self.file,
            "request": self.request,
            "line": self.line,
            "column": self.column,
            "json_path": self.json_path,
            "token_position": self.token_position,
            "tokens_reprefilled": self.tokens_reprefilled,
            "message": self.message,
            "fix_title": self.fix_title,
            "fixable": self.fixable,
        }
