"""The one check of the library API's arguments, made before any work, with one error type.

Every public function (`pcache.diff`, `hash`, `lint`, `replay`, and the assertions of
`pcache.record`) passes its arguments through these checks: a value of a type the function
does not take is an `ArgumentTypeError`, a value out of range an `ArgumentValueError`, both
`pcache.InputError`s whose message names the function and the argument
(`pcache.lint: block_size must be an integer from 1 to 1048576, got 0`). The requests
themselves are then read by the core (`pcache.prompt.reading.held`), which refuses what no JSON
document holds, cycles and nesting past the readers' limit with typed errors of its own.
Checks the core makes itself (the options dataclasses', `Settings`') are run inside
`named_as`: the core raises an `OptionError` naming the field, which becomes an
`ArgumentValueError` naming the argument (`block_size must be ...`), its `command_line` the
flag's words (`--block-size must be ...`).
"""

from __future__ import annotations

import contextlib
import math
import operator
import os
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from pcache.errors import (
    ArgumentError,
    ArgumentTypeError,
    ArgumentValueError,
    OptionError,
    UsageError,
)
from pcache.prompt.reading.memory_values import kind_of

_REQUEST = "a request body (dict), an SDK object or a path"


def _shown(value: Any) -> str:
    """A value as a message shows it: short, and by kind when it is not a plain scalar."""
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, str):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    if isinstance(value, dict):
        return "a dict"
    if isinstance(value, list | tuple):
        return f"a {type(value).__name__}"
    return kind_of(value)


def _refuse_type(function: str, name: str, expected: str, value: Any) -> ArgumentTypeError:
    found = f"must be {expected}, got {_shown(value)}"
    return ArgumentTypeError(function, name, f"{name} {found}", f"{_flag_of(name)} {found}")


def _refuse_value(function: str, name: str, expected: str, value: Any) -> ArgumentValueError:
    found = f"must be {expected}, got {_shown(value)}"
    return ArgumentValueError(function, name, f"{name} {found}", f"{_flag_of(name)} {found}")


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def block_size(function: str, value: Any) -> int | None:
    from pcache.defaults import MAX_BLOCK_SIZE

    return integer(function, "block_size", value, 1, MAX_BLOCK_SIZE)


def jobs(function: str, value: Any) -> int | None:
    """An optional count of tokenizing threads (`--jobs`)."""
    from pcache.defaults import MAX_JOBS

    return integer(function, "jobs", value, 1, MAX_JOBS)


def executor(function: str, value: Any) -> str | None:
    """An optional executor name (`--executor`): one of `pcache.defaults.EXECUTORS`."""
    from pcache.defaults import EXECUTORS

    return text(function, "executor", value, EXECUTORS)


def settings_values(function: str, **given: Any) -> dict[str, Any]:
    """The `Settings` keywords given (tokenizer, block_size, hash_algo, cache_salt, date),
    checked; those left None are left out (the defaults apply)."""
    from pcache.cache.hashing import HASH_ALGOS

    checks: dict[str, Callable[[Any], Any]] = {
        "tokenizer": lambda value: tokenizer(function, value),
        "block_size": lambda value: block_size(function, value),
        "hash_algo": lambda value: text(function, "hash_algo", value, HASH_ALGOS),
        "cache_salt": lambda value: salt(function, value),
        "date": lambda value: text(function, "date", value),
        "jobs": lambda value: jobs(function, value),
        "executor": lambda value: executor(function, value),
        "ray_address": lambda value: text(function, "ray_address", value),
    }
    return {name: checks[name](value) for name, value in given.items() if value is not None}


def tokenizer(function: str, value: Any) -> str | None:
    """An optional tokenizer name, loaded here so that one that cannot be is this argument's
    error (`TokenizerError` says why: not built in, not in the local cache, ...)."""
    from pcache.errors import RequestTemplateError, TokenizerError
    from pcache.prompt.renderers.render import resolve_renderer

    name = text(function, "tokenizer", value)
    if name is not None:
        try:
            resolve_renderer(name)
        except RequestTemplateError:
            raise
        except TokenizerError as failure:
            raise ArgumentValueError(
                function, "tokenizer", f"tokenizer {failure}", str(failure)
            ) from None
    return name


def salt(function: str, value: Any) -> str | None:
    """A cache salt: any string ("" is a salt of its own), or None."""
    if value is not None and not isinstance(value, str):
        raise _refuse_type(function, "cache_salt", "a string or None", value)
    return value


def integer(
    function: str, name: str, value: Any, minimum: int, maximum: int | None = None
) -> int | None:
    """An optional integer from `minimum` to `maximum` (bool is not an integer here; an
    integer of another type, such as numpy's, is taken by its `__index__`)."""
    if value is None:
        return None
    span = f"from {minimum} to {maximum}" if maximum is not None else f"of at least {minimum}"
    expected = f"an integer {span}"
    if not _is_integer(value):
        if isinstance(value, bool) or not hasattr(type(value), "__index__"):
            raise _refuse_type(function, name, expected, value)
        value = operator.index(value)
    if value < minimum or (maximum is not None and value > maximum):
        raise _refuse_value(function, name, expected, value)
    return int(value)


def number(function: str, name: str, value: Any, minimum: float, maximum: float) -> float:
    """A finite real number from `minimum` to `maximum` (NaN and bool are refused)."""
    expected = f"a number from {minimum:g} to {maximum:g}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _refuse_type(function, name, expected, value)
    if not math.isfinite(value) or not minimum <= value <= maximum:
        raise _refuse_value(function, name, expected, value)
    return float(value)


def text(
    function: str, name: str, value: Any, choices: tuple[str, ...] | None = None
) -> str | None:
    """An optional non-empty string, one of `choices` when given."""
    if value is None:
        return None
    expected = f"one of {', '.join(choices)}" if choices else "a non-empty string"
    if not isinstance(value, str):
        raise _refuse_type(function, name, expected, value)
    if (choices and value not in choices) or not value or "\x00" in value:
        raise _refuse_value(function, name, expected, value)
    return str(value)


def flag(function: str, name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _refuse_type(function, name, "True or False", value)
    return value


def callback(function: str, name: str, value: Any) -> Callable | None:
    if value is not None and not callable(value):
        raise _refuse_type(function, name, "a function or None", value)
    return value


def keys(function: str, name: str, value: Any) -> list[str] | None:
    """An optional list of grouping keys (`["model", "metadata.tenant"]`)."""
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
        raise _refuse_type(function, name, "a list of keys (strings)", value)
    for index, key in enumerate(value):
        if not isinstance(key, str):
            raise _refuse_type(function, f"{name}[{index}]", "a key (a string)", key)
    return list(value)


def codes(function: str, name: str, value: Any) -> list[str] | None:
    """An optional list of rule codes or prefixes (`["PC1", "PC203"]`)."""
    if value is None:
        return None
    expected = "a list of rule codes (strings)"
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
        raise _refuse_type(function, name, expected, value)
    for index, code in enumerate(value):
        if not isinstance(code, str):
            raise _refuse_type(function, f"{name}[{index}]", "a rule code (a string)", code)
    return list(value)


def path(function: str, name: str, value: Any) -> str:
    """A file or folder path (str or os.PathLike giving a str), as `os.fspath` gives it."""
    if isinstance(value, bytes | bytearray | memoryview):
        raise ArgumentTypeError(
            function, name, f"{name} is bytes; pass a path as str, or the parsed JSON value"
        )
    try:
        fspath = os.fspath(value)
    except TypeError:
        raise _refuse_type(function, name, "a path (str or os.PathLike)", value) from None
    if not isinstance(fspath, str):
        raise _refuse_type(function, name, "a path (str or os.PathLike)", value)
    if not fspath or "\x00" in fspath:
        refused = _refuse_value(function, name, "a path (non-empty, without NUL)", fspath)
        refused.command_line = f"{fspath!r}: not a file name"
        raise refused
    try:
        os.fsencode(fspath)
    except UnicodeEncodeError:
        refused = _refuse_value(function, name, "a path the file system can name", fspath)
        refused.command_line = f"{fspath!r}: not a file name"
        raise refused from None
    if fspath.lstrip()[:1] in ("{", "[") and not os.path.exists(fspath):
        raise ArgumentValueError(
            function,
            name,
            f"{name} is JSON text, not a path; pass the parsed value (orjson.loads(text))",
            f"{fspath[:60]}: no such file (JSON text is read from a file, or from - for stdin)",
        )
    return fspath


def optional_path(function: str, name: str, value: Any) -> str | None:
    return None if value is None else path(function, name, value)


def _is_request(value: Any) -> bool:
    from pcache.prompt.shapes.request import Request

    if isinstance(value, dict | Request):
        return True
    return callable(getattr(type(value), "model_dump", None))


def _is_path(value: Any) -> bool:
    return isinstance(value, str | os.PathLike)


def request(function: str, name: str, value: Any) -> Any:
    """One request: a body (dict), an SDK object, a `Request`, or a path."""
    if _is_path(value) or isinstance(value, bytes | bytearray | memoryview):
        return path(function, name, value)
    if not _is_request(value):
        raise _refuse_type(function, name, _REQUEST, value)
    return value


def requests(function: str, name: str, value: Any) -> Any:
    """One request (as `request`), or an iterable of them (read once, into a list)."""
    if _is_path(value) or _is_request(value) or isinstance(value, bytes | bytearray):
        return request(function, name, value)
    if isinstance(value, Mapping) or not _is_iterable(value):
        expected = f"{_REQUEST}, or a list of them"
        raise _refuse_type(function, name, expected, value)
    items = list(value)
    return [request(function, f"{name}[{index}]", item) for index, item in enumerate(items)]


def _is_iterable(value: Any) -> bool:
    try:
        iter(value)
    except TypeError:
        return False
    return not isinstance(value, memoryview)


@contextlib.contextmanager
def named_as(function: str, names: Collection[str]) -> Iterator[None]:
    """Run checks the core makes itself: an `OptionError` about one of `names` (the arguments
    given) becomes an `ArgumentValueError` naming that argument; any other `UsageError` one
    worded as the command line words it."""
    try:
        yield
    except ArgumentError:
        raise
    except OptionError as failure:
        if failure.field in names:
            message = failure.worded(failure.field)
            raise ArgumentValueError(function, failure.field, message, str(failure)) from None
        raise ArgumentValueError(function, "", str(failure)) from None
    except UsageError as failure:
        raise ArgumentValueError(function, "", str(failure)) from None


def _flag_of(name: str) -> str:
    return "--" + name.replace("_", "-")


PATH_FIELDS = ("calibration", "save_calibration")
"""Options of `str` type that name files: an `os.PathLike` is taken for them too."""


def _matches(value: Any, hint: Any) -> bool:
    """Whether `value` has the type `hint` names (unions of None, bool, int, float, str and
    classes; a hint of another form is left to the options class to check)."""
    import types
    import typing

    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_matches(value, member) for member in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return _is_integer(value)
    if hint is float:  # NaN and infinities are the options classes' to refuse, with their words
        return _is_integer(value) or isinstance(value, float)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def _hint_words(hint: Any) -> str:
    import types
    import typing

    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_hint_words(member) for member in typing.get_args(hint))
    words = {type(None): "None", bool: "True or False", int: "an integer", str: "a string"}
    if hint in words:
        return words[hint]
    return "a number" if hint is float else getattr(hint, "__name__", str(hint))


def replay_keywords(function: str, given: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """`pcache.replay`'s keywords checked by type against the fields of the drivers' options:
    (the mode given or None, the other keywords). Ranges are the options classes' to check."""
    import typing

    from pcache.replayer.run import driver_options
    from pcache.settings import SETTINGS_FIELDS, Settings

    drivers = driver_options()
    given = dict(given)
    mode = text(function, "mode", given.pop("mode", None), tuple(drivers))
    hints: dict[str, Any] = {}
    for options_class in (*drivers.values(), Settings):
        for name, hint in typing.get_type_hints(options_class).items():
            if options_class is not Settings or name in SETTINGS_FIELDS:
                hints.setdefault(name, hint)
    settings = {name: given.pop(name) for name in SETTINGS_FIELDS if name in given}
    checked: dict[str, Any] = settings_values(function, **settings)
    for name, value in given.items():
        if name not in hints or typing.get_origin(hints[name]) is typing.ClassVar:
            raise ArgumentTypeError(
                function, name, f"{function}() got an unexpected keyword argument {name!r}"
            )
        if name in PATH_FIELDS and value is not None:
            value = path(function, name, value)
        if isinstance(value, str) and "\x00" in value:
            raise _refuse_value(function, name, "a string without NUL", value)
        if value is not None and not _matches(value, hints[name]):
            raise _refuse_type(function, name, _hint_words(hints[name]), value)
        checked[name] = value
    return mode, checked


def replay_fields() -> frozenset[str]:
    """Every keyword of `pcache.replay` that names an option: the drivers' fields and the
    settings'."""
    from dataclasses import fields

    from pcache.replayer.run import driver_options
    from pcache.settings import SETTINGS_FIELDS

    names = {item.name for options in driver_options().values() for item in fields(options)}
    return frozenset(names | set(SETTINGS_FIELDS))
