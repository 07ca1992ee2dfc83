"""`ReplayOptions`: what every replay driver shares, and which option belongs to which driver.

Each driver has its own options, a frozen dataclass over this one that checks itself when it is
made (`SimulateOptions`, `EngineOptions`, `EndpointOptions`). An option is a field of the
classes of the drivers it applies to, and of no other: that is the one place where this is
written. `build_options` makes one driver's options from loose values (the command line's
flags, `pcache.replay`'s keywords); a value meant for another driver is refused with the
message the chosen class gives, unless it is that other driver's default. A new driver is one
more class here beside the others, and one more entry in `pcache.replayer.run`.

The trace itself is not an option: drivers take it beside their options.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from typing import Any, ClassVar, TypeVar

from pcache.defaults import MAX_BLOCK_SIZE
from pcache.errors import UsageError
from pcache.numbers import check_number
from pcache.pipeline import Settings
from pcache.replayer.simulate.driver import MAX_CACHE_BLOCKS
from pcache.traces.record import Trace

SETTINGS_FIELDS = (
    "tokenizer",
    "block_size",
    "hash_algo",
    "cache_salt",
    "date",
    "jobs",
    "executor",
    "ray_address",
)
"""Loose keywords that fill the embedded `Settings`."""
MAX_SEED = 2**63 - 1

Options = TypeVar("Options", bound="ReplayOptions")


def flag_of(item: Field) -> str:
    """A field's command-line flag: its `metadata["flag"]`, else `--` and its name."""
    return item.metadata.get("flag") or "--" + item.name.replace("_", "-")


def _default_of(item: Field) -> Any:
    if item.default is not MISSING:
        return item.default
    return item.default_factory() if item.default_factory is not MISSING else MISSING


def _joined(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def check_count(name: str, value: int | None, minimum: int, maximum: int | None = None) -> None:
    """`check_number` for an optional count (None passes)."""
    if value is not None:
        check_number(name, value, minimum=minimum, maximum=maximum)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayOptions:
    """How to read the trace and what every driver is told: the settings it is rendered and
    hashed with, the cache's capacity, how many requests, whether per-request outcomes are
    kept."""

    mode: ClassVar[str] = ""
    """The driver's name (`pcache.replayer.report.MODES`)."""
    flags: ClassVar[tuple[str, ...]] = ()
    """The command-line flags that choose this driver."""
    refusals: ClassVar[dict[str, str]] = {}
    """What to say when a field of another driver is given to this one (else `refusal`)."""

    settings: Settings = field(default_factory=Settings)
    tokenizer_given: bool = False
    """True when `-t` was given: a model's own tokenizer then does not replace it."""
    trace_format: str = "auto"
    trace_block_size: int | None = None
    """Tokens per hash id of a hash-id trace (default: the format's)."""
    strict: bool = False
    """Fail on the first malformed line instead of skipping it."""
    cache_blocks: int | None = None
    """The cache's capacity in blocks (None: unlimited, or the engine's footprint)."""
    limit: int | None = None
    """Replay the first N requests only."""
    keep_requests: bool = False
    """Keep every request's outcome in the report (`ReplayReport.per_request`)."""

    def __post_init__(self) -> None:
        check_count("--trace-block-size", self.trace_block_size, 1, MAX_BLOCK_SIZE)
        check_count("--cache-blocks", self.cache_blocks, 1, MAX_CACHE_BLOCKS)
        check_count("--limit", self.limit, 1)
        if self.settings.executor != "local" and self.mode != "simulate":
            raise UsageError(f"--executor {self.settings.executor} applies to --simulate")

    @classmethod
    def refusal(cls, name: str, flag: str, owners: Sequence[type[ReplayOptions]]) -> str:
        """The message for option `name` (flag `flag`), a field of `owners` only."""
        if name in cls.refusals:
            return cls.refusals[name]
        return f"{flag} applies to {_joined([f for owner in owners for f in owner.flags])}"

    def check_plot(self) -> None:
        """Refuse `--plot` where this driver draws no chart."""
        raise UsageError(f"--plot does not apply to {_joined(self.flags)}")

    def read_trace(self, trace: Any, settings: Settings | None = None) -> Trace:
        """The trace (a path, or request bodies in arrival order), read with these options."""
        import os

        from pcache.traces.readers import read_trace

        settings = settings or self.settings
        is_path = isinstance(trace, str | os.PathLike) and os.fspath(trace) != "-"
        if is_path and (settings.executor != "local" or os.path.isdir(trace)):
            from pcache.executors import executor_of
            from pcache.traces.sharded import read_trace_sharded

            return read_trace_sharded(
                trace,
                executor_of(settings.executor, settings.ray_address),
                trace_format=self.trace_format,
                strict=self.strict,
                settings=settings,
                block_size=self.trace_block_size,
            )
        return read_trace(
            trace,
            trace_format=self.trace_format,
            strict=self.strict,
            settings=settings,
            block_size=self.trace_block_size,
        )


def build_options(
    chosen: type[Options],
    drivers: Sequence[type[ReplayOptions]],
    given: dict[str, Any],
    base: ReplayOptions | None = None,
) -> Options:
    """`chosen`'s options from `given` (None: not given), over `base`'s values when given.

    `tokenizer`, `block_size`, `hash_algo`, `cache_salt`, `date`, `jobs`, `executor` and
    `ray_address` fill `settings`. A field of another of `drivers` is refused (`UsageError`)
    unless it holds that driver's default; a name no driver knows is a `TypeError`, as for
    any function.
    """
    own = {item.name: item for item in fields(chosen)}
    values: dict[str, Any] = {}
    if base is not None:
        values = {item.name: getattr(base, item.name) for item in fields(base)}
    values.update((name, value) for name, value in given.items() if value is not None)
    kwargs: dict[str, Any] = {}
    changes: dict[str, Any] = {}
    for name, value in values.items():
        if name in SETTINGS_FIELDS:
            changes[name] = value
        elif name in own:
            kwargs[name] = value
        else:
            owners = [d for d in drivers if name in {item.name for item in fields(d)}]
            if not owners:
                raise TypeError(f"replay() got an unexpected keyword argument {name!r}")
            items = [next(i for i in fields(d) if i.name == name) for d in owners]
            if any(value != _default_of(item) for item in items):
                raise UsageError(chosen.refusal(name, flag_of(items[0]), owners))
    if changes:
        kwargs["settings"] = replace(kwargs.get("settings", Settings()), **changes)
        if "tokenizer" in given and given["tokenizer"] is not None:
            kwargs.setdefault("tokenizer_given", True)
        if given.get("block_size") is not None and "block_size_given" in own:
            kwargs.setdefault("block_size_given", True)  # it wins over a server's
    return chosen(**kwargs)
