"""Routers in front of a fleet of replicas, one module each, modelled as their projects
document and code them (each module's docstring says which version and where they differ).

A router module has a `Parameters` frozen dataclass (its knobs and their defaults) and a
`Router(num_replicas, parameters)` whose `route(request, fleet)` returns the replica index
(`pcache.replayer.fleet.routers.request`: what a router sees). `make_router` builds one from a name
and `router.parameter=value` settings (`--router-param`).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from pcache.errors import OptionError
from pcache.options.numbers import check_number

ROUTERS = {
    "round-robin": "round_robin",
    "random": "random_choice",
    "least-load": "least_load",
    "session": "session",
    "prefix-hash": "prefix_hash",
    "sglang": "sglang",
    "precise": "precise",
    "dynamo": "dynamo",
    "llm-d": "llm_d",
    "ray": "ray_prefix",
}
"""Router name -> module under `pcache.replayer.fleet.routers`."""


def router_module(name: str):
    module = ROUTERS.get(name)
    if module is None:
        raise OptionError("router", f"must be one of {', '.join(ROUTERS)}, got {name!r}")
    return importlib.import_module(f"pcache.replayer.fleet.routers.{module}")


BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


NO_LIMIT = ("none", "inf", "infinity")
"""Values of an optional limit (a `float | None` parameter) that mean "no limit"."""


def _convert(text: str, kind: Any, flag: str) -> Any:
    if isinstance(kind, str) and kind.endswith(" | None"):
        if text.lower() in NO_LIMIT:
            return None
        kind = kind.removesuffix(" | None")
    kinds = {"int": int, "float": float, "bool": bool}
    kind = kind if isinstance(kind, type) else kinds.get(kind, str)
    if kind is bool:
        value = BOOLEANS.get(text.lower())
        if value is None:
            raise OptionError("router_param", f"{flag}: expected true or false, got {text!r}")
        return value
    try:
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
    except ValueError:
        raise OptionError("router_param", f"{flag}: expected a number, got {text!r}") from None
    return text


def parse_parameters(settings: Mapping[str, str], routers: list[str]) -> dict[str, dict]:
    """`{"sglang.cache_threshold": "0.5"}` -> `{"sglang": {"cache_threshold": 0.5}}`, checked
    against each router's `Parameters`; a setting for a router not chosen is refused."""
    chosen: dict[str, dict] = {name: {} for name in routers}
    for flag, text in settings.items():
        router, _, name = flag.partition(".")
        if router not in ROUTERS:
            raise OptionError("router_param", f"{flag}: no router {router!r}")
        if router not in chosen:
            raise OptionError("router_param", f"{flag}: --router {router} is not chosen")
        known = {item.name: item for item in fields(router_module(router).Parameters)}
        if name not in known:
            names = ", ".join(known) or "none"
            raise OptionError("router_param", f"{flag}: {router}'s parameters are {names}")
        chosen[router][name] = _convert(text, known[name].type, flag)
    return chosen


def build_parameters(name: str, values: Mapping[str, Any] | None = None):
    """Router `name`'s `Parameters` with `values` over its defaults, checked: every number
    finite, at least its field's
    `minimum` (default 0), above its `above`, at most its `maximum` (field metadata)."""
    module = router_module(name)
    try:
        parameters = module.Parameters(**(values or {}))
    except TypeError as failure:
        raise OptionError("router_param", f": {failure}") from None
    for item in fields(parameters):
        value = getattr(parameters, item.name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            check_number(
                f"--router-param {name}.{item.name}",
                value,
                minimum=item.metadata.get("minimum", 0),
                maximum=item.metadata.get("maximum"),
                above=item.metadata.get("above"),
            )
    return parameters


def make_router(name: str, num_replicas: int, parameters: Mapping[str, Any] | None = None):
    """Router `name` over `num_replicas` replicas, with `parameters` over its defaults."""
    return router_module(name).Router(num_replicas, build_parameters(name, parameters))
