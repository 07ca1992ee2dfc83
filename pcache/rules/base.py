"""What a lint rule is, what it reports, and the findings a check yields."""

from __future__ import annotations

from dataclasses import dataclass, field

SEVERITIES = ("error", "warning", "info")
FIX_AVAILABILITY = ("none", "sometimes", "always")
CLAIMS = ("none", "rounding")


@dataclass(frozen=True, slots=True)
class Rule:
    """A rule's identity: code, kebab-case name, default severity, one-line summary.

    `default`: on without `--select` (rules that report an observed break, and warnings whose
    precision is high); the others are opt-in (`--extend-select CODE`, `--select ALL`).
    """

    code: str
    name: str
    severity: str
    summary: str
    fix_availability: str = "none"
    default: bool = True

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

    What a finding may be charged (`pcache.rules.fixed_replay`): lost tokens are charged to the
    fixes that save them in the fixed log; a check's finding on a request a fix changes becomes
    that fix's finding there, and is charged nothing otherwise; `claims="rounding"` takes the
    shared tokens the cache's granularity could not reuse (a prefix that ends inside a block),
    `"none"` (the default) nothing.
    A `hint` is a single-request suspicion without an observed change: reported only when its
    rule is selected explicitly, and never charged. Findings of one `group` are reported once,
    where the first was found, with the highest severity seen and the costs of all.
    `at_template`: the finding is about the chat template, not a place in a request.
    """

    message: str
    json_path: str
    offset: int = 0
    token_position: int | None = None
    severity: str | None = None
    fix_title: str | None = None
    fixable: bool = False
    claims: str = "none"
    hint: bool = False
    group: object = None
    at_template: bool = False

    def __post_init__(self) -> None:
        assert self.claims in CLAIMS, self.claims


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
    listed: bool = True
    """False: past the findings a run lists (`runner.KEEP_FINDINGS`), counted in totals only."""

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
