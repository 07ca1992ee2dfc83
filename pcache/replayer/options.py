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
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pcache.defaults import DEFAULT_MODEL, MAX_BLOCK_SIZE
from pcache.errors import OptionError, UsageError
from pcache.options.declared import Declared, declared_of, default_of, flag_of, option
from pcache.options.numbers import number_problem
from pcache.settings import SETTINGS_FIELDS, Settings

if TYPE_CHECKING:
    from pcache.traces.record import Trace

MAX_SEED = 2**63 - 1

Options = TypeVar("Options", bound="ReplayOptions")

__all__ = ["SETTINGS_FIELDS", "Declared", "ReplayOptions", "build_options", "flag_of"]

MODEL_HELP = (
    "A preset (tiny, qwen3-0.6b, llama3-8b, qwen3-8b, gpt-oss-20b, ...), a model"
    " directory or a config.json (--simulate default: {default})."
)
"""`--model`'s help; `{default}` is the simulated model's default."""
MODEL = Declared(
    ("--model", "-m"),
    MODEL_HELP.format(default=DEFAULT_MODEL),
    "input",
    type=str | None,
)
TIME_SCALE = Declared(
    ("--time-scale",),
    "--engine timed, --endpoint: multiply the trace's gaps between arrivals.",
    "engine",
    command_default=1.0,
)
MAX_OUTPUT_TOKENS = Declared(
    ("--max-output-tokens",), "--engine, --endpoint: cap each output length.", "engine"
)
MAX_PROMPT_TOKENS = Declared(
    ("--max-prompt-tokens",), "--engine: keep each prompt's first N tokens.", "engine"
)
CONCURRENCY = Declared(
    ("--concurrency",),
    "serial (one request at a time) or timed (requests overlap).",
    "simulate",
    command_default="serial",
)
DECODE_RATE = Declared(
    ("--decode-rate",),
    "Decode tokens/s per request (timed mode).",
    "simulate",
    command_default=50.0,
)
"""Options of several drivers, declared once for each of their fields."""


def _joined(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def check_field(options: Any, name: str, **bounds: float | None) -> None:
    """`check_number`'s bounds for field `name` of `options` (None passes): an `OptionError`
    naming the field, by its declared flag on the command line."""
    value = getattr(options, name)
    if value is None:
        return
    problem = number_problem(value, **bounds)
    if problem is not None:
        item = type(options).__dataclass_fields__[name]
        raise OptionError(name, problem, flag=flag_of(item))


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
    trace_format: str = option(
        "auto",
        flags=("--trace-format",),
        help="auto, mooncake, bailian or requests.",
        panel="input",
        command_default="auto",
    )
    trace_block_size: int | None = option(
        None,
        flags=("--trace-block-size",),
        help="Tokens per hash id (hash-id traces).",
        panel="input",
    )
    """Tokens per hash id of a hash-id trace (default: the format's)."""
    strict: bool = option(
        False,
        flags=("--strict",),
        help="Fail on the first malformed line.",
        panel="input",
        command_default=False,
    )
    """Fail on the first malformed line instead of skipping it."""
    cache_blocks: int | None = option(
        None,
        flags=("--cache-blocks",),
        help="Cache capacity in blocks that prompts can use (default: unlimited;"
        " --endpoint: the server's). vLLM's num_gpu_blocks counts one more, the null block"
        " it never fills: give its count minus 1.",
        panel="simulate",
    )
    """The cache's capacity in blocks prompts can use (None: unlimited, the engine's
    footprint, or with `--endpoint` the server's own: vLLM's `num_gpu_blocks` less its null
    block)."""
    limit: int | None = option(
        None, flags=("--limit",), help="Replay the first N requests only.", panel="input"
    )
    """Replay the first N requests only."""
    keep_requests: bool = False
    """Keep every request's outcome in the report (`ReplayReport.per_request`)."""

    def __post_init__(self) -> None:
        from pcache.replayer.simulate.driver import MAX_CACHE_BLOCKS

        check_field(self, "trace_block_size", minimum=1, maximum=MAX_BLOCK_SIZE)
        check_field(self, "cache_blocks", minimum=1, maximum=MAX_CACHE_BLOCKS)
        check_field(self, "limit", minimum=1)
        if self.settings.executor != "local" and self.mode != "simulate":
            raise OptionError("executor", f"{self.settings.executor} applies to --simulate")

    @classmethod
    def refusal(cls, name: str, flag: str, owners: Sequence[type[ReplayOptions]]) -> UsageError:
        """The error for option `name` (flag `flag`), a field of `owners` only, given to this
        driver: a message of `refusals`, else the drivers it applies to."""
        if name in cls.refusals:
            return _refused(name, flag, cls.refusals[name])
        drivers = _joined([driver for owner in owners for driver in owner.flags])
        return OptionError(name, f"applies to {drivers}", flag=flag)

    def check_plot(self) -> None:
        """Refuse `--plot` where this driver draws no chart."""
        raise OptionError("plot", f"does not apply to {_joined(self.flags)}")

    def read_trace(
        self,
        trace: str | tuple[Any, ...],
        settings: Settings | None = None,
        keep_requests: bool = False,
    ) -> Trace:
        """The trace (a path, or request bodies in arrival order), read with these options
        (`keep_requests`: a request file or in-memory trace keeps its parsed requests, read
        here, in this process)."""
        import os

        from pcache.traces.readers import read_trace

        settings = settings or self.settings
        is_path = isinstance(trace, str | os.PathLike) and os.fspath(trace) != "-"
        sharded = settings.executor != "local" and not keep_requests
        if is_path and (sharded or os.path.isdir(trace)):
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
            keep_requests=keep_requests,
        )


def build_options(
    chosen: type[Options],
    drivers: Sequence[type[ReplayOptions]],
    given: dict[str, Any],
    base: ReplayOptions | None = None,
) -> Options:
    """`chosen`'s options from `given` (None: not given), over `base`'s values when given.

    `tokenizer`, `block_size`, `hash_algo`, `cache_salt`, `date`, `jobs`, `executor` and
    `ray_address` fill `settings`. A field of another of `drivers` is refused (`OptionError`)
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
            if any(value != default_of(item) for item in items):
                raise chosen.refusal(name, flag_of(items[0]), owners)
    if changes:
        kwargs["settings"] = replace(kwargs.get("settings", Settings()), **changes)
        if "tokenizer" in given and given["tokenizer"] is not None:
            kwargs.setdefault("tokenizer_given", True)
        if given.get("block_size") is not None and "block_size_given" in own:
            kwargs.setdefault("block_size_given", True)  # it wins over a server's
    return chosen(**kwargs)


def _refused(name: str, flag: str, message: str) -> UsageError:
    """A refusal's message as the error of field `name` when it begins with its flag."""
    if message.startswith(flag + " "):
        return OptionError(name, message.removeprefix(flag + " "), flag=flag)
    return UsageError(message)


def declared_fields(options_class: type) -> dict[str, Declared]:
    """The declared options of an options class (and of the classes it embeds), by field."""
    return {item.name: declared_of(item) for item in fields(options_class) if declared_of(item)}
