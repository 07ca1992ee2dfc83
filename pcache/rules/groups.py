"""Lint's totals per group of requests (`--group-by KEY`): which app, tenant or model loses
the tokens.

A key is `model`, `user` (the body's `user`, or `metadata.user_id`), `metadata.X` (the body's
metadata, else the log line's), `header.X` (the log line's `headers`, case-insensitive), `file`
(the request's file) or `app` (the first `[tool.pcache.apps]` entry whose matches hold, e.g.
`support = ["metadata.app=support"]`). Several keys group by their combination.

Each figure is charged to the group of the request that pays it: a request's prompt and
reused tokens, the tokens a fix saves in it, the fixed log's tokens; so every figure of the
groups adds up to the whole run's exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pcache.errors import ConfigError, OptionError
from pcache.text.redaction import shown

if TYPE_CHECKING:
    from pcache.prompt.shapes.request import Request
    from pcache.rules.money import Money

PLAIN_KEYS = ("model", "user", "file", "app")
DOTTED_KEYS = ("metadata.", "header.")
NONE = "(none)"
"""The value of a key a request does not have."""
OTHER_APP = "(other)"
MAX_GROUPS = 1000
"""Groups kept apart; the requests of any later group are counted in `OTHER_GROUPS`."""
OTHER_GROUPS = "(other groups)"


def check_keys(keys: list[str], apps: dict[str, list[str]]) -> tuple[str, ...]:
    """The `--group-by` keys, each one pcache reads (`app` needs `[tool.pcache.apps]`)."""
    for key in keys:
        dotted = key.startswith(DOTTED_KEYS) and len(key.split(".", 1)[1]) > 0
        if key not in PLAIN_KEYS and not dotted:
            raise OptionError(
                "group_by",
                f"unknown key {key!r}: model, user, file, app, metadata.NAME or header.NAME",
            )
        if key == "app" and not apps:
            raise OptionError(
                "group_by", "app: no [tool.pcache.apps] table says which requests are which app"
            )
    return tuple(keys)


def parse_apps(table: Any, where: str) -> dict[str, list[tuple[str, str]]]:
    """`[tool.pcache.apps]`: app name -> the `KEY=VALUE` matches that all hold for its
    requests."""
    if not isinstance(table, dict):
        raise ConfigError(f'{where} must be a table of app = ["KEY=VALUE", ...]')
    apps = {}
    for name, matches in table.items():
        if isinstance(matches, str):
            matches = [matches]
        if not isinstance(matches, list) or not all(
            isinstance(match, str) and "=" in match for match in matches
        ):
            raise ConfigError(f'{where} {name} must be a list of "KEY=VALUE" strings')
        pairs = [tuple(match.split("=", 1)) for match in matches]
        for key, _ in pairs:
            if key == "app" or (key not in PLAIN_KEYS and not key.startswith(DOTTED_KEYS)):
                raise ConfigError(
                    f"{where} {name}: {key!r} is not a key (model, user, file, metadata.NAME,"
                    " header.NAME)"
                )
        apps[name] = pairs
    return apps


def value_of(request: Request, key: str, apps: dict[str, list[tuple[str, str]]]) -> str:
    """The request's value of one key (`NONE` when it has none)."""
    if key == "model":
        return request.model or NONE
    if key == "file":
        return request.source
    if key == "app":
        for name, matches in apps.items():
            if all(value_of(request, k, apps) == v for k, v in matches):
                return name
        return OTHER_APP
    if key == "user":
        user = request.raw.get("user")
        if user is None:
            user = _metadata(request).get("user_id")
        return NONE if user is None else str(user)
    if key.startswith("metadata."):
        value = _metadata(request).get(key.split(".", 1)[1])
        return NONE if value is None or isinstance(value, (dict, list)) else str(value)
    wanted = key.split(".", 1)[1].lower()
    headers = request.annotations.get("headers") or {}
    for name, value in headers.items():
        if str(name).lower() == wanted and not isinstance(value, (dict, list)):
            return str(value)
    return NONE


def _metadata(request: Request) -> dict[str, Any]:
    body = request.raw.get("metadata")
    if isinstance(body, dict):
        return body
    outer = request.annotations.get("metadata")
    return outer if isinstance(outer, dict) else {}


@dataclass(slots=True)
class GroupTotal:
    """One group's share of the run's totals (`key`: each key's value as outputs show it)."""

    key: dict[str, str]
    requests: int = 0
    prompt_tokens: int = 0
    reusable_tokens: int = 0
    prompt_tokens_if_fixed: int = 0
    reusable_tokens_if_fixed: int = 0
    rule_tokens: dict[str, int] = field(default_factory=dict)
    rule_counts: dict[str, int] = field(default_factory=dict)
    rule_length: dict[str, int] = field(default_factory=dict)
    """Prompt tokens each rule's fix adds to the group's requests (negative: takes off)."""
    first_ms: float | None = None
    last_ms: float | None = None
    timed_requests: int = 0
    """Requests with a timestamp."""
    money: Money | None = None
    """The group's cost (`pcache.rules.money`), when every request of the run has a price."""

    @property
    def reprefilled_tokens(self) -> int:
        return self.prompt_tokens - self.reusable_tokens

    @property
    def name(self) -> str:
        return ", ".join(f"{key}={value}" for key, value in self.key.items())

    def as_dict(self) -> dict[str, object]:
        attributed = sum(self.rule_tokens.values())
        prompt, fixed = self.prompt_tokens, self.prompt_tokens_if_fixed
        codes = sorted(self.rule_tokens.keys() | self.rule_counts.keys())
        return {
            "key": dict(self.key),
            "name": self.name,
            "requests": self.requests,
            "prompt_tokens": prompt,
            "reusable_tokens": self.reusable_tokens,
            "reprefilled_tokens": self.reprefilled_tokens,
            "attributed_tokens": attributed,
            "unattributed_tokens": self.reprefilled_tokens - attributed,
            "cacheable_ratio": round(self.reusable_tokens / prompt, 6) if prompt else 0.0,
            "if_fixed": {
                "prompt_tokens": fixed,
                "reusable_tokens": self.reusable_tokens_if_fixed,
                "cacheable_ratio": (
                    round(self.reusable_tokens_if_fixed / fixed, 6) if fixed else 0.0
                ),
            },
            "rules": sorted(
                (
                    {
                        "code": code,
                        "count": self.rule_counts.get(code, 0),
                        "tokens_reprefilled": self.rule_tokens.get(code, 0),
                    }
                    for code in codes
                ),
                key=lambda row: (-row["tokens_reprefilled"], row["code"]),
            ),
            "money": self.money.as_dict() if self.money is not None else None,
        }


def _shown(key: str, value: str) -> str:
    """A group's value as outputs show it: model, file and app names as they are, request
    values as their shapes under `--redact`."""
    if key in ("model", "file", "app", "price") or value in (NONE, OTHER_GROUPS):
        return value
    return shown(value)


class Groups:
    """The group of each request (by number) and each group's totals."""

    def __init__(
        self,
        keys: tuple[str, ...],
        apps: dict[str, list[tuple[str, str]]],
        extra_keys: tuple[str, ...] = (),
    ):
        self.keys = keys
        self.apps = apps
        self.extra_keys = extra_keys
        """Keys whose values the caller gives with each request (`add_request(extra=...)`)."""
        self.totals: list[GroupTotal] = []
        self.index: dict[tuple[str, ...], int] = {}
        self.of_request: list[int] = []
        """Each request's group (by request number)."""
        self.debts: dict[tuple[str, int], int] = {}

    def group_of(self, request: Request, extra: tuple[str, ...] = ()) -> int:
        """The request's group; `extra`: values of keys beyond `keys` (`extra_keys`), kept
        apart even past `MAX_GROUPS`."""
        values = tuple(value_of(request, key, self.apps) for key in self.keys) + extra
        found = self.index.get(values)
        if found is None:
            if len(self.totals) >= MAX_GROUPS:
                values = (OTHER_GROUPS,) * len(self.keys) + extra
                found = self.index.get(values)
            if found is None:
                found = len(self.totals)
                self.index[values] = found
                pairs = zip((*self.keys, *self.extra_keys), values, strict=True)
                self.totals.append(GroupTotal({key: _shown(key, value) for key, value in pairs}))
        return found

    def add_request(
        self, request: Request, prompt_tokens: int, reused: int, extra: tuple[str, ...] = ()
    ) -> None:
        group = self.group_of(request, extra)
        self.of_request.append(group)
        total = self.totals[group]
        total.requests += 1
        total.prompt_tokens += prompt_tokens
        total.reusable_tokens += reused
        stamp = request.timestamp
        if stamp is not None:
            total.timed_requests += 1
            total.first_ms = stamp if total.first_ms is None else min(total.first_ms, stamp)
            total.last_ms = stamp if total.last_ms is None else max(total.last_ms, stamp)

    def count(self, request: Request, code: str) -> None:
        counts = self.totals[self.group_of(request)].rule_counts
        counts[code] = counts.get(code, 0) + 1

    def uncount(self, group: int, code: str) -> None:
        counts = self.totals[group].rule_counts
        counts[code] -= 1

    def charge(self, number: int, code: str, tokens: int) -> None:
        """`tokens` (negative: a debt) of rule `code` paid by request `number`."""
        group = self.of_request[number]
        if tokens < 0:
            self.debts[(code, group)] = self.debts.get((code, group), 0) - tokens
            return
        rules = self.totals[group].rule_tokens
        rules[code] = rules.get(code, 0) + tokens

    def lengthen(self, number: int, code: str, tokens: int) -> None:
        """`tokens` added to request `number`'s prompt by rule `code`'s fix (negative: taken
        off)."""
        lengths = self.totals[self.of_request[number]].rule_length
        lengths[code] = lengths.get(code, 0) + tokens

    def settle(self, code: str, paid: int) -> None:
        """Take `paid` tokens of a rule's debts off its groups: the groups the debts arose
        in first, then the others."""
        debts = [
            (group, debt) for (debt_code, group), debt in self.debts.items() if debt_code == code
        ]
        order = [group for group, _ in debts] + [
            group for group in range(len(self.totals)) if group not in dict(debts)
        ]
        for group in order:
            if not paid:
                break
            rules = self.totals[group].rule_tokens
            taken = min(paid, rules.get(code, 0))
            if taken:
                rules[code] -= taken
                paid -= taken
        for group, _ in debts:
            del self.debts[(code, group)]

    def add_fixed(self, number: int, prompt_tokens: int, reused: int) -> None:
        total = self.totals[self.of_request[number]]
        total.prompt_tokens_if_fixed += prompt_tokens
        total.reusable_tokens_if_fixed += reused

    def ranked(self) -> list[GroupTotal]:
        """The groups, most re-prefilled tokens first."""
        return sorted(self.totals, key=lambda total: (-total.reprefilled_tokens, total.name))
