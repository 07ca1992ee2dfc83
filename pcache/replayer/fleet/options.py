"""`FleetOptions`: `replay --simulate --replicas N --router P` (one pool per replica)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pcache.defaults import DEFAULT_ROUTER
from pcache.errors import OptionError, UsageError
from pcache.replayer.fleet.routers import build_parameters, parse_parameters, router_module
from pcache.replayer.fleet.routers.request import DEFAULT_CHARS_PER_TOKEN

MAX_REPLICAS = 4096
FLEET_POLICIES = ("vllm", "radix")


def parse_list(flag: str, text: str) -> list[str]:
    """`a,b,c` -> its non-empty items (`--replicas`, `--router`)."""
    items = [item.strip() for item in text.split(",")]
    if not items or any(not item for item in items):
        raise UsageError(f"{flag} must be a comma-separated list, got {text!r}")
    return items


def parse_replicas(text: str) -> tuple[int, ...]:
    counts = []
    for item in parse_list("--replicas", text):
        if not item.isdigit() or not 1 <= int(item) <= MAX_REPLICAS:
            raise OptionError("replicas", f": each count must be 1 to {MAX_REPLICAS}, got {item!r}")
        counts.append(int(item))
    return tuple(dict.fromkeys(counts))


def parse_router_params(values: list[str] | None) -> tuple[tuple[str, str], ...]:
    """`--router-param sglang.cache_threshold=0.5` (repeated) -> (name, value) pairs."""
    pairs = []
    for value in values or ():
        name, equals, text = value.partition("=")
        if not equals or "." not in name:
            raise OptionError("router_param", f"must be ROUTER.NAME=VALUE, got {value!r}")
        pairs.append((name.strip(), text.strip()))
    return tuple(pairs)


@dataclass(frozen=True, slots=True)
class FleetOptions:
    """Replica counts and routers to simulate (every pair of the two: the grid)."""

    replicas: tuple[int, ...] = (1,)
    routers: tuple[str, ...] = ("round-robin",)
    router_params: tuple[tuple[str, str], ...] = ()
    """`router.name` -> value, as given (`--router-param`)."""
    chars_per_token: int = DEFAULT_CHARS_PER_TOKEN
    """Hash-id traces: characters each token stands for in the routers' text view."""
    parameters: dict = field(default_factory=dict, compare=False, repr=False)
    """The parsed parameters per router (filled from `router_params`)."""

    def __post_init__(self) -> None:
        if not self.replicas or any(not 1 <= n <= MAX_REPLICAS for n in self.replicas):
            raise OptionError("replicas", f": each count must be 1 to {MAX_REPLICAS}")
        if not self.routers:
            raise OptionError("router", ": give at least one router")
        for name in self.routers:
            router_module(name)
        if self.chars_per_token < 1:
            raise OptionError("chars_per_token", "must be at least 1")
        parsed = parse_parameters(dict(self.router_params), list(self.routers))
        for name, values in parsed.items():  # refuse bad values now, before any replay
            build_parameters(name, values)
        object.__setattr__(self, "parameters", parsed)

    @property
    def is_grid(self) -> bool:
        return len(self.replicas) * len(self.routers) > 1


def fleet_from_flags(
    replicas: str | None,
    router: str = DEFAULT_ROUTER,
    params: list[str] | None = None,
    chars_per_token: int = DEFAULT_CHARS_PER_TOKEN,
) -> FleetOptions | None:
    """The `FleetOptions` of `--replicas`, `--router`, `--router-param`, `--chars-per-token`
    as given on a command line (`replay`, `report`); None without `--replicas`."""
    if replicas is None:
        if router != DEFAULT_ROUTER or params or chars_per_token != DEFAULT_CHARS_PER_TOKEN:
            raise UsageError("--router, --router-param and --chars-per-token need --replicas")
        return None
    return FleetOptions(
        replicas=parse_replicas(replicas),
        routers=tuple(dict.fromkeys(parse_list("--router", router))),
        router_params=parse_router_params(params),
        chars_per_token=chars_per_token,
    )
