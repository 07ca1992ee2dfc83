"""Read `pcache replay -o per_request.jsonl` files back into `RequestOutcome`s."""

from __future__ import annotations

from dataclasses import dataclass, fields

from pcache.errors import InputError
from pcache.prompt.reading.loading import display_name, iter_values
from pcache.replayer.report import RequestOutcome

_FIELDS = {f.name for f in fields(RequestOutcome)}
_REQUIRED = ("index", "prompt_tokens", "cached_tokens", "ttft_ms", "ttft_uncached_ms")
_NUMBERS = ("timestamp_ms", "start_ms", "ttft_ms", "ttft_uncached_ms")


@dataclass(slots=True)
class ReplayFile:
    """One per-request file: what a replay measured (engine, endpoint) or predicted."""

    source: str
    outcomes: list[RequestOutcome]

    @property
    def measured(self) -> bool:
        """Measuring drivers write the simulator's cached tokens beside their own."""
        return any(outcome.predicted_cached_tokens is not None for outcome in self.outcomes)

    @property
    def explains_misses(self) -> bool:
        """Its requests say why their missed tokens were missed (a limited or timed cache)."""
        return any(outcome.miss_reasons is not None for outcome in self.outcomes)


def read_replay_file(path: str) -> ReplayFile:
    source = display_name(path)
    outcomes = []
    for entry in iter_values(path, skip_errors=False):
        if isinstance(entry, InputError):
            raise entry
        line, value = entry
        outcomes.append(_outcome(value, source, line))
    if not outcomes:
        raise InputError(source, "no per-request lines (write them with pcache replay -o FILE)")
    return ReplayFile(source, outcomes)


def _outcome(value: object, source: str, line: int | None) -> RequestOutcome:
    if not isinstance(value, dict):
        raise InputError(source, "expected a JSON object per line", line)
    missing = [key for key in _REQUIRED if key not in value]
    if missing:
        raise InputError(
            source, f"not a replay per-request line: missing {', '.join(missing)}", line
        )
    for key in _NUMBERS:
        number = value.get(key, 0)
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise InputError(source, f"`{key}` must be a number", line)
    for key in ("prompt_tokens", "cached_tokens", "index"):
        if isinstance(value[key], bool) or not isinstance(value[key], int):
            raise InputError(source, f"`{key}` must be an integer", line)
    if not isinstance(value.get("miss_reasons") or {}, dict):
        raise InputError(source, "`miss_reasons` must be an object", line)
    known = {key: item for key, item in value.items() if key in _FIELDS}
    known.setdefault("line", None)
    known.setdefault("timestamp_ms", 0.0)
    known.setdefault("start_ms", 0.0)
    return RequestOutcome(**known)
