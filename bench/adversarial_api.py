"""Call each public function of pcache's library API with hostile values; count the outcomes.

    python bench/adversarial_api.py [--count N] [--seed S] [--json]

For each function (`pcache.diff`, `hash`, `lint`, `replay`, `pcache.record.assert_cacheable`
and `assert_prefix_stable`), N calls, each with a request argument drawn from families of
hostile values (wrong types, non-JSON values, cycles, deep nesting, odd numbers and strings,
SDK-like objects that misbehave, odd paths, malformed bodies) and zero to two hostile keyword
options. An outcome is `ok` (a result), `InputError` (a `pcache.errors.InputError`, the
API's promise for bad input), `assertion` (an assertion helper failing as it should), `caller's
own` (the exception the caller's own iterator raised, passed on as Python passes it on),
`other pcache error` (another `PcacheError`: typed, but not an input error) or `other
exception` (anything else: a leak), or `timeout` (more than --timeout seconds). The draws
depend only on the seed, so two versions of pcache (PYTHONPATH=...) can be compared on the
same calls. Run it from an empty folder: it writes its fixtures into a temporary one and never
lints `.`.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import decimal
import fractions
import json
import math
import os
import random
import signal
import sys
import tempfile
import types
from collections.abc import Callable, Iterator
from typing import Any

GOOD = {"messages": [{"role": "user", "content": "Where is P-42?"}]}


class Dumps:
    """An SDK-like object: `model_dump` returns `value`, or raises it when it is an exception."""

    def __init__(self, value: Any):
        self.value = value

    def model_dump(self, **_: Any) -> Any:
        if isinstance(self.value, BaseException):
            raise self.value
        return self.value() if callable(self.value) else self.value


class Itself:
    """An SDK-like object whose dump holds a new copy of itself: unbounded depth."""

    def model_dump(self, **_: Any) -> Any:
        return {"role": "user", "content": [Itself()]}


class CallersFailure(RuntimeError):
    """What the caller's own code raises: the API passes it on."""


class NoLength:
    """An iterable that raises while it is being read."""

    def __iter__(self) -> Iterator[Any]:
        yield GOOD
        raise CallersFailure("the caller's iterator failed")


class Text(str):
    pass


class Number(int):
    pass


def _nested(depth: int, kind: str) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value} if kind == "dict" else [value]
    return value


def _cycle(kind: str) -> Any:
    if kind == "dict":
        body: dict[str, Any] = dict(GOOD)
        body["again"] = body
        return body
    messages: list[Any] = [{"role": "user", "content": "x"}]
    messages.append(messages)
    return {"messages": messages}


def _fixtures(folder: str) -> dict[str, str]:
    """Files that hostile paths point at: junk, a folder, a FIFO, deep JSON, a bad body."""
    paths = {
        "junk": os.path.join(folder, "junk.json"),
        "binary": os.path.join(folder, "binary.json"),
        "deep": os.path.join(folder, "deep.json"),
        "bad_body": os.path.join(folder, "bad.jsonl"),
        "good": os.path.join(folder, "good.json"),
        "folder": os.path.join(folder, "folder"),
        "fifo": os.path.join(folder, "fifo.json"),
    }
    with open(paths["junk"], "w") as handle:
        handle.write('{"messages": [')
    with open(paths["binary"], "wb") as handle:
        handle.write(b"\x00\x01\xff" * 10)
    with open(paths["deep"], "w") as handle:
        handle.write('{"prompt": "x", "m": ' + "[" * 5000 + "]" * 5000 + "}")
    with open(paths["bad_body"], "w") as handle:
        handle.write('{"messages": 5}\n{"prompt": 7}\n{"token_ids": [-1, 1.5]}\n')
    with open(paths["good"], "w") as handle:
        json.dump(GOOD, handle)
    os.mkdir(paths["folder"])
    with open(os.path.join(paths["folder"], "x.json"), "w") as handle:
        handle.write("[1, 2")
    if hasattr(os, "mkfifo"):
        os.mkfifo(paths["fifo"])
    return paths


def _scalars(paths: dict[str, str]) -> list[Any]:
    return [
        None,
        True,
        False,
        0,
        -1,
        2**70,
        10**400,
        math.nan,
        math.inf,
        -0.0,
        1e308,
        "",
        "x",
        "\x00",
        "\ud800",
        '{"prompt": "x"}',
        "  [1, 2]",
        "no/such/file.json",
        "/dev/null",
        "/dev/zero",
        *paths.values(),
        b'{"prompt": "x"}',
        bytearray(b"{}"),
        memoryview(b"{}"),
        object(),
        {1, 2},
        frozenset(),
        1j,
        Ellipsis,
        int,
        lambda: None,
        (item for item in [GOOD]),
        range(3),
        decimal.Decimal("1.5"),
        fractions.Fraction(1, 3),
        types.SimpleNamespace(a=1),
        Text("text"),
        Number(3),
        NoLength(),
        Dumps(RuntimeError("dump failed")),
        Dumps(None),
        Dumps(5),
        Dumps(object()),
        Itself(),
    ]


def _bodies(rng: random.Random, scalars: list[Any]) -> list[Callable[[], Any]]:
    """Makers of request-shaped hostile values (fresh on each call: some are mutated)."""
    pick = lambda: rng.choice(scalars)  # noqa: E731
    return [
        lambda: {"prompt": pick()},
        lambda: {"messages": pick()},
        lambda: {"messages": [pick()]},
        lambda: {"messages": [{"role": pick(), "content": "x"}]},
        lambda: {"messages": [{"role": "user", "content": pick()}]},
        lambda: {"messages": [{"role": "user", "content": [{"type": "text", "text": pick()}]}]},
        lambda: {**GOOD, "tools": pick()},
        lambda: {**GOOD, "tools": [{"type": "function", "function": pick()}]},
        lambda: {
            "messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": pick()}}]}]
        },
        lambda: {"token_ids": pick()},
        lambda: {"token_ids": [pick(), 1, 2]},
        lambda: {**GOOD, "model": pick(), "cache_salt": pick()},
        lambda: {**GOOD, "session_id": pick(), "timestamp": pick()},
        lambda: {"custom_id": "x", "url": "/v1/chat/completions", "body": pick()},
        lambda: {**GOOD, rng.choice([5, None, (1, 2), 1.5, True]): "x"},
        lambda: {**GOOD, "extra": _nested(rng.choice([50, 101, 1000, 100_000]), "dict")},
        lambda: {**GOOD, "extra": _nested(rng.choice([50, 101, 1000, 100_000]), "list")},
        lambda: _cycle(rng.choice(["dict", "list"])),
        lambda: {"messages": [{"role": "user", "content": "x" * 1_000_000}]},
        lambda: {"messages": [{"role": "user", "content": "x"}] * 500},
        lambda: {"messages": [Dumps({"role": "user", "content": pick()})]},
        lambda: collections.OrderedDict(GOOD),
        lambda: types.MappingProxyType(GOOD),
        lambda: tuple(GOOD["messages"]),
        lambda: [GOOD, pick()],
        lambda: [pick(), pick()],
        lambda: [],
        lambda: [[GOOD]],
    ]


OPTIONS_COMMON: dict[str, list[Any]] = {
    "block_size": [0, -1, True, "16", 16.0, math.nan, 2**64, 2**20 + 1],
    "tokenizer": ["", 5, "\x00", "no-such-tokenizer-here", "cl100k_base"],
    "date": ["x", 5, "2026-02-30", ""],
}
OPTIONS = {
    "diff": {**OPTIONS_COMMON, "hash_algo": ["md5", 5, ""], "cache_salt": [5, b"x", ""]},
    "hash": {**OPTIONS_COMMON, "hash_algo": ["md5", 5, ""], "cache_salt": [5, b"x", ""]},
    "lint": {
        **OPTIONS_COMMON,
        "select": ["PC1", [5], ["PC9Z"], [""]],
        "ignore": [5, ["nope"]],
        "profile": [5, "x", ""],
        "fix": [1, "yes", True],
        "since": [5, "HEAD"],
        "progress": [5, "x"],
        "config": [5, "/no/such/pyproject.toml", b"pyproject.toml"],
    },
    "replay": {
        **OPTIONS_COMMON,
        "cache_blocks": [0, -1, math.nan, 1.5, "4", 2**80, True],
        "cache_gb": [math.nan, -1, math.inf, "1", 0],
        "limit": [0, -1, True, 1.5],
        "policy": [5, "lfu", ""],
        "concurrency": ["async", 5],
        "decode_rate": [0, math.nan, -1, "x", math.inf],
        "mode": ["warp", 5, ""],
        "sweep_points": [1, -1, 10**6, "8"],
        "model": ["nope", 5, ""],
        "calibration": [5, "/no/such/calibration.json", "\x00"],
        "no_such_option": [1],
        "options": [5, "simulate", object()],
        "progress": [5],
    },
    "assert_cacheable": {
        "min_ratio": [math.nan, -1, 2, "0.5", None, True, math.inf, -math.inf],
        "profile": [5, "x"],
        "block_size": [0, "16", math.nan],
    },
    "assert_prefix_stable": {"block_size": [0, "16"], "date": [5, "x"]},
}


def _functions() -> dict[str, Callable[..., Any]]:
    import pcache
    from pcache.record import assert_cacheable, assert_prefix_stable

    def diff(value: Any, rng: random.Random, **options: Any) -> Any:
        return (
            pcache.diff(value, GOOD, **options)
            if rng.random() < 0.5
            else pcache.diff(GOOD, value, **options)
        )

    def cacheable(value: Any, rng: random.Random, **options: Any) -> Any:
        ratio = options.pop("min_ratio", 0.0)
        return assert_cacheable([value] if rng.random() < 0.5 else value, ratio, **options)

    return {
        "diff": diff,
        "hash": lambda value, rng, **options: pcache.hash(value, **options),
        "lint": lambda value, rng, **options: pcache.lint(value, **options),
        "replay": lambda value, rng, **options: pcache.replay(value, **options),
        "assert_cacheable": cacheable,
        "assert_prefix_stable": lambda value, rng, **options: assert_prefix_stable(
            value, **options
        ),
    }


class Timeout(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    def expire(*_: Any) -> None:
        raise Timeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _outcome(call: Callable[..., Any], arguments: tuple, seconds: float) -> tuple[str, str]:
    from pcache.errors import InputError, PcacheError

    value, rng, options = arguments
    try:
        with _deadline(seconds):
            call(value, rng, **options)
    except Timeout:
        return "timeout", ""
    except InputError:
        return "InputError", ""
    except PcacheError as failure:
        return "other pcache error", f"{type(failure).__name__}: {failure}"
    except AssertionError:
        return "assertion", ""
    except CallersFailure:
        return "caller's own", ""
    except BaseException as failure:  # a leak is what this counts
        if isinstance(failure, KeyboardInterrupt):
            raise
        return "other exception", f"{type(failure).__name__}: {failure}"
    return "ok", ""


def sweep(count: int, seed: int, seconds: float) -> dict[str, Any]:
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    functions = _functions()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="pcache-adversarial-") as folder:
        paths = _fixtures(folder)
        for name, function in functions.items():
            rng = random.Random(f"{seed}:{name}")
            scalars = _scalars(paths)
            bodies = _bodies(rng, scalars)
            counts: collections.Counter[str] = collections.Counter()
            leaks: dict[str, int] = {}
            for _ in range(count):
                value = rng.choice(scalars) if rng.random() < 0.35 else rng.choice(bodies)()
                choices = OPTIONS[name]
                chosen = rng.sample(sorted(choices), k=min(rng.choice([0, 0, 1, 2]), len(choices)))
                options = {key: rng.choice(choices[key]) for key in chosen}
                if name == "assert_cacheable" and "min_ratio" not in options:
                    options["min_ratio"] = 0.0
                kind, detail = _outcome(function, (value, rng, options), seconds)
                counts[kind] += 1
                if detail:
                    key = detail.splitlines()[0][:160]
                    leaks[key] = leaks.get(key, 0) + 1
            results[name] = {"counts": dict(counts), "leaks": leaks}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300, help="calls per function")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per call")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    arguments = parser.parse_args()
    import pcache

    results = sweep(arguments.count, arguments.seed, arguments.timeout)
    if arguments.json:
        print(json.dumps({"pcache": pcache.__file__, "results": results}, indent=2))
        return
    kinds = ["ok", "InputError", "assertion", "caller's own"]
    kinds += ["other pcache error", "other exception", "timeout"]
    print(f"pcache from {os.path.dirname(pcache.__file__)}; {arguments.count} calls per function")
    print(f"{'function':22}" + "".join(f"{kind:>19}" for kind in kinds))
    totals: collections.Counter[str] = collections.Counter()
    for name, result in results.items():
        totals.update(result["counts"])
        print(f"{name:22}" + "".join(f"{result['counts'].get(k, 0):>19}" for k in kinds))
    print(f"{'total':22}" + "".join(f"{totals.get(k, 0):>19}" for k in kinds))
    for name, result in results.items():
        for detail, times in sorted(result["leaks"].items(), key=lambda item: -item[1])[:8]:
            print(f"  {name}: {times} x {detail}")


if __name__ == "__main__":
    main()
